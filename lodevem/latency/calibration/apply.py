"""Applying a fit: the step after prediction that scales a ``LatencyPrediction``, and
``CalibrationSet``, the calibrations folder as one run uses it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ...store import digest
from ..estimator import Estimator
from ..records import uncertainty_band
from .fit import CalibrationFit, fit_calibration, select_records, threads_text
from .store import CalibrationStore, default_calibrations_dir

if TYPE_CHECKING:  # the records this step reads and returns; predict.py does not import this package
    from ...profiles import Profile
    from ..records import LatencyPrediction

__all__ = ["CalibrationSet", "apply_calibration", "calibrated_source", "oneshot_figure", "oneshot_uncertainty"]


def oneshot_figure(estimator: Estimator) -> Optional[float]:
    """The estimator's one-shot calibration MAPE (``uncertainty.oneshot_mape_pct``), None without one."""
    return estimator.accuracy.oneshot_mape_pct


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
    models = ", ".join(f"{r.model_label} {r.measured_ms:.4g} ms ({r.runtime}, {threads_text(r.threads)})"
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
                   # the one-shot figure is not the held-out rows' of the uncalibrated cell: no basis of theirs
                   held_out_rows=None, held_out_socs=None, held_out_pool=None,
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
