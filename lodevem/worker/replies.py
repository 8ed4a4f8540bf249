"""The worker's reply, typed: one record per section, defined once, beside the request.

Why here, in the worker package: the worker writes these sections and the host reads them, and a
section renamed on one side only used to read as empty on the other, silently. The records are
stdlib-only (the worker imports nothing of the host); each reads its section with ``parse``,
keeping only fields of the expected types and sizes (the worker runs a user's model, so its
stdout is untrusted), and the sections the worker builds whole are written with ``to_dict``
(``error``, ``accuracy``). The host adds its own concerns (``sandbox.client.parse_reply``: host
paths in messages, escaping for a terminal, the armsim profile's record).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from . import fields
from .precision import FILE_PRECISIONS
from .sections import (
    MAX_TEXT,
    AccuracySection,
    CgroupCounters,
    ConvertedSection,
    HostTimings,
    MemorySection,
    RuntimeSection,
    WorkerFailure,
)

__all__ = ["MAX_TEXT", "AccuracySection", "ConvertedSection", "DerivedSection", "HostTimings", "LayerSparsity",
           "MemorySection", "ModelSection", "RuntimeSection", "SparsitySection", "WorkerFailure", "WorkerReply",
           "reply_object", "CgroupCounters"]




def _text(value: Any, limit: int = MAX_TEXT) -> Optional[str]:
    return fields.text(value, limit)


def _section(reply: dict[str, Any], name: str) -> dict[str, Any]:
    return fields.mapping(reply.get(name))


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

    @classmethod
    def parse(cls, data: Any) -> Optional["SparsitySection"]:
        if not isinstance(data, dict):
            return None
        fraction = fields.number(data.get("zero_fraction"))
        if fraction is None or not 0 <= fraction <= 1:
            return None
        layers = []
        for item in fields.items(data.get("layers"))[:50]:
            if not isinstance(item, dict):
                continue
            name, zf = _text(item.get("name"), 200), fields.number(item.get("zero_fraction"))
            zc, ch = fields.integer(item.get("zero_channels")), fields.integer(item.get("channels"))
            if name is not None and zf is not None and zc is not None and ch is not None:
                layers.append(LayerSparsity(name, zf, zc, ch))
        return cls(zero_fraction=fraction, zero_channels=fields.integer(data.get("zero_channels")) or 0,
                   channels=fields.integer(data.get("channels")) or 0,
                   masked_layers=fields.integer(data.get("masked_layers")) or 0,
                   layers=tuple(layers), channels_removed=_text(data.get("channels_removed"), 300))

    @property
    def pruned(self) -> bool:
        """Zeros worth a word: at least 1 % of the weights, whole channels, or attached masks."""
        return self.zero_fraction >= 0.01 or self.zero_channels > 0 or self.masked_layers > 0


@dataclass(frozen=True)
class ModelSection:
    """What the worker found the file to be (``model`` section)."""

    format: Optional[str] = None
    params: Optional[int] = None
    class_name: Optional[str] = None
    sparsity: Optional[SparsitySection] = None
    input_shape: Optional[tuple[int, ...]] = None
    input_dtype: Optional[str] = None
    param_bytes: Optional[int] = None
    precision: Optional[str] = None  # fp32 | fp16 | int8-dynamic | int8-static | mixed
    quantization: Optional[str] = None  # "scheme, backend"
    input_shape_source: Optional[str] = None  # "--input-shape" | "recorded in the file" | "default"
    input_shape_warning: Optional[str] = None  # the default shape contradicted by the first layers
    output_shape: Optional[tuple[Optional[int], ...]] = None  # the (first) output's, e.g. (1, 10); None: dynamic

    @property
    def classes(self) -> Optional[int]:
        """The model's number of outputs (the last dimension of its first output): what labels and
        an ImageFolder tree's class folders are checked against; None when the export did not say."""
        shape = self.output_shape
        return shape[-1] if shape and len(shape) >= 2 and shape[-1] else None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "ModelSection":
        shape = data.get("input_shape")
        dims = tuple(d for d in shape if fields.integer(d) is not None and d > 0) if isinstance(shape, list) else ()
        precision = _text(data.get("precision"), 20)
        quant = fields.mapping(data.get("quantization"))
        scheme, backend = _text(quant.get("scheme"), 40), _text(quant.get("backend"), 80)
        if isinstance(data.get("quantization"), str):  # a record lodevem wrote from this section
            scheme, _, backend = (_text(data["quantization"], 122) or "").partition(", ")
        return cls(format=_text(data.get("format"), 40), params=fields.integer(data.get("params")),
                   class_name=_text(data.get("class_name"), 200), sparsity=SparsitySection.parse(data.get("sparsity")),
                   input_shape=dims if dims and isinstance(shape, list) and len(dims) == len(shape) <= 8 else None,
                   input_dtype=_text(data.get("input_dtype"), 20), param_bytes=fields.integer(data.get("param_bytes")),
                   precision=precision if precision in FILE_PRECISIONS else None,
                   quantization=f"{scheme}, {backend}" if scheme and backend else None,
                   input_shape_source=_text(data.get("input_shape_source"), 40),
                   input_shape_warning=_text(data.get("input_shape_warning"), 300),
                   output_shape=_dims(data.get("output_shape")))


