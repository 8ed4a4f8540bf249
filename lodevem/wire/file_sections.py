"""The reply sections that describe a file: the model as loaded, its ONNX export, a level's variant, derived files.

One typed record each (``model``, ``onnx``, ``variant``, ``derived``), built by the worker and
written with ``to_dict``, read by the host with ``parse``. What an action measured or did with
the file (timings, memory, accuracy, a conversion) is ``sections``'.

Why records on the worker side too: the ``model`` section is built up step by step (the file,
then what loading found, the shape check, the export's precision, a level's variant), in several
worker modules; as a dict a key misspelt in one of them only showed as an empty field on the host.
A record can only hold its own fields, and ``with_`` / ``filled_from`` say which way a step
merges. Field names and their order are the wire format; stdlib only, like the rest of the worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as record_fields
from typing import Any, Optional

from . import fields
from .precision import FILE_PRECISIONS

__all__ = ["DerivedFile", "LayerSparsity", "ModelSection", "OnnxSection", "SparsitySection", "VariantSection",
           "quantization_text"]

MAX_LAYERS = 50  # layers kept in a sparsity section, most zeros first


def _text(value: Any, limit: int) -> Optional[str]:
    return fields.text(value, limit)


def quantization_text(quantization: Any) -> Optional[str]:
    """``{"scheme": ..., "backend": ...}`` (how torch and the ONNX metadata say it) as the record's
    ``"scheme, backend"``; None when either is missing."""
    data = fields.mapping(quantization)
    scheme, backend = _text(data.get("scheme"), 40), _text(data.get("backend"), 80)
    return f"{scheme}, {backend}" if scheme and backend else None


@dataclass(frozen=True)
class LayerSparsity:
    """One Conv/Linear layer's zeros."""

    name: str
    zero_fraction: float
    zero_channels: int
    channels: int


@dataclass(frozen=True)
class SparsitySection:
    """How much of a file's Conv/Linear weights is zero (``model.sparsity``): pruning that a dense
    runtime does not skip. ``channels_removed``: what removing the all-zero channels did."""

    zero_fraction: float
    zero_channels: int
    channels: int
    masked_layers: int
    layers: tuple[LayerSparsity, ...] = ()
    channels_removed: Optional[str] = None
    weights: Optional[int] = None  # weight elements counted

    @property
    def pruned(self) -> bool:
        """Zeros worth a word: at least 1 % of the weights, whole channels, or attached masks."""
        return self.zero_fraction >= 0.01 or self.zero_channels > 0 or self.masked_layers > 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layers": [asdict(layer) for layer in self.layers]}

    @classmethod
    def parse(cls, data: Any) -> Optional["SparsitySection"]:
        if not isinstance(data, dict):
            return None
        fraction = fields.number(data.get("zero_fraction"))
        if fraction is None or not 0 <= fraction <= 1:
            return None
        layers = []
        for item in fields.items(data.get("layers"))[:MAX_LAYERS]:
            if not isinstance(item, dict):
                continue
            name, zf = _text(item.get("name"), 200), fields.number(item.get("zero_fraction"))
            zc, ch = fields.integer(item.get("zero_channels")), fields.integer(item.get("channels"))
            if name is not None and zf is not None and zc is not None and ch is not None:
                layers.append(LayerSparsity(name, zf, zc, ch))
        return cls(zero_fraction=fraction, zero_channels=fields.integer(data.get("zero_channels")) or 0,
                   channels=fields.integer(data.get("channels")) or 0,
                   masked_layers=fields.integer(data.get("masked_layers")) or 0,
                   layers=tuple(layers), channels_removed=_text(data.get("channels_removed"), 300),
                   weights=fields.integer(data.get("weights")))


Dims = tuple[Optional[int], ...]


