"""The lines under the results table: one per model (where it fits, its peak and latency range,
what to try next) and the run's notes. Plain text, no markup (print with ``markup=False``: file
names may contain brackets).

Short by default: a line says what a reader decides on; ``verbose`` adds the per-model detail
(the file each runtime loaded, the minimum RAM, the tier's description), which the CSV also has.
A reason is never cut mid-word (``whole_words``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Optional

from ..profiles import TIERS, tier_rank
from ..results import PairResult
from ..wire.registry import COMPARISON_RUNTIME, on_device_runtimes
from ..wire.verdict import VERDICTS, Verdict
from .cells import cells, count_text, group_by_model, latency_mark, verdict_word

__all__ = ["devices_text", "measured_file_text", "model_summaries", "size_text", "whole_words"]


def whole_words(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, cut only between words (`` …``)."""
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" \u2026")


def size_text(mb: float) -> str:
    """``23 kB`` under 0.1 MB (a small model's file is not "0.0 MB"), else ``3.4 MB``."""
    return f"{mb * 1024:,.0f} kB" if mb < 0.1 else f"{mb:,.1f} MB"


def devices_text(n: int) -> str:
    """``the one device``, ``both devices``, ``all 6 devices``."""
    return "the one device" if n == 1 else "both devices" if n == 2 else f"all {n} devices"


def model_summaries(rows: Sequence[PairResult], verbose: bool = False) -> list[str]:
    """One plain-text line per model: how many devices it fits and the most constrained tier.

    "Lowest tier" is the least capable tier (tier3 < tier2 < tier1) holding at least one device
    the model fits on: the answer to "how cheap a phone can run this?". ``verbose`` adds what each
    runtime loaded and the minimum RAM (see the module docstring).
    """
    lines = []
    for label, group in group_by_model(rows).items():
        text = _fit_text(label, group, verbose)
        hint = _smaller_runtime_hint(group, rows)
        if hint:
            text += f"; {hint}"
            undecided = [r for r in group if r.fits is None]
            if undecided:
                text += f"; undecided: {_verdict_counts(undecided)}"
        sparse = _sparsity_text(group)
        if sparse:
            text += f"; {sparse}"
        measured = measured_file_text(group) if verbose else None
        if measured:
            text += f"; {measured}"
        lines.append(text + "".join(f"; {part}" for part in _floor_and_missing(group, verbose)))
    unstable = [r for r in rows if r.host.unstable]  # pyperf's rule, see runner.unstable
    if unstable and verbose:  # informational figures: not worth a line under a small table
        lines.append(f"note: host-CPU timings (CSV host_latency_*) were unstable for {len(unstable)} of "
                     f"{len(rows)} pairs (std >= 10 % of the mean); they are informational, not the "
                     "device's latency")
    return lines


def _fit_text(label: str, group: Sequence[PairResult], verbose: bool) -> str:
    """The line's head: where the model fits (or why nowhere), its peak RAM and latency span."""
    fitting = [r for r in group if r.fits]
    failed = [r for r in group if r.fits is False]
    if not fitting and all(r.verdict == Verdict.ERROR for r in group):
        text = f"{label}: memory not measured on {devices_text(len(group))}"
        shown = [(r.latency.ms, latency_mark(r.latency.kind)) for r in group if cells(r).is_number]
        if shown:
            text += f"; predicted latency {_span(shown)} ms"
        return text
    if not fitting:
        return f"{label}: fits nowhere (0 of {len(group)} devices: {_verdict_counts(group)})"
    if len(fitting) < len(group):
        head = f"fits on {len(fitting)} of {len(group)} devices"
    else:
        head = f"fits on {devices_text(len(group))}"
    text = f"{label}: {head}; {_lowest_tier_text(group, fitting, verbose)}"
    peaks = [r for r in fitting if r.memory.peak_rss_mb is not None]
    if peaks:
        top = max(peaks, key=lambda r: r.memory.peak_rss_mb or 0.0)
        text += f"; peak RAM {top.memory.peak_rss_mb:,.0f} MB"
        if top.memory.runtime_baseline_mb is not None:
            text += f", of which runtime {top.memory.runtime_baseline_mb:,.0f} MB ({top.memory.runtime})"
    shown = [(r.latency.ms, latency_mark(r.latency.kind)) for r in fitting if cells(r).is_number]
    if shown:
        text += f"; predicted latency {_span(shown)} ms"
    if failed:
        text += f"; does not fit: {_verdict_counts(failed)}"
    return text


def _sparsity_text(group: Sequence[PairResult]) -> Optional[str]:
    """What the zeros of a pruned file mean: the dense speed, and the channels-removed figure."""
    sparse = [r for r in group
              if r.model.sparsity is not None and (r.model.sparsity >= 0.01 or r.model.zero_channels)]
    if not sparse:
        return None
    text = f"{sparse[0].model.sparsity:.0%} of its weights are zero, run at the dense speed"
    removed = [r.latency.if_channels_removed_ms for r in sparse if r.latency.if_channels_removed_ms is not None]
    if removed:
        text += (f" ({min(removed):,.1f}" + (f"\u2013{max(removed):,.1f}" if max(removed) != min(removed)
                                             else "") + " ms with its all-zero channels removed)")
    return text


