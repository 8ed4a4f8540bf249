"""One measurement makes a device yours: calibration records, benchmark-log parsing, the fit,
and the step that scales a prediction.

Why a step after prediction: the estimator (or nn-Meter) predicts a profile's latency from its
core and clock alone, and boards with the same core differ up to 1.6-1.8x (runtime version,
real vs nominal clocks, memory). One model measured on the user's own board fixes most of
that offset. The predictors stay untouched (``lodevem.predict`` knows nothing of this module):
``apply_calibration`` takes a finished ``LatencyPrediction`` and returns a scaled one.

* **Records** (``CalibrationRecord``): one JSON file per measurement in the calibrations folder
  (``--calibrations DIR``, ``$LODEVEM_CALIBRATIONS``, else ``$XDG_CONFIG_HOME/lodevem/calibrations``,
  else ``~/.config/lodevem/calibrations``). A record keeps the measured ms *and* what lodevem
  predicted for that model at calibration time, split into its compute- and memory-bound parts,
  so applying it never needs the calibration model again.
* **Fit** (``fit_calibration``): one record -> one factor, measured / predicted. Two -> one factor,
  the geometric mean of the two ratios. Three or more -> separate factors for the compute-bound
  part (MAC terms) and the memory-bound part (bytes moved, per-kernel overhead) of the
  prediction, least squares on relative error; if that fit is degenerate (a factor <= 0, the
  models too alike to tell the parts apart) the single geometric-mean factor is used, and the
  note says so.
* **Apply**: a prediction with compute share ``s`` is scaled by ``a*s + b*(1-s)``. Its source
  reads ``estimator:v1 calibrated(n=1) (Cortex-A53@2.0GHz)`` and its note names the calibration
  models, their runtime and threads. A calibration measured with another runtime or thread count
  than the run's is applied with a note that says so, never silently.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..errors import InputError
from ..safe_io import CALIBRATION_RECORD, LOG, LOG_LINE_CHARS, bounded_lines, clip, printable, read_text
from ..store import digest
from .estimator import Estimator
from .records import uncertainty_band
from ..worker.registry import on_device_runtimes

if TYPE_CHECKING:  # the records this step reads and returns; predict.py does not import this module
    from .records import LatencyPrediction
    from ..profiles import Profile

__all__ = [
    "CALIBRATIONS_ENV",
    "MEASURED_RUNTIMES",
    "CalibrationFit",
    "CalibrationRecord",
    "CalibrationSet",
    "CalibrationStore",
    "LogEntry",
    "Measurement",
    "ParsedLog",
    "apply_calibration",
    "calibrated_source",
    "default_calibrations_dir",
    "fit_calibration",
    "measurements_from_args",
    "measurements_from_log",
    "oneshot_uncertainty",
    "parse_benchmark_log",
    "read_benchmark_log",
    "select_records",
    "shares_chipset",
]

CALIBRATIONS_ENV = "LODEVEM_CALIBRATIONS"
CONFIG_ENV = "XDG_CONFIG_HOME"
# Runtimes a measurement on a device can be made with (the registry's on-device runtimes, whose
# benchmark tools the log parsers know), and "other" for anything else.
MEASURED_RUNTIMES: tuple[str, ...] = (*on_device_runtimes(), "other")
_SCHEMA = 1
# Below this many records the compute/memory split is not fitted (two unknowns need >= 3 points
# to leave a residual that says whether the split means anything).
_SPLIT_MIN = 3


def default_calibrations_dir(explicit: Optional[Path | str] = None) -> Path:
    """``--calibrations DIR``, else ``$LODEVEM_CALIBRATIONS``, else the user's config folder."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(CALIBRATIONS_ENV)
    if env:
        return Path(env)
    config = os.environ.get(CONFIG_ENV)
    root = Path(config) if config else Path.home() / ".config"
    return root / "lodevem" / "calibrations"


# --------------------------------------------------------------------------- records


