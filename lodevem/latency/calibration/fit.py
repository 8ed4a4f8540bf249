"""The fit: a profile's records -> the factors in force (one, or compute/memory split)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from .records import MAX_FACTOR, MIN_FACTOR, CalibrationRecord

__all__ = ["CalibrationFit", "fit_calibration", "select_records", "threads_text"]

# Below this many records the compute/memory split is not fitted (two unknowns need >= 3 points
# to leave a residual that says whether the split means anything).
_SPLIT_MIN = 3

@dataclass(frozen=True)
class CalibrationFit:
    """The factors in force for one profile: time = a * compute part + b * memory part."""

    profile_id: str
    records: tuple[CalibrationRecord, ...]
    compute_factor: float
    memory_factor: float
    split: bool
    fallback: Optional[str] = None  # why three or more records still gave one factor

    @property
    def n(self) -> int:
        return len(self.records)

    def factor(self, share: float) -> float:
        """The scale for a prediction whose compute-bound share is ``share``."""
        return self.compute_factor * share + self.memory_factor * (1.0 - share)

    def describe(self) -> str:
        if self.split:
            return f"compute x{self.compute_factor:.3f}, memory x{self.memory_factor:.3f} (n={self.n})"
        text = f"x{self.compute_factor:.3f} (n={self.n})"
        return f"{text}; {self.fallback}" if self.fallback else text


def fit_calibration(profile_id: str, records: Sequence[CalibrationRecord]) -> Optional[CalibrationFit]:
    """Fit the factors from a profile's records (None: no records)."""
    records = tuple(records)
    if not records:
        return None
    single = math.exp(sum(math.log(r.ratio) for r in records) / len(records))
    if len(records) < _SPLIT_MIN:
        return CalibrationFit(profile_id, records, single, single, split=False)
    # minimise sum_i (a*c_i/y_i + b*m_i/y_i - 1)^2: relative error, so a 10 ms and a 400 ms model
    # weigh alike. Normal equations of a 2-unknown linear least squares.
    xs = [(r.compute_ms / r.measured_ms, r.memory_ms / r.measured_ms) for r in records]
    scc = sum(c * c for c, _ in xs)
    smm = sum(m * m for _, m in xs)
    scm = sum(c * m for c, m in xs)
    sc, sm = sum(c for c, _ in xs), sum(m for _, m in xs)
    det = scc * smm - scm * scm
    if det <= 1e-12 * max(scc * smm, 1e-300):
        return CalibrationFit(profile_id, records, single, single, split=False,
                              fallback="the models' compute/memory mixes are too alike to fit two factors")
    a = (sc * smm - sm * scm) / det
    b = (sm * scc - sc * scm) / det
    if not (MIN_FACTOR <= a <= MAX_FACTOR and MIN_FACTOR <= b <= MAX_FACTOR):
        return CalibrationFit(profile_id, records, single, single, split=False,
                              fallback=f"a two-factor fit gave compute x{a:.2f}, memory x{b:.2f}: one factor used")
    return CalibrationFit(profile_id, records, a, b, split=True)


def select_records(records: Sequence[CalibrationRecord], runtime: Optional[str],
                   threads: int) -> tuple[list[CalibrationRecord], Optional[str]]:
    """The records to fit for a run, and a note when they do not match the run's settings.

    Records measured with the run's runtime and thread count are preferred; when none match,
    every record is used and the note says what differs (applied, never silently).
    """
    records = list(records)
    if not records:
        return [], None
    same = [r for r in records if r.threads == threads and (runtime is None or r.runtime == runtime)]
    if same:
        return same, None
    measured = sorted({f"{r.runtime}, {threads_text(r.threads)}" for r in records})
    wanted = f"{runtime}, {threads_text(threads)}" if runtime else threads_text(threads)
    return records, f"calibration measured with {' / '.join(measured)}, this prediction is for {wanted}: applied anyway"


def threads_text(n: int) -> str:
    """"1 thread" or "N threads", as the notes say it."""
    return "1 thread" if n == 1 else f"{n} threads"
