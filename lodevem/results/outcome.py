"""What ``lodevem start`` answers: a record the terminal shows and the command exits by.

Why in the records' package: the report wing renders it and imports no face (the runner makes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import BudgetBroken, LodevemError
from . import PairResult

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

    @property
    def failure(self) -> Optional[LodevemError]:
        if self.nothing:
            return LodevemError(self.nothing)
        if self.broken:
            return BudgetBroken(f"{len(self.broken)} pair(s) broke the budget")
        return None
