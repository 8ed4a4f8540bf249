"""The worker's reply, typed: one record per section, defined once, beside the request.

Why here, in the worker package: the worker writes these sections and the host reads them, and a
section renamed on one side only used to read as empty on the other, silently. The records are
stdlib-only (the worker imports nothing of the host); each reads its section with ``parse``,
keeping only fields of the expected types and sizes (the worker runs a user's model, so its
stdout is untrusted), and the sections the worker builds whole are written with ``to_dict``
(``error``, ``accuracy``). The host adds its own concerns (``sandbox.client.parse_reply``: host
paths in messages, escaping for a terminal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from . import fields
from .file_sections import DerivedFile, LayerSparsity, ModelSection, OnnxSection, SparsitySection, VariantSection
from .profile_section import InstructionProfile
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
    profile: Optional[InstructionProfile] = None  # armsim-profile: one inference's instruction counts
    accuracy: Optional[AccuracySection] = None  # evaluate: what was counted
    onnx: Optional[OnnxSection] = None  # export-onnx: the graph written or found

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "WorkerReply":
        """The reply object, typed and bounded: only fields of the expected types and sizes."""
        failure = WorkerFailure.parse(data)
        return cls(
            ok=data.get("ok") is True and failure is None,
            schema_version=fields.integer(data.get("schema_version")),
            worker_version=_text(data.get("worker_version"), 80),
            failure=failure,
            model=ModelSection.parse(data.get("model")),
            memory=MemorySection.parse(data.get("memory")),
            timings=HostTimings.parse(data.get("latency")),
            derived=DerivedSection.of(DerivedFile.parse(data.get("derived")),
                                      VariantSection.parse(data.get("variant"))),
            converted=ConvertedSection.parse(data.get("converted")),
            runtime=RuntimeSection.parse(data.get("runtime")),
            accuracy=AccuracySection.parse(data.get("accuracy")),
            onnx=OnnxSection.parse(data.get("onnx")),
            profile=InstructionProfile.parse(data.get("profile")),
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