@dataclass(frozen=True)
class ModelSection:
    """What the worker found the file to be (``model`` section): the file, its parameters, the
    input it takes (and where that shape came from), its output, precision and zeros."""

    format: Optional[str] = None
    sha256: Optional[str] = None
    file_bytes: Optional[int] = None
    params: Optional[int] = None
    param_bytes: Optional[int] = None
    dtype: Optional[str] = None  # the dtype holding most of the state bytes
    class_name: Optional[str] = None
    sparsity: Optional[SparsitySection] = None
    input_shape: Optional[tuple[int, ...]] = None
    input_dtype: Optional[str] = None
    precision: Optional[str] = None  # fp32 | fp16 | int8-dynamic | int8-static | mixed
    quantization: Optional[str] = None  # "scheme, backend"
    input_shape_source: Optional[str] = None  # "--input-shape" (the request's) | "recorded in the file" | "default"
    input_shape_warning: Optional[str] = None  # the default shape contradicted by the first layers
    output_shape: Optional[Dims] = None  # the (first) output's, e.g. (1, 10); None: dynamic
    converted_bytes: Optional[int] = None  # the converted file(s) a tflite / ncnn run measured

    def __post_init__(self) -> None:  # the worker hands shapes over as lists
        for name in ("input_shape", "output_shape"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))

    @property
    def classes(self) -> Optional[int]:
        """The model's number of outputs (the last dimension of its first output): what labels and
        an ImageFolder tree's class folders are checked against; None when the export did not say."""
        shape = self.output_shape
        return shape[-1] if shape and len(shape) >= 2 and shape[-1] else None

    @property
    def shape(self) -> list[int]:
        """The input shape as a list (what torch and numpy take); the load always sets it."""
        assert self.input_shape is not None, "the model section has no input shape yet"
        return list(self.input_shape)

    def with_(self, **changes: Any) -> "ModelSection":
        """This record with ``changes`` (a step that knows better overrides)."""
        return replace(self, **changes)

    def updated(self, other: "ModelSection") -> "ModelSection":
        """This record with every field ``other`` knows taken from it (a variant's own figures)."""
        return replace(self, **{f.name: getattr(other, f.name) for f in record_fields(self)
                                if getattr(other, f.name) is not None})

    def filled_from(self, other: "ModelSection") -> "ModelSection":
        """This record with its unknown fields taken from ``other`` (a step that only fills gaps)."""
        return replace(self, **{f.name: getattr(other, f.name) for f in record_fields(self)
                                if getattr(self, f.name) is None and getattr(other, f.name) is not None})

    def described_input(self) -> str:
        return f"shape {self.shape} ({self.input_dtype})"

    def to_dict(self) -> dict[str, Any]:
        scheme, _, backend = (self.quantization or "").partition(", ")
        return {**asdict(self), "sparsity": self.sparsity.to_dict() if self.sparsity else None,
                "input_shape": list(self.input_shape) if self.input_shape is not None else None,
                "output_shape": list(self.output_shape) if self.output_shape is not None else None,
                "quantization": {"scheme": scheme, "backend": backend} if self.quantization else None}

    @classmethod
    def parse(cls, data: Any) -> "ModelSection":
        data = fields.mapping(data)
        shape = data.get("input_shape")
        dims = tuple(d for d in shape if fields.integer(d) is not None and d > 0) if isinstance(shape, list) else ()
        precision = _text(data.get("precision"), 20)
        quantization = quantization_text(data.get("quantization"))
        if isinstance(data.get("quantization"), str):  # a record lodevem wrote from this section
            scheme, _, backend = (_text(data["quantization"], 122) or "").partition(", ")
            quantization = f"{scheme}, {backend}" if scheme and backend else None
        return cls(format=_text(data.get("format"), 40), sha256=_text(data.get("sha256"), 64),
                   file_bytes=fields.integer(data.get("file_bytes")), params=fields.integer(data.get("params")),
                   param_bytes=fields.integer(data.get("param_bytes")), dtype=_text(data.get("dtype"), 20),
                   class_name=_text(data.get("class_name"), 200), sparsity=SparsitySection.parse(data.get("sparsity")),
                   input_shape=dims if dims and isinstance(shape, list) and len(dims) == len(shape) <= 8 else None,
                   input_dtype=_text(data.get("input_dtype"), 20),
                   precision=precision if precision in FILE_PRECISIONS else None, quantization=quantization,
                   input_shape_source=_text(data.get("input_shape_source"), 40),
                   input_shape_warning=_text(data.get("input_shape_warning"), 300),
                   output_shape=_dims(data.get("output_shape")),
                   converted_bytes=fields.integer(data.get("converted_bytes")))


