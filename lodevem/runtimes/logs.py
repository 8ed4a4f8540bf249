"""What a device benchmark log says, as records every runtime's log reader returns.

Why here, beside the runtimes: each runtime that ships on a phone has its own benchmark tool
(LiteRT's ``benchmark_model``, ncnn's ``benchncnn``) and its own log format; the runtime's folder
reads it (``runtimes.<name>.log``), and the calibration (``latency.calibration``) takes the
records without knowing which tool wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["NUMBER", "LogEntry", "ParsedLog"]

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