# The record schema's bounds, checked when a record is written *and* when one is read (the
# folder is the user's: hand-edited, copied from elsewhere, or planted). Why these figures:
# * a latency is 1 µs .. 1e7 ms (2.8 h): no inference on a phone is faster than a microsecond
#   (one kernel launch), and nothing slower is a latency a table could compare;
# * a factor (measured / predicted) is 1/100 .. 100: boards with the same core differ 1.6-1.8x
#   (the module docstring); a factor 100 off is a wrong unit (us given as ms) or the wrong model;
# * threads 1..16 (the CLI's range), input shapes of 1..8 dimensions of 1..65536.
MIN_MS = 1e-3
MAX_MS = 1e7
MIN_FACTOR = 0.01
MAX_FACTOR = 100.0
MAX_THREADS = 16
_TEXT_CAPS = {"profile_id": 128, "model_label": 300, "model_sha256": 64, "graph_sha256": 64, "runtime": 16,
              "date": 40, "note": 1000, "predictor": 300, "measured_by": 600, "scope": 16, "chipset": 200,
              "core": 80}
SCOPES = ("profile", "same-chipset")


def check_ms(value: Any, what: str) -> float:
    """``value`` as a latency in ms within [MIN_MS, MAX_MS]; else ``InputError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what}: expected a number of milliseconds, got {type(value).__name__}")
    number = float(value)
    if not (math.isfinite(number) and MIN_MS <= number <= MAX_MS):
        raise InputError(f"{what}: {number:g} ms is outside {MIN_MS:g}..{MAX_MS:g} ms, the latencies a device "
                         "can measure")
    return number


@dataclass(frozen=True)
class CalibrationRecord:
    """One model measured on one device, with what lodevem predicted for it at the time.

    ``graph_sha256`` digests the model's kernel-graph *structure*, so the same architecture
    given as a ``.pt`` file or as a zoo name is recognised as the calibration model itself.
    ``predicted_ms`` = ``compute_ms`` + ``memory_ms`` (the estimator's split of the prediction).
    ``scope`` ``same-chipset`` (``calibrate --same-chipset``): the record also calibrates every
    profile whose ``chipset`` and core are this one's; ``profile`` (default): its own only.

    Every record is checked against the schema's bounds (``MIN_MS``.. ``MAX_MS``, ``MIN_FACTOR``..
    ``MAX_FACTOR``, finite, positive; see docs/security.md) when it is made and when it is read:
    ``validated`` raises a one-line ``InputError`` naming where the record came from.
    """

    profile_id: str
    model_label: str
    model_sha256: str
    graph_sha256: str
    measured_ms: float
    runtime: str
    threads: int
    date: str
    note: str
    predicted_ms: float
    compute_ms: float
    memory_ms: float
    predictor: str
    measured_by: str
    input_shape: Optional[tuple[int, ...]] = None
    schema: int = _SCHEMA
    scope: str = "profile"
    chipset: str = ""
    core: str = ""

    def __post_init__(self) -> None:
        self.validated(f"calibration of {clip(str(self.model_label), 80)} on {clip(str(self.profile_id), 80)}")

    @property
    def ratio(self) -> float:
        """measured / predicted: the single factor this record implies."""
        return self.measured_ms / self.predicted_ms

    @property
    def key(self) -> tuple[str, str, str, int]:
        """A newer record with the same key replaces an older one (a re-measurement)."""
        return (self.profile_id, self.graph_sha256, self.runtime, self.threads)

    def validated(self, where: str) -> "CalibrationRecord":
        """This record when every field is within the schema (see the class docstring)."""
        for name, cap in _TEXT_CAPS.items():
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InputError(f"{where}: field {name} must be text, got {type(value).__name__}")
            if len(value) > cap:
                raise InputError(f"{where}: field {name} is {len(value)} characters, at most {cap}")
            if not value.isprintable():  # a terminal escape in a note would reach every table
                raise InputError(f"{where}: field {name} holds a control character "
                                 f"({printable(next(c for c in value if not c.isprintable()))})")
        for name in ("measured_ms", "predicted_ms"):
            check_ms(getattr(self, name), f"{where}: field {name}")
        for name in ("compute_ms", "memory_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and 0 <= value <= MAX_MS):
                raise InputError(f"{where}: field {name} must be a finite number of ms >= 0")
        if abs(self.compute_ms + self.memory_ms - self.predicted_ms) > 1e-6 * self.predicted_ms + 1e-9:
            raise InputError(f"{where}: compute_ms + memory_ms must equal predicted_ms")
        if not MIN_FACTOR <= self.ratio <= MAX_FACTOR:
            raise InputError(f"{where}: measured {self.measured_ms:g} ms against {self.predicted_ms:g} ms predicted "
                             f"is a factor {self.ratio:.3g}, outside {MIN_FACTOR:g}..{MAX_FACTOR:g} (a wrong unit "
                             "or another model?)")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 1 <= self.threads <= MAX_THREADS:
            raise InputError(f"{where}: field threads must be a whole number 1..{MAX_THREADS}")
        if self.runtime not in MEASURED_RUNTIMES:
            raise InputError(f"{where}: field runtime must be one of {', '.join(MEASURED_RUNTIMES)}")
        if self.scope not in SCOPES:
            raise InputError(f"{where}: field scope must be one of {', '.join(SCOPES)}")
        if self.schema != _SCHEMA:
            raise InputError(f"{where}: schema {self.schema!r}, this lodevem reads schema {_SCHEMA}")
        shape = self.input_shape
        if shape is not None and not (isinstance(shape, tuple) and 1 <= len(shape) <= 8 and all(
                isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= 65536 for d in shape)):
            raise InputError(f"{where}: field input_shape must be 1..8 whole numbers 1..65536")
        try:
            _dt.datetime.fromisoformat(self.date)
        except ValueError:
            raise InputError(f"{where}: field date is not an ISO 8601 date") from None
        return self

    def file_name(self, serial: int = 0) -> str:
        """``PROFILE--STAMP--DIGEST.json``; the digest covers the whole record and ``serial``, so
        two measurements in the same second get two names (``CalibrationStore.add`` picks a free one)."""
        stamp = re.sub(r"[^0-9]", "", self.date)[:14]
        payload = json.dumps(self.to_dict(), sort_keys=True, allow_nan=False) + f"#{serial}"
        return f"{self.profile_id}--{stamp}--{hashlib.sha256(payload.encode()).hexdigest()[:12]}.json"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape) if self.input_shape else None
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "CalibrationRecord":
        """A record from parsed JSON, type-checked (no coercion of text to numbers) and validated."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: not a lodevem calibration record (expected a JSON object)")
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in names - set(data) if n not in ("input_shape", "schema", "scope", "chipset", "core"))
        if missing:
            raise InputError(f"{where}: not a lodevem calibration record (missing {', '.join(missing)})")
        values = {k: v for k, v in data.items() if k in names}
        shape = values.get("input_shape")
        if shape is not None:
            values["input_shape"] = tuple(shape) if isinstance(shape, list) else shape
        record = object.__new__(cls)  # validated with ``where`` below, not __post_init__'s text
        for f in fields(cls):
            object.__setattr__(record, f.name, values.get(f.name, f.default))
        return record.validated(where)


