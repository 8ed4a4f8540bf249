"""Device benchmark logs (TFLite/LiteRT ``benchmark_model``, ncnn ``benchncnn``: each read by its
runtime's folder, ``lodevem.runtimes``) and the ``MODEL=MS`` arguments of ``lodevem calibrate``,
turned into measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ...errors import InputError
from ...runtimes import LogEntry, ParsedLog, parse_device_log
from ...safe_io import LOG, LOG_LINE_CHARS, bounded_lines, clip, read_text
from .records import check_ms

__all__ = ["LogEntry", "Measurement", "ParsedLog", "measurements_from_args", "measurements_from_log",
           "parse_benchmark_log", "read_benchmark_log"]

def read_benchmark_log(path: Path) -> ParsedLog:
    """``--from-log FILE``: read through ``safe_io`` (a regular file of at most 16 MiB) and parsed."""
    return parse_benchmark_log(read_text(path, LOG), str(path))


def parse_benchmark_log(text: str, where: str) -> ParsedLog:
    """Read a ``benchmark_model`` (TFLite/LiteRT) or ``benchncnn`` (ncnn) log.

    benchmark_model prints microseconds (possibly as ``2.95034e+06``), benchncnn milliseconds;
    both come back in ms. Log prefixes (``INFO: ``, Android's ``I tflite  : ``) are tolerated.
    Raises ``InputError`` naming ``where`` when neither tool's timing lines are found. Linear
    time: one pass per line, lines longer than ``LOG_LINE_CHARS`` skipped.
    """
    lines, skipped = bounded_lines(text, LOG_LINE_CHARS)
    found = parse_device_log(lines, where)  # each runtime's folder reads its own tool's log
    if found is not None:
        return found
    long_lines = f" ({skipped} line(s) over {LOG_LINE_CHARS} characters skipped)" if skipped else ""
    raise InputError(f"{where}: no timings found{long_lines}: expected TFLite benchmark_model output (a line "
                     "'Inference timings in us: ... Inference (avg): N') or ncnn benchncnn output (lines 'NAME  "
                     "min = N  max = N  avg = N')")


@dataclass(frozen=True)
class Measurement:
    """One model's measured time on the device, before it becomes a record: ``model`` as the
    user named it (a path or a zoo name), where the figure came from, and the input shape the
    benchmark used when lodevem knows it (ncnn's squeezenet runs at 227x227)."""

    model: str
    ms: float
    measured_by: str
    input_shape: Optional[tuple[int, ...]] = None


def _positive_ms(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{what}: expected MODEL=MS with MS a positive number of milliseconds, got {clip(text, 80)!r}")
    return check_ms(value, what)


def measurements_from_args(args: Sequence[str]) -> list[Measurement]:
    """``MODEL=MS`` arguments (``mobilenet_v2.pt=24.1``); the last ``=`` splits, so a path may hold one."""
    if not args:
        raise InputError("no measurements given: lodevem calibrate add PROFILE_ID MODEL=MS [MODEL=MS ...] "
                         "(or lodevem calibrate from-log LOG PROFILE_ID)")
    found = []
    for arg in args:
        model, sep, ms = arg.rpartition("=")
        if not sep or not model:
            raise InputError(f"{arg!r}: expected MODEL=MS (a model file or zoo name, '=', its measured "
                             "milliseconds), e.g. mobilenet_v2=24.1")
        found.append(Measurement(model, _positive_ms(ms, repr(arg)), "given on the command line"))
    return found


def measurements_from_log(args: Sequence[str], log: ParsedLog, where: str,
                          model_map: dict[str, Any]) -> list[Measurement]:
    """Pair the models named on the command line with a log's timings.

    benchmark_model logs one model per run: MODEL arguments pair with its ``Inference (avg)``
    lines in order, one each. benchncnn logs many models by name: ``MODEL`` is found by its
    zoo name or file stem (``mobilenet_v1`` is benchncnn's ``mobilenet``, through the estimator's
    ``model_map``), ``MODEL=ENTRY`` names the log entry; no MODEL takes every entry that is a zoo
    model (int8 entries are skipped: the prediction is fp32).
    """
    origin = f"{log.tool} log {where}" + (f" ({log.settings})" if log.settings else "")
    if log.tool == "benchmark_model":
        if any("=" in a for a in args):
            raise InputError(f"{where}: a benchmark_model log times one model per run; give MODEL (no =MS) "
                             "for each run in the log, in order")
        if len(args) != len(log.entries):
            raise InputError(f"{where}: the log holds {len(log.entries)} benchmark_model run(s) but "
                             f"{len(args)} MODEL(s) were given; name one MODEL per run, in order")
        return [Measurement(a, check_ms(e.ms, f"{where}: run {i + 1}"),
                            f"{origin}: Inference (avg)" + (f" of {e.name}" if e.name else ""))
                for i, (a, e) in enumerate(zip(args, log.entries))]
    by_name = {e.name: e for e in log.entries if e.name}
    to_zoo = {name: entry["zoo"] for name, entry in model_map.items() if isinstance(entry, dict) and "zoo" in entry}
    shapes = {name: tuple(entry["input"]) for name, entry in model_map.items()
              if isinstance(entry, dict) and entry.get("input")}
    if not args:
        found = [Measurement(to_zoo[name], check_ms(e.ms, f"{where}: {name}"), f"{origin}: {name} avg",
                             shapes.get(name))
                 for name, e in by_name.items() if name in to_zoo]
        if not found:
            raise InputError(f"{where}: no entry of this benchncnn log is a lodevem zoo model (zoo models "
                             f"benchncnn knows: {clip(', '.join(sorted(to_zoo)))}); name them: MODEL=ENTRY")
        return found
    from_zoo: dict[str, str] = {}
    for name, zoo_name in to_zoo.items():  # benchncnn's own entry names first (not the "std:" TFLite ones)
        if name in by_name:
            from_zoo.setdefault(zoo_name, name)
    found = []
    for arg in args:
        model, sep, entry_name = arg.rpartition("=")
        if not sep:
            model, entry_name = arg, ""
        stem = Path(model).stem
        candidates = [entry_name] if entry_name else [model, stem, from_zoo.get(model, ""), from_zoo.get(stem, "")]
        found_name = next((c for c in candidates if c in by_name), None)
        if found_name is None:
            raise InputError(f"{where}: no benchncnn entry for {clip(arg, 80)!r}; entries: "
                             f"{clip(', '.join(by_name))} (name one with MODEL=ENTRY)")
        shape = shapes.get(found_name) if to_zoo.get(found_name) in (model, stem) else None
        found.append(Measurement(model, check_ms(by_name[found_name].ms, f"{where}: {found_name}"),
                                 f"{origin}: {found_name} avg", shape))
    return found
