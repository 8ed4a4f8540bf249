"""The reply sections of what an action did: what ran, its timings, memory and accuracy, a conversion, its error.

One typed record each (``runtime``, ``latency``, ``memory``, ``converted``, ``accuracy``, ``error``),
written by the worker with ``to_dict`` and read by the host with ``parse``. The sections that
describe a file (the model as loaded, its export, a level's variant, a derivation's files) are
``file_sections``'; armsim's instruction profile is ``profile_section``'s (its own action and cache).

Why one class per section on both sides: a key renamed on one side used to read as empty on the
other, silently; now the worker can only write what the record has, and the host reads the same
fields back. ``parse`` keeps only values of the expected types and sizes, since the worker runs
the user's model and its stdout is untrusted. Field names and their order are the wire format
(``WorkerReply.to_json``); stdlib only, like the rest of the worker.
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from . import fields
from .error_kinds import ERROR_KINDS

__all__ = ["AccuracySection", "CgroupCounters", "ConvertedSection", "HostTimings", "MAX_TEXT", "MemorySection",
           "RuntimeSection", "WorkerFailure"]

MAX_TEXT = 2000  # longest string kept from a reply: a message, never a dump
MAX_SAMPLES = 100_000  # timed passes kept from a reply (runs has no upper bound; a reply does)


def _text(value: Any, limit: int) -> Optional[str]:
    return fields.text(value, limit)


@dataclass(frozen=True)
class RuntimeSection:
    """What ran the model: the runtime's name and version and the worker's python."""

    name: str
    version: str
    python: str

    @classmethod
    def here(cls, name: str, version: str) -> "RuntimeSection":
        """The runtime ``name`` at ``version`` in this worker's own python."""
        return cls(name, version, platform.python_version())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any) -> Optional["RuntimeSection"]:
        data = fields.mapping(data)
        name, version = _text(data.get("name"), 40), _text(data.get("version"), 80)
        if name is None or version is None:
            return None
        return cls(name, version, _text(data.get("python"), 40) or "")


@dataclass(frozen=True)
class HostTimings:
    """Timed passes on the HOST CPU (``latency`` section; informational: not the device's latency).
    ``std_ms`` is the population standard deviation; ``throughput_ips`` counts the batch."""

    samples_ms: tuple[float, ...] = ()
    mean_ms: Optional[float] = None
    std_ms: Optional[float] = None
    min_ms: Optional[float] = None
    max_ms: Optional[float] = None
    p50_ms: Optional[float] = None
    p90_ms: Optional[float] = None
    p95_ms: Optional[float] = None
    p99_ms: Optional[float] = None
    throughput_ips: Optional[float] = None
    warmup: Optional[int] = None
    runs: Optional[int] = None
    threads: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "samples_ms": list(self.samples_ms)}

    @classmethod
    def parse(cls, data: Any) -> "HostTimings":
        data = fields.mapping(data)
        samples = [fields.number(x) for x in fields.items(data.get("samples_ms"))[:MAX_SAMPLES]]

        def num(name: str) -> Optional[float]:
            return fields.number(data.get(name))

        def count(name: str) -> Optional[int]:
            return fields.integer(data.get(name))

        return cls(samples_ms=tuple(x for x in samples if x is not None), mean_ms=num("mean_ms"), std_ms=num("std_ms"),
                   min_ms=num("min_ms"), max_ms=num("max_ms"), p50_ms=num("p50_ms"), p90_ms=num("p90_ms"),
                   p95_ms=num("p95_ms"), p99_ms=num("p99_ms"), throughput_ips=num("throughput_ips"),
                   warmup=count("warmup"), runs=count("runs"), threads=count("threads"))


@dataclass(frozen=True)
class CgroupCounters:
    """The container cgroup's memory counters, read from inside before it vanishes (v1 or v2;
    ``limit_bytes`` None: unlimited). They differ from VmHWM: the cgroup is also charged for
    page cache. ``stat``: the memory.stat keys the worker keeps."""

    version: int
    peak_bytes: Optional[int] = None
    usage_bytes: Optional[int] = None
    limit_bytes: Optional[int] = None
    stat: Optional[dict[str, int]] = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def parse(cls, data: Any) -> Optional["CgroupCounters"]:
        data = fields.mapping(data)
        version = fields.integer(data.get("version"))
        if version not in (1, 2):
            return None
        stat = {str(k)[:40]: v for k, v in list(fields.mapping(data.get("stat")).items())[:40]
                if fields.integer(v) is not None}
        return cls(version, fields.integer(data.get("peak_bytes")), fields.integer(data.get("usage_bytes")),
                   fields.integer(data.get("limit_bytes")), stat or None)


