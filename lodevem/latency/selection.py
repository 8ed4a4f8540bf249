"""Which predictor kind prices a cell by default, and how far off that default is: one rule, one record.

Why one module: the default must be the same on every install and its band must be honest, and
both are easy to get subtly wrong (issue 35). Two facts and one rule live here, used by the
predictor pool (``latency.pool``), by each kind's band and by ``benchmarks/latency_accuracy.py``:

* **Availability** (``Availability``): a kind declares whether every install has it (its data ship
  in the package, nothing to build or download) or whether it needs something optional (an image,
  downloaded predictor data). The default is chosen only among ``EVERY_INSTALL`` kinds, so a
  missing image or missing nn-Meter data never changes a default cell: armsim and nn-Meter are
  opt-in (``--predictor NAME``).
* **Held-out rows** (``HeldOutRow``): each dev row predicted by a kind fitted without the row's
  SoC, with its hyperparameters chosen by inner folds that also left that SoC out (nested). A
  kind ships its rows (the estimator: ``uncertainty.held_out_rows`` of its params file).
* **The pick rule** (``DefaultSelection``): per (core family, runtime), the eligible kind with the
  lowest held-out error over that family's rows (``CoreFamily``: in-order ARMv7, in-order ARMv8,
  out-of-order); ties and kinds stating no error keep registry order. Not per precision or
  threads: every variant of one model on one device is priced by one kind within a run (a ratio
  between two predictors is an artefact of the two). The default's band for a cell is the MAPE of
  the *nested* default: each SoC's rows priced by the kind picked without that SoC
  (``nested_rows``), for the cell's kind (core x 1/multi-thread x arithmetic x runtime, pooled
  over the core's family, then all cores, then all runtimes where a kind has fewer than
  ``MIN_KIND_ROWS`` rows). Its one name everywhere: "held-out (leave-one-SoC-out) error".
"""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Iterable, Mapping, Optional, Sequence

from .records import LatencyPrediction, uncertainty_band

__all__ = ["Availability", "CellKind", "CoreFamily", "DefaultSelection", "HELD_OUT_NAME", "HeldOutError",
           "HeldOutRow", "MIN_BAND_ROWS", "MIN_KIND_ROWS", "band_coverage", "family_of", "held_out_error", "p90",
           "pick", "with_band"]

# Fewest held-out rows whose MAPE is stated for a kind of cell: four rows of one board would state
# that board's luck, not the predictor's error; a smaller kind states its pooled figure.
MIN_KIND_ROWS = 8
HELD_OUT_NAME = "held-out (leave-one-SoC-out) error"


class Availability(enum.Enum):
    """Whether every install can run a predictor kind (the only kinds the default may use)."""

    EVERY_INSTALL = "every install"  # its data ship in the package; no image, no download
    OPTIONAL = "optional"  # needs an optional image or downloaded data: opt-in only


class CoreFamily(enum.Enum):
    """The pipeline families the default is chosen per (with the runtime)."""

    IN_ORDER_ARMV7 = "in-order ARMv7"
    IN_ORDER_ARMV8 = "in-order ARMv8"
    OUT_OF_ORDER = "out-of-order"


# Arm's technical reference manuals: Cortex-A7 (ARMv7-A) and Cortex-A53 / A55 (ARMv8-A / ARMv8.2-A)
# are in-order, partially dual-issue pipelines; Cortex-A72, A73, A75 and A76 are out-of-order.
CORE_FAMILIES: dict[str, CoreFamily] = {
    "Cortex-A7": CoreFamily.IN_ORDER_ARMV7, "Cortex-A53": CoreFamily.IN_ORDER_ARMV8,
    "Cortex-A55": CoreFamily.IN_ORDER_ARMV8, "Cortex-A72": CoreFamily.OUT_OF_ORDER,
    "Cortex-A73": CoreFamily.OUT_OF_ORDER, "Cortex-A75": CoreFamily.OUT_OF_ORDER,
    "Cortex-A76": CoreFamily.OUT_OF_ORDER}