def now_iso() -> str:
    """The record's date: UTC, seconds, ISO 8601."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


class CalibrationStore:
    """The calibrations folder: one JSON file per record, written atomically under a name no
    other record holds; read through ``safe_io`` (regular files of at most 64 KiB), each record
    validated, a bad one skipped with a one-line warning in ``warnings`` (never a crash)."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.warnings: list[str] = []

    def add(self, record: CalibrationRecord) -> Path:
        record.validated("the new calibration record")
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(record.to_dict(), indent=1, allow_nan=False) + "\n"
        for serial in range(1000):
            path = self.folder / record.file_name(serial)
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
            try:
                with open(tmp, "x", encoding="utf-8") as handle:  # lodevem's own new file
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.link(tmp, path)  # atomic, and fails when the name is taken: never overwrites
                return path
            except FileExistsError:
                continue
            finally:
                tmp.unlink(missing_ok=True)
        raise InputError(f"{self.folder}: no free calibration record name for {record.profile_id}")

    def remove(self, path: Path) -> None:
        """Delete one record file (``calibrate --remove``)."""
        path.unlink()

    def records(self, profile_id: Optional[str] = None) -> list[tuple[Path, CalibrationRecord]]:
        """Every valid record (of one profile), oldest first. A missing folder holds none; a file
        that is not a valid record is skipped with a warning naming it (in ``warnings``)."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                text = read_text(path, CALIBRATION_RECORD, errors="strict")
                try:
                    data = json.loads(text, parse_constant=_no_constant)
                except RecursionError:
                    raise InputError(f"{path}: nested too deep for a calibration record") from None
                except ValueError as exc:
                    raise InputError(f"{path}: unreadable calibration record ({clip(str(exc))})") from None
                record = CalibrationRecord.from_dict(data, str(path))
            except InputError as exc:
                warning = printable(f"{exc}; skipped (fix or remove it)", newlines=False)
                if warning not in self.warnings:
                    self.warnings.append(warning)
                continue
            if profile_id is None or record.profile_id == profile_id:
                found.append((path, record))
        return sorted(found, key=lambda item: (item[1].date, item[0].name))

    def current(self, profile_id: str) -> list[CalibrationRecord]:
        """A profile's records in force: the newest per (model graph, runtime, threads)."""
        return _newest(r for _, r in self.records(profile_id))

    def siblings(self, profile: "Profile") -> list[CalibrationRecord]:
        """Records of other profiles with ``profile``'s chipset and one of its cores, newest per key."""
        return _newest(r for _, r in self.records() if r.profile_id != profile.id
                       and shares_chipset(profile, r.chipset, {r.core}))


