"""``lodevem calibrate``'s work: record measurements made on a real device, list and remove records.

The command line (``cli.py``: the ``calibrate`` group, ``add``, ``from-log``, ``list``, ``remove``)
parses options and prints what these functions return; the rules live here: which runtime and
thread count a log implies, which records an ID names, which other profiles share the chipset.
The records, their store and the fit are ``calibration``'s (beside this module); predictions go
through the ``Predictor``, as ``predict`` and the Python API do.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional, Sequence

from ..errors import InputError
from ..latency.calibration import (
    CalibrationOutcome,
    Measurement,
    RecordListing,
    Removed,
    measurements_from_args,
    measurements_from_log,
    read_benchmark_log,
    shares_chipset,
)
from ..safe_io import printable
from .predictor import Predictor

__all__ = ["CalibrationOutcome", "RecordListing", "Removed", "add_from_args", "add_from_log", "calibrate_profile",
           "list_records", "log_measurements", "remove", "remove_records"]


@dataclass(frozen=True)
class LogMeasurements:
    """A device log's timings paired with the models named: the runtime and the threads it ran."""

    measurements: tuple[Measurement, ...]
    runtime: str
    threads: Optional[int]


def benchncnn_model_map(predictor: Predictor) -> dict[str, Any]:
    """benchncnn's entry names -> zoo models and input shapes, from the estimator's provenance
    (the one table that knows ``mobilenet`` is benchncnn's ``mobilenet_v1``)."""
    provenance = predictor.pool.estimator.params.get("provenance", {})
    found = provenance.get("model_map", {}) if isinstance(provenance, dict) else {}
    return found if isinstance(found, dict) else {}


def log_measurements(predictor: Predictor, log_file: Path, models: Sequence[str],
                     runtime: Optional[str]) -> LogMeasurements:
    """The timings of a TFLite ``benchmark_model`` or ncnn ``benchncnn`` log, paired with ``models``
    (``measurements_from_log``); ``runtime``, when given, must be the log's own."""
    log = read_benchmark_log(log_file)
    if runtime is not None and runtime != log.runtime:
        raise InputError(f"--runtime {runtime}: {log_file} is a {log.tool} log ({log.runtime})")
    found = measurements_from_log(models, log, str(log_file), benchncnn_model_map(predictor))
    return LogMeasurements(tuple(found), log.runtime, log.threads)


def arg_measurements(args: Sequence[str]) -> tuple[Measurement, ...]:
    """``MODEL=MS`` arguments as measurements (``measurements_from_args``)."""
    return tuple(measurements_from_args(args))


def calibrate_profile(predictor: Predictor, profile_id: str, measurements: Sequence[Measurement], *,
                      runtime: str, threads: int, note: str = "", same_chipset: bool = False) -> CalibrationOutcome:
    """Predict each measured model on the profile, store one record each (nothing is written
    when one model cannot be predicted), and report the profile's fit and chipset siblings."""
    profile = predictor.profile(profile_id)
    warnings = list(predictor.calibrations.check())
    with predictor:
        written = predictor.calibrate(profile, measurements, runtime=runtime, threads=threads, note=note,
                                    same_chipset=same_chipset)
    warnings += predictor.warnings
    fit, mismatch = predictor.calibrations.fit_for(profile.id, runtime, threads)
    cores = {c.core for c in profile.cpu}
    siblings = tuple(p.id for p in predictor.profiles()
                     if p.id != profile.id and shares_chipset(p, profile.chipset, cores))
    return CalibrationOutcome(profile.id, runtime, threads, tuple(written), fit.describe() if fit is not None else None,
                              mismatch or None, siblings, profile.chipset, tuple(dict.fromkeys(warnings)))


def threads_of(given: Optional[int], from_log: Optional[int], log_file: Optional[Path]) -> int:
    """The thread count of the measurement: ``--threads``, else the log's, else 1; the two must agree."""
    if given is not None and from_log is not None and given != from_log:
        raise InputError(f"--threads {given}, but {log_file} says the benchmark ran {from_log} thread(s)")
    return given or from_log or 1


