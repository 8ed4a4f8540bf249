"""How sure a latency is, said one way: the one place every output's uncertainty text comes from.

Why one module: issue 46 found three figures for one run (the methods quoted the estimator's
overall fit error, each row a pooled figure whose pooling the methods denied, the README a
third), so a reviewer could not tell which to quote. Every latency band lodevem prints is now
the prediction ± the **held-out error** of its kind of cell (``selection.HeldOutError``: the
nested leave-one-SoC-out mean absolute percentage error), and every output says it with the
functions here, from the same record:

* ``statement(err)``: a row's ``latency_uncertainty`` (CSV, JSON, ``lodevem predict``);
* ``basis_text(...)``: the basis (held-out rows, SoCs, what was pooled) the console, LaTeX and
  HTML legends and the methods quote after each figure, from the row's own fields
  (``latency_held_out_rows`` / ``_socs`` / ``_pool``), never from its text;
* ``BAND_DEFINITION`` / ``POOLING``: the one sentence that defines the band, said under every
  table and in the methods;
* ``with_figure(prediction, err)``: a cell stating ``err`` (its text, figure, band and basis);
* ``not_default(...)``: why an opt-in kind's cell (``--predictor armsim``) is not the default's.

``latency.bands`` renders the default predictor's figures per kind of cell with these functions
for the README (checked by ``tests/test_docs.py``). How a figure is *computed* (its rows, the
pooling rule, ``MIN_KIND_ROWS``) is ``latency.selection``'s; this module only says it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from .records import LatencyPrediction, uncertainty_band
from .selection import MIN_KIND_ROWS, HeldOutError

__all__ = ["BAND_DEFINITION", "BAND_SHORT", "DEFINITION", "HELD_OUT", "HELD_OUT_NAME", "OPT_IN_REASON", "POOLING",
           "basis_text", "figure_text", "not_default", "socs_of", "statement", "with_figure"]

HELD_OUT = "held-out error"
HELD_OUT_NAME = "held-out (leave-one-SoC-out) error"


def pooling() -> str:
    """Where a kind of cell has too few held-out rows of its own, the wider pool its figure states."""
    from . import selection

    band_rows = getattr(selection, "MIN_BAND_ROWS", None)  # the 90 % band's own minimum, where it has one
    band = (f" (a 90 % band, where stated, needs {band_rows} rows: fewer borrow one the same way, and say so)"
            if isinstance(band_rows, int) else "")
    return (f"a kind of cell with fewer than {MIN_KIND_ROWS} held-out rows of its own borrows the figure of a stated "
            f"wider pool (its core family, then all cores, then all runtimes){band}")


POOLING = pooling()
# What the held-out error is: the methods say "That error is " + DEFINITION, every legend BAND_DEFINITION.
DEFINITION = ("the predictor's mean absolute percentage error on held-out cells of the same kind (core, threads, "
              "precision, runtime) for SoCs left out of its fit (leave-one-SoC-out; the methods say whether its "
              "hyperparameters were also chosen without them, nested); "
              + POOLING + "; a typical error, not a confidence interval")
BAND_DEFINITION = "(low\u2013high) = the prediction \u00b1 its held-out error: " + DEFINITION
# The console's short form (``--verbose`` prints BAND_DEFINITION): the basis is on each mark's line.
BAND_SHORT = ("(low\u2013high) = prediction \u00b1 held-out error (leave-one-SoC-out; its basis after each "
              "figure below), not a confidence interval")


def own_scope(scope: Optional[str]) -> bool:
    """Whether a figure rests on its own core's rows (a scope naming one core), not a wider pool."""
    return bool(scope) and str(scope).startswith("Cortex-")


def basis_text(rows: Optional[int], socs: Optional[int], scope: Optional[str]) -> str:
    """``8 held-out rows from 5 SoCs, pooled over all cores``: what a figure rests on. ``socs``
    None: the record does not say (an older results file, or a HeldOutError without ``socs``)."""
    if rows is None:
        return "basis not recorded"
    text = f"{rows} held-out row{'s' if rows != 1 else ''}"
    if socs:
        text += f" from {socs} SoC{'s' if socs != 1 else ''}"
    if scope and not own_scope(scope):
        text += f", pooled over {scope}"
    elif scope:
        text += f" on {scope}"
    return text


