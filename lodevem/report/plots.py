"""The latency heatmap (model x device) and the minimum-RAM bars (``--find-floor``).

Their common style, files and axes are ``report.figure_kit``'s, shared with the other figures.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

from ..profiles import TIERS, Profile
from ..results import PairResult
from .cells import HEATMAP, MIN_RAM, cells, group_by_model, ordered_devices
from .figure_kit import colourbar_ticks, draw_ram_limits, log2_ram_axis, paper_style, ram_text, save_figure, tier_limits
from .legend import mark_notes, row_cell


def latency_heatmap(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]],
                    out_dir: Path) -> list[Path]:
    """Model x device heatmap of predicted latency (``heatmap_figure``); returns PNG and PDF."""
    if not rows:
        return []
    with paper_style():
        return save_figure(heatmap_figure(rows, profiles), out_dir, HEATMAP)


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
    with paper_style():
        width = min(max(4.5, 0.42 * len(devices) + 2.4), 12.0)
        fig = Figure(figsize=(width, max(2.4, 0.42 * len(groups) + 2.3)), layout="constrained")
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
        _heatmap_cells(ax, list(groups.values()), col, values.shape, lambda ms: cmap(norm(ms)))
        ax.set_yticks(range(len(groups)), list(groups))
        ax.set_xticks(range(len(devices)), [f"{d.device.label} \u00b7 {ram_text(d.device.ram_mb)}" for d in devices],
                      rotation=40, ha="right", rotation_mode="anchor")
        ax.tick_params(length=0)
        _tier_bands(ax, [d.device.tier for d in devices])
        ax.set_title("Predicted latency per device (ms)", loc="left", pad=14)
        fig.supxlabel(_heatmap_notes(rows, width), x=0.01, ha="left", fontsize=6)  # laid out, never clipped
        if finite.size:
            _latency_colour_bar(fig, ax, image, vmin, vmax)
        return fig


def _heatmap_cells(ax: Axes, groups: list[list[PairResult]], col: dict[str, int], shape: tuple[int, ...],
                   colour: Callable[[float], Any]) -> None:
    """Each cell's text: a dash where no row was planned, the latency with its predictor's mark
    (white on dark colours), or, on grey, why there is none (hatched when it did not fit)."""
    planned = {(i, col[r.device.profile_id]) for i, group in enumerate(groups) for r in group}
    for i, j in np.ndindex(shape):
        if (i, j) not in planned:
            ax.text(j, i, "\u2014", ha="center", va="center", fontsize=6.5, color="#aaaaaa")
    for i, group in enumerate(groups):
        for row in group:
            j, c = col[row.device.profile_id], cells(row)
            if c.is_number and row.latency.ms is not None:
                rgba = colour(row.latency.ms)
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


def _tier_bands(ax: Axes, tiers: list[str]) -> None:
    """A line between the columns of two tiers, and each tier's name (with its description
    when it spans three columns or more) on a top axis over its columns."""
    bounds = [j for j in range(1, len(tiers)) if tiers[j] != tiers[j - 1]]
    for j in bounds:
        ax.axvline(j - 0.5, color="black", linewidth=1.5)
    top = ax.secondary_xaxis("top")
    starts, ends = [0] + bounds, bounds + [len(tiers)]
    top.set_xticks([(s + e - 1) / 2 for s, e in zip(starts, ends)],
                   [tiers[s] if e - s < 3 else f"{tiers[s]}: {TIERS.get(tiers[s], '')}"
                    for s, e in zip(starts, ends)])
    top.tick_params(length=0)


def _heatmap_notes(rows: Sequence[PairResult], width: float) -> str:
    """The caption under the heatmap: what a value is, each predictor mark's held-out error, and
    what hatching means when a cell is hatched; wrapped to the figure's width."""
    notes = ["value = predicted latency; \u00b1 its held-out error (leave-one-SoC-out) per predictor:"]
    notes += [f"  {n.text()}" for n in mark_notes(row_cell(r) for r in rows)]
    if any(not cells(r).is_number and r.fits is False for r in rows):
        notes.append("hatched: does not fit in the device's RAM")
    return "\n".join(line for note in notes for line in textwrap.wrap(note, width=int(19 * width)))


def _latency_colour_bar(fig: Figure, ax: Axes, image: Any, vmin: float, vmax: float) -> None:
    """The colour bar, its name above it, short (a label along the bar was cut off on a
    one-model figure), ticked in plain ms ("1,000" reads faster than 10^3)."""
    bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.01)
    bar.ax.set_title("ms\n(log)", fontsize=6.5, loc="left")
    ticks, labels = colourbar_ticks(vmin, vmax)
    bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
    bar.ax.yaxis.set_major_formatter(FixedFormatter(labels))
    bar.ax.yaxis.set_minor_locator(NullLocator())


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
    with paper_style():
        return save_figure(min_ram_figure(floors, tier_limits(rows)), out_dir, MIN_RAM)


def min_ram_figure(floors: dict[str, float], limits: dict[int, list[str]]) -> Figure:
    """Bars of each model's minimum RAM (MB) from the axis edge, device RAM sizes as lines."""
    with paper_style():
        fig = Figure(figsize=(6.8, max(2.2, 0.35 * len(floors) + 1.6)), layout="constrained")
        ax = fig.add_subplot()
        labels = list(floors)[::-1]
        log2_ram_axis(ax, list(floors.values()) + list(limits))
        left = ax.get_xlim()[0]  # bars grow from the axis edge: a log axis has no zero
        bars = ax.barh(labels, [floors[m] - left for m in labels], left=left, color="#4C72B0",
                       height=0.55, zorder=2)
        ax.bar_label(bars, labels=[ram_text(floors[m]) for m in labels], padding=3, fontsize=7)
        limit_handles = draw_ram_limits(ax, limits)
        ax.set_xlabel("minimum RAM the model runs in (MB, measured with --find-floor)")
        ax.set_title("Minimum RAM per model", loc="left")
        fig.legend(handles=limit_handles, loc="outside lower center", frameon=False, ncols=2)
        return fig
