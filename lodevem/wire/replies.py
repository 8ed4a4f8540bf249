"""The worker's reply, typed: one record per section, defined once, beside the request.

Why here, on the ground floor: the worker writes these sections and the host reads them, and a
section renamed on one side only used to read as empty on the other, silently; the envelope is
one class too (``WorkerReply``), written and read under the same field names. The records are
stdlib-only (the worker imports nothing of the host); each reads its section with ``parse``,
keeping only fields of the expected types and sizes (the worker runs a user's model, so its
stdout is untrusted), and the sections the worker builds whole are written with ``to_dict``
(``error``, ``accuracy``). The host adds its own concerns (``sandbox.client.parse_reply``: host
paths in messages, escaping for a terminal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Optional

from . import fields
from .file_sections import DerivedFile, LayerSparsity, ModelSection, OnnxSection, SparsitySection, VariantSection
from .profile_section import InstructionProfile
from .protocol import SCHEMA_VERSION, WORKER_VERSION
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

__all__ = ["MAX_TEXT", "AccuracySection", "ConvertedSection", "DerivedFile", "DerivedSection", "HostTimings",
           "LayerSparsity", "MemorySection", "ModelSection", "OnnxSection", "RuntimeSection", "SparsitySection",
           "VariantSection", "WorkerFailure", "WorkerReply", "reply_object", "CgroupCounters"]


def _text(value: Any, limit: int = MAX_TEXT) -> Optional[str]:
    return fields.text(value, limit)


@dataclass(frozen=True)
class DerivedSection:
    """A variant the worker wrote (action ``derive``): its format, parameters and what was done.
    Its size is read from the file the host took, not from the reply."""

    format: str
    params_after: Optional[int]
    notes: tuple[str, ...]

    @classmethod
    def of(cls, derived: Optional[DerivedFile], variant: Optional[VariantSection]) -> Optional["DerivedSection"]:
        """The variant's file and what deriving it did, as the host keeps them."""
        if derived is None:
            return None
        notes = (*(variant.notes if variant else ()), *((derived.format_reason,) if derived.format_reason else ()))
        return cls(format=derived.format, params_after=variant.params_after if variant else None, notes=notes)


@dataclass
class WorkerReply:
    """The one JSON object the worker prints on stdout, one class on both sides: the worker fills it
    as the action goes and writes it (``to_json``), the host reads it back (``parse``), under the
    same field names. Sections stay ``None`` when the action does not fill them (``action`` too,
    when the request itself could not be read); ``parse`` gives ``model`` and ``latency`` as
    (possibly empty) records, so the host reads them without a None check."""

    action: Optional[str] = None
    ok: bool = False
    schema_version: Optional[int] = SCHEMA_VERSION
    worker_version: Optional[str] = WORKER_VERSION
    error: Optional[WorkerFailure] = None
    model: Optional[ModelSection] = None
    latency: Optional[HostTimings] = None  # timed passes on the host CPU (informational)
    memory: Optional[MemorySection] = None
    onnx: Optional[OnnxSection] = None  # export-onnx: the graph written or found
    runtime: Optional[RuntimeSection] = None
    variant: Optional[VariantSection] = None  # derive: before/after figures
    derived: Optional[DerivedFile] = None  # derive: the file written
    converted: Optional[ConvertedSection] = None  # export-tflite / export-ncnn: what was written
    profile: Optional[InstructionProfile] = None  # armsim-profile: the instruction counts of one inference
    accuracy: Optional[AccuracySection] = None  # evaluate: samples, top1_correct, top5_correct, classes

    def to_json(self) -> str:
        """The result line; a typed section is written by its own ``to_dict`` (``wire.sections``)."""
        data = {f.name: getattr(self, f.name) for f in dataclass_fields(self)}
        for name, value in data.items():
            if hasattr(value, "to_dict"):
                data[name] = value.to_dict()
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "WorkerReply":
        """The reply object, typed and bounded: only fields of the expected types and sizes."""
        failure = WorkerFailure.parse(data)
        return cls(
            action=_text(data.get("action"), 40),
            ok=data.get("ok") is True and failure is None,
            schema_version=fields.integer(data.get("schema_version")),
            worker_version=_text(data.get("worker_version"), 80),
            error=failure,
            model=ModelSection.parse(data.get("model")),
            memory=MemorySection.parse(data.get("memory")),
            latency=HostTimings.parse(data.get("latency")),
            variant=VariantSection.parse(data.get("variant")),
            derived=DerivedFile.parse(data.get("derived")),
            converted=ConvertedSection.parse(data.get("converted")),
            runtime=RuntimeSection.parse(data.get("runtime")),
            accuracy=AccuracySection.parse(data.get("accuracy")),
            onnx=OnnxSection.parse(data.get("onnx")),
            profile=InstructionProfile.parse(data.get("profile")),
        )

    def derived_variant(self) -> Optional[DerivedSection]:
        """A derive's file and what deriving it did, as the host keeps them (None: no file)."""
        return DerivedSection.of(self.derived, self.variant)


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