def shares_chipset(profile: "Profile", chipset: str, cores: set[str]) -> bool:
    """Whether ``profile`` has ``chipset`` and one of ``cores``: what ``--same-chipset`` carries
    a calibration across (the same SoC, so the same cores, clocks and memory)."""
    return profile.chipset == chipset and bool(cores & {c.core for c in profile.cpu})


def _newest(records: Any) -> list[CalibrationRecord]:
    latest: dict[tuple[str, str, str, int], CalibrationRecord] = {}
    for record in records:
        latest[record.key] = record
    return list(latest.values())


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a calibration record may hold")


# --------------------------------------------------------------------------- benchmark logs


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


_NUMBER = r"([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
# TFLite / LiteRT benchmark_model: "Inference timings in us: Init: ..., Inference (avg): 12345.6".
# Parsed line by line (lines over safe_io.LOG_LINE_CHARS skipped): find the summary's literal
# start, then one anchored number after its "Inference (avg):": linear in the line, where a lazy
# ``.*?`` between the two was quadratic on a 1 MB line repeating the first phrase.
_TFLITE_START = "Inference timings in us:"
_TFLITE_AVG = re.compile(r"Inference \(avg\):\s*" + _NUMBER)
_TFLITE_THREADS = re.compile(r"Num threads:\s*\[(\d+)\]")
_TFLITE_GRAPH = re.compile(r"Graph:\s*\[([^\]]+)\]")
# ncnn benchncnn: "        mobilenet_v2  min =   23.45  max =   25.67  avg =   24.12"
_NCNN_LINE = re.compile(r"^\s*(\S+)\s+min\s*=\s*" + _NUMBER + r"\s+max\s*=\s*" + _NUMBER + r"\s+avg\s*=\s*" + _NUMBER)
_NCNN_SETTING = re.compile(r"^\s*(loop_count|num_threads|powersave|gpu_device|cooling_down)\s*=\s*(-?\d+)\s*$")