def _dims(value: Any) -> Optional[Dims]:
    """A shape from untrusted JSON: 1..8 dims, each a positive whole number or null (dynamic)."""
    if not isinstance(value, list) or not 1 <= len(value) <= 8:
        return None
    dims = [d if fields.integer(d) is not None and d > 0 else None for d in value]
    return tuple(dims) if all(d is None or fields.integer(d) is not None for d in value) else None


@dataclass(frozen=True)
class OnnxSection:
    """The ONNX graph export-onnx wrote or found (``onnx`` section): where, by which exporter, its
    opset and node count, whether it was already there, and which graph it holds."""

    path: str
    exporter: str
    opset: Optional[int]
    nodes: int
    cached: bool
    level: Optional[str] = None
    graph_of: str = "the model as given"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any) -> Optional["OnnxSection"]:
        data = fields.mapping(data)
        path, nodes = _text(data.get("path"), 4096), fields.integer(data.get("nodes"))
        if path is None or nodes is None:
            return None
        return cls(path, _text(data.get("exporter"), 40) or "", fields.integer(data.get("opset")), nodes,
                   data.get("cached") is True, _text(data.get("level"), 20),
                   _text(data.get("graph_of"), 200) or "the model as given")


@dataclass(frozen=True)
class VariantSection:
    """A level derived from the file (``variant`` section): the parameters, bytes and dtype before
    and after, the bytes it takes written, the seconds it took, and what was done (``notes``: one
    line each; ``details``: the level's own figures, e.g. pruning ratios and MACs)."""

    level: str
    params_before: Optional[int]
    params_after: Optional[int]
    param_bytes_before: Optional[int]
    param_bytes_after: Optional[int]
    dtype_before: Optional[str]
    dtype_after: Optional[str]
    serialized_bytes: Optional[int] = None
    serialized_format: Optional[str] = None
    derive_s: Optional[float] = None
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes)}

    @classmethod
    def parse(cls, data: Any) -> Optional["VariantSection"]:
        data = fields.mapping(data)
        level = _text(data.get("level"), 20)
        if level is None:
            return None
        notes = tuple(n for n in (_text(x, 500) for x in fields.items(data.get("notes"))[:20]) if n)
        details = {str(k)[:40]: v for k, v in list(fields.mapping(data.get("details")).items())[:40]
                   if _scalar(v) or (isinstance(v, list) and len(v) <= 50 and all(_scalar(x) for x in v))}

        def count(name: str) -> Optional[int]:
            return fields.integer(data.get(name))

        return cls(level, count("params_before"), count("params_after"), count("param_bytes_before"),
                   count("param_bytes_after"), _text(data.get("dtype_before"), 20), _text(data.get("dtype_after"), 20),
                   count("serialized_bytes"), _text(data.get("serialized_format"), 40),
                   fields.number(data.get("derive_s")), notes, details)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (int, float, str, bool)) and len(str(value)) <= 500


@dataclass(frozen=True)
class DerivedFile:
    """A file the worker wrote for the host to take (``derived`` section): a level's variant
    (action derive) or decoded samples (decode-images). ``format_reason``: why it is not the
    format asked for; ``check``: what was done to trust it. The host reads the size from the
    file it took, not from here."""

    path: str
    format: str
    size_bytes: Optional[int]
    sha256: Optional[str] = None
    format_reason: Optional[str] = None
    check: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any) -> Optional["DerivedFile"]:
        data = fields.mapping(data)
        if not data:
            return None
        return cls(_text(data.get("path"), 4096) or "", _text(data.get("format"), 40) or "",
                   fields.integer(data.get("size_bytes")), _text(data.get("sha256"), 64),
                   _text(data.get("format_reason"), 500), _text(data.get("check"), 500))
