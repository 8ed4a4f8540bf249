"""The worker's replies, typed: one record per action (``REPLIES``), defined once, beside the requests.

Why here, on the ground floor: the worker writes these records and the host reads them, and a
section renamed on one side only used to read as empty on the other, silently; each action's reply
is one class on both sides (the envelope ``WorkerReply`` and the action's own sections), written
and read under the same field names, so mypy sees a handler fill a section its action does not
send, or the host read one its action never gets. The records are
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
from typing import Any, Mapping, Optional, TypeVar, get_args, get_type_hints

from . import fields
from .file_sections import DerivedFile, LayerSparsity, ModelSection, OnnxSection, SparsitySection, VariantSection
from .profile_section import InstructionProfile
from .protocol import ACTIONS, SCHEMA_VERSION, WORKER_VERSION, WorkerError
from .registry import CONVERT_ACTIONS, Live
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

__all__ = ["MAX_TEXT", "REPLIES", "AccuracySection", "ArmsimProfileReply", "CgroupCounters", "ConvertReply",
           "ConvertedSection", "DecodeImagesReply", "DeriveReply", "DerivedFile", "DerivedSection", "EvaluateReply",
           "ExportOnnxReply", "HostTimings", "InspectReply", "LayerSparsity", "MeasureReply", "MemorySection",
           "ModelSection", "OnnxSection", "RuntimeSection", "SparsitySection", "VariantSection", "WorkerFailure",
           "WorkerReply", "as_reply", "reply_for", "reply_object"]


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
    """The envelope every action's reply shares, one class on both sides: the worker fills its
    action's reply (``REPLIES``) as the action goes and writes it (``to_json``), the host reads it
    back into the same class (``parse``), under the same field names. ``schema_version`` versions
    the wire format (the host refuses another). What every action that loads a file says is here:
    the model, the memory phases and what ran it; each action's record adds its own sections.
    A section stays ``None`` when the action did not fill it (``action`` too, when the request
    itself could not be read: the reply is then this envelope alone); ``parse`` gives ``model``
    as a (possibly empty) record, so the host reads it without a None check."""

    action: Optional[str] = None
    ok: bool = False
    schema_version: Optional[int] = SCHEMA_VERSION
    worker_version: Optional[str] = WORKER_VERSION
    error: Optional[WorkerFailure] = None
    model: Optional[ModelSection] = None
    memory: Optional[MemorySection] = None
    runtime: Optional[RuntimeSection] = None

    def to_json(self) -> str:
        """The result line; a typed section is written by its own ``to_dict`` (``wire.sections``)."""
        data = {f.name: getattr(self, f.name) for f in dataclass_fields(self)}
        for name, value in data.items():
            if hasattr(value, "to_dict"):
                data[name] = value.to_dict()
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "WorkerReply":
        """The reply object, typed and bounded: only fields of the expected types and sizes. Read
        as ``cls``; the envelope class reads a reply as the record of the action it names."""
        action = _text(data.get("action"), 40)
        if cls is WorkerReply and action is not None and action in REPLIES:
            return REPLIES[action].parse(data)
        failure = WorkerFailure.parse(data)
        return cls(
            action=action,
            ok=data.get("ok") is True and failure is None,
            schema_version=fields.integer(data.get("schema_version")),
            worker_version=_text(data.get("worker_version"), 80),
            error=failure,
            model=ModelSection.parse(data.get("model")),
            memory=MemorySection.parse(data.get("memory")),
            runtime=RuntimeSection.parse(data.get("runtime")),
            **cls.sections(data),
        )

    @classmethod
    def sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The action's own sections, each read from ``data`` under its field's name by its
        record's ``parse`` (none for the envelope alone): a section is named once, as a field."""
        hints = get_type_hints(cls)
        return {f.name: _section_record(hints[f.name]).parse(data.get(f.name))
                for f in dataclass_fields(cls) if f.name not in _ENVELOPE}


def _section_record(hint: Any) -> Any:
    """The record type of an ``Optional[Record]`` section."""
    return next(a for a in get_args(hint) if a is not type(None))


_ENVELOPE = frozenset(f.name for f in dataclass_fields(WorkerReply))


@dataclass
class MeasureReply(WorkerReply):
    """``measure``: the timed passes on the host CPU (informational; the memory is the envelope's)."""

    latency: Optional[HostTimings] = None


@dataclass
class ExportOnnxReply(WorkerReply):
    """``export-onnx``: the graph written or found."""

    onnx: Optional[OnnxSection] = None


@dataclass
class InspectReply(WorkerReply):
    """``inspect``: the model section alone (the envelope's)."""


@dataclass
class DeriveReply(WorkerReply):
    """``derive``: the variant's before/after figures and the file written."""

    variant: Optional[VariantSection] = None
    derived: Optional[DerivedFile] = None

    def derived_variant(self) -> Optional[DerivedSection]:
        """A derive's file and what deriving it did, as the host keeps them (None: no file)."""
        return DerivedSection.of(self.derived, self.variant)


@dataclass
class ConvertReply(WorkerReply):
    """A runtime's conversion (its converter's action, ``export-<runtime>``): what was written."""

    converted: Optional[ConvertedSection] = None


@dataclass
class ArmsimProfileReply(WorkerReply):
    """``armsim-profile``: the instruction counts of one inference on an emulated Arm core."""

    profile: Optional[InstructionProfile] = None


@dataclass
class EvaluateReply(WorkerReply):
    """``evaluate``: samples, top-1 and top-5 correct, classes."""

    accuracy: Optional[AccuracySection] = None


@dataclass
class DecodeImagesReply(WorkerReply):
    """``decode-images``: the samples file written."""

    derived: Optional[DerivedFile] = None


# Every action's reply record, beside its request record (``wire.requests.REQUESTS``): the worker
# writes and the host reads by this one table. (Made at each use from the registry: a runtime
# registered later has its conversion's record.)
REPLIES: Mapping[str, type[WorkerReply]] = Live(lambda: {
    "measure": MeasureReply, "export-onnx": ExportOnnxReply, "inspect": InspectReply, "derive": DeriveReply,
    **{action: ConvertReply for action in CONVERT_ACTIONS.values()}, "armsim-profile": ArmsimProfileReply,
    "evaluate": EvaluateReply, "decode-images": DecodeImagesReply})
assert tuple(REPLIES) == tuple(ACTIONS), "every action has its reply record"


Rep = TypeVar("Rep", bound=WorkerReply)


def as_reply(reply: WorkerReply, record: type[Rep]) -> Rep:
    """``reply`` as the record of its action (the worker made it with ``reply_for``): an
    ``internal`` WorkerError if a handler were given another action's reply."""
    if not isinstance(reply, record):
        raise WorkerError("internal", f"action {reply.action}: a {type(reply).__name__}, not a {record.__name__}")
    return reply


def reply_for(action: str) -> WorkerReply:
    """The empty reply of ``action`` (the envelope alone for an action no record is known for)."""
    return REPLIES.get(action, WorkerReply)(action=action)


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