def read_benchmark_log(path: Path) -> ParsedLog:
    """``--from-log FILE``: read through ``safe_io`` (a regular file of at most 16 MiB) and parsed."""
    return parse_benchmark_log(read_text(path, LOG), str(path))


def _tflite_ms(line: str) -> Optional[float]:
    start = line.find(_TFLITE_START)
    if start < 0:
        return None
    match = _TFLITE_AVG.search(line, start + len(_TFLITE_START))
    return float(match.group(1)) / 1000.0 if match else None


def parse_benchmark_log(text: str, where: str) -> ParsedLog:
    """Read a ``benchmark_model`` (TFLite/LiteRT) or ``benchncnn`` (ncnn) log.

    benchmark_model prints microseconds (possibly as ``2.95034e+06``), benchncnn milliseconds;
    both come back in ms. Log prefixes (``INFO: ``, Android's ``I tflite  : ``) are tolerated.
    Raises ``InputError`` naming ``where`` when neither tool's timing lines are found. Linear
    time: one pass per line, lines longer than ``LOG_LINE_CHARS`` skipped.
    """
    lines, skipped = bounded_lines(text, LOG_LINE_CHARS)
    tflite = [ms for ms in map(_tflite_ms, lines) if ms is not None]
    if tflite:
        threads = [int(m.group(1)) for m in map(_TFLITE_THREADS.search, lines) if m]
        graphs = [m.group(1) for m in map(_TFLITE_GRAPH.search, lines) if m]
        names = [Path(g.strip()).stem for g in graphs] if len(graphs) == len(tflite) else [None] * len(tflite)
        return ParsedLog("tflite", "benchmark_model", threads[0] if len(set(threads)) == 1 else None,
                         tuple(LogEntry(n, ms) for n, ms in zip(names, tflite)), "")
    entries, settings = [], {}
    for line in lines:
        setting = _NCNN_SETTING.match(line)
        if setting:
            settings[setting.group(1)] = int(setting.group(2))
            continue
        match = _NCNN_LINE.match(line)
        if match:
            entries.append(LogEntry(match.group(1), float(match.group(4))))
    if entries:
        if settings.get("gpu_device", -1) != -1:
            raise InputError(f"{where}: benchncnn ran on GPU device {settings['gpu_device']}; lodevem predicts "
                             "CPU latency (rerun with gpu_device = -1)")
        threads = settings.pop("num_threads", None)
        return ParsedLog("ncnn", "benchncnn", threads, tuple(entries),
                         ", ".join(f"{k}={v}" for k, v in settings.items()))
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
        name = next((c for c in candidates if c in by_name), None)
        if name is None:
            raise InputError(f"{where}: no benchncnn entry for {clip(arg, 80)!r}; entries: "
                             f"{clip(', '.join(by_name))} (name one with MODEL=ENTRY)")
        shape = shapes.get(name) if to_zoo.get(name) in (model, stem) else None
        found.append(Measurement(model, check_ms(by_name[name].ms, f"{where}: {name}"), f"{origin}: {name} avg", shape))
    return found


# --------------------------------------------------------------------------- the fit


@dataclass(frozen=True)
class CalibrationFit:
    """The factors in force for one profile: time = a * compute part + b * memory part."""

    profile_id: str
    records: tuple[CalibrationRecord, ...]
    compute_factor: float
    memory_factor: float
    split: bool
    fallback: Optional[str] = None  # why three or more records still gave one factor

    @property
    def n(self) -> int:
        return len(self.records)

    def factor(self, share: float) -> float:
        """The scale for a prediction whose compute-bound share is ``share``."""
        return self.compute_factor * share + self.memory_factor * (1.0 - share)

    def describe(self) -> str:
        if self.split:
            return f"compute x{self.compute_factor:.3f}, memory x{self.memory_factor:.3f} (n={self.n})"
        text = f"x{self.compute_factor:.3f} (n={self.n})"
        return f"{text}; {self.fallback}" if self.fallback else text


