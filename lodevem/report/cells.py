"""The display form of result rows, shared by the console table, the LaTeX table and the plots.

Every output orders devices and formats a cell the same way, so the rules live here once:
devices run tier1 -> tier3; a latency is a number with its predictor's mark or a word saying why
there is none (``OOM``, ``thrashing``, ...); peak RAM is shown only for a model that ran under
the device's limit. This module knows nothing about rich, LaTeX or matplotlib, so each output
module imports it without pulling in the others.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Optional

from ..profiles import Profile, tier_rank
from ..results import PairResult
from ..worker.verdict import Verdict

# Verdicts for which the table shows a word instead of the predicted latency.
VERDICT_WORDS: Mapping[Verdict, str] = MappingProxyType(
    {Verdict.OOM: "OOM", Verdict.THRASHING: "thrashing", Verdict.TIMEOUT: "timeout", Verdict.ERROR: "error"})
# What the verdicts mean, said once for the console caption, the .tex footnote and the docs.
VERDICT_LEGEND = ("Verdict: fits = peak within the device's app budget (what one app can use before the "
                  "OS's low-memory killer stops it, profile app_budget_mb); tight = above the budget but "
                  "within the RAM (the phone would likely kill the app); OOM = killed at the RAM limit. "
                  "Headroom = budget - peak.")
# One mark per latency source, so every number says which predictor produced it.
MARKS: Mapping[str, str] = MappingProxyType({"estimator": "*", "nn-meter": "\u2020"})
# File stems of the figures (plots draws them, figure_cache decides whether they need drawing).
HEATMAP = "latency_heatmap"
SCATTER = "latency_vs_ram"
MIN_RAM = "min_ram"
OTHER_MARK = "\u2021"
# Added after the predictor's mark when a calibration (a measurement on the real device) scaled the number.
CALIBRATED_MARK = "\u00a7"
CALIBRATED_NOTE = ("scaled by a calibration against a measurement on the device "
                   "(CSV column latency_calibrations)")


# --------------------------------------------------------------------------- ordering


def ordered_devices(rows: Sequence[PairResult],
                    profiles: Optional[Sequence[Profile]] = None) -> list[PairResult]:
    """One representative row per device present in ``rows``, ordered by tier then profile order.

    The order inside a tier is the order of ``profiles`` when given (the order the user asked
    for), else the order the rows arrived in; tiers run tier1 -> tier3, like ``lodevem list``.
    """
    first: dict[str, PairResult] = {}
    for row in rows:
        first.setdefault(row.profile_id, row)
    given = [p.id for p in profiles or () if p.id in first]
    ids = list(dict.fromkeys(given + list(first)))
    ids.sort(key=lambda pid: tier_rank(first[pid].tier))  # stable: keeps given order
    return [first[pid] for pid in ids]


def group_by_model(rows: Sequence[PairResult],
                   profiles: Optional[Sequence[Profile]] = None) -> dict[str, list[PairResult]]:
    """Rows keyed by model label (first-seen order), each model's devices in ``ordered_devices`` order."""
    position = {r.profile_id: i for i, r in enumerate(ordered_devices(rows, profiles))}
    groups: dict[str, list[PairResult]] = {}
    for row in rows:
        groups.setdefault(row.model_label, []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: position[r.profile_id])
    return groups


# --------------------------------------------------------------------------- cells


def source_kind(source: Optional[str]) -> str:
    """``estimator`` / ``nn-meter`` / ... : the predictor family named before the first colon."""
    return (source or "none").split(":", 1)[0].strip().lower()


