"""Many models on many profiles in one call: what ``lodevem predict`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import InputError, LodevemError
from ..latency.records import ModelLatency
from ..results.failures import one_line
from .predictor import Predictor

__all__ = ["PredictionReport", "predict_models"]


@dataclass(frozen=True)
class PredictionReport:
    """``lodevem predict``'s answer: every (model, profile) cell and the run's warnings;
    ``failure`` when no pair has a number (a table of blanks is not a result)."""

    items: tuple[ModelLatency, ...]
    warnings: tuple[str, ...]

    @property
    def failure(self) -> Optional[LodevemError]:
        if all(i.latency.latency_ms is None for i in self.items):
            reasons = list(dict.fromkeys(one_line((i.latency.note or "").split("; ")[0]) for i in self.items))
            return LodevemError("no latency could be predicted for any (model, profile) pair: " + reasons[0]
                                + (f" (and {len(reasons) - 1} other reason(s): --json has each cell's latency_note)"
                                   if len(reasons) > 1 else "") if reasons else
                                "no latency could be predicted for any (model, profile) pair")
        return None


def predict_models(models: Sequence[Any], profile_ids: Sequence[str] = (), tiers: Sequence[str] = (),
                   device: Optional[str] = None, benchmark_binary: Optional[Path] = None,
                   **options: Any) -> PredictionReport:
    """``lodevem predict``: every model (a file, a zoo name) on the chosen profiles, with a
    ``Predictor`` made from ``options`` (its keyword arguments). A kind that predicts only inside a
    run (``start_only``: armsim emulates the run's converted files) is refused with the others named."""
    from ..latency.pool import KINDS, modes

    if not models:
        raise InputError("no models given: lodevem predict MODEL [MODEL ...] (a file or a zoo name)")
    chosen = options.get("predictor", "auto")
    start_only = getattr(KINDS.get(chosen), "start_only", "")
    if start_only:
        takes = [m for m in modes() if not getattr(KINDS.get(m), "start_only", "")]
        raise InputError(f"--predictor {chosen}: {start_only}; predict takes {', '.join(takes[:-1])} or {takes[-1]}")
    layers_csv = options.pop("layers_csv", None)
    with Predictor(**options) as predictor:
        profiles = predictor.profiles(ids=profile_ids, tiers=tiers)
        calibration_warnings = predictor.calibrations.check()
        items = predictor.predict_all(list(models), profiles)
        measured: list[str] = []
        if device is not None:  # also measured on the phone (lodevem.device, docs/device.md)
            from ..device import parse_device_option
            from ..device.predictions import measure_models

            cells, measured = measure_models(predictor, list(models), parse_device_option(device), benchmark_binary,
                                             predictor.threads, predictor.runtime)
            items = [*items, *cells]
    if layers_csv is not None:  # where the time goes (report.layers), one line per node type per cell
        from ..report.layers import write_layers_csv

        write_layers_csv(layers_csv, [(i.model.label, i.profile.id, i.latency) for i in items])
    return PredictionReport(tuple(items), (*calibration_warnings, *predictor.warnings, *measured))
