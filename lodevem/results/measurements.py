"""What the sandbox measured for one model file under one RAM limit: ``MemoryMeasurement``, the
``FloorResult`` of a --find-min-ram search, and the ``Accuracy`` counted on the user's data.

Why apart from the row: these are measured once per (file, limit) and shared by every profile
with that RAM; ``PairResult`` joins them with a profile and a prediction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Optional

from ..wire.verdict import Verdict

# Bump when the stored form of ``MemoryMeasurement`` changes: it is part of every measurement's
# cache key (``memory.cache.cache_key``), so a record of another layout is a miss, never misread.
# 2: the figures grouped into parts (peak, host, sandbox, model, converted, fallback).
MEASUREMENT_LAYOUT = 2


class OomPhase(str, Enum):
    """Where a run that ran out of memory was when it died (``memory.verdicts.oom_phase``: the
    worker's last progress line), or ``RSS_OVER_LIMIT``: it finished, its peak RSS above the limit."""

    RUNTIME_IMPORT = "during runtime import"
    MODEL_LOAD = "while loading the model"
    WARMUP = "during warm-up"
    INFERENCE = "during inference"
    BEFORE_START = "before the worker started"
    RSS_OVER_LIMIT = "rss over limit"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PeakMemory:
    """What the sandbox saw of the worker's memory, in MB (None: the run did not get so far, or
    its verdict says nothing of memory). ``rss_mb``: the process's high-water mark (VmHWM), the
    figure a verdict is made of; ``runtime_baseline_mb`` the runtime alone, before the model;
    ``model_increment_mb`` what loading and running the model added; ``cgroup_mb`` the container's
    own peak (page cache included); ``major_faults`` page faults that read from disk."""

    rss_mb: Optional[float] = None
    runtime_baseline_mb: Optional[float] = None
    model_increment_mb: Optional[float] = None
    cgroup_mb: Optional[float] = None
    major_faults: Optional[int] = None


@dataclass(frozen=True)
class HostTimings:
    """The latency the worker timed on the HOST CPU (informational: a phone's is predicted)."""

    mean_ms: Optional[float] = None
    std_ms: Optional[float] = None
    p50_ms: Optional[float] = None
    p95_ms: Optional[float] = None
    throughput_ips: Optional[float] = None


@dataclass(frozen=True)
class SandboxFacts:
    """Where and how the run was made: the backend, how it held the limit (``limit_enforcement``;
    an inferred row says where its figures come from there), what ran the worker (``image_id``,
    ``worker_version``), the run's wall seconds (0: no run of its own) and what the backend
    observed besides (``observed``: e.g. Slurm's job state)."""

    backend: str
    limit_enforcement: str
    image_id: str
    worker_version: str
    wall_s: float
    observed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MeasuredModel:
    """The file the run measured: its digest, and the format and parameter count the worker read."""

    sha256: str
    format: Optional[str] = None
    params: Optional[int] = None


@dataclass(frozen=True)
class ConvertedFile:
    """The file a converting runtime (tflite, ncnn) loaded: total size, the precision and
    quantization scheme the conversion reports (``measure.MeasurePlan``), and the conversion's own
    seconds in this run (None: it came from the cache)."""

    size_bytes: Optional[int] = None
    precision: Optional[str] = None
    scheme: Optional[str] = None
    seconds: Optional[float] = None


@dataclass(frozen=True)
class Fallback:
    """Why the row's own runtime did not measure the file (its converter refused a user's
    quantized file), and the runtime that measured it instead; the row says ``torch (fallback)``."""

    reason: str
    measured_under: str

    @property
    def text(self) -> str:
        """The sentence a row's memory note carries."""
        return f"{self.reason}; measured under {self.measured_under} instead"


@dataclass(frozen=True)
class MemoryMeasurement:
    """One model under one memory limit, as typed parts: the verdict and what it was measured
    under (limit, runtime, threads), why it failed (``error``, ``phase``), the ``peak`` figures,
    the ``host`` timings, the ``sandbox`` that ran it, the measured ``model``, the ``converted``
    file a tflite/ncnn run loaded (None under torch/onnxruntime), the ``fallback`` when another
    runtime measured it, and how it came to be (``note``: e.g. synthetic calibration; ``cached``;
    ``inferred_from_mb``: not run, inferred from the run at that limit, ``memory.planning``)."""

    verdict: Verdict
    limit_mb: int
    runtime: str
    threads: int
    peak: PeakMemory
    sandbox: SandboxFacts
    model: MeasuredModel
    error: Optional[str] = None
    phase: Optional[OomPhase] = None
    host: HostTimings = field(default_factory=HostTimings)
    converted: Optional[ConvertedFile] = None
    fallback: Optional[Fallback] = None
    note: Optional[str] = None
    inferred_from_mb: Optional[int] = None
    cached: bool = False

    def __post_init__(self) -> None:  # a record read back from JSON holds the text: the member again
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.phase is not None:
            object.__setattr__(self, "phase", OomPhase(self.phase))

    @property
    def fits(self) -> bool:
        return self.verdict == Verdict.FITS

    def to_dict(self) -> dict[str, Any]:
        """The store's record: each part an object of its own (``MEASUREMENT_LAYOUT``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str = "a measurement record") -> "MemoryMeasurement":
        """A record read back, every field of every part typed and range-checked (``BadRecord``
        naming the field, e.g. ``peak.rss_mb``, otherwise)."""
        from ..safe_io.records import typed

        return typed(cls, data, where)


@dataclass(frozen=True)
class FloorResult:
    """Smallest limit (within ``tolerance_mb``) at which the model still completes."""

    model_label: str
    floor_mb: Optional[int]  # None: fails even at hi_mb, or an error stopped the search
    fails_at_mb: Optional[int]  # the largest limit that failed (floor is in (fails_at, floor])
    tolerance_mb: int
    probes: tuple[tuple[int, str], ...]  # (limit, verdict) in the order tried
    at_floor: Optional[MemoryMeasurement]
    error: Optional[str] = None


@dataclass(frozen=True)
class Accuracy:
    """One model's accuracy under one runtime on the run's --eval-data (``lodevem.accuracy``), or
    why there is none (``note``). Percentages of the ``samples`` evaluated; ``drop_pts``: the fp32
    row's top-1 minus this top-1, in points. ``to_record``/``from_record``: the store's cache."""

    top1_pct: Optional[float] = None
    top5_pct: Optional[float] = None
    samples: Optional[int] = None
    drop_pts: Optional[float] = None
    note: Optional[str] = None
    seconds: Optional[float] = None
    cached: bool = False

    @classmethod
    def unavailable(cls, why: str) -> "Accuracy":
        return cls(note=why)

    def to_record(self) -> dict[str, Any]:
        return {"top1_pct": self.top1_pct, "top5_pct": self.top5_pct, "samples": self.samples,
                "seconds": self.seconds}

    @classmethod
    def from_record(cls, record: Any, where: str = "an accuracy record") -> "Accuracy":
        """The store's record read back: top-1/top-5 0..100 %, top-5 >= top-1, samples >= 1, every
        field typed (``BadRecord`` naming the field otherwise: a top-1 of 250 % is no figure)."""
        from ..safe_io.records import BadRecord, typed

        if not isinstance(record, dict) or record.get("top1_pct") is None or record.get("samples") is None:
            raise BadRecord(where, "top1_pct" if isinstance(record, dict) else "", "missing")
        parsed = typed(cls, {k: record[k] for k in ("top1_pct", "top5_pct", "samples", "seconds") if k in record},
                       where, extra={"cached": True})
        if parsed.top5_pct is not None and parsed.top1_pct is not None and parsed.top5_pct < parsed.top1_pct:
            raise BadRecord(where, "top5_pct", f"{parsed.top5_pct:g} is below top1_pct {parsed.top1_pct:g}")
        return parsed
