"""What the reports know of a predictor kind by its name alone: ``describe_kind``.

Why a module of its own: a results row names its kind (``latency_kind``) and the reports
(``report.legend``, the methods, the HTML page) need that kind's table mark, legend title and
methods words without making the kind (no estimator, no nn-Meter, no sandbox), from the one
registry, ``latency.pool.KINDS``. A kind not registered (a results file made elsewhere, a kind
removed since) gets ``UNKNOWN_MARK`` and words saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .paper import KindPaper, KindUse
from .papers import unknown_paper
from .pool import KINDS

__all__ = ["MEASURED", "MEASURED_MARK", "UNKNOWN_MARK", "KindDescription", "describe_kind"]


# The mark of a kind this lodevem has not registered (a results file made elsewhere, a removed kind).
UNKNOWN_MARK = "?"
# A latency no predictor made: measured on a phone over adb by the runtime's own benchmark binary
# (``lodevem.device.rows``: ``latency_kind`` ``measured``).
MEASURED = "measured"
MEASURED_MARK = "m"


def _measured_paper(use: KindUse) -> KindPaper:
    return KindPaper("measured on the phone", f"For {use.scope()}, the latency was measured on the phone itself over "
                     "adb with the runtime's own benchmark binary (LiteRT's benchmark_model): the mean of the timed "
                     "runs after the warm-up runs, with the binary's own minimum, maximum and standard deviation; "
                     "nothing in those rows is predicted.")


@dataclass(frozen=True)
class KindDescription:
    """What the reports know of a kind by its name alone (``latency.paper``): its legend title,
    table mark and methods words, read from the registered class without making it. ``order``:
    its place in ``KINDS`` (legends list kinds in it; unregistered kinds last)."""

    name: str
    title: str
    mark: str
    paper: Callable[[KindUse], KindPaper]
    order: int
    registered: bool = True


def describe_kind(name: str) -> KindDescription:
    """The registered kind ``name`` as the reports see it; a kind not registered (or a factory
    without ``mark`` / ``title`` / ``paper``) gets ``UNKNOWN_MARK`` and words saying so."""
    if name == MEASURED:
        return KindDescription(name, "measured on the phone (the runtime's own benchmark binary)", MEASURED_MARK,
                               _measured_paper, len(KINDS) - 1)
    factory = KINDS.get(name)
    mark, title, paper = (getattr(factory, attr, None) for attr in ("mark", "title", "paper"))
    if factory is None or not isinstance(mark, str) or not isinstance(title, str) or not callable(paper):
        return KindDescription(name, name or "unknown predictor", UNKNOWN_MARK, unknown_paper(name), len(KINDS), False)
    return KindDescription(name, title, mark, paper, list(KINDS).index(name))
