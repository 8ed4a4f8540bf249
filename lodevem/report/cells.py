"""The display form of result rows, shared by the console table, the LaTeX table and the plots.

Every output orders devices and formats a cell the same way, so the rules live here once:
devices run tier1 -> tier3; a latency is a number with its predictor's mark or a word saying why
there is none (``OOM``, ``thrashing``, ...); peak RAM is shown only for a model that ran under
the device's limit. This module knows nothing about rich, LaTeX or matplotlib, so each output
module imports it without pulling in the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Optional

from ..latency.described import describe_kind
from ..profiles import Profile, tier_rank
from ..results import PairResult
from ..wire.verdict import Verdict
from .legend import CALIBRATED_MARK

# Verdicts for which the table shows a word instead of the predicted latency: the model did not run
# under the device's limit, so its latency is not one anyone would observe. An ``error`` row (nothing
# measured: a conversion refused the file) keeps its predicted latency when it has one.
VERDICT_WORDS: Mapping[Verdict, str] = MappingProxyType(
    {Verdict.OOM: "OOM", Verdict.THRASHING: "thrashing", Verdict.TIMEOUT: "timeout", Verdict.ERROR: "error"})
# The Fits word of an ``error`` row that has a latency: the memory run gave no figure, the prediction
# stands (short: the verdict column must fit an 80-column terminal beside a latency band).
NOT_MEASURED = "no peak"


def verdict_legend(headroom: bool = True) -> str:
    """What the verdicts mean, said once for the console caption, the .tex footnote and the docs;
    ``headroom``: the output has a Headroom column to explain."""
    text = ("Verdict: fits = peak within the device's app budget (what one app can use before the OS's "
            "low-memory killer stops it); tight = above the budget but within the RAM (the phone would likely "
            "kill the app); OOM = killed at the RAM limit; no peak = the memory run gave no figure (the CSV's "
            "memory_error says why).")
    return text + (" Headroom = budget - peak." if headroom else "")


VERDICT_LEGEND = verdict_legend()
# File stems of the figures (plots draws them, figure_cache decides whether they need drawing).
HEATMAP = "latency_heatmap"
SCATTER = "latency_vs_ram"
MIN_RAM = "min_ram"


# --------------------------------------------------------------------------- ordering


def ordered_devices(rows: Sequence[PairResult],
                    profiles: Optional[Sequence[Profile]] = None) -> list[PairResult]:
    """One representative row per device present in ``rows``, ordered by tier then profile order.

    The order inside a tier is the order of ``profiles`` when given (the order the user asked
    for), else the order the rows arrived in; tiers run tier1 -> tier3, like ``lodevem list``.
    """
    first: dict[str, PairResult] = {}
    for row in rows:
        first.setdefault(row.device.profile_id, row)
    given = [p.id for p in profiles or () if p.id in first]
    ids = list(dict.fromkeys(given + list(first)))
    ids.sort(key=lambda pid: tier_rank(first[pid].device.tier))  # stable: keeps given order
    return [first[pid] for pid in ids]


def group_by_model(rows: Sequence[PairResult],
                   profiles: Optional[Sequence[Profile]] = None) -> dict[str, list[PairResult]]:
    """Rows keyed by model label (first-seen order), each model's devices in ``ordered_devices`` order."""
    position = {r.device.profile_id: i for i, r in enumerate(ordered_devices(rows, profiles))}
    groups: dict[str, list[PairResult]] = {}
    for row in rows:
        groups.setdefault(row.model.label, []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: position[r.device.profile_id])
    return groups


# --------------------------------------------------------------------------- cells


def latency_mark(kind: Optional[str]) -> str:
    """The footnote mark that tells a reader which predictor kind produced a latency number (the
    kind's own, ``latency.described.describe_kind``)."""
    return describe_kind(kind or "").mark


@dataclass(frozen=True)
class Cells:
    """The display form of one row, shared by the console table, the LaTeX table and the plots."""

    latency: str          # a number ("1,234.5") or a word (OOM, thrashing, timeout, error, n/a)
    mark: str             # the predictor's mark when ``latency`` is a number, else ""
    peak_ram: Optional[str]  # None: no usable measurement (drawn as a dash)
    fits: Optional[bool]

    @property
    def is_number(self) -> bool:
        """True when ``latency`` is a predicted number (it then carries a mark), not a word."""
        return bool(self.mark)


def cells(row: PairResult) -> Cells:
    """Format one row the way the README shows it (``OOM | — | ✗`` for a model that cannot load;
    the predicted number, ``—`` and ``no peak`` for one whose memory run gave no figure)."""
    word = VERDICT_WORDS.get(row.verdict)
    number = row.latency.ms is not None and math.isfinite(row.latency.ms)
    if word is not None and not (row.verdict == Verdict.ERROR and number):
        latency, mark = word, ""
    elif not number:
        latency, mark = "n/a", ""
    else:  # a prediction, shown also where no memory figure exists (the Fits cell says why)
        latency, mark = f"{row.latency.ms:,.1f}", latency_mark(row.latency.kind)
        if row.latency.calibrations:
            mark += CALIBRATED_MARK
    ram = None
    if row.ran and row.memory.peak_rss_mb is not None:
        ram = f"{row.memory.peak_rss_mb:,.0f}"
    return Cells(latency, mark, ram, row.fits)