def fit_calibration(profile_id: str, records: Sequence[CalibrationRecord]) -> Optional[CalibrationFit]:
    """Fit the factors from a profile's records (None: no records)."""
    records = tuple(records)
    if not records:
        return None
    single = math.exp(sum(math.log(r.ratio) for r in records) / len(records))
    if len(records) < _SPLIT_MIN:
        return CalibrationFit(profile_id, records, single, single, split=False)
    # minimise sum_i (a*c_i/y_i + b*m_i/y_i - 1)^2: relative error, so a 10 ms and a 400 ms model
    # weigh alike. Normal equations of a 2-unknown linear least squares.
    xs = [(r.compute_ms / r.measured_ms, r.memory_ms / r.measured_ms) for r in records]
    scc = sum(c * c for c, _ in xs)
    smm = sum(m * m for _, m in xs)
    scm = sum(c * m for c, m in xs)
    sc, sm = sum(c for c, _ in xs), sum(m for _, m in xs)
    det = scc * smm - scm * scm
    if det <= 1e-12 * max(scc * smm, 1e-300):
        return CalibrationFit(profile_id, records, single, single, split=False,
                              fallback="the models' compute/memory mixes are too alike to fit two factors")
    a = (sc * smm - sm * scm) / det
    b = (sm * scc - sc * scm) / det
    if not (MIN_FACTOR <= a <= MAX_FACTOR and MIN_FACTOR <= b <= MAX_FACTOR):
        return CalibrationFit(profile_id, records, single, single, split=False,
                              fallback=f"a two-factor fit gave compute x{a:.2f}, memory x{b:.2f}: one factor used")
    return CalibrationFit(profile_id, records, a, b, split=True)


def select_records(records: Sequence[CalibrationRecord], runtime: Optional[str],
                   threads: int) -> tuple[list[CalibrationRecord], Optional[str]]:
    """The records to fit for a run, and a note when they do not match the run's settings.

    Records measured with the run's runtime and thread count are preferred; when none match,
    every record is used and the note says what differs (applied, never silently).
    """
    records = list(records)
    if not records:
        return [], None
    same = [r for r in records if r.threads == threads and (runtime is None or r.runtime == runtime)]
    if same:
        return same, None
    measured = sorted({f"{r.runtime}, {_threads(r.threads)}" for r in records})
    wanted = f"{runtime}, {_threads(threads)}" if runtime else _threads(threads)
    return records, f"calibration measured with {' / '.join(measured)}, this prediction is for {wanted}: applied anyway"


def _threads(n: int) -> str:
    return "1 thread" if n == 1 else f"{n} threads"


# --------------------------------------------------------------------------- applying


def oneshot_figure(estimator: Estimator) -> Optional[float]:
    """The estimator's one-shot calibration MAPE (``uncertainty.oneshot_mape_pct``), None without one."""
    value = estimator.params.get("uncertainty", {}).get("oneshot_mape_pct")
    try:
        figure = float(value)
    except (TypeError, ValueError):
        return None
    return figure if math.isfinite(figure) else None


def oneshot_uncertainty(estimator: Estimator) -> str:
    """The stated error of a calibrated prediction: the estimator's one-shot calibration MAPE
    (``uncertainty.oneshot_mape_pct`` in its parameters), or a statement that there is none."""
    figure = oneshot_figure(estimator)
    if figure is None:
        return ("one-shot calibration error not available (these estimator parameters have no "
                "uncertainty.oneshot_mape_pct)")
    return f"±{figure:.0f}% (one-shot calibration MAPE)"


