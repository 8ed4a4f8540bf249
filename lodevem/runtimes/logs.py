"""What a device benchmark log says, as records every runtime's log reader returns.

Why here, beside the runtimes: each runtime that ships on a phone has its own benchmark tool
(LiteRT's ``benchmark_model``, ncnn's ``benchncnn``) and its own log format; the runtime's folder
reads it (``runtimes.<name>.log``), and the calibration (``latency.calibration``) takes the
records without knowing which tool wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["NUMBER", "BenchmarkRun", "LatencyStats", "LogEntry", "OpTime", "ParsedLog"]

# A decimal number as the tools print them (``2.95034e+06`` included).
NUMBER = r"([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"


@dataclass(frozen=True)
class LogEntry:
    """One model's average inference time in a benchmark log (``name`` None: the log names none)."""

    name: Optional[str]
    ms: float


@dataclass(frozen=True)
class ParsedLog:
    """What a device benchmark log says: the tool's runtime, its thread count, the timings."""

    runtime: str
    tool: str
    threads: Optional[int]
    entries: tuple[LogEntry, ...]
    settings: str  # the tool's other settings, for the record ("loop_count=8, powersave=2")


@dataclass(frozen=True)
class LatencyStats:
    """The timed runs' statistics as a device benchmark printed them (ms): its own figures, none
    recomputed. ``p50_ms`` None: the tool prints no median (benchmark_model's stat line has none)."""

    count: int
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: Optional[float] = None
    p50_ms: Optional[float] = None
    first_ms: Optional[float] = None


@dataclass(frozen=True)
class OpTime:
    """One node type of a per-operator profile: how many nodes, their summed average ms, their share."""

    node_type: str
    count: int
    avg_ms: float
    share_pct: float

    def __str__(self) -> str:  # the CSV cell: "CONV_2D x36 20.42 ms (71.2%)"
        return f"{self.node_type} x{self.count} {self.avg_ms:.4g} ms ({self.share_pct:.1f}%)"


@dataclass(frozen=True)
class BenchmarkRun:
    """What one run of a runtime's own benchmark binary reported about one model."""

    tool: str
    threads: Optional[int]
    stats: LatencyStats
    peak_memory_mb: Optional[float] = None
    op_profile: tuple[OpTime, ...] = ()
    version: Optional[str] = None  # the runtime version the binary printed, if it printed one