def family_of(core: str) -> Optional[CoreFamily]:
    """The core's pipeline family (None: a core the table does not know)."""
    return CORE_FAMILIES.get(core)


@dataclass(frozen=True)
class HeldOutRow:
    """One dev row as a kind predicted it from a fit that never saw the row's SoC (nor, for its
    hyperparameters, inner folds that saw it). ``arithmetic``: what the runtime executed (ncnn's
    fp32 models on ARMv8.2 cores run fp16: such a row is ``fp16``). ``error``: predicted /
    measured - 1."""

    device: str
    soc: str
    core: str
    threads: int
    arithmetic: str
    runtime: str
    model: str
    error: float

    @property
    def key(self) -> tuple[str, str, int, str, str, str]:
        """What identifies the measurement across kinds (the same row scored by two kinds)."""
        return (self.device, self.core, self.threads, self.arithmetic, self.runtime, self.model)

    @property
    def family(self) -> Optional[CoreFamily]:
        return family_of(self.core)


@dataclass(frozen=True)
class CellKind:
    """The kind of a cell an error is stated for: core x 1/multi-thread x arithmetic x runtime."""

    core: str
    threads: int
    arithmetic: str
    runtime: str

    @property
    def what(self) -> str:
        return f"{'1-thread' if self.threads == 1 else 'multi-thread'} {self.arithmetic} {self.runtime}"


@dataclass(frozen=True)
class HeldOutError:
    """A held-out (leave-one-SoC-out) MAPE over ``rows`` rows of a kind of cell, pooled over
    ``scope`` ("Cortex-A55", "in-order ARMv8 cores", "all cores", "all cores and runtimes"), and
    its spread: the 90 % band.

    ``socs``: the SoCs the MAPE rests on. ``p90_pct``: the 90 % band (a finite-sample 90th
    percentile of |error|: the ceil(0.9 (n + 1))-th smallest, so n rows claim no more than they
    can) over ``p90_rows`` rows of ``p90_socs`` SoCs pooled over ``p90_scope`` (the band needs
    ``MIN_BAND_ROWS`` rows: a spread from fewer states one board's luck); where pooled it is
    widened to at least the kind's own rows' figure (``widened``). ``coverage_pct``: share of
    those rows inside the band computed WITHOUT their own SoC (what the band claims on a SoC it
    never saw: about 90 %). None: no such figure."""

    mape_pct: float
    rows: int
    scope: str
    what: str = ""
    socs: int = 0
    p90_pct: Optional[float] = None
    p90_rows: int = 0
    p90_socs: int = 0
    p90_scope: str = ""
    widened: bool = False
    coverage_pct: Optional[float] = None

    @property
    def pooled(self) -> bool:
        return not self.scope.startswith("Cortex-")

    @property
    def band_pct(self) -> Optional[float]:
        """The 90 % band (±%): the p90 of |error| (None where no band is stated)."""
        return self.p90_pct

    def text(self) -> str:
        what = f" {self.what}" if self.what else ""
        head = f"±{self.mape_pct:.1f}% {HELD_OUT_NAME} ({self.rows}{what} rows, {self.scope})"
        if self.socs:
            head += f" from {self.socs} SoC{'s' if self.socs != 1 else ''}"
        if self.p90_pct is None:
            return head
        basis = f"{self.p90_rows} rows, {self.p90_socs} SoCs, {self.p90_scope}" + (
            ", widened to the kind's own rows" if self.widened else "")
        cover = f"; {self.coverage_pct:.0f}% of held-out SoCs' rows inside it" if self.coverage_pct is not None else ""
        return f"{head}; 90% band ±{self.p90_pct:.1f}% ({basis}{cover})"


# Fewest held-out rows a 90 % band is stated from (issue 44): fewer are pooled, and widened.
MIN_BAND_ROWS = 20


def _mape(rows: Sequence[HeldOutRow]) -> float:
    return 100.0 * statistics.fmean(abs(r.error) for r in rows)