def _floor_and_missing(group: Sequence[PairResult], verbose: bool) -> list[str]:
    """The minimum RAM, and why a figure is missing (no peak RAM, no latency), one part each."""
    parts = []
    floors = [r.memory.min_ram_mb for r in group if r.memory.min_ram_mb is not None]
    if floors:
        parts.append(f"minimum RAM {max(floors):,.0f} MB")
    errors = [r.memory.error for r in group if r.verdict == Verdict.ERROR and r.memory.error]
    if errors:  # why there is no figure, in one line (a converter's reason, a failed derivation)
        parts.append(f"no peak RAM: {errors[0] if verbose else whole_words(errors[0], 200)}")
    missing = [r.latency.note for r in group if r.latency.ms is None and r.latency.note]
    if missing:
        why = missing[0] if verbose else whole_words(missing[0], 160)
        parts.append(f"no latency on {count_text(len(missing), 'device')}: {why}")
    return parts


def measured_file_text(group: Sequence[PairResult]) -> Optional[str]:
    """What a model's rows loaded when it was converted (tflite, ncnn): "measured 3.4 MB int8-static
    .tflite (scheme)", and each note on how it was made (a synthetic calibration, a fallback)."""
    parts = []
    row = next((r for r in group if r.memory.converted.mb is not None), None)
    if row is not None:
        what = " ".join(x for x in (size_text(row.memory.converted.mb or 0.0), row.memory.converted.precision) if x)
        parts.append(f"measured {what} {row.memory.runtime_shown} file"
                     + (f" ({row.memory.converted.scheme})" if row.memory.converted.scheme else ""))
    notes = dict.fromkeys(note for r in group for note in r.memory.notes)
    parts += list(notes)
    return "; ".join(parts) or None


def _lowest_tier_text(group: Sequence[PairResult], fitting: Sequence[PairResult], verbose: bool = True) -> str:
    """"lowest tier it runs on" only when the run tried the tier below it (or there is none);
    else "lowest tier tested", so an untried tier is never implied to fail or to fit."""
    lowest = max({r.device.tier for r in fitting}, key=tier_rank)
    tried = {r.device.tier for r in group}
    below = [t for t in TIERS if tier_rank(t) > tier_rank(lowest)]
    name = f"{lowest} = {TIERS.get(lowest, lowest)}" if verbose else lowest
    if not below or any(t in tried for t in below):
        return f"lowest tier it runs on: {name}"
    return f"lowest tier tested: {name} ({', '.join(below)} not tried)"


def _span(shown: Sequence[tuple[Optional[float], str]]) -> str:
    """``12.4‡–48.9*``: the lowest and highest latency with their marks."""
    lo, hi = min(shown, key=lambda s: s[0] or 0.0), max(shown, key=lambda s: s[0] or 0.0)
    return f"{lo[0]:,.1f}{lo[1]}" + (f"\u2013{hi[0]:,.1f}{hi[1]}" if hi != lo else "")


def _smaller_runtime_hint(group: Sequence[PairResult], rows: Sequence[PairResult]) -> Optional[str]:
    """For torch rows over the app budget or the RAM: most of the peak is PyTorch itself, which no
    phone app ships; name an on-device runtime, with its figure when this run measured it."""
    over = [r for r in group if r.memory.runtime == COMPARISON_RUNTIME
            and r.verdict in (Verdict.TIGHT, Verdict.OOM, Verdict.THRASHING)]
    if not over:
        return None
    worst = over[0]
    same = [r for r in rows if r.model.path == worst.model.path and r.model.level == worst.model.level
            and r.device.profile_id == worst.device.profile_id and r.memory.runtime in on_device_runtimes()]
    base = (f"the PyTorch runtime alone takes {worst.memory.runtime_baseline_mb:,.0f} MB"
            if worst.memory.runtime_baseline_mb is not None else "PyTorch's own footprint is part of the peak")
    if same:
        other = same[0]
        peak = (f"peak {other.memory.peak_rss_mb:,.0f} MB, {other.verdict}" if other.memory.peak_rss_mb is not None
                else other.verdict)
        return f"{base}: on {worst.device.label} under {other.memory.runtime} ({peak}) in this run"
    if worst.memory.fallback:  # the on-device converter was tried and refused it
        return f"{base}: an app would ship a smaller runtime, which needs a file its converter takes (an fp32 export)"
    return f"{base}: an app would ship a smaller runtime, try --runtime tflite"


def _verdict_counts(rows: Sequence[PairResult]) -> str:
    counts: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: VERDICTS.index(r.verdict)):
        word = verdict_word(row)
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{word} on {n}" for word, n in counts.items())