def count_text(n: int, noun: str) -> str:
    """``1 model``, ``2 models``: a count with its noun in the right number."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


def verdict_word(row: PairResult) -> str:
    """The Fits cell's word: the verdict's, except ``no peak`` for a row whose memory run gave no
    figure but whose latency was predicted (``error`` only where nothing was produced)."""
    if row.verdict == Verdict.ERROR and cells(row).is_number:
        return NOT_MEASURED
    return VERDICT_WORDS.get(row.verdict, str(row.verdict))


@dataclass(frozen=True)
class RunCounts:
    """What a run covered, counted the way a reader counts: one model file measured under three
    runtimes is "1 model, 3 runtimes", not "3 models"; its --levels variants are more files."""

    models: int  # the user's files
    files: int  # files measured: each model's variants (levels) included
    runtimes: tuple[str, ...]
    levels: tuple[str, ...]  # "fp32" for a file as given

    def text(self) -> str:
        parts = [f"{self.models} model{'s' if self.models != 1 else ''}"]
        if self.files != self.models:
            parts.append(f"{self.files} files")
        if len(self.runtimes) > 1:
            parts.append(f"{len(self.runtimes)} runtimes")
        if len(self.levels) > 1:
            parts.append(f"{len(self.levels)} levels")
        return ", ".join(parts)


def run_counts(rows: Sequence[PairResult]) -> RunCounts:
    # a compressed file of the user's beside its float sibling is that network's variant, not a
    # model of its own, and its precision is no level lodevem derived
    models = list(dict.fromkeys(r.model.path for r in rows if r.model.variant_of is None))
    files = list(dict.fromkeys((r.model.path, r.model.level) for r in rows))
    # a row measured under torch because its runtime's converter refused the file is still that
    # run's runtime: the fallback is not a runtime the user asked for
    asked = [r for r in rows if not r.memory.fallback] or list(rows)
    return RunCounts(len(models), len(files), tuple(dict.fromkeys(r.memory.runtime for r in asked)),
                     tuple(dict.fromkeys(r.model.level or "fp32" for r in rows if r.model.variant_of is None)))


def base_label(row: PairResult) -> str:
    """The row's model label without its `` [runtime]`` suffix (several --runtime values)."""
    return row.model.base_label


def input_shape_text(rows: Sequence[PairResult]) -> str:
    """``1x3x224x224 (default)``: the input every model ran with and where it came from; one
    entry per model when they differ."""
    by_model: dict[str, str] = {}
    for row in rows:
        shape = row.model.input_shape or "unknown"
        source = row.model.input_shape_source
        by_model.setdefault(base_label(row), f"{shape} ({source})" if source else shape)
    shapes = list(dict.fromkeys(by_model.values()))
    if len(shapes) <= 1:
        return shapes[0] if shapes else "unknown"
    return "; ".join(f"{label} {shape}" for label, shape in by_model.items())


def threads_text(rows: Sequence[PairResult]) -> str:
    """``1 thread`` or ``1/4 threads``: the thread counts the latencies were predicted for."""
    threads = sorted({r.device.threads for r in rows})
    return "1 thread" if threads in ([], [1]) else f"{'/'.join(map(str, threads))} threads"


# --------------------------------------------------------------------------- accuracy (--eval-data)

# The mark on a pruned row's accuracy that was not fine-tuned (lodevem.accuracy).
NOT_FINETUNED_MARK = "\u00b0"
ACCURACY = "accuracy_tradeoff"  # file stem of the accuracy vs latency / peak RAM figure


def has_accuracy(rows: Sequence[PairResult]) -> bool:
    """True when the run evaluated accuracy (--eval-data): every such row has a figure or a note."""
    return any(r.accuracy.samples is not None or r.accuracy.not_evaluated is not None for r in rows)


def _pruned_untuned(row: PairResult) -> bool:
    """A pruned row derived without fine-tuning, or whose fine-tuning failed (lodevem.accuracy's note)."""
    return row.accuracy.not_finetuned


def not_finetuned(rows: Sequence[PairResult]) -> list[str]:
    """Labels of the pruned rows derived without fine-tuning (lodevem.accuracy's note)."""
    return list(dict.fromkeys(r.model.label for r in rows if _pruned_untuned(r)))


def accuracy_text(row: PairResult, dash: str = "\u2014", minus: str = "\u2212") -> str:
    """``97.8`` for an fp32 row, ``82.4 (−15.4)°`` for a variant (drop vs fp32 in points; ° not
    fine-tuned), ``dash`` when the row has no figure (``accuracy_note`` says why)."""
    if row.accuracy.top1_pct is None:
        return dash
    text = f"{row.accuracy.top1_pct:.1f}"
    if (row.model.level is not None or row.model.variant_of is not None) and row.accuracy.drop_pts is not None:
        drop = -row.accuracy.drop_pts
        text += f" ({minus if drop < 0 else '+'}{abs(drop):.1f})"
    if _pruned_untuned(row):
        text += NOT_FINETUNED_MARK
    return text


def accuracy_legend(rows: Sequence[PairResult]) -> Optional[str]:
    """What the accuracy column is, once for the console caption and the .tex footnote."""
    if not has_accuracy(rows):
        return None
    samples = sorted({r.accuracy.samples for r in rows if r.accuracy.samples is not None})
    n = f"{samples[0]:,}" if len(samples) == 1 else "the"
    text = (f"Top-1: accuracy (%) on {n} evaluation samples, evaluated under the row's own runtime on the file "
            "it measures; (\u2212x) = drop vs the fp32 row in points")
    if any(_pruned_untuned(r) for r in rows):
        text += f"; {NOT_FINETUNED_MARK} pruned without fine-tuning"
    missing = sum(1 for r in rows if r.accuracy.top1_pct is None)
    if missing:
        text += f"; {missing} row(s) not evaluated (CSV accuracy_note says why)"
    return text + "."
