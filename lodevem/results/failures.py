"""Why a cell has no figure, in one line, for every output a user looks at.

Why a module of its own: a failed cell used to say only ``error``, ``no peak``, ``n/a`` or ``—``;
the reason sat in a CSV note column (or only under ``--verbose``). Here each row's missing
figures (latency, peak RAM, top-1) get their reason once, read from the row's own fields, and the
console (a line per failed cell under the table), the CSV (``failure_reason``) and report.html
(under the cell) all show the same words. A word that is a result (OOM, timeout, thrashing: the
model did not run within the limit) is not a failure: the verdict says it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..wire.verdict import Verdict
from .row_parts import RowAccuracy, RowDevice, RowLatency, RowMemory, RowModel


class PairResult(Protocol):
    """The row parts a reason is read from (``results.pair.PairResult``, which imports this module)."""

    @property
    def model(self) -> RowModel: ...

    @property
    def device(self) -> RowDevice: ...

    @property
    def verdict(self) -> Verdict: ...

    @property
    def latency(self) -> RowLatency: ...

    @property
    def memory(self) -> RowMemory: ...

    @property
    def accuracy(self) -> RowAccuracy: ...


__all__ = ["CellFailure", "REASON_CHARS", "failure_lines", "failure_reason", "failures", "one_line"]

REASON_CHARS = 220  # one line of a terminal or a table cell; the CSV notes keep the whole text


@dataclass(frozen=True)
class CellFailure:
    """One figure a row asked for and did not get: which (``latency``, ``peak RAM``, ``top-1``) and why."""

    figure: str
    reason: str

    def text(self) -> str:
        return f"{self.figure}: {self.reason}"


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    return textwrap.shorten(" ".join(text.split()), limit, placeholder=" ...") or "no reason recorded"


def failures(row: PairResult) -> tuple[CellFailure, ...]:
    """The row's missing figures with their reasons: a latency that could not be predicted (its
    note's first part), a memory run that gave no figure (``error``/``no peak``: its error), a
    top-1 that --eval-data could not give (its note's ``not evaluated`` part)."""
    found = []
    if row.latency.ms is None or not math.isfinite(row.latency.ms):
        found.append(CellFailure("latency", one_line(row.latency.notes[0] if row.latency.notes else "")))
    if row.verdict == Verdict.ERROR:
        found.append(CellFailure("peak RAM", one_line(row.memory.error or "")))
    if row.accuracy.top1_pct is None:
        why = row.accuracy.not_evaluated
        if why is not None:
            found.append(CellFailure("top-1", one_line(why)))
    return tuple(found)


def failure_reason(row: PairResult) -> str:
    """The CSV's ``failure_reason``: every missing figure of the row with its reason ("" when none)."""
    return "; ".join(f.text() for f in failures(row))


def failure_lines(rows: Sequence[PairResult]) -> list[str]:
    """The lines under the console table: one per failed cell, the devices that share a model and
    a reason on one line (``net.pt@pruned on Nokia C1, Itel P37: latency: ...``)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for failure in failures(row):
            grouped.setdefault((row.model.label, failure.text()), []).append(row.device.label)
    return [f"{label} on {', '.join(devices)}: {text}" for (label, text), devices in grouped.items()]
