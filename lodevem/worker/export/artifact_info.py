"""What a converted file IS, read from its bytes: the weight dtypes of a ``.tflite`` (its
flatbuffer's tensors) and the weight storage of an ncnn model (its ``.param`` and ``.bin``).

Why: a conversion's ``converted`` section reports the file's precision, and that must be what
the runtime will load, not what the converter was asked for (a quantizer that silently leaves a
model in float would otherwise be reported as int8). Both readers are stdlib only and bounded:
they follow offsets inside the file's own length and count at most ``MAX_TENSORS`` tensors /
``MAX_LAYERS`` layers, so a damaged file gives a "cannot read" answer, never a crash or a hang.
They read files the converter just wrote in the sandbox (the host never runs them on a user's
file; ``lodevem inspect`` has its own path).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

MAX_TENSORS = 200_000
MAX_LAYERS = 100_000
MAX_PARAM_BYTES = 16 * 2**20

# TFLite's TensorType enum (tensorflow/lite/schema/schema.fbs), the members a converter writes.
TFLITE_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
                7: "int16", 9: "int8", 10: "float64", 16: "uint32", 17: "uint16", 18: "int4"}
_FLOATS = ("float32", "float16", "float64")


class ArtifactUnreadable(ValueError):
    """The file is not a well-formed .tflite / ncnn model: the reason in one line."""


@dataclass
class TensorCensus:
    """Tensors of a .tflite by dtype: constants (weights, with their data bytes) and the rest
    (activations, the graph's inputs and outputs)."""

    constant_bytes: dict[str, int] = field(default_factory=dict)
    constant_count: dict[str, int] = field(default_factory=dict)
    activation_count: dict[str, int] = field(default_factory=dict)
    per_channel: int = 0  # quantized constants with one scale per channel
    input_dtype: Optional[str] = None

    def precision(self) -> str:
        """fp32 / fp16 / int8-dynamic / int8-static / mixed, from the bytes, in the precision
        vocabulary (``precision.FILE_PRECISIONS``): int8 weights with float activations are
        dynamic-range; int8 activations too are full-integer; fp16 weights (dequantized to
        fp32 at load) are fp16."""
        weights = max(self.constant_bytes, key=lambda k: self.constant_bytes[k], default="float32")
        int8_acts = self.activation_count.get("int8", 0) + self.activation_count.get("uint8", 0)
        float_acts = sum(self.activation_count.get(k, 0) for k in _FLOATS)
        if weights in ("int8", "uint8", "int4"):
            if int8_acts and int8_acts >= float_acts:
                return "int8-static"
            return "int8-dynamic" if not int8_acts else "mixed"
        if weights == "float16":
            return "fp16"
        return "fp32" if not int8_acts else "mixed"

    def to_dict(self) -> dict[str, Any]:
        return {"weight_bytes_by_dtype": dict(sorted(self.constant_bytes.items())),
                "weights_by_dtype": dict(sorted(self.constant_count.items())),
                "activations_by_dtype": dict(sorted(self.activation_count.items())),
                "per_channel_quantized": self.per_channel, "input_dtype": self.input_dtype}


class _Flat:
    """Just enough of the flatbuffers wire format to walk tables and vectors, every read
    bounds-checked against the buffer."""

    def __init__(self, buf: "bytes | mmap.mmap") -> None:
        self.buf, self.size = buf, len(buf)

    def _u(self, fmt: str, pos: int) -> int:
        width = struct.calcsize(fmt)
        if pos < 0 or pos + width > self.size:
            raise ArtifactUnreadable(f"offset {pos} outside the file ({self.size} bytes)")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def root(self) -> int:
        return self._u("<I", 0)

    def field(self, table: int, index: int) -> Optional[int]:
        """The position of field ``index`` of the table at ``table``, None when absent."""
        vtable = table - self._u("<i", table)
        vsize = self._u("<H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vsize:
            return None
        offset = self._u("<H", vtable + slot)
        return table + offset if offset else None

    def scalar(self, table: int, index: int, fmt: str, default: int = 0) -> int:
        pos = self.field(table, index)
        return default if pos is None else self._u(fmt, pos)

    def ref(self, table: int, index: int) -> Optional[int]:
        pos = self.field(table, index)
        return None if pos is None else pos + self._u("<I", pos)

    def vector(self, table: int, index: int) -> tuple[int, int]:
        """(position of the first element, length) of a vector field; (0, 0) when absent."""
        pos = self.ref(table, index)
        if pos is None:
            return 0, 0
        length = self._u("<I", pos)
        if length > self.size:
            raise ArtifactUnreadable(f"vector of {length} elements in a {self.size}-byte file")
        return pos + 4, length

    def tables(self, table: int, index: int) -> list[int]:
        start, length = self.vector(table, index)
        return [start + 4 * i + self._u("<I", start + 4 * i) for i in range(length)]


def tflite_census(path: str) -> TensorCensus:
    """Count the tensors of every subgraph of the .tflite at ``path`` by dtype (schema.fbs:
    Model.subgraphs=2, Model.buffers=4; SubGraph.tensors=0, inputs=1; Tensor.type=1,
    buffer=2, quantization=4; Buffer.data=0, size=2; QuantizationParameters.scale=2)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < 8:
            raise ArtifactUnreadable(f"{path}: too short for a .tflite")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if buf[4:8] != b"TFL3":
                raise ArtifactUnreadable(f"{path}: no TFL3 identifier (not a .tflite)")
            try:
                return _census(_Flat(buf))
            except struct.error as exc:
                raise ArtifactUnreadable(f"{path}: {exc}") from None


def _census(fb: _Flat) -> TensorCensus:
    model = fb.root()
    buffers = fb.tables(model, 4)
    census = TensorCensus()
    seen = 0
    for graph_index, graph in enumerate(fb.tables(model, 2)):
        tensors = fb.tables(graph, 0)
        seen += len(tensors)
        if seen > MAX_TENSORS:
            raise ArtifactUnreadable(f"more than {MAX_TENSORS} tensors")
        for tensor in tensors:
            dtype = TFLITE_TYPES.get(fb.scalar(tensor, 1, "<b"), "other")
            buffer_index = fb.scalar(tensor, 2, "<I")
            nbytes = _buffer_bytes(fb, buffers[buffer_index]) if 0 < buffer_index < len(buffers) else 0
            if nbytes:
                census.constant_bytes[dtype] = census.constant_bytes.get(dtype, 0) + nbytes
                census.constant_count[dtype] = census.constant_count.get(dtype, 0) + 1
                quant = fb.ref(tensor, 4)
                if quant is not None and fb.vector(quant, 2)[1] > 1:
                    census.per_channel += 1
            else:
                census.activation_count[dtype] = census.activation_count.get(dtype, 0) + 1
        if graph_index == 0:
            start, count = fb.vector(graph, 1)
            if count:
                first = fb._u("<i", start)
                if 0 <= first < len(tensors):
                    census.input_dtype = TFLITE_TYPES.get(fb.scalar(tensors[first], 1, "<b"), "other")
    return census


def _buffer_bytes(fb: _Flat, buffer: int) -> int:
    """A buffer's data length: inline (``data``) or, in files over 2 GB, stored after the
    flatbuffer (``offset``/``size``)."""
    _, inline = fb.vector(buffer, 0)
    if inline:
        return inline
    offset, size = fb.scalar(buffer, 1, "<Q"), fb.scalar(buffer, 2, "<Q")
    if size and offset + size > fb.size:
        raise ArtifactUnreadable(f"a buffer of {size} bytes at offset {offset} ends past the file ({fb.size} bytes)")
    return size


# ---------------------------------------------------------------------------- ncnn

NCNN_MAGIC = 7767517
_TAG_STORAGE = {0x01306B47: "float16", 0x01348B83: "bfloat16", 0x000D4B38: "int8", 0: "float32"}
# Layers whose .bin data the walk knows (Convolution.cpp / ConvolutionDepthWise.cpp /
# InnerProduct.cpp load_model): weights with a storage tag, then raw fp32 bias and int8 scales.
_WEIGHTED = ("Convolution", "ConvolutionDepthWise", "InnerProduct")
# Layers that read nothing from the .bin (the walk steps over them).
_WEIGHTLESS = frozenset((
    "Input", "Split", "ReLU", "Clip", "Pooling", "BinaryOp", "Eltwise", "Concat", "Flatten", "Reshape", "Softmax",
    "HardSwish", "HardSigmoid", "Sigmoid", "Swish", "Mish", "GELU", "SELU", "ELU", "TanH", "AbsVal", "Interp",
    "Permute", "Crop", "Slice", "Noop", "Dropout", "UnaryOp", "Padding", "ShuffleChannel", "PixelShuffle",
    "Reduction", "Squeeze", "ExpandDims", "Tile", "Pooling1D", "Pooling3D", "Threshold", "Power", "Exp", "Log",
    "Quantize", "Dequantize", "Requantize", "Cast", "Convolution1D", "Gemm", "MatMul"))


@dataclass
class NcnnCensus:
    """The weight storage of an ncnn model: blobs per storage type (of the layers walked),
    layers running int8 (``int8_scale_term`` set), and whether the walk covered the whole .bin."""

    layers: int = 0
    weighted_layers: int = 0
    int8_layers: int = 0
    storage_blobs: dict[str, int] = field(default_factory=dict)
    storage_bytes: dict[str, int] = field(default_factory=dict)
    bin_bytes: int = 0
    walked_bytes: int = 0
    stopped_at: Optional[str] = None  # a layer type the walk does not know (the rest is not counted)

    @property
    def complete(self) -> bool:
        return self.stopped_at is None and self.walked_bytes == self.bin_bytes

    def precision(self) -> str:
        """int8-static when every conv/fc layer is int8 (ncnn's int8 is full-integer: inputs
        quantized with the table's static scales), fp16 / fp32 when every weight blob is
        stored so, else mixed."""
        if self.weighted_layers and self.int8_layers == self.weighted_layers:
            return "int8-static"
        kinds = set(self.storage_blobs)
        if self.int8_layers or len(kinds) > 1:
            return "mixed"
        return "fp16" if kinds == {"float16"} else "fp32"

    def to_dict(self) -> dict[str, Any]:
        return {"layers": self.layers, "weighted_layers": self.weighted_layers, "int8_layers": self.int8_layers,
                "weight_blobs_by_storage": dict(sorted(self.storage_blobs.items())),
                "weight_bytes_by_storage": dict(sorted(self.storage_bytes.items())),
                "bin_bytes": self.bin_bytes, "walked_bytes": self.walked_bytes, "complete": self.complete,
                "stopped_at": self.stopped_at}


def _params(tokens: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if sep and key.lstrip("-").isdigit():
            out[int(key)] = value
    return out


def _int(params: dict[int, str], key: int, default: int = 0) -> int:
    try:
        return int(params.get(key, default))
    except ValueError:
        raise ArtifactUnreadable(f"param {key}={params[key]!r} is not an integer") from None


def ncnn_census(param_path: str, bin_path: str) -> NcnnCensus:
    """Walk the ``.param`` layer by layer and the ``.bin`` alongside (ncnn's ModelBin layout:
    a weight blob is a 4-byte storage tag then its data, fp16 and int8 padded to 4 bytes; bias
    and int8 scales are raw fp32)."""
    if os.path.getsize(param_path) > MAX_PARAM_BYTES:
        raise ArtifactUnreadable(f"{param_path}: over {MAX_PARAM_BYTES} bytes (not an ncnn .param)")
    with open(param_path, encoding="utf-8", errors="replace") as fh:
        lines = [ln.split() for ln in fh.read().splitlines() if ln.strip()]
    if not lines or lines[0] != [str(NCNN_MAGIC)]:
        raise ArtifactUnreadable(f"{param_path}: no ncnn magic {NCNN_MAGIC} on its first line")
    census = NcnnCensus(bin_bytes=os.path.getsize(bin_path))
    census.layers = len(lines) - 2
    if census.layers > MAX_LAYERS:
        raise ArtifactUnreadable(f"{param_path}: more than {MAX_LAYERS} layers")
    with open(bin_path, "rb") as fh:
        pos = 0
        for tokens in lines[2:]:
            kind = tokens[0]
            if kind in _WEIGHTLESS:
                continue
            if kind not in _WEIGHTED:
                census.stopped_at = kind
                break
            try:
                n_in, n_out = int(tokens[2]), int(tokens[3])
            except (IndexError, ValueError):
                raise ArtifactUnreadable(f"{param_path}: malformed layer line {' '.join(tokens)[:80]}") from None
            params = _params(tokens[4 + n_in + n_out:])
            fc = kind == "InnerProduct"  # 0=num_output; bias_term 5 (conv) / 1 (fc); weight_data_size 6 / 2
            num_output, bias, size = _int(params, 0), _int(params, 1 if fc else 5), _int(params, 2 if fc else 6)
            scale_term = _int(params, 8)
            if not fc and _int(params, 19):  # dynamic_weight: the weights are an input, not in the .bin
                continue
            census.weighted_layers += 1
            census.int8_layers += 1 if scale_term else 0
            fh.seek(pos)
            head = fh.read(4)
            if len(head) < 4:
                raise ArtifactUnreadable(f"{bin_path}: ends inside layer {tokens[1]}")
            storage = _TAG_STORAGE.get(struct.unpack("<I", head)[0], "float32")
            data = {"float16": (size * 2 + 3) // 4 * 4, "bfloat16": (size * 2 + 3) // 4 * 4,
                    "int8": (size + 3) // 4 * 4}.get(storage, size * 4)
            census.storage_blobs[storage] = census.storage_blobs.get(storage, 0) + 1
            census.storage_bytes[storage] = census.storage_bytes.get(storage, 0) + data
            pos += 4 + data
            pos += 4 * num_output if bias else 0
            if scale_term:
                group = _int(params, 7, 1)
                depthwise = kind == "ConvolutionDepthWise"
                weight_scales = (group if scale_term in (1, 101) else 1) if depthwise else num_output
                pos += 4 * (weight_scales + 1) + (4 if scale_term > 100 else 0)
        census.walked_bytes = pos
    if census.walked_bytes > census.bin_bytes:
        raise ArtifactUnreadable(f"{bin_path}: {census.bin_bytes} bytes, the layers need {census.walked_bytes}")
    return census


def describe(counts: "dict[str, int] | Counter[str]") -> str:
    """``{"int8": 3, "float32": 1}`` as ``int8 3, float32 1`` (largest first)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
