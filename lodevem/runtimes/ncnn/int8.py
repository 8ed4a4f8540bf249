"""lodevem's own ncnn int8 writer: the float ncnn model pnnx wrote, made full-integer int8 in
ncnn's model format, calibrated by running the float model with the ``ncnn`` wheel.

Why lodevem's own: ncnn's C++ ``tools/quantize`` are in no package (the ``ncnn`` wheel and
sdist do not ship them), and lodevem neither vendors third-party code nor builds it. The format
is ncnn's documented one (``docs/developer-guide/param-and-model-file-structure``, the layers'
parameter tables and ``ModelBin``):

* ``.param``: each quantized Convolution / ConvolutionDepthWise / InnerProduct gets parameter
  ``8=`` (``int8_scale_term``): 2 for Convolution and InnerProduct (one weight scale per output
  channel), 1 for ConvolutionDepthWise (one per group); nothing else changes;
* ``.bin``: such a layer's weight blob is the int8 storage tag ``0x000D4B38`` then the int8
  weights padded to 4 bytes; the bias follows unchanged (raw float32), then the weight scales
  and the one input (bottom blob) scale, raw float32.

Scales: weights ``127 / absmax`` per output channel (per group for depthwise), rounded and
clipped to [-127, 127]; activations by max calibration, ``127 / absmax`` of each quantized
layer's input blob over the calibration inputs (the float model run by ``ncnn.Net``). ncnn's
int8 is full-integer: each int8 layer quantizes its input with that static scale and gives a
float output; ncnn has no dynamic-range mode, so lodevem's ``int8`` level under ncnn is this
same full-integer model, and its scheme starts with ``NCNN_NO_DYNAMIC``. A conv whose weights
are an input (``19=1``) stays float.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from ...wire.protocol import WorkerError, first_line, progress
from ...worker.export.artifact_info import _WEIGHTED, _WEIGHTLESS, NCNN_MAGIC
from ...worker.export.calibration import Calibration

NCNN_NO_DYNAMIC = ("ncnn has no dynamic-range int8: full-integer int8 (lodevem's ncnn int8 writer, "
                   "max calibration)")
NCNN_INT8_HOW = "lodevem's ncnn int8 writer (max calibration)"
INT8_TAG = 0x000D4B38
FP32_TAG = 0


def _params(fields: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for field in fields:
        key, _, value = field.partition("=")
        try:
            out[int(key)] = value
        except ValueError:
            pass
    return out


def _layers(param: str, model_path: str) -> tuple[list[str], list[list[str]]]:
    with open(param, encoding="utf-8", errors="replace") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    if len(lines) < 2 or lines[0].strip() != str(NCNN_MAGIC):
        raise WorkerError("export_failed", f"pnnx wrote no readable ncnn .param for {model_path}")
    return lines[:2], [ln.split() for ln in lines[2:]]


def _io(tokens: list[str]) -> tuple[list[str], list[str], list[str]]:
    """A layer line's (bottoms, tops, parameter fields)."""
    n_in, n_out = int(tokens[2]), int(tokens[3])
    return tokens[4:4 + n_in], tokens[4 + n_in:4 + n_in + n_out], tokens[4 + n_in + n_out:]


def _quantized(tokens: list[str]) -> bool:
    return tokens[0] in _WEIGHTED and not (tokens[0] != "InnerProduct" and _params(_io(tokens)[2]).get(19) == "1")


def input_scales(param: str, weights: str, layers: list[list[str]], calibration: Calibration,
                 model_path: str) -> dict[str, float]:
    """``127 / absmax`` of each quantized layer's input blob over the calibration inputs, the
    float model run by ncnn (single-threaded, fp32 arithmetic)."""
    import ncnn

    inputs = [_io(t)[1][0] for t in layers if t[0] == "Input"]
    if len(inputs) != 1:
        raise WorkerError("export_failed", f"ncnn int8 needs one input blob; the ncnn model of {model_path} has "
                                           f"{len(inputs)}")
    blobs = list(dict.fromkeys(_io(t)[0][0] for t in layers if _quantized(t)))
    absmax = dict.fromkeys(blobs, 0.0)
    net = ncnn.Net()
    net.opt.num_threads = 1
    net.opt.use_fp16_packed = net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    if net.load_param(param) != 0 or net.load_model(weights) != 0:
        raise WorkerError("export_failed", f"ncnn cannot load the float ncnn model of {model_path}")
    try:
        for batch in calibration.batches:
            for sample in batch:  # ncnn's input blob is one sample: c x h x w
                for blob, m in _sample_absmax(ncnn, net, inputs[0], sample, blobs, model_path).items():
                    absmax[blob] = max(absmax[blob], m)
    finally:
        net.clear()
    return {blob: 127.0 / m if m > 0 else 1.0 for blob, m in absmax.items()}


def _sample_absmax(ncnn: Any, net: Any, input_blob: str, sample: Any, blobs: list[str],
                   model_path: str) -> dict[str, float]:
    """Each blob's absmax on one input. A function of its own so that the extractor and the
    blobs it made (which hold the net's allocators) are gone before the net is cleared."""
    import numpy as np

    ex = net.create_extractor()
    ex.input(input_blob, ncnn.Mat(np.ascontiguousarray(sample, dtype=np.float32)))
    out = {}
    for blob in blobs:
        ret, mat = ex.extract(blob)
        if ret != 0:
            raise WorkerError("export_failed", f"ncnn could not compute blob {blob} of the ncnn model of "
                                               f"{model_path} (error {ret})")
        values = np.abs(np.array(mat))
        del mat
        if not np.isfinite(values).all():
            raise WorkerError("export_failed", f"blob {blob} of the ncnn model of {model_path} is not finite "
                                               f"on a calibration input")
        out[blob] = float(values.max(initial=0.0))
    del ex
    return out


