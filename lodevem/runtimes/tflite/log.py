"""LiteRT / TFLite ``benchmark_model`` logs: the device benchmark that calibrates a tflite profile
(``parse_log``: the averages) and measures on a phone (``parse_run``: statistics, peak memory,
per-operator profile)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

from ..logs import NUMBER, BenchmarkRun, LatencyStats, LogEntry, OpTime, ParsedLog

__all__ = ["parse_log", "parse_run"]

# "Inference timings in us: Init: ..., Inference (avg): 12345.6". Parsed line by line (lines over
# safe_io.LOG_LINE_CHARS skipped by the caller): find the summary's literal start, then one
# anchored number after its "Inference (avg):": linear in the line, where a lazy ``.*?`` between
# the two was quadratic on a 1 MB line repeating the first phrase.
_START = "Inference timings in us:"
_AVG = re.compile(r"Inference \(avg\):\s*" + NUMBER)
_THREADS = re.compile(r"Num threads:\s*\[(\d+)\]")
_GRAPH = re.compile(r"Graph:\s*\[([^\]]+)\]")
# The stat line of tensorflow/tsl's Stat<int64>::OutputToStream, microseconds:
# "count=50 first=35234 curr=34987 min=34512 max=36123 avg=35012.1 std=345", or, when every run
# took the same time, "count=50 curr=35000(all same)". After a log prefix ("INFO: ", "I tflite  : ").
_STAT = re.compile(r"^(?:[A-Z][A-Za-z ]{0,20}:\s+)?count=(\d+) (?:first=" + NUMBER + r" )?curr=" + NUMBER
                   + r"(?:\(all same\)|(?: min=" + NUMBER + r" max=" + NUMBER + r" avg=" + NUMBER + r" std="
                   + NUMBER + r"))?\s*$")
_PEAK = re.compile(r"Overall peak memory footprint \(MB\) via periodic monitoring:\s*" + NUMBER)
_VERSION = re.compile(r"(?:LiteRT|TensorFlow Lite|TfLite|TFLite) version:?\s*\[?([0-9][0-9A-Za-z.+-]{0,40})\]?")
_SUMMARY = "Summary by node type"
_OP_ROW = re.compile(r"^\s*([A-Za-z0-9_/:.\-]{1,80})\s+(\d+)\s+" + NUMBER + r"\s+" + NUMBER + r"%\s+" + NUMBER + "%")
MAX_OPS = 500


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


def _stats(match: "re.Match[str]") -> LatencyStats:
    count, first, curr, low, high, avg, std = match.groups()
    if avg is None:  # "(all same)": every run took ``curr``
        same = float(curr) / 1000.0
        return LatencyStats(int(count), same, same, same, 0.0, None, same)
    return LatencyStats(int(count), float(avg) / 1000.0, float(low) / 1000.0, float(high) / 1000.0,
                        float(std) / 1000.0, None, float(first) / 1000.0 if first is not None else None)


def parse_run(lines: Sequence[str]) -> Optional[BenchmarkRun]:
    """One benchmark_model run: the timed runs' statistics (the last stat line before the
    ``Inference timings`` summary: the first is the warm-up's, the op profile's ``Timings
    (microseconds)`` line is not one), the peak footprint (``--report_peak_memory_footprint``),
    the "Summary by node type" table (``--enable_op_profiling``) and a version if printed. None:
    no stat line, not a benchmark_model run that finished."""
    stats: Optional[LatencyStats] = None
    peak = version = None
    ops: list[OpTime] = []
    in_summary = False
    for line in lines:
        if _START in line:
            break
        match = _STAT.match(line.strip())
        if match:
            stats = _stats(match)
            continue
        if _SUMMARY in line:
            in_summary, ops = True, []
            continue
        if in_summary:
            row = _OP_ROW.match(line)
            if row and len(ops) < MAX_OPS:
                ops.append(OpTime(row.group(1), int(row.group(2)), float(row.group(3)), float(row.group(4))))
            elif line.strip() and "[Node type]" not in line:
                in_summary = False
        found = _VERSION.search(line)
        if found and version is None:
            version = found.group(1)
    for line in lines:
        found_peak = _PEAK.search(line)
        if found_peak:
            peak = float(found_peak.group(1))
    if stats is None:
        return None
    threads = [int(m.group(1)) for m in map(_THREADS.search, lines) if m]
    return BenchmarkRun("benchmark_model", threads[0] if threads else None, stats, peak, tuple(ops), version)
