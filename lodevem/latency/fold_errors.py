"""The stated error of each latency predictor, per cell kind, from SoC-grouped folds: one reader.

Both fitted predictors store the leave-one-SoC-out MAPE of every cell kind (core x 1/multi thread
x precision x runtime, plus kinds pooled over cores and runtimes) in their params file:
``uncertainty.per_kind`` of ``data/estimator_params.json`` (``scripts/fit_estimator.py``) and of
``data/armsim_params.json`` (``scripts/fit_armsim.py``), with ``uncertainty.folds == "soc"``. A fold
holds out a whole SoC (its boards and clusters together), so the figure is the error on a phone
whose SoC the fit never saw. ``--predictor auto`` compares these figures per kind
(``lower_error_predictor``) and each predictor states its own as the cell's band.

A kind with fewer than ``MIN_KIND_ROWS`` rows states the pooled kind's figure (as the predictors
do): four rows of one board would state that board's luck, not the predictor's error.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

from ..store import bytes_digest

__all__ = ["FoldError", "FoldedPredictor", "MIN_KIND_ROWS", "lower_error_predictor", "soc_fold_error"]

DATA = Path(__file__).resolve().parent.parent / "data"
MIN_KIND_ROWS = 8


class FoldedPredictor(enum.Enum):
    """The predictors whose params files carry SoC-fold errors (value: the --predictor name)."""

    ESTIMATOR = "estimator"
    ARMSIM = "armsim"

    @property
    def params_path(self) -> Path:
        return DATA / ("estimator_params.json" if self is FoldedPredictor.ESTIMATOR else "armsim_params.json")


@dataclass(frozen=True)
class FoldError:
    """The leave-one-SoC-out MAPE a predictor states for one kind; ``core``/``runtime`` None: the
    figure is pooled over cores (and runtimes) because the kind itself has too few rows."""

    predictor: FoldedPredictor
    core: Optional[str]
    threads: str  # "1" | "multi"
    precision: str
    runtime: Optional[str]
    mape_pct: float
    rows: int


def _kinds(path: str) -> tuple[tuple[Optional[str], str, str, Optional[str], float, int], ...]:
    """The file read every time (tens of KB), parsed once per content (``_parsed_kinds``)."""
    raw = Path(path).read_bytes()
    return _parsed_kinds(bytes_digest(raw), raw)


@lru_cache(maxsize=8)
def _parsed_kinds(sha256: str, raw: bytes) -> tuple[tuple[Optional[str], str, str, Optional[str], float, int], ...]:
    unc = json.loads(raw).get("uncertainty", {})
    if unc.get("folds") != "soc":  # a file fitted with folds by board states optimistic errors
        return ()
    return tuple((k.get("core"), str(k["threads"]), str(k["precision"]), k.get("runtime"), float(k["mape_pct"]),
                  int(k["rows"])) for k in unc.get("per_kind", ()))


def soc_fold_error(predictor: FoldedPredictor, core: str, threads: int, precision: str, runtime: str
                   ) -> Optional[FoldError]:
    """The SoC-fold MAPE ``predictor`` states for a cell: its own kind, else pooled over cores, then
    over runtimes too; None where its params file has no such figure (or none from SoC folds)."""
    path = predictor.params_path
    try:
        kinds = _kinds(str(path))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    kind = "1" if threads == 1 else "multi"
    for want in ((core, runtime), (None, runtime), (None, None)):
        for c, t, p, rt, mape, rows in kinds:
            if (c, rt) == want and (t, p) == (kind, precision) and rows >= MIN_KIND_ROWS:
                return FoldError(predictor, c, t, p, rt, mape, rows)
    return None


def lower_error_predictor(core: str, threads: int, precision: str, runtime: str,
                          candidates: tuple[FoldedPredictor, ...] = tuple(FoldedPredictor)
                          ) -> tuple[Optional[FoldedPredictor], dict[FoldedPredictor, Optional[FoldError]]]:
    """Which of ``candidates`` states the lower SoC-fold error for this cell, and every figure
    compared (ties go to the first candidate). None when no candidate has a figure."""
    figs = {p: soc_fold_error(p, core, threads, precision, runtime) for p in candidates}
    known = [(f.mape_pct, i, p) for i, (p, f) in enumerate(figs.items()) if f is not None]
    return (min(known)[2] if known else None), figs
