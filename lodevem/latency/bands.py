"""The default predictor's held-out error per kind of cell on the shipped profiles' cores, as the
README states it: ``python -m lodevem.latency.bands``.

Why a module: the README's uncertainty figures were typed by hand and drifted from what the rows
state (issue 46: 32.6 % in the README, 20.5 % in the methods, ±31 % on the rows). Here they are
computed by the same rule a run's cells use (``PredictorPool.selection(...).band``: the nested
default's error for the cell's kind, with its pooling) and worded by ``latency.statement``; the
README block is this module's output (``scripts/docs.py`` block ``held-out-errors``) and
``tests/test_docs.py`` fails when they differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..profiles import load_profiles
from ..wire.precision import ARITHMETIC
from ..wire.registry import on_device_runtimes
from .arithmetic import cell_arithmetic_executed
from .selection import Availability, CellKind, HeldOutError
from .statement import figure_text, socs_of

__all__ = ["KindBand", "default_bands", "render"]

THREADS = (1, 4)  # 1-thread and multi-thread: the two kinds of thread count a figure is stated for


@dataclass(frozen=True)
class KindBand:
    """The default's figure for one kind of cell (``err`` None: no rows to state one)."""

    core: str
    runtime: str
    threads: int
    precision: str
    arithmetic: str  # what the runtime executes for that precision on that core
    err: Optional[HeldOutError]


def default_bands() -> list[KindBand]:
    """Each (shipped profile core, runtime, 1/multi-thread, precision) with the default's figure:
    the kinds every install has, the same selection a run's pool makes."""
    from .pool import PredictorPool

    pool = PredictorPool()
    order = tuple(name for name, kind in pool.kinds.items() if kind.availability is Availability.EVERY_INSTALL)
    selection = pool.selection(order)
    cores = sorted({p.fastest_cluster.core for p in load_profiles()}, key=lambda c: (len(c), c))
    out = []
    for runtime in on_device_runtimes():
        for core in cores:
            for threads in THREADS:
                for precision in ARITHMETIC:
                    arithmetic = cell_arithmetic_executed(runtime, core, precision)
                    out.append(KindBand(core, runtime, threads, precision, arithmetic,
                                        selection.band(CellKind(core, threads, arithmetic, runtime))))
    return out


def render(bands: Optional[list[KindBand]] = None, threads: tuple[int, ...] = (1,)) -> str:
    """One line per runtime, thread count and figures, cores with the same figures together and
    precisions sharing a figure written once: ``tflite Cortex-A7/A53/A55/A75, 1 thread: fp32/fp16
    ±31.0% (8 held-out rows, pooled over all cores); int8 ±23.5% (...)``. ``threads``: the thread
    counts shown (the README: 1, the default; ``--all``: 1 and multi-thread)."""
    bands = default_bands() if bands is None else bands
    cells: dict[tuple[str, int, str], dict[str, list[str]]] = {}
    for b in bands:
        if b.threads not in threads:
            continue
        figure = (figure_text(b.err.mape_pct, b.err.rows, socs_of(b.err), b.err.scope) if b.err is not None
                  else "no figure: no held-out rows")
        cells.setdefault((b.runtime, b.threads, b.core), {}).setdefault(figure, []).append(b.precision)
    lines: dict[tuple[str, int, str], list[str]] = {}
    for (runtime, n, core), figures in cells.items():
        text = "; ".join(f"{'/'.join(p)} {figure}" for figure, p in figures.items())
        lines.setdefault((runtime, n, text), []).append(core)
    return "\n".join(f"{runtime} {cores[0]}{''.join('/' + c.removeprefix('Cortex-') for c in cores[1:])}, "
                     f"{'1 thread' if n == 1 else f'{n} threads'}: {text}"
                     for (runtime, n, text), cores in lines.items())


if __name__ == "__main__":
    import sys

    print(render(threads=THREADS if "--all" in sys.argv[1:] else (1,)))