def calibrated_source(source: str, n: int) -> str:
    """``estimator:v1 (Cortex-A53@2.0GHz)`` -> ``estimator:v1 calibrated(n=1) (Cortex-A53@2.0GHz)``;
    a source without a ``(core@clock)`` part gets the tag at its end."""
    tag = f"calibrated(n={n})"
    head, sep, tail = source.rpartition(" (")
    return f"{head} {tag}{sep}{tail}" if sep else f"{source} {tag}"


def _predictor_base(source: str) -> str:
    """The predictor a source names, without the core/clock it was carried to."""
    return source.rpartition(" (")[0] if " (" in source else source.split("\u2192")[0]


def apply_calibration(prediction: "LatencyPrediction", fit: Optional[CalibrationFit], share: float,
                      estimator: Estimator, graph_sha256: Optional[str] = None,
                      mismatch: Optional[str] = None) -> "LatencyPrediction":
    """``prediction`` (a ``LatencyPrediction``) scaled by the profile's fit, with its source,
    uncertainty and note saying so; unchanged when there is no fit or no number.

    ``share``: the prediction's compute-bound share (``LatencyPrediction.compute_share``, from the
    cost model's ``Estimate``); ``graph_sha256``: the
    predicted model's graph digest, to say when it is a calibration model itself; ``mismatch``:
    the note from ``select_records``.
    """
    if fit is None or prediction.latency_ms is None:
        return prediction
    factor = fit.factor(share)
    models = ", ".join(f"{r.model_label} {r.measured_ms:.4g} ms ({r.runtime}, {_threads(r.threads)})"
                       for r in fit.records)
    donors = ", ".join(sorted({r.profile_id for r in fit.records}))
    notes = [prediction.note, f"calibrated on {donors} with {models}: x{factor:.3f}"
             + (f" ({fit.describe()})" if fit.split or fit.fallback else "")]
    own = [r for r in fit.records if graph_sha256 and r.graph_sha256 == graph_sha256]
    if own:
        notes.append("this model is a calibration model (its prediction reproduces its measurement)"
                     if fit.n == 1 else "this model is one of the calibration models")
    predictors = sorted({_predictor_base(r.predictor) for r in fit.records})
    current = _predictor_base(prediction.latency_source)
    if predictors != [current]:
        notes.append(f"calibrated against {', '.join(predictors)}, this prediction is {current}: the factor may "
                     "not carry over")
    if mismatch:
        notes.append(mismatch)
    measured = ", ".join(f"{r.model_label} {r.measured_ms:g} ms ({r.runtime}, {r.threads} thread(s), {r.date[:10]})"
                         for r in fit.records)
    described = f"{fit.records[0].profile_id}: x{factor:.3f} from {fit.n} measurement(s) on the device: {measured}"
    scaled = prediction.latency_ms * factor
    low, high = uncertainty_band(scaled, oneshot_figure(estimator))
    return replace(prediction, latency_ms=scaled,
                   latency_source=calibrated_source(prediction.latency_source, fit.n),
                   calibrations=(*prediction.calibrations, described),
                   uncertainty=oneshot_uncertainty(estimator), uncertainty_pct=oneshot_figure(estimator),
                   latency_low_ms=low, latency_high_ms=high,
                   compute_ms=prediction.compute_ms * fit.compute_factor if prediction.compute_ms is not None else None,
                   memory_ms=prediction.memory_ms * fit.memory_factor if prediction.memory_ms is not None else None,
                   note="; ".join(n for n in notes if n),
                   kernels=tuple(replace(k, ms=k.ms * factor if k.ms is not None else None)
                                 for k in prediction.kernels))