def _dims(value: Any) -> Optional[tuple[Optional[int], ...]]:
    """A shape from untrusted JSON: 1..8 dims, each a positive whole number or null (dynamic)."""
    if not isinstance(value, list) or not 1 <= len(value) <= 8:
        return None
    dims = [d if fields.integer(d) is not None and d > 0 else None for d in value]
    return tuple(dims) if all(d is None or fields.integer(d) is not None for d in value) else None


@dataclass(frozen=True)
class DerivedSection:
    """A variant the worker wrote (action ``derive``): its format, parameters and what was done.
    Its size is read from the file the host took, not from the reply."""

    format: str
    params_after: Optional[int]
    notes: tuple[str, ...]

    @classmethod
    def parse(cls, derived: dict[str, Any], variant: dict[str, Any]) -> Optional["DerivedSection"]:
        if not derived:
            return None
        raw_notes = fields.items(variant.get("notes"))
        notes = [n for n in (_text(x, 500) for x in raw_notes) if n]
        reason = _text(derived.get("format_reason"), 500)
        if reason:
            notes.append(reason)
        return cls(format=_text(derived.get("format"), 40) or "",
                   params_after=fields.integer(variant.get("params_after")),
                   notes=tuple(notes))


@dataclass(frozen=True)
class WorkerReply:
    """The worker's result line, typed; sections the action does not fill stay empty."""

    ok: bool
    schema_version: Optional[int]
    worker_version: Optional[str]
    failure: Optional[WorkerFailure]
    model: ModelSection
    memory: Optional[MemorySection]
    timings: HostTimings
    derived: Optional[DerivedSection]
    converted: Optional[ConvertedSection] = None
    runtime: Optional[RuntimeSection] = None
    profile: Any = None  # armsim-profile: one inference's instruction counts (the host types it)
    accuracy: Optional[AccuracySection] = None  # evaluate: what was counted

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "WorkerReply":
        """The reply object, typed and bounded: only fields of the expected types and sizes."""
        failure = WorkerFailure.parse(data)
        return cls(
            ok=data.get("ok") is True and failure is None,
            schema_version=fields.integer(data.get("schema_version")),
            worker_version=_text(data.get("worker_version"), 80),
            failure=failure,
            model=ModelSection.parse(_section(data, "model")),
            memory=MemorySection.parse(data.get("memory")),
            timings=HostTimings.parse(data.get("latency")),
            derived=DerivedSection.parse(_section(data, "derived"), _section(data, "variant")),
            converted=ConvertedSection.parse(data.get("converted")),
            runtime=RuntimeSection.parse(data.get("runtime")),
            accuracy=AccuracySection.parse(_section(data, "accuracy")),
        )


def reply_object(stdout: str) -> Optional[dict[str, Any]]:
    """The last of the last 50 stdout lines that is a JSON object (the worker prints one line;
    a model's own prints go to stderr, but a hostile one may still reach stdout)."""
    for line in reversed(stdout.strip().splitlines()[-50:]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None
