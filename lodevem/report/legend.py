"""The legend of the latency marks and bands, said one way in every output.

Every latency band lodevem prints is the prediction ± its **held-out error**
(``latency.statement``, the one place its wording lives: ``BAND_DEFINITION``, re-exported here).
The console legend, the LaTeX footnote, the HTML report, the plots and the methods quote it, and
each mark's line gives one figure per kind of cell with its basis
(``* offline estimator: ±9.1% (Cortex-A53, fp32: 27 held-out rows on Cortex-A53)``), read from
the cells' fields (``latency_held_out_pct`` / ``_rows`` / ``_socs`` / ``_pool``), never from
their text.

The marks, titles and words of the kinds come from the kinds themselves
(``latency.described.describe_kind``), so a kind registered tomorrow is in every legend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Optional

from ..latency.described import describe_kind
from ..latency.paper import CellFigure
from ..latency.statement import BAND_DEFINITION, HELD_OUT, basis_text
from ..results import PairResult
from ..wire.precision import LEVEL_FILE_PRECISION, level_arithmetic

if TYPE_CHECKING:
    from ..latency.records import ModelLatency

__all__ = ["BAND_DEFINITION", "CALIBRATED_MARK", "CALIBRATED_NOTE", "HELD_OUT", "LegendCell", "MarkNote", "mark_notes",
           "prediction_cell", "row_arithmetic", "row_cell"]

# Added after the predictor's mark when a calibration (a measurement on the real device) scaled the number.
CALIBRATED_MARK = "\u00a7"
CALIBRATED_NOTE = ("scaled by a calibration against a measurement on the device; its band is the calibration's "
                   "own held-out error (CSV column latency_calibrations)")
# A file's own precision -> the arithmetic its cell's error figure is for: that of the level making
# such a file (wire.precision's vocabulary, inverted; "mixed" stays itself)
_PRECISION_ARITHMETIC = MappingProxyType({precision: level_arithmetic(level)
                                          for level, precision in LEVEL_FILE_PRECISION.items()})


@dataclass(frozen=True)
class LegendCell:
    """One shown latency as the legend counts it: its kind, its held-out figure and the kind of
    cell that figure is for."""

    kind: str
    figure: Optional[CellFigure]
    calibrated: bool = False


def row_arithmetic(row: PairResult) -> str:
    """The arithmetic a row's latency is stated in: its level's, else its file's own."""
    if row.model.level is not None:
        return level_arithmetic(row.model.level)
    return _PRECISION_ARITHMETIC.get(row.model.precision or "fp32", row.model.precision or "fp32")


def row_cell(row: PairResult) -> Optional[LegendCell]:
    """The legend's view of a row with a latency number (None without one)."""
    if row.latency.ms is None:
        return None
    figure = None if row.latency.band.held_out_pct is None else CellFigure(
        float(row.latency.band.held_out_pct), row.device.core, row.device.threads, row_arithmetic(row),
        row.latency.runtime or "",
        row.latency.band.held_out_rows, row.latency.band.held_out_socs, row.latency.band.held_out_pool)
    return LegendCell(row.latency.kind or "", figure, bool(row.latency.calibrations))


def prediction_cell(item: "ModelLatency") -> Optional[LegendCell]:
    """The same for a ``lodevem predict`` cell (its arithmetic is the file's: not recorded, "")."""
    latency = item.latency
    if latency.latency_ms is None:
        return None
    figure = None if latency.uncertainty_pct is None else CellFigure(
        float(latency.uncertainty_pct), latency.core, latency.threads, "", latency.runtime,
        latency.held_out_rows, latency.held_out_socs, latency.held_out_pool)
    return LegendCell(latency.kind, figure, bool(latency.calibrations))


@dataclass(frozen=True)
class MarkNote:
    """One legend entry: a mark, the kind it stands for, and its held-out figures by kind of cell
    (``figures``: "±32.6% (Cortex-A7, fp32)" each)."""

    mark: str
    kind: str
    title: str
    figures: tuple[str, ...]

    def text(self) -> str:
        """``* offline estimator: ±32.6% (Cortex-A7, fp32), ±36.6% (int8)``."""
        if not self.kind:  # the calibration's note
            return f"{self.mark} {self.title}"
        stated = ", ".join(self.figures) if self.figures else f"no {HELD_OUT} stated"
        return f"{self.mark} {self.title}: {stated}"


def mark_notes(cells: Iterable[Optional[LegendCell]]) -> list[MarkNote]:
    """One entry per kind shown, in registry order, then the calibration's when a number has one."""
    shown = [c for c in cells if c is not None]
    kinds = sorted({c.kind for c in shown}, key=lambda k: (describe_kind(k).order, k))
    figures = [c.figure for c in shown if c.figure is not None]
    vary = {name: len({getattr(f, name) for f in figures}) > 1 for name in ("threads", "runtime")}
    notes = []
    for kind in kinds:
        described = describe_kind(kind)
        mine = [c.figure for c in shown if c.kind == kind and c.figure is not None]
        notes.append(MarkNote(described.mark, kind, described.title, _figures_text(mine, vary)))
    if any(c.calibrated for c in shown):
        notes.append(MarkNote(CALIBRATED_MARK, "", CALIBRATED_NOTE, ()))
    return notes


def _figures_text(figures: Sequence[CellFigure], vary: dict[str, bool]) -> tuple[str, ...]:
    """Each distinct figure once, lowest first, with the kinds of cell it is the figure of and its
    basis (``latency.statement.basis_text``: held-out rows, SoCs, what was pooled)."""
    by_pct: dict[tuple[float, tuple[Optional[int], Optional[int], Optional[str]]], list[CellFigure]] = {}
    for figure in figures:
        by_pct.setdefault((round(figure.pct, 1), figure.basis), []).append(figure)
    out = []
    for (pct, basis), group in sorted(by_pct.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        parts = [_cores(f.core for f in group)]
        if vary["threads"]:
            threads = sorted({f.threads for f in group})
            parts.append("/".join(map(str, threads)) + (" thread" if threads == [1] else " threads"))
        arithmetic = sorted({f.arithmetic for f in group if f.arithmetic})
        if arithmetic:
            parts.append("/".join(arithmetic))
        if vary["runtime"]:
            parts.append("/".join(sorted({f.runtime for f in group if f.runtime})))
        stated = f"{', '.join(p for p in parts if p)}: {basis_text(*basis)}" if basis[0] is not None \
            else ", ".join(p for p in parts if p)
        out.append(f"\u00b1{pct:.1f}% ({stated})")
    return tuple(out)


def _cores(cores: Iterable[str]) -> str:
    """``Cortex-A53/A55/A7``: the cores once, the family prefix written once."""
    names = sorted(set(cores), key=lambda c: (len(c), c))
    if not names:
        return ""
    return names[0] + "".join("/" + c.replace("Cortex-", "") for c in names[1:])
