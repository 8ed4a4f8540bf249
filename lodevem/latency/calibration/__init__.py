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

Modules, one concern each: ``records`` (the record and its schema), ``store`` (the folder),
``logs`` (benchmark logs and ``MODEL=MS`` arguments), ``fit`` (records -> factors), ``apply``
(scaling a prediction; ``CalibrationSet``). Everything public is importable from here.
"""

from __future__ import annotations

from .apply import CalibrationSet, apply_calibration, calibrated_source, oneshot_figure, oneshot_uncertainty
from .fit import CalibrationFit, fit_calibration, select_records
from .logs import (
    LogEntry,
    Measurement,
    ParsedLog,
    measurements_from_args,
    measurements_from_log,
    parse_benchmark_log,
    read_benchmark_log,
)
from .outcomes import CalibrationOutcome, RecordListing, Removed
from .records import (
    MAX_FACTOR,
    MAX_MS,
    MAX_THREADS,
    MEASURED_RUNTIMES,
    MIN_FACTOR,
    MIN_MS,
    SCOPES,
    CalibrationRecord,
    check_ms,
    now_iso,
)
from .store import CALIBRATIONS_ENV, CalibrationStore, default_calibrations_dir, shares_chipset

__all__ = [
    "CALIBRATIONS_ENV",
    "MAX_FACTOR",
    "MAX_MS",
    "MAX_THREADS",
    "MEASURED_RUNTIMES",
    "MIN_FACTOR",
    "MIN_MS",
    "SCOPES",
    "CalibrationFit",
    "CalibrationOutcome",
    "CalibrationRecord",
    "CalibrationSet",
    "CalibrationStore",
    "RecordListing",
    "Removed",
    "LogEntry",
    "Measurement",
    "ParsedLog",
    "apply_calibration",
    "calibrated_source",
    "check_ms",
    "default_calibrations_dir",
    "fit_calibration",
    "measurements_from_args",
    "measurements_from_log",
    "now_iso",
    "oneshot_figure",
    "oneshot_uncertainty",
    "parse_benchmark_log",
    "read_benchmark_log",
    "select_records",
    "shares_chipset",
]