def latency_mark(source: Optional[str]) -> str:
    """The footnote mark that tells a reader which predictor produced a latency number."""
    return MARKS.get(source_kind(source), OTHER_MARK)


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
    """Format one row the way the README shows it (``OOM | — | ✗`` for a model that cannot load)."""
    word = VERDICT_WORDS.get(row.verdict)
    if word is not None:
        latency, mark = word, ""
    elif row.latency_ms is None or not math.isfinite(row.latency_ms):
        latency, mark = "n/a", ""
    else:
        latency, mark = f"{row.latency_ms:,.1f}", latency_mark(row.latency_source)
        if row.latency_calibrations:
            mark += CALIBRATED_MARK
    ram = None
    if row.ran and row.peak_rss_mb is not None:
        ram = f"{row.peak_rss_mb:,.0f}"
    return Cells(latency, mark, ram, row.fits)


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
    models = list(dict.fromkeys(r.model_path for r in rows))
    files = list(dict.fromkeys((r.model_path, r.level) for r in rows))
    return RunCounts(len(models), len(files), tuple(dict.fromkeys(r.runtime for r in rows)),
                     tuple(dict.fromkeys(r.level or "fp32" for r in rows)))


def base_label(row: PairResult) -> str:
    """The row's model label without its `` [runtime]`` suffix (several --runtime values)."""
    return re.sub(r" \[[a-z0-9]+\]$", "", row.model_label)


def input_shape_text(rows: Sequence[PairResult]) -> str:
    """``1x3x224x224 (default)``: the input every model ran with and where it came from; one
    entry per model when they differ."""
    by_model: dict[str, str] = {}
    for row in rows:
        shape = row.input_shape or "unknown"
        by_model.setdefault(base_label(row), f"{shape} ({row.input_shape_source})" if row.input_shape_source else shape)
    shapes = list(dict.fromkeys(by_model.values()))
    if len(shapes) <= 1:
        return shapes[0] if shapes else "unknown"
    return "; ".join(f"{label} {shape}" for label, shape in by_model.items())


# --------------------------------------------------------------------------- legend


@dataclass(frozen=True)
class SourceNote:
    """One legend entry: a mark, the predictor it stands for, and its stated uncertainty."""

    mark: str
    name: str
    uncertainty: str

    def text(self) -> str:
        """``mark name, uncertainty ...``: the line a caption, a comment or a figure shows."""
        extra = f", uncertainty {self.uncertainty}" if self.uncertainty else ""
        return f"{self.mark} {self.name}{extra}"


def source_notes(rows: Sequence[PairResult]) -> list[SourceNote]:
    """The legend for the marks actually shown, in a stable order (estimator first)."""
    by_mark: dict[str, tuple[set[str], set[str]]] = {}
    calibrated = False
    for row in rows:
        c = cells(row)
        if not c.is_number:
            continue
        calibrated = calibrated or c.mark.endswith(CALIBRATED_MARK)
        details, uncertainties = by_mark.setdefault(c.mark.removesuffix(CALIBRATED_MARK), (set(), set()))
        source = row.latency_source or ""
        detail = source.split(":", 1)[-1].split("\u2192")[0].split(" (")[0].strip()
        details.add(detail if c.mark != OTHER_MARK else source)
        if row.latency_uncertainty:
            uncertainties.add(row.latency_uncertainty)
    notes = []
    for mark, (details, uncertainties) in sorted(by_mark.items(), key=lambda kv: kv[0] != "*"):
        what = ", ".join(sorted(d for d in details if d))
        if mark == "*":
            name = f"lodevem's offline estimator ({what})" if what else "lodevem's offline estimator"
        elif mark == MARKS["nn-meter"]:
            name = f"nn-Meter {what} carried to the device's core" if what else "nn-Meter"
        else:
            name = what or "other predictor"
        # The error figure first ("±18% (LODO MAPE)"), then qualifications, in a stable order.
        notes.append(SourceNote(mark, name, uncertainty_text(uncertainties)))
    if calibrated:
        notes.append(SourceNote(CALIBRATED_MARK, CALIBRATED_NOTE, ""))
    return notes


def uncertainty_text(stated: Iterable[str]) -> str:
    """The uncertainty statements of several cells as one legend text: each ';'-separated part
    once, parts differing only in the core merged, the error figures ("±20% ...") first."""
    parts = {part.strip() for text in stated for part in text.split(";") if part.strip()}
    return "; ".join(sorted(_merge_by_core(parts), key=lambda u: (not u.startswith("\u00b1"), u)))