def float_weights(src: bytes, pos: int, kind: str, p: dict[int, str]) -> tuple[Any, bytes, int]:
    """One weighted layer's raw float32 weights and its bias bytes at ``pos`` of a float ncnn
    .bin, and the position after them. The one reader of ncnn's weight layout for the worker's
    int8 writer and the armsim dev graphs' (scripts/armsim_dev_graphs.py), so both read a layer
    alike. ValueError (the caller names the layer and the file) when the file ends inside the
    layer or its weights are not stored raw float32."""
    import numpy as np

    fc = kind == "InnerProduct"  # fc: 1=bias_term 2=weight_data_size; convs: 5= and 6=
    size, num_output = int(p.get(2 if fc else 6, "0")), int(p.get(0, "0"))
    if pos + 4 + 4 * size > len(src):
        raise ValueError("ends inside the layer's weights")
    tag = struct.unpack_from("<I", src, pos)[0]
    if tag != FP32_TAG:
        raise ValueError(f"stores its weights with tag {tag:#x}, not raw float32")
    w = np.frombuffer(src, "<f4", size, pos + 4)
    pos += 4 + 4 * size
    bias = b""
    if p.get(1 if fc else 5, "0") == "1":
        bias = src[pos:pos + 4 * num_output]
        pos += 4 * num_output
    return w, bias, pos


def write_int8(param: str, weights: str, out: list[str], header: list[str], layers: list[list[str]],
               scales: dict[str, float], model_path: str) -> int:
    """Write the int8 twin of the float model (``out``: [.param, .bin]); returns how many
    layers became int8."""
    import numpy as np

    src = open(weights, "rb").read()
    pos, n_int8 = 0, 0
    out_bin = bytearray()
    out_lines = list(header)
    for tokens in layers:
        kind = tokens[0]
        if kind not in _WEIGHTED and kind not in _WEIGHTLESS:
            raise WorkerError("export_failed", f"ncnn int8: the ncnn model of {model_path} has a {kind} layer, whose "
                                               f"weights lodevem's int8 writer does not know")
        if kind not in _WEIGHTED or not _quantized(tokens):
            out_lines.append(" ".join(tokens))
            continue
        bottoms, tops, fields = _io(tokens)
        p = _params(fields)
        try:
            w, bias, pos = float_weights(src, pos, kind, p)
        except ValueError as exc:
            raise WorkerError("export_failed", f"ncnn int8: layer {tokens[1]} of the float ncnn model of "
                                               f"{model_path} {exc}") from None
        num_output = int(p.get(0, "0"))
        depthwise = kind == "ConvolutionDepthWise"
        channels = int(p.get(7, "1")) if depthwise else num_output
        if channels <= 0 or w.size % channels:
            raise WorkerError("export_failed", f"ncnn int8: layer {tokens[1]} of the ncnn model of {model_path} has "
                                               f"{w.size} weights, not a multiple of {channels} channels")
        wc = w.reshape(channels, -1)
        absmax = np.abs(wc).max(axis=1)
        wscale = np.where(absmax > 0, 127.0 / np.maximum(absmax, 1e-30), 1.0).astype("<f4")
        q = np.clip(np.rint(wc * wscale[:, None]), -127, 127).astype(np.int8).tobytes()
        q += b"\0" * (-len(q) % 4)
        out_bin += struct.pack("<I", INT8_TAG) + q + bias + wscale.tobytes() + struct.pack("<f", scales[bottoms[0]])
        fields = [f for f in fields if not f.startswith("8=")] + [f"8={1 if depthwise else 2}"]
        out_lines.append(" ".join(tokens[:4] + bottoms + tops + fields))
        n_int8 += 1
    if pos != len(src):
        raise WorkerError("export_failed", f"ncnn int8: {len(src) - pos} bytes of the float ncnn .bin of "
                                           f"{model_path} left unread (a layer's layout was misread)")
    with open(out[1], "wb") as fh:
        fh.write(bytes(out_bin))
    with open(out[0], "w", encoding="utf-8") as fh:
        fh.write("\n".join(out_lines) + "\n")
    return n_int8


def ncnn_int8(produced: list[str], work: str, calibration: Calibration, shape: list[int],
              model_path: str) -> list[str]:
    """Quantize the float ncnn model ``produced`` ([.param, .bin] in ``work``) to int8 with
    ``calibration``'s inputs; returns the int8 model's [.param, .bin] (in ``work`` too)."""
    param, weights = produced
    header, layers = _layers(param, model_path)
    try:
        for t in layers:
            _io(t)
    except (IndexError, ValueError):
        raise WorkerError("export_failed", f"pnnx wrote a malformed ncnn .param for {model_path}") from None
    progress(f"calibrating ncnn int8 input scales (max calibration, {calibration.description})")
    try:
        scales = input_scales(param, weights, layers, calibration, model_path)
    except WorkerError:
        raise
    except Exception as exc:  # the ncnn wheel's own errors, one line
        raise WorkerError("export_failed", f"ncnn int8 calibration failed on {model_path}: {first_line(exc)}") from None
    out = [os.path.join(work, "model.int8.param"), os.path.join(work, "model.int8.bin")]
    progress("writing the int8 ncnn model (lodevem's ncnn int8 writer)")
    n_int8 = write_int8(param, weights, out, header, layers, scales, model_path)
    if not n_int8:
        raise WorkerError("export_failed", f"the ncnn model of {model_path} has no Convolution / "
                                           f"ConvolutionDepthWise / InnerProduct layer to make int8")
    return out
