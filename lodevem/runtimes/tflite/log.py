"""LiteRT / TFLite ``benchmark_model`` logs: the device benchmark that calibrates a tflite profile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

from ..logs import NUMBER, LogEntry, ParsedLog

__all__ = ["parse_log"]

# "Inference timings in us: Init: ..., Inference (avg): 12345.6". Parsed line by line (lines over
# safe_io.LOG_LINE_CHARS skipped by the caller): find the summary's literal start, then one
# anchored number after its "Inference (avg):": linear in the line, where a lazy ``.*?`` between
# the two was quadratic on a 1 MB line repeating the first phrase.
_START = "Inference timings in us:"
_AVG = re.compile(r"Inference \(avg\):\s*" + NUMBER)
_THREADS = re.compile(r"Num threads:\s*\[(\d+)\]")
_GRAPH = re.compile(r"Graph:\s*\[([^\]]+)\]")


def _ms(line: str) -> Optional[float]:
    start = line.find(_START)
    if start < 0:
        return None
    match = _AVG.search(line, start + len(_START))
    return float(match.group(1)) / 1000.0 if match else None


def parse_log(lines: Sequence[str], where: str) -> Optional[ParsedLog]:
    """The log's timings (benchmark_model prints microseconds; returned in ms), or None when it
    is not a benchmark_model log. Log prefixes (``INFO: ``, Android's ``I tflite  : ``) are fine."""
    timings = [ms for ms in map(_ms, lines) if ms is not None]
    if not timings:
        return None
    threads = [int(m.group(1)) for m in map(_THREADS.search, lines) if m]
    graphs = [m.group(1) for m in map(_GRAPH.search, lines) if m]
    names = [Path(g.strip()).stem for g in graphs] if len(graphs) == len(timings) else [None] * len(timings)
    return ParsedLog("tflite", "benchmark_model", threads[0] if len(set(threads)) == 1 else None,
                     tuple(LogEntry(n, ms) for n, ms in zip(names, timings)), "")