def socs_of(err: HeldOutError) -> Optional[int]:
    """The SoCs the figure rests on, when the record says (``HeldOutError.socs``; latency.selection)."""
    value: Any = getattr(err, "socs", None)
    if isinstance(value, (tuple, list, frozenset, set)):
        return len(value)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _p90(err: HeldOutError) -> Optional[float]:
    value: Any = getattr(err, "p90_pct", None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _parenthesis(rows: Optional[int], socs: Optional[int], scope: Optional[str], p90: Optional[float]) -> str:
    spread = f"; 90 % of them within \u00b1{p90:.1f}%" if p90 is not None else ""
    return f"({basis_text(rows, socs, scope)}{spread})"


def band_text(err: HeldOutError) -> str:
    """``; 90 % band ±41.0% (24 held-out rows from 6 SoCs, pooled over all cores; 88 % of held-out
    SoCs' rows inside it)``: the record's 90 % band with its own basis (``latency.selection`` may
    pool it more widely than the mean); "" when the record states none."""
    p90 = _p90(err)
    if p90 is None:
        return ""
    rows, socs = getattr(err, "p90_rows", None), getattr(err, "p90_socs", None)
    basis = basis_text(rows if isinstance(rows, int) and rows else None, socs if isinstance(socs, int) else None,
                       str(getattr(err, "p90_scope", "") or "") or None)
    if getattr(err, "widened", False):
        basis += ", widened to its own core's rows"
    coverage = getattr(err, "coverage_pct", None)
    if isinstance(coverage, (int, float)):
        basis += f"; {coverage:.0f} % of held-out SoCs' rows inside it"
    return f"; 90 % band \u00b1{p90:.1f}% ({basis})"


def figure_text(pct: float, rows: Optional[int], socs: Optional[int], scope: Optional[str],
                p90: Optional[float] = None) -> str:
    """``±31.0% (8 held-out rows from 5 SoCs, pooled over all cores)``: a figure with its basis."""
    return f"\u00b1{pct:.1f}% {_parenthesis(rows, socs, scope, p90)}"


def statement(err: HeldOutError) -> str:
    """A cell's uncertainty as every row states it: ``±31.0% held-out (leave-one-SoC-out) error of
    1-thread fp32 tflite cells (8 held-out rows from 5 SoCs, pooled over all cores)``."""
    what = f" of {err.what} cells" if err.what else ""
    basis = _parenthesis(err.rows, socs_of(err), err.scope, None)
    return f"\u00b1{err.mape_pct:.1f}% {HELD_OUT_NAME}{what} {basis}{band_text(err)}"


def with_figure(prediction: LatencyPrediction, err: Optional[HeldOutError], why: str = ""
                ) -> LatencyPrediction:
    """``prediction`` stating ``err``: its text (``statement``, then ``why``), its figure, its band
    (the prediction ± the figure) and its basis. Unchanged without a number or a figure, or when
    it states that figure already (the estimator's own text may add a note on a derived core)."""
    if err is None or prediction.latency_ms is None:
        return prediction
    if not why and prediction.uncertainty_pct == err.mape_pct and prediction.held_out_rows == err.rows:
        return prediction
    low, high = uncertainty_band(prediction.latency_ms, err.mape_pct)
    text = statement(err) + (f"; {why}" if why else "")
    return replace(prediction, uncertainty=text, uncertainty_pct=err.mape_pct, latency_low_ms=low,
                   latency_high_ms=high, held_out_rows=err.rows, held_out_socs=socs_of(err), held_out_pool=err.scope)


# Why an opt-in kind is never the default, whatever its figure (latency.selection.Availability)
OPT_IN_REASON = ("it needs what not every install has (an optional image or downloaded data), and the default must "
                 "give the same figures on every install")


def not_default(title: str, reason: str, default: Optional[HeldOutError]) -> str:
    """Why a named opt-in kind's cell is not what the default gives: ``reason`` (what it needs
    that not every install has) and, for comparison, the default's figure for the same kind of cell."""
    text = f"{title} is opt-in, not the default: {reason}"
    if default is not None:
        text += (f"; the default for this kind of cell states \u00b1{default.mape_pct:.1f}% "
                 f"({basis_text(default.rows, socs_of(default), default.scope)})")
    return text