_CORE = re.compile(r"Cortex-A\d+|Kryo[\w ]*?(?= |\)|:|$)")


def _merge_by_core(statements: set[str]) -> set[str]:
    """Statements that differ only in the core they name, once with the cores joined
    ("... on Cortex-A53/A55/A7"): a tier's legend would otherwise repeat each per core."""
    groups: dict[str, list[str]] = {}
    for text in statements:
        cores = _CORE.findall(text)
        key = _CORE.sub("{core}", text) if len(cores) == 1 else text
        groups.setdefault(key, []).extend(cores if len(cores) == 1 else [])
    merged = set()
    for key, cores in groups.items():
        if not cores:
            merged.add(key)
            continue
        names = sorted(set(cores), key=lambda c: (len(c), c))
        joined = names[0] + "".join("/" + c.replace("Cortex-", "") for c in names[1:])
        merged.add(key.replace("{core}", joined))
    return merged


def threads_text(rows: Sequence[PairResult]) -> str:
    """``1 thread`` or ``1/4 threads``: the thread counts the latencies were predicted for."""
    threads = sorted({r.threads for r in rows})
    return "1 thread" if threads in ([], [1]) else f"{'/'.join(map(str, threads))} threads"


# --------------------------------------------------------------------------- accuracy (--eval-data)

# The mark on a pruned row's accuracy that was not fine-tuned (lodevem.accuracy).
NOT_FINETUNED_MARK = "\u00b0"
ACCURACY = "accuracy_tradeoff"  # file stem of the accuracy vs latency / peak RAM figure


def has_accuracy(rows: Sequence[PairResult]) -> bool:
    """True when the run evaluated accuracy (--eval-data): every such row has a figure or a note."""
    return any(r.accuracy_samples is not None or "not evaluated" in (r.accuracy_note or "") for r in rows)


def _pruned_untuned(row: PairResult) -> bool:
    """A pruned row derived without fine-tuning, or whose fine-tuning failed (lodevem.accuracy's note)."""
    note = row.accuracy_note or ""
    return "without fine-tuning" in note or "not fine-tuned: " in note


def not_finetuned(rows: Sequence[PairResult]) -> list[str]:
    """Labels of the pruned rows derived without fine-tuning (lodevem.accuracy's note)."""
    return list(dict.fromkeys(r.model_label for r in rows if _pruned_untuned(r)))


def accuracy_text(row: PairResult, dash: str = "\u2014", minus: str = "\u2212") -> str:
    """``97.8`` for an fp32 row, ``82.4 (−15.4)°`` for a variant (drop vs fp32 in points; ° not
    fine-tuned), ``dash`` when the row has no figure (``accuracy_note`` says why)."""
    if row.accuracy_top1_pct is None:
        return dash
    text = f"{row.accuracy_top1_pct:.1f}"
    if row.level is not None and row.accuracy_drop_pts is not None:
        drop = -row.accuracy_drop_pts
        text += f" ({minus if drop < 0 else '+'}{abs(drop):.1f})"
    if _pruned_untuned(row):
        text += NOT_FINETUNED_MARK
    return text


def accuracy_legend(rows: Sequence[PairResult]) -> Optional[str]:
    """What the accuracy column is, once for the console caption and the .tex footnote."""
    if not has_accuracy(rows):
        return None
    samples = sorted({r.accuracy_samples for r in rows if r.accuracy_samples is not None})
    n = f"{samples[0]:,}" if len(samples) == 1 else "the"
    text = (f"Top-1: accuracy (%) on {n} --eval-data samples, evaluated under the row's own runtime on the file "
            "it measures; (\u2212x) = drop vs the fp32 row in points")
    if any(_pruned_untuned(r) for r in rows):
        text += f"; {NOT_FINETUNED_MARK} pruned without fine-tuning"
    missing = sum(1 for r in rows if r.accuracy_top1_pct is None)
    if missing:
        text += f"; {missing} row(s) not evaluated (CSV accuracy_note says why)"
    return text + "."