def remove_records(predictor: Predictor, target: str) -> list[Removed]:
    """Delete one record by ID (its file's stem), or every record of a profile."""
    store = predictor.calibrations.store
    records = store.records()
    chosen = [(p, r) for p, r in records if p.stem == target] or [(p, r) for p, r in records if r.profile_id == target]
    if not chosen:
        known = ", ".join(p.stem for p, _ in records[:5]) + (", ..." if len(records) > 5 else "")
        raise InputError(f"calibrate remove {printable(target, 80)}: no calibration record with that ID and no "
                         f"profile with records in {store.folder}" + (f" (IDs: {known})" if known else ""))
    for path, _ in chosen:
        store.remove(path)
    return [Removed(path.stem, record) for path, record in chosen]


# -- the subcommands, one call each (``commands.calibrate``) ---------------------------------------

Busy = Callable[[str], ContextManager[Any]]  # a spinner while models are exported and predicted


def _predictor(calibrations: Optional[Path], profiles_dirs: Sequence[Path] = (), **options: Any) -> Predictor:
    """The predictions a record compares against are ``auto``'s, as ``start`` and ``predict`` make them."""
    return Predictor(predictor="auto", calibrations=calibrations, profiles_dir=profiles_dirs, **options)


def _record(predictor: Predictor, profile_id: str, found: Sequence[Measurement], runtime: str, threads: int,
            note: str, same_chipset: bool, busy: Busy) -> CalibrationOutcome:
    with busy(f"exporting and predicting {len(found)} model(s) on {profile_id}"):
        return calibrate_profile(predictor, profile_id, found, runtime=runtime, threads=threads, note=note,
                                 same_chipset=same_chipset)


def add_from_args(profile_id: str, measurements: Sequence[str], runtime: Optional[str], threads: int, note: str = "",
                  same_chipset: bool = False, *, calibrations: Optional[Path] = None,
                  profiles_dirs: Sequence[Path] = (), busy: Busy = lambda _: contextlib.nullcontext(),
                  **options: Any) -> CalibrationOutcome:
    """``calibrate add``: ``MODEL=MS`` measurements made on ``profile_id``'s device, recorded.
    ``options``: how model files are exported (``input_shape``, ``backend``, ``timeout_s``, ``loading``)."""
    predictor = _predictor(calibrations, profiles_dirs, **options)
    predictor.profile(profile_id)  # an unknown profile first: its error suggests the near names
    found = arg_measurements(measurements)
    if runtime is None:
        raise InputError("--runtime is required: the runtime the measurement was made with (tflite, ncnn or other)")
    return _record(predictor, profile_id, found, runtime, threads, note, same_chipset, busy)


def add_from_log(log_file: Path, profile_id: str, models: Sequence[str], runtime: Optional[str],
                 threads: Optional[int], note: str = "", same_chipset: bool = False, *,
                 calibrations: Optional[Path] = None, profiles_dirs: Sequence[Path] = (),
                 busy: Busy = lambda _: contextlib.nullcontext(), **options: Any) -> CalibrationOutcome:
    """``calibrate from-log``: the times of a device benchmark log, recorded for ``profile_id``."""
    predictor = _predictor(calibrations, profiles_dirs, **options)
    predictor.profile(profile_id)
    log = log_measurements(predictor, log_file, models, runtime)
    return _record(predictor, profile_id, log.measurements, log.runtime, threads_of(threads, log.threads, log_file),
                   note, same_chipset, busy)


def list_records(profile_id: Optional[str], calibrations: Optional[Path],
                 profiles_dirs: Sequence[Path] = ()) -> RecordListing:
    """The records of the calibrations folder (of one profile: its id is checked first)."""
    predictor = _predictor(calibrations, profiles_dirs)
    if profile_id is not None:
        predictor.profile(profile_id)
    warnings = tuple(predictor.calibrations.check())
    return RecordListing(predictor.calibrations.folder, profile_id,
                         tuple(predictor.calibrations.store.records(profile_id)), warnings)


def remove(target: str, calibrations: Optional[Path]) -> tuple[tuple[str, ...], list[Removed]]:
    """``calibrate remove``: (warnings about the folder, the records deleted)."""
    predictor = _predictor(calibrations)
    warnings = tuple(predictor.calibrations.check())
    return warnings, remove_records(predictor, target)