class CalibrationSet:
    """The calibrations folder as one run uses it: records read once, one fit per (profile,
    runtime, threads), applied to each prediction after the predictor made it.

    ``folder`` None: ``default_calibrations_dir()``. ``enabled=False``: nothing is applied.
    """

    def __init__(self, folder: Optional[Path | str] = None, enabled: bool = True) -> None:
        self.folder = default_calibrations_dir(folder)
        self.enabled = enabled
        self.store = CalibrationStore(self.folder)
        self._fits: dict[tuple[str, Optional[str], int], tuple[Optional[CalibrationFit], Optional[str]]] = {}
        self._used: dict[str, CalibrationFit] = {}

    def fit_for(self, profile_id: str, runtime: Optional[str], threads: int,
                profile: Optional["Profile"] = None) -> tuple[Optional[CalibrationFit], Optional[str]]:
        """The fit in force for a profile and the run's settings, and a note if any: the mismatch
        note of ``select_records``, or (``profile`` given, no records of its own) that a profile
        with the same chipset and core is calibrated, applied here only when its records were
        made with ``--same-chipset``."""
        key = (profile_id, runtime, threads)
        if key not in self._fits:
            if not self.enabled:
                self._fits[key] = (None, None)
            else:
                own = self.store.current(profile_id)
                borrowed = self.store.siblings(profile) if profile is not None and not own else []
                shared = [r for r in borrowed if r.scope == "same-chipset"]
                chosen, note = select_records(own or shared, runtime, threads)
                fit = fit_calibration(profile_id, chosen)
                donors = ", ".join(sorted({r.profile_id for r in (shared or borrowed)}))
                if shared and fit is not None:
                    note = "; ".join(n for n in (f"calibration of {donors} applied: same chipset "
                                                 f"({shared[0].chipset}) and core ({shared[0].core}), "
                                                 "recorded with --same-chipset", note) if n)
                elif borrowed:
                    note = (f"not calibrated: {donors} (same chipset {borrowed[0].chipset}, core {borrowed[0].core}) "
                            f"is; `lodevem calibrate add {borrowed[0].profile_id} ... --same-chipset` applies it "
                            "here too")
                self._fits[key] = (fit, note)
        return self._fits[key]

    def check(self) -> list[str]:
        """Read every record now; returns one warning per file that is not a valid record (it
        is skipped: it changes no latency)."""
        if self.enabled:
            self.store.records()
        return self.warnings

    @property
    def warnings(self) -> list[str]:
        """One line per calibration file skipped as invalid."""
        return self.store.warnings

    def digest(self) -> str:
        """A digest of the records in force ("" when disabled or none): a run resumed after a new
        calibration must not mix rows scaled with the old and the new factors."""
        if not self.enabled:
            return ""
        records = sorted(json.dumps(r.to_dict(), sort_keys=True, allow_nan=False) for _, r in self.store.records())
        return digest(records)[:16] if records else ""

    def reload(self) -> None:
        """Forget the fits, so records added since are read (after ``lodevem calibrate``)."""
        self._fits.clear()

    def apply(self, prediction: "LatencyPrediction", profile: "Profile", estimator: Estimator,
              runtime: Optional[str] = None) -> "LatencyPrediction":
        """``prediction`` on ``profile``, scaled by the profile's calibration, with the split into
        compute- and memory-bound parts the prediction carries (the cost model's ``Estimate``);
        ``estimator``: the cost model that made it (its one-shot error is the calibrated figure's).

        The run's runtime is the prediction's own when it names one (issue 13's field), else
        ``runtime``.
        """
        if prediction.latency_ms is None:
            return prediction
        runtime = prediction.runtime or runtime
        fit, mismatch = self.fit_for(profile.id, runtime, prediction.threads, profile)
        if fit is None:
            if mismatch:  # a profile of the same chipset is calibrated: say why this one is not
                return replace(prediction, note="; ".join(n for n in (prediction.note, mismatch) if n))
            return prediction
        self._used[profile.id] = fit
        return apply_calibration(prediction, fit, prediction.compute_share, estimator, prediction.graph_sha256,
                                 mismatch)

    def describe(self) -> dict[str, Any]:
        """What was applied, for the run's manifest."""
        return {"folder": str(self.folder), "enabled": self.enabled,
                "applied": {pid: {"fit": fit.describe(), "records": [r.to_dict() for r in fit.records]}
                            for pid, fit in self._used.items()}}