@dataclass(frozen=True)
class MemorySection:
    """The worker's own memory (``memory`` section): RSS at each phase (KiB, from
    /proc/self/status), the high-water mark, faults and its cgroup's counters. ``peak_phase``
    (with a level only): "derivation" when the high-water mark was reached while loading the
    original and deriving the variant, else "inference"."""

    phases_kb: dict[str, Optional[int]] = field(default_factory=dict)  # rss_<phase>_kb, in phase order
    rss_end_kb: Optional[int] = None
    hwm_kb: Optional[int] = None
    hwm_after_derive_kb: Optional[int] = None
    peak_phase: Optional[str] = None
    runtime_baseline_kb: Optional[int] = None
    model_increment_kb: Optional[int] = None
    major_faults: Optional[int] = None
    minor_faults: Optional[int] = None
    cgroup: Optional[CgroupCounters] = None

    @property
    def cgroup_peak_bytes(self) -> Optional[int]:
        return self.cgroup.peak_bytes if self.cgroup is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Flat, as the wire has it: each phase a key of its own beside the rest."""
        rest = {k: v for k, v in asdict(self).items() if k not in ("phases_kb", "cgroup")}
        return {**self.phases_kb, **rest, "cgroup": self.cgroup.to_dict() if self.cgroup is not None else None}

    @classmethod
    def parse(cls, data: Any) -> Optional["MemorySection"]:
        data = fields.mapping(data)
        if not data:
            return None
        phases = {k[:40]: fields.integer(v) for k, v in list(data.items())[:40]
                  if isinstance(k, str) and k.startswith("rss_") and k.endswith("_kb") and k != "rss_end_kb"}
        ints = {name: fields.integer(data.get(name)) for name in (
            "rss_end_kb", "hwm_kb", "hwm_after_derive_kb", "runtime_baseline_kb", "model_increment_kb",
            "major_faults", "minor_faults")}
        phase = _text(data.get("peak_phase"), 20)
        return cls(phases_kb=phases, peak_phase=phase if phase in ("derivation", "inference") else None,
                   cgroup=CgroupCounters.parse(data.get("cgroup")), **ints)


@dataclass(frozen=True)
class ConvertedSection:
    """What a conversion (export-tflite / export-ncnn) wrote: its converter, the time it took,
    and what the worker read back from the file's bytes: its precision (``FILE_PRECISIONS``),
    the precision the level should give, a one-line quantization scheme, what calibrated it
    (None: nothing did) and the op census. The file itself is what the host took from the
    sandbox; ``size_bytes`` here is the worker's count."""

    format: str
    converter: str
    converter_version: str
    seconds: Optional[float]
    size_bytes: Optional[int] = None
    input_shape: tuple[int, ...] = ()
    quantize: Optional[str] = None
    precision: Optional[str] = None
    expected_precision: Optional[str] = None
    scheme: Optional[str] = None
    calibration: Optional[str] = None
    census: Optional[dict[str, Any]] = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "input_shape": list(self.input_shape)}

    @classmethod
    def parse(cls, data: Any) -> Optional["ConvertedSection"]:
        from .precision import FILE_PRECISIONS

        data = fields.mapping(data)
        if not data:
            return None
        precision, expected = _text(data.get("precision"), 20), _text(data.get("expected_precision"), 20)
        shape = [fields.integer(d) for d in fields.items(data.get("input_shape"))[:8]]
        return cls(format=_text(data.get("format"), 20) or "", converter=_text(data.get("converter"), 40) or "",
                   converter_version=_text(data.get("converter_version"), 40) or "",
                   seconds=fields.number(data.get("seconds")), size_bytes=fields.integer(data.get("size_bytes")),
                   input_shape=tuple(d for d in shape if d is not None and d > 0),
                   quantize=_text(data.get("quantize"), 20),
                   precision=precision if precision in FILE_PRECISIONS else None,
                   expected_precision=expected if expected in FILE_PRECISIONS else None,
                   scheme=_text(data.get("scheme"), 400), calibration=_text(data.get("calibration"), 200))


@dataclass(frozen=True)
class AccuracySection:
    """What an ``evaluate`` run counted: samples, correct top-1 / top-5 (None with <= 5 classes),
    the model's number of outputs, and the evaluation's own seconds. The worker writes it
    (``to_dict``), the host reads it back (``parse``)."""

    samples: int
    top1_correct: int
    top5_correct: Optional[int]
    classes: Optional[int]
    seconds: Optional[float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any) -> Optional["AccuracySection"]:
        data = fields.mapping(data)
        samples, top1 = fields.integer(data.get("samples")), fields.integer(data.get("top1_correct"))
        top5 = fields.integer(data.get("top5_correct"))
        if samples is None or top1 is None or samples < 1 or not 0 <= top1 <= samples:
            return None
        if top5 is not None and not top1 <= top5 <= samples:
            return None
        return cls(samples, top1, top5, fields.integer(data.get("classes")), fields.number(data.get("seconds")))


@dataclass(frozen=True)
class WorkerFailure:
    """The worker's own one-line explanation (``error`` section): written by the worker from its
    ``WorkerError`` (``to_dict``), read back by the host (``parse``: an unknown kind is
    ``internal``; a reply that is not ok without one says so)."""

    kind: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Optional["WorkerFailure"]:
        error = fields.mapping(data.get("error"))
        if not error and data.get("ok") is True:
            return None
        kind = _text(error.get("kind"), 40)
        return cls(kind if kind in ERROR_KINDS else "internal",
                   _text(error.get("message"), MAX_TEXT) or "the worker failed without a message")
