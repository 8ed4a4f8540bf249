"""Which RAM limits to measure, and which rows to infer: planning from the physics (issue 24).

A memory cgroup's limit changes a run only when the cgroup's charge gets near it: below, the
kernel reclaims page cache, then swaps or thrashes, then OOM-kills. Far above, it does nothing:
the same model measured under 512 / 1024 / 2048 / 3072 / 4096 MB peaks at 270.7 / 270.5 / 270.8
/ 271.5 / 270.9 MB (mobilenet_v2, torch; resnet18: 293.8 ... 293.5 MB), and a naive plan
measures that one number once per profile. So, per (model, runtime):

1. one **reference run** at the largest limit the rows need (every profile's RAM is at most it);
2. a limit **far above** the reference's peak gets its row from that run (verdict ``fits``, the
   same peak), labelled in ``limit_enforcement``: ``inferred from the 4096 MB run: peak 270.9 MB
   ≪ 1024 MB``;
3. every other limit, within the margin of the peak or below it (OOM, reclaim, thrashing, the
   floor), is measured as before. A reference that did not fit infers nothing.

The margin: "far above" means ``limit >= peak * (1 + RELATIVE) + ABSOLUTE_MB``. Why these
values (measured on this machine, Docker, cgroup v1, warm page cache; docs/measurement.md):

* **VmHWM spread**: over 5 runs at 1 GiB mobilenet_v2's VmHWM has a CV of 0.27 %; across the
  five limits above it varied by 1.0 MB (0.4 %). Five standard deviations are under 2 %.
* **cgroup charge vs VmHWM**: with the cache warm (``measure.prewarm``) the cgroup is charged
  less than VmHWM (tiny_cnn: 152 vs 238 MB; the runtime's shared library pages are charged to
  whoever read them first), so a limit above VmHWM is not reached by the charge. With a cold
  cache the charge grows to 486 MB at a 1 GiB limit (page cache, reclaimable), and a 256 MB limit
  (VmHWM + 8 %) still finished, by evicting file pages; 200 and 160 MB thrashed.
* **reclaimable file pages**: of VmHWM, the file-backed part (libtorch and the other shared
  libraries mapped, RssFile) is the part a tight limit can take away and must read back: about
  110 MB of tiny_cnn's 238 MB and of mobilenet_v2's 271 MB in the bench image (RssFile).
  A limit above VmHWM + 25 % leaves room for all of the spread above and for the runtime's
  own page-cache churn; ABSOLUTE_MB covers small models, whose relative margin is tiny.

``--no-infer`` measures every limit; ``benchmarks/harness.py`` measures both ways for the zoo
models x 16 profiles and counts verdicts that differ (0 is the requirement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

from ..wire.verdict import Verdict

__all__ = ["ABSOLUTE_MB", "RELATIVE", "LimitPlan", "floor_bracket", "inferred_note", "plan_limits",
           "safe_above"]

RELATIVE = 0.25
ABSOLUTE_MB = 32.0


def safe_above(peak_mb: float, relative: float = RELATIVE, absolute_mb: float = ABSOLUTE_MB) -> float:
    """The smallest limit whose row may be inferred from a run that peaked at ``peak_mb``."""
    return peak_mb * (1 + relative) + absolute_mb


@dataclass(frozen=True)
class LimitPlan:
    """What to do for each limit of one (model, runtime) below the reference: ``measured`` (run
    them, largest first) and ``inferred`` (rows from the reference run)."""

    reference_mb: int
    measured: tuple[int, ...]
    inferred: tuple[int, ...]


def reference_limit(limits: Iterable[int]) -> Optional[int]:
    """The reference run's limit: the largest the rows need (None: no limit needed)."""
    values = [int(v) for v in limits]
    return max(values) if values else None


def plan_limits(limits: Iterable[int], reference_mb: int, verdict: Verdict, peak_mb: Optional[float], *,
                infer: bool = True, relative: float = RELATIVE, absolute_mb: float = ABSOLUTE_MB) -> LimitPlan:
    """Split the limits below ``reference_mb`` once its run (``verdict``, ``peak_mb``) is known."""
    below = sorted({int(v) for v in limits if int(v) < reference_mb}, reverse=True)
    if not infer or verdict != Verdict.FITS or peak_mb is None:
        return LimitPlan(reference_mb, tuple(below), ())
    floor = safe_above(peak_mb, relative, absolute_mb)
    return LimitPlan(reference_mb, tuple(v for v in below if v < floor), tuple(v for v in below if v >= floor))


def inferred_note(reference_mb: int, peak_mb: float, limit_mb: int) -> str:
    """The ``limit_enforcement`` of an inferred row: what it comes from, and why it may."""
    return f"inferred from the {reference_mb} MB run: peak {peak_mb:.1f} MB ≪ {limit_mb} MB"


def floor_bracket(peak_mb: float, tolerance_mb: int, lo_mb: int, hi_mb: int) -> tuple[int, int]:
    """Where ``find_floor`` probes first once the top run peaked at ``peak_mb``: just above the
    peak (a limit the model fits at, since fitting needs VmHWM <= limit) and just below it
    (a limit it fails at), so the bisection starts from a bracket ``2 * tolerance`` wide instead
    of ``[lo, hi]``: 2-3 probes instead of 9 for 64..4096 MB at 8 MB."""
    above = min(hi_mb, max(lo_mb, math.ceil(peak_mb) + tolerance_mb))
    below = max(lo_mb, min(above - 1, math.floor(peak_mb) - tolerance_mb))
    return above, below