def p90(errors: Sequence[float]) -> Optional[float]:
    """Finite-sample 90th percentile of |error| in %: the ceil(0.9 (n + 1))-th smallest (the
    largest when n < 9), so a band from n exchangeable rows covers a new one >= 90 % of the time."""
    if not errors:
        return None
    ordered = sorted(abs(e) for e in errors)
    k = min(len(ordered), math.ceil(0.9 * (len(ordered) + 1)))
    return 100.0 * ordered[k - 1]


def _scopes(cell: CellKind) -> tuple[tuple[str, Callable[[HeldOutRow], bool]], ...]:
    family = family_of(cell.core)
    return ((cell.core, lambda r: r.core == cell.core and r.runtime == cell.runtime),
            (f"{family.value} cores" if family else "", lambda r: family is not None and r.family is family
             and r.runtime == cell.runtime),
            ("all cores", lambda r: r.runtime == cell.runtime),
            ("all cores and runtimes", lambda r: True))


def _pooled(same: Sequence[HeldOutRow], cell: CellKind, least: int) -> tuple[str, list[HeldOutRow]]:
    for scope, keep in _scopes(cell):
        chosen = [r for r in same if keep(r)]
        if scope and len(chosen) >= least:
            return scope, chosen
    return "", []


def _band(same: Sequence[HeldOutRow], cell: CellKind) -> tuple[Optional[float], str, list[HeldOutRow], bool]:
    scope, chosen = _pooled(same, cell, MIN_BAND_ROWS)
    if not scope and same:  # fewer than MIN_BAND_ROWS rows anywhere: every row of the kind, the widest pool
        scope, chosen = "all cores and runtimes", list(same)
    band = p90([r.error for r in chosen])
    own = [r.error for r in same if r.core == cell.core and r.runtime == cell.runtime]
    widened = False
    if band is not None and scope != cell.core and own and (p90(own) or 0.0) > band:
        band, widened = p90(own), True
    return band, scope, chosen, widened


def band_coverage(same: Sequence[HeldOutRow], cell: CellKind) -> Optional[float]:
    """% of the band's rows inside the band made without their SoC (nested: the band each SoC
    would have been told before it was measured)."""
    _, _, chosen, _ = _band(same, cell)
    if not chosen:
        return None
    inside = 0
    for soc in {r.soc for r in chosen}:
        band, _, _, _ = _band([r for r in same if r.soc != soc], cell)
        inside += sum(band is not None and 100.0 * abs(r.error) <= band + 1e-9 for r in chosen if r.soc == soc)
    return round(100.0 * inside / len(chosen), 1)


def held_out_error(rows: Iterable[HeldOutRow], cell: CellKind) -> Optional[HeldOutError]:
    """The MAPE of ``rows`` for ``cell``'s kind: its own core, else pooled over the core's family,
    then all cores of the runtime, then all runtimes (each needs ``MIN_KIND_ROWS`` rows); and its
    90 % band, pooled the same way until ``MIN_BAND_ROWS`` rows, with its nested coverage."""
    same = [r for r in rows if (r.threads == 1) == (cell.threads == 1) and r.arithmetic == cell.arithmetic]
    scope, chosen = _pooled(same, cell, MIN_KIND_ROWS)
    if not scope:
        return None
    what = cell.what if scope != "all cores and runtimes" else cell.what.removesuffix(" " + cell.runtime)
    band, band_scope, basis, widened = _band(same, cell)
    return HeldOutError(round(_mape(chosen), 1), len(chosen), scope, what, len({r.soc for r in chosen}),
                        None if band is None else round(band, 1), len(basis), len({r.soc for r in basis}),
                        band_scope, widened, band_coverage(same, cell) if band is not None else None)


