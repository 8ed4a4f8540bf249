"""CI budget gates: turn results into a pass/fail a pipeline can act on (exit code 3)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from .results import PairResult
from .wire.verdict import Verdict


@dataclass(frozen=True)
class Budget:
    """What a run must meet: a latency ceiling and/or fitting in RAM, optionally per tier."""

    max_latency_ms: Optional[float] = None
    fail_on_oom: bool = False
    tiers: Sequence[str] = ()
    fail_on_tight: bool = False  # stricter than fail_on_oom: a peak above the app budget fails too


def check_budget(rows: Sequence[PairResult], budget: Budget) -> list[str]:
    """One line per (model, device) pair that broke the budget; empty when all passed.

    A pair whose latency could not be predicted breaks a latency budget: a gate that passes
    because a number is missing would hide exactly what it exists to catch. So does a latency
    that is no measurement of anything: 0 or less, infinite or NaN (a calibration that scaled
    every latency to 0.0 ms would otherwise pass every gate).
    """
    broken = []
    for row in rows:
        if budget.tiers and row.device.tier not in budget.tiers:
            continue
        where = f"{row.model.label} on {row.device.label} ({row.device.profile_id}, {row.device.tier})"
        if budget.max_latency_ms is not None:
            if row.latency.ms is None:
                broken.append(f"{where}: no latency prediction ({(row.latency.note or 'unknown reason')[:300]})")
            elif not (math.isfinite(row.latency.ms) and row.latency.ms > 0):
                broken.append(f"{where}: latency {row.latency.ms} ms is not a usable figure (it must be finite "
                              "and above 0)")
            elif row.latency.ms > budget.max_latency_ms:
                broken.append(f"{where}: latency {row.latency.ms:,.1f} ms > {budget.max_latency_ms:g} ms")
        if budget.fail_on_tight and row.verdict == Verdict.TIGHT:
            broken.append(f"{where}: tight: peak {row.memory.peak_rss_mb:,.0f} MB > app budget "
                          f"{row.device.app_budget_mb} MB "
                          f"(fits the {row.memory.limit_mb} MB RAM; a phone's low-memory killer would likely stop it)")
        elif (budget.fail_on_oom or budget.fail_on_tight) and not row.ran:
            detail = f": {row.memory.error}" if row.memory.error else ""
            broken.append(f"{where}: {row.verdict} under {row.memory.limit_mb} MB{detail}")
    return broken


def no_figures(rows: Sequence[PairResult]) -> Optional[str]:
    """A one-line failure when no row got a memory figure (every measurement an error: nothing ran
    under a device's limit): such a run answers only half its question, whatever was written, so
    it must not exit 0. The predicted latencies it has are in the files all the same."""
    if not rows or any(r.verdict != Verdict.ERROR for r in rows):
        return None
    first = next((r.memory.error or r.latency.note or "" for r in rows if r.memory.error or r.latency.note), "")
    latencies = sum(1 for r in rows if r.latency.ms is not None)
    plural = latencies > 1
    kept = (f"; {'its' if plural else 'the'} {latencies} predicted latenc{'ies are' if plural else 'y is'} "
            "in the CSV") if latencies else ""
    return (f"no row got a memory figure ({len(rows)} row{'s' if len(rows) != 1 else ''}{kept}); the first reason: "
            f"{textwrap.shorten(' '.join(first.split()), 300, placeholder=' ...')}")
