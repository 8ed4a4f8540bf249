"""What ``lodevem start`` answers: a record the terminal shows and the command exits by.

Why in the records' package: the report wing renders it and imports no face (the runner makes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import BudgetBroken, LodevemError, PartialFailure
from . import PairResult
from .failures import failures

if TYPE_CHECKING:
    from ..profiles import Profile

__all__ = ["StartResult"]


@dataclass
class StartResult:
    """``lodevem start``'s answer: the run's rows (in table order) and warnings, the files written,
    the pairs that broke a budget gate; ``failure`` is what the command exits with after showing it."""

    rows: list[PairResult]
    profiles: tuple[Profile, ...]
    warnings: list[str]
    written: list[Path]
    broken: list[str]
    nothing: Optional[str]  # no pair produced any figure: why (``gates.no_figures``)
    # the labels of the models this run was asked for (None: every row's): rows of other models an
    # earlier run left in the table (report.combine) do not make this run a partial failure
    asked: Optional[frozenset[str]] = None

    @property
    def partial(self) -> list[PairResult]:
        """The rows asked for that miss a figure (``results.failures``)."""
        return [r for r in self.rows if (self.asked is None or r.model.label in self.asked) and failures(r)]

    @property
    def failure(self) -> Optional[LodevemError]:
        if self.nothing:
            return LodevemError(self.nothing)
        if self.broken:
            return BudgetBroken(f"{len(self.broken)} pair(s) broke the budget")
        partial = self.partial
        if partial:
            cells = sum(len(failures(r)) for r in partial)
            return PartialFailure(f"{cells} figure(s) missing in {len(partial)} of {len(self.rows)} row(s) (why: the "
                                  "lines under the table, the CSV's failure_reason); the others are written")
        return None