def family_error(rows: Iterable[HeldOutRow], family: Optional[CoreFamily], runtime: str) -> Optional[HeldOutError]:
    """A kind's held-out MAPE over every row of one (core family, runtime): what the pick compares
    (pooled over families, then runtimes, where the family has too few rows)."""
    rows = list(rows)
    scopes = ((f"{family.value} cores" if family else "", lambda r: family is not None and r.family is family
               and r.runtime == runtime),
              ("all cores", lambda r: r.runtime == runtime), ("all cores and runtimes", lambda r: True))
    for scope, keep in scopes:
        chosen = [r for r in rows if keep(r)]
        if scope and len(chosen) >= MIN_KIND_ROWS:
            return HeldOutError(round(_mape(chosen), 1), len(chosen), scope, runtime)
    return None


def pick(order: Sequence[str], errors: Mapping[str, Optional[HeldOutError]]) -> str:
    """The rule: the kind with the lowest stated error; kinds stating none never win over one that
    states one; ties and no figures at all keep ``order`` (registry order)."""
    stated = [(errors[name].mape_pct, i, name) for i, name in enumerate(order)  # type: ignore[union-attr]
              if errors.get(name) is not None]
    return min(stated)[2] if stated else order[0]


class DefaultSelection:
    """The default predictor of a pool: the pick per (core family, runtime) among the eligible
    kinds (``order``: registry order, every one ``EVERY_INSTALL``), from their held-out rows, and
    the nested default's band per kind of cell. Pure and deterministic: the same kinds and rows
    give the same picks and bands on every install."""

    def __init__(self, order: Sequence[str], rows: Mapping[str, Sequence[HeldOutRow]]) -> None:
        if not order:
            raise ValueError("no predictor kind every install has: the default needs one")
        self.order = tuple(order)
        self.rows = {name: tuple(rows.get(name, ())) for name in self.order}

    def errors(self, family: Optional[CoreFamily], runtime: str, without_soc: Optional[str] = None
               ) -> dict[str, Optional[HeldOutError]]:
        """Each eligible kind's held-out error over (family, runtime); ``without_soc``: computed
        without that SoC's rows (the pick a nested fold makes)."""
        return {name: family_error((r for r in self.rows[name] if r.soc != without_soc), family, runtime)
                for name in self.order}

    def kind_for(self, core: str, runtime: str) -> str:
        """The kind that prices every cell of ``core`` (its family) under ``runtime``."""
        return self.kind_for_family(family_of(core), runtime)

    def kind_for_family(self, family: Optional[CoreFamily], runtime: str) -> str:
        return pick(self.order, self.errors(family, runtime))

    @cached_property
    def nested_rows(self) -> tuple[HeldOutRow, ...]:
        """The default's own held-out rows: each SoC's rows priced by the kind picked for their
        (family, runtime) from the OTHER SoCs' rows only. A row the picked kind did not score is
        the first kind's (in order) that did."""
        by_key = {name: {r.key: r for r in rows} for name, rows in self.rows.items()}
        keys = {r.key: r for name in reversed(self.order) for r in self.rows[name]}
        picks: dict[tuple[Optional[CoreFamily], str, str], str] = {}
        out = []
        for key, row in sorted(keys.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            where = (row.family, row.runtime, row.soc)
            if where not in picks:
                picks[where] = pick(self.order, self.errors(row.family, row.runtime, without_soc=row.soc))
            chosen = picks[where]
            source = chosen if key in by_key[chosen] else next(n for n in self.order if key in by_key[n])
            out.append(by_key[source][key])
        return tuple(out)

    def band(self, cell: CellKind) -> Optional[HeldOutError]:
        """The nested default's held-out error for ``cell``'s kind (None: no rows to state one)."""
        return held_out_error(self.nested_rows, cell)


def with_band(prediction: LatencyPrediction, band: Optional[HeldOutError]) -> LatencyPrediction:
    """``prediction`` stating ``band`` (its low / high = prediction +- the MAPE); unchanged when it
    already states that figure or there is no figure."""
    if band is None or prediction.latency_ms is None or prediction.uncertainty_pct == band.mape_pct:
        return prediction
    low, high = uncertainty_band(prediction.latency_ms, band.mape_pct)
    return replace(prediction, uncertainty=band.text(), uncertainty_pct=band.mape_pct, latency_low_ms=low,
                   latency_high_ms=high)
