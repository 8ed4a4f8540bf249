"""What the sandbox measured for one model file under one RAM limit: ``MemoryMeasurement``, the
``FloorResult`` of a --find-min-ram search, and the ``Accuracy`` counted on the user's data.

Why apart from the row: these are measured once per (file, limit) and shared by every profile
with that RAM; ``PairResult`` joins them with a profile and a prediction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from ..wire.verdict import Verdict


@dataclass(frozen=True)
class MemoryMeasurement:
    """One model under one memory limit. Latency fields are the HOST CPU's (informational)."""

    verdict: Verdict
    limit_mb: int
    peak_rss_mb: Optional[float]
    runtime_baseline_mb: Optional[float]
    model_increment_mb: Optional[float]
    cgroup_peak_mb: Optional[float]
    error: Optional[str]
    phase: Optional[str]
    backend: str
    limit_enforcement: str
    runtime: str
    wall_s: float
    image_id: str
    worker_version: str
    model_sha256: str
    threads: int
    model_format: Optional[str] = None
    params: Optional[int] = None
    major_faults: Optional[int] = None
    host_latency_mean_ms: Optional[float] = None
    host_latency_std_ms: Optional[float] = None
    host_latency_p50_ms: Optional[float] = None
    host_latency_p95_ms: Optional[float] = None
    host_throughput_ips: Optional[float] = None
    cached: bool = False
    observed: dict[str, Any] = field(default_factory=dict)
    inferred_from_mb: Optional[int] = None  # not run: inferred from the run at this limit (memory.planning)
    # The file a tflite/ncnn run loaded (its conversion; None under torch/onnxruntime): total size,
    # precision and quantization scheme as the conversion reports them (``measure.MeasurePlan``)
    converted_size_bytes: Optional[int] = None
    converted_precision: Optional[str] = None
    converted_scheme: Optional[str] = None
    conversion_s: Optional[float] = None  # the conversion's own seconds in this run (None: from the cache)
    # Why the row's own runtime did not measure it (its converter refused a user's quantized file):
    # measured under torch instead, and the row says ``torch (fallback)``
    fallback: Optional[str] = None
    note: Optional[str] = None  # one line on how the measured file was made (e.g. synthetic calibration)

    def __post_init__(self) -> None:  # a record read back from JSON holds the text: the member again
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def fits(self) -> bool:
        return self.verdict == Verdict.FITS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str = "a measurement record") -> "MemoryMeasurement":
        """A record read back, every field typed and range-checked (``BadRecord`` otherwise)."""
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
