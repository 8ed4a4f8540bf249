"""The paper figures' common parts: their style and files, the RAM axis, device-RAM lines, ms ticks.

Used by every figure (``plots``: the heatmap and the minimum-RAM bars; ``scatter``: latency vs
peak RAM; ``tradeoff``: accuracy), so that they read alike in one paper. Figures are built on
``matplotlib.figure.Figure`` directly (Agg canvas) instead of ``pyplot``: no global figure
registry, no backend switch, nothing left open between calls, and it works on a headless
machine. Each figure is saved as PNG (for a quick look) and PDF (vector, for LaTeX), atomically,
with fixed metadata so that identical results give identical files. Sizes are chosen for a
two-column paper (about 7 in wide at 8 pt) and grow with the number of devices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator

from ..profiles import TIERS, Profile, tier_rank
from ..results import PairResult
from ..store.files import atomic_path
from ..version import __version__

# Colour-blind-safe (Okabe-Ito) colours for tiers; models use matplotlib's tab10 cycle.
TIER_COLOURS = {"tier1": "#009E73", "tier2": "#E69F00", "tier3": "#D55E00"}
# One filled marker shape per device of a figure (15 tell apart at 5 pt; more devices repeat them).
DEVICE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "p", "h", "d", "H", "8")
_STYLE: dict[str, Any] = {"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7,
          "ytick.labelsize": 7, "legend.fontsize": 7, "pdf.fonttype": 42, "svg.hashsalt": "lodevem"}


@contextmanager
def paper_style() -> Iterator[None]:
    """Paper-sized fonts for the figures built inside, restored afterwards (rcParams are global)."""
    with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]  # matplotlib's stub wants literal keys
        yield


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` atomically (``store.atomic_path``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for ext, metadata in (("png", {"Software": f"lodevem {__version__}"}),
                          ("pdf", {"Creator": f"lodevem {__version__}", "CreationDate": None})):
        final = out_dir / f"{stem}.{ext}"
        with atomic_path(final) as tmp:
            fig.savefig(tmp, format=ext, dpi=200, metadata=metadata)
        written.append(final)
    return written


def ram_text(mb: float) -> str:
    return f"{mb / 1024:g} GB" if mb >= 1024 and mb % 512 == 0 else f"{mb:,.0f} MB"


def tier_limits(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None) -> dict[int, list[str]]:
    """Each distinct device RAM limit with the tiers that have a device of that size."""
    pairs = {(r.device.ram_mb, r.device.tier) for r in rows} | {(p.ram_mb, p.tier) for p in profiles or ()}
    limits: dict[int, list[str]] = {}
    for ram, tier in sorted(pairs):
        limits.setdefault(ram, []).append(tier)
    return limits


def draw_ram_limits(ax: Axes, limits: dict[int, list[str]]) -> list[Line2D]:
    """Dashed lines at device RAM sizes, labelled on a top axis; returns the tier legend handles.

    A size shared by several tiers (512 MB: tier2 and tier3) gets one line, coloured by the most
    constrained of them, and a label naming them all. Call after the x scale is set.
    """
    colours = []
    for ram, tiers in limits.items():
        colours.append(TIER_COLOURS.get(max(tiers, key=tier_rank), "grey"))
        ax.axvline(ram, color=colours[-1], linestyle="--", linewidth=1, zorder=1)
    top = ax.secondary_xaxis("top")
    labels = [f"{ram_text(ram)}\n{tiers[0]}{''.join('+' + t.removeprefix('tier') for t in tiers[1:])}"
              for ram, tiers in limits.items()]
    top.set_xticks(list(limits), labels, fontsize=6)
    top.xaxis.set_minor_locator(NullLocator())
    top.tick_params(length=2)
    for label, colour in zip(top.get_xticklabels(), colours):
        label.set_color(colour)
    present = sorted({t for tiers in limits.values() for t in tiers}, key=tier_rank)
    return [Line2D([], [], color=TIER_COLOURS.get(t, "grey"), linestyle="--",
                   label=f"{t} device RAM ({TIERS.get(t, t)})") for t in present]


def log2_ram_axis(ax: Axes, values: Sequence[float]) -> None:
    """Log-2 RAM axis with plain MB tick labels at powers of two (256, 512, 1024 ...)."""
    lo, hi = min(values) / 1.35, max(values) * 1.35
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ticks = [2.0 ** k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)
             if lo <= 2.0 ** k <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:,.0f}" for t in ticks])


def _nice_number(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def _ms_label(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 or value == round(value) else f"{value:g}"


def colourbar_ticks(vmin: float, vmax: float) -> tuple[list[float], list[str]]:
    """Major ticks for a log colour bar from ``vmin`` to ``vmax`` ms, each label distinct.

    1-2-5 steps when the range holds at least three of them; a narrow range (14.2 to 14.9 ms:
    the default locator then labels every minor tick "14") gets four log-spaced values,
    rounded to the fewest significant digits that keep their labels apart."""
    lo, hi = math.floor(math.log10(vmin)), math.ceil(math.log10(vmax))
    for mantissas in ((1, 2, 5), (1, 3), (1,)):  # the finest steps that give at most 8 ticks
        steps = [m * 10.0 ** k for k in range(lo, hi + 1) for m in mantissas if vmin <= m * 10.0 ** k <= vmax]
        if len(steps) <= 8:
            break
    if len(steps) >= 3:
        if len(steps) < 5:  # few steps: also label the ends, so the bar's range can be read off
            ends = [_inside(v, vmin, vmax) for v in (vmin, vmax)]
            steps = sorted(steps + [e for e in ends if e and all(max(e / t, t / e) > 1.3 for t in steps)])
        return steps, [_ms_label(t) for t in steps]
    raw = np.geomspace(vmin, vmax, 4)
    for digits in range(2, 8):
        ticks = [_inside(float(v), vmin, vmax, digits) for v in raw]
        labels = [_ms_label(t) for t in ticks if t is not None]
        if len(set(labels)) == len(raw):
            return [t for t in ticks if t is not None], labels
    return [float(v) for v in raw], [f"{v:.8g}" for v in raw]


def _inside(value: float, vmin: float, vmax: float, digits: int = 2) -> Optional[float]:
    """``value`` at ``digits`` significant digits, rounded (or, at an end, rounded inward) so that
    it stays in the range; None when no such value exists."""
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    for step in (round(value / scale), math.ceil(value / scale), math.floor(value / scale)):
        candidate = _nice_number(step * scale, digits + 1)  # drops float noise (9.4000000001)
        if vmin <= candidate <= vmax:
            return candidate
    return None
