"""Figures for a paper: latency heatmap, latency vs peak RAM, minimum RAM per model.

Figures are built on ``matplotlib.figure.Figure`` directly (Agg canvas) instead of ``pyplot``:
no global figure registry, no backend switch, nothing left open between calls, and it works on
a headless machine. Each figure is saved as PNG (for a quick look) and PDF (vector, for LaTeX),
atomically, with fixed metadata so that identical results give identical files. Sizes are
chosen for a two-column paper (about 7 in wide at 8 pt) and grow with the number of devices.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

from ..profiles import TIERS, Profile, tier_rank
from ..results import PairResult
from ..store.files import atomic_path
from ..version import __version__
from .cells import HEATMAP, MIN_RAM, cells, group_by_model, ordered_devices
from .legend import mark_notes, row_cell

# Colour-blind-safe (Okabe-Ito) colours for tiers; models use matplotlib's tab10 cycle.
TIER_COLOURS = {"tier1": "#009E73", "tier2": "#E69F00", "tier3": "#D55E00"}
# One filled marker shape per device of a figure (15 tell apart at 5 pt; more devices repeat them).
DEVICE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "p", "h", "d", "H", "8")
_STYLE: dict[str, Any] = {"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7,
          "ytick.labelsize": 7, "legend.fontsize": 7, "pdf.fonttype": 42, "svg.hashsalt": "lodevem"}


@contextmanager
def _paper_style() -> Iterator[None]:
    """Paper-sized fonts for the figures built inside, restored afterwards (rcParams are global)."""
    with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]  # matplotlib's stub wants literal keys
        yield


def _save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
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


def _ram_text(mb: float) -> str:
    return f"{mb / 1024:g} GB" if mb >= 1024 and mb % 512 == 0 else f"{mb:,.0f} MB"


def _tier_limits(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None) -> dict[int, list[str]]:
    """Each distinct device RAM limit with the tiers that have a device of that size."""
    pairs = {(r.device.ram_mb, r.device.tier) for r in rows} | {(p.ram_mb, p.tier) for p in profiles or ()}
    limits: dict[int, list[str]] = {}
    for ram, tier in sorted(pairs):
        limits.setdefault(ram, []).append(tier)
    return limits


def _draw_limits(ax: Axes, limits: dict[int, list[str]]) -> list[Line2D]:
    """Dashed lines at device RAM sizes, labelled on a top axis; returns the tier legend handles.

    A size shared by several tiers (512 MB: tier2 and tier3) gets one line, coloured by the most
    constrained of them, and a label naming them all. Call after the x scale is set.
    """
    colours = []
    for ram, tiers in limits.items():
        colours.append(TIER_COLOURS.get(max(tiers, key=tier_rank), "grey"))
        ax.axvline(ram, color=colours[-1], linestyle="--", linewidth=1, zorder=1)
    top = ax.secondary_xaxis("top")
    labels = [f"{_ram_text(ram)}\n{tiers[0]}{''.join('+' + t.removeprefix('tier') for t in tiers[1:])}"
              for ram, tiers in limits.items()]
    top.set_xticks(list(limits), labels, fontsize=6)
    top.xaxis.set_minor_locator(NullLocator())
    top.tick_params(length=2)
    for label, colour in zip(top.get_xticklabels(), colours):
        label.set_color(colour)
    present = sorted({t for tiers in limits.values() for t in tiers}, key=tier_rank)
    return [Line2D([], [], color=TIER_COLOURS.get(t, "grey"), linestyle="--",
                   label=f"{t} device RAM ({TIERS.get(t, t)})") for t in present]


def _log2_ram_axis(ax: Axes, values: Sequence[float]) -> None:
    """Log-2 RAM axis with plain MB tick labels at powers of two (256, 512, 1024 ...)."""
    lo, hi = min(values) / 1.35, max(values) * 1.35
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ticks = [2.0 ** k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)
             if lo <= 2.0 ** k <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:,.0f}" for t in ticks])


def latency_heatmap(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]],
                    out_dir: Path) -> list[Path]:
    """Model x device heatmap of predicted latency (``heatmap_figure``); returns PNG and PDF."""
    if not rows:
        return []
    with _paper_style():
        return _save(heatmap_figure(rows, profiles), out_dir, HEATMAP)


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


def heatmap_figure(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]]) -> Figure:
    """Model x device heatmap of predicted latency, devices in tier order.

    Colour is log latency (models and phones span ms to seconds). A pair where the model does
    not fit in RAM is hatched and says why (``OOM``, ``thrashing``, ``timeout``): its predicted
    latency is not a latency anyone would observe. Each value carries its predictor's mark.
    """
    devices = ordered_devices(rows, profiles)
    groups = group_by_model(rows, profiles)
    col = {d.device.profile_id: j for j, d in enumerate(devices)}
    values = np.full((len(groups), len(devices)), np.nan)
    for i, group in enumerate(groups.values()):
        for row in group:
            if cells(row).is_number:
                values[i, col[row.device.profile_id]] = row.latency.ms
    finite = values[np.isfinite(values)]
    vmin, vmax = (finite.min(), finite.max()) if finite.size else (1.0, 10.0)
    if vmax <= vmin * 1.01:
        vmin, vmax = vmin / 1.5, vmax * 1.5
    norm, cmap = LogNorm(vmin=vmin, vmax=vmax), matplotlib.colormaps["YlOrRd"]
    with _paper_style():
        width = min(max(4.5, 0.42 * len(devices) + 2.4), 12.0)
        fig = Figure(figsize=(width, max(2.4, 0.42 * len(groups) + 2.3)), layout="constrained")
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
        planned = {(i, col[r.device.profile_id]) for i, group in enumerate(groups.values()) for r in group}
        for i, j in np.ndindex(values.shape):
            if (i, j) not in planned:
                ax.text(j, i, "\u2014", ha="center", va="center", fontsize=6.5, color="#aaaaaa")
        for i, group in enumerate(groups.values()):
            for row in group:
                j, c = col[row.device.profile_id], cells(row)
                if c.is_number and row.latency.ms is not None:
                    rgba = cmap(norm(row.latency.ms))
                    dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5
                    text = f"{row.latency.ms:,.0f}" if row.latency.ms >= 100 else f"{row.latency.ms:.1f}"
                    ax.text(j, i, text + c.mark, ha="center", va="center", fontsize=6.5,
                            color="white" if dark else "black")
                    continue
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#eeeeee",
                                       hatch="///" if c.fits is False else None,
                                       edgecolor="#999999", linewidth=0))
                ax.text(j, i, c.latency, ha="center", va="center", fontsize=6.5 if len(c.latency) < 6 else 5.5,
                        fontweight="bold",
                        color="#b2182b" if c.fits is False else "#555555",
                        bbox={"facecolor": "#eeeeee", "edgecolor": "none", "pad": 0.6})
        ax.set_yticks(range(len(groups)), list(groups))
        ax.set_xticks(range(len(devices)), [f"{d.device.label} \u00b7 {_ram_text(d.device.ram_mb)}" for d in devices],
                      rotation=40, ha="right", rotation_mode="anchor")
        ax.tick_params(length=0)
        tiers = [d.device.tier for d in devices]
        bounds = [j for j in range(1, len(tiers)) if tiers[j] != tiers[j - 1]]
        for j in bounds:
            ax.axvline(j - 0.5, color="black", linewidth=1.5)
        top = ax.secondary_xaxis("top")
        starts, ends = [0] + bounds, bounds + [len(tiers)]
        top.set_xticks([(s + e - 1) / 2 for s, e in zip(starts, ends)],
                       [tiers[s] if e - s < 3 else f"{tiers[s]}: {TIERS.get(tiers[s], '')}"
                        for s, e in zip(starts, ends)])
        top.tick_params(length=0)
        ax.set_title("Predicted latency per device (ms)", loc="left", pad=14)
        notes = ["value = predicted latency; \u00b1 its held-out error (leave-one-SoC-out) per predictor:"]
        notes += [f"  {n.text()}" for n in mark_notes(row_cell(r) for r in rows)]
        if any(not cells(r).is_number and r.fits is False for r in rows):
            notes.append("hatched: does not fit in the device's RAM")
        wrapped = [line for note in notes for line in textwrap.wrap(note, width=int(19 * width))]
        fig.supxlabel("\n".join(wrapped), x=0.01, ha="left", fontsize=6)  # laid out, never clipped
        if finite.size:
            # the bar's name above it, short: a label along the bar was cut off on a one-model figure
            bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.01)
            bar.ax.set_title("ms\n(log)", fontsize=6.5, loc="left")
            ticks, labels = colourbar_ticks(vmin, vmax)  # plain "1,000" reads faster than 10^3 for ms
            bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
            bar.ax.yaxis.set_major_formatter(FixedFormatter(labels))
            bar.ax.yaxis.set_minor_locator(NullLocator())
        return fig


def min_ram_bar(rows: Sequence[PairResult], out_dir: Path) -> list[Path]:
    """Minimum RAM per model (``--find-floor``) as bars against every device RAM limit.

    Writes nothing and returns ``[]`` when no row has ``min_ram_mb``, so callers need not check.
    """
    floors: dict[str, float] = {}
    for row in rows:
        if row.memory.min_ram_mb is not None:
            floors[row.model.label] = max(floors.get(row.model.label, 0.0), row.memory.min_ram_mb)
    if not floors:
        return []
    with _paper_style():
        return _save(min_ram_figure(floors, _tier_limits(rows)), out_dir, MIN_RAM)


def min_ram_figure(floors: dict[str, float], limits: dict[int, list[str]]) -> Figure:
    """Bars of each model's minimum RAM (MB) from the axis edge, device RAM sizes as lines."""
    with _paper_style():
        fig = Figure(figsize=(6.8, max(2.2, 0.35 * len(floors) + 1.6)), layout="constrained")
        ax = fig.add_subplot()
        labels = list(floors)[::-1]
        _log2_ram_axis(ax, list(floors.values()) + list(limits))
        left = ax.get_xlim()[0]  # bars grow from the axis edge: a log axis has no zero
        bars = ax.barh(labels, [floors[m] - left for m in labels], left=left, color="#4C72B0",
                       height=0.55, zorder=2)
        ax.bar_label(bars, labels=[_ram_text(floors[m]) for m in labels], padding=3, fontsize=7)
        limit_handles = _draw_limits(ax, limits)
        ax.set_xlabel("minimum RAM the model runs in (MB, measured with --find-floor)")
        ax.set_title("Minimum RAM per model", loc="left")
        fig.legend(handles=limit_handles, loc="outside lower center", frameon=False, ncols=2)
        return fig
