"""The latency vs peak RAM figure: every (model, device) a point, its latency band a bar, the app
budgets the verdicts compare with, and the device RAM sizes within the data's range.

Its style, files, RAM axis and device-RAM lines are ``report.figure_kit``'s, shared with the other
figures; what is this figure's own is the points (side by side where they would hide each other),
the app budgets and the sectioned legend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator
from matplotlib.transforms import ScaledTranslation

from ..profiles import Profile
from ..results import PairResult
from .cells import SCATTER, VERDICT_WORDS, group_by_model, ordered_devices
from .figure_kit import (
    DEVICE_MARKERS,
    colourbar_ticks,
    draw_ram_limits,
    log2_ram_axis,
    paper_style,
    ram_text,
    save_figure,
    tier_limits,
)

__all__ = ["latency_vs_ram", "scatter_figure"]


def latency_vs_ram(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]],
                   out_dir: Path) -> list[Path]:
    """Peak RAM against predicted latency per (model, device) (``scatter_figure``); PNG and PDF."""
    if not rows:
        return []
    with paper_style():
        return save_figure(scatter_figure(rows, profiles), out_dir, SCATTER)


@dataclass(frozen=True)
class _Point:
    model: int  # index into the model legend
    device: int  # index into the device legend
    x: float
    y: float
    ran: bool  # False: did not fit, drawn at the device's RAM
    low: Optional[float] = None  # the latency band (prediction ± held-out error), drawn as a bar
    high: Optional[float] = None


def _coinciding(points: Sequence[_Point], ax: Axes, near: tuple[float, float] = (0.02, 0.03)) -> list[list[int]]:
    """Groups of points that would hide each other: closer than ``near`` (fractions of the axes'
    width, height; about one marker at the figure's size) on the log axes. Greedy, in order."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()

    def where(p: _Point) -> tuple[float, float]:
        return (math.log(p.x / x0) / math.log(x1 / x0), math.log(p.y / y0) / math.log(y1 / y0))

    placed = [where(p) for p in points]
    groups: list[list[int]] = []
    for i, (u, v) in enumerate(placed):
        for group in groups:
            gu, gv = placed[group[0]]
            if abs(u - gu) < near[0] and abs(v - gv) < near[1]:
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def scatter_figure(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]]) -> Figure:
    """Peak RAM (x, measured) against predicted latency (y), with the app budgets the verdicts use
    and the device RAM sizes within the data's range; each latency with its band (± held-out error).

    One point per (model, device): colour = model, marker shape = device, each with its legend,
    so every point can be named. A pair that ran sits at its measured peak RSS; a pair that did
    not fit is a hollow marker at the device's limit (it needed more). Points that would hide
    each other (variants of one model often measure the same) are set side by side, a few points
    apart, and the caption says so: no model disappears under another.
    """
    limits = tier_limits(rows, profiles)
    devices = ordered_devices(rows, profiles)
    groups = group_by_model(rows, profiles)
    points = _points(list(groups.values()), {d.device.profile_id: j for j, d in enumerate(devices)})
    budgets = sorted({r.device.app_budget_mb for r in rows if r.device.app_budget_mb})
    # the axis spans the points and the app budgets (what the verdicts compare with); a device RAM
    # size is drawn only where it falls inside (2 GB phones must not squeeze points into a corner)
    spanned = [p.x for p in points] + [float(b) for b in budgets] or [float(m) for m in limits]
    limits = {ram: tiers for ram, tiers in limits.items() if ram <= max(spanned) * 1.35} or \
        ({} if budgets else limits)
    with paper_style():
        fig = Figure(figsize=(7.2, 4.8), layout="constrained")
        ax = fig.add_subplot()
        log2_ram_axis(ax, spanned + [float(m) for m in limits])
        _latency_axis(ax, [v for p in points for v in (p.y, p.low, p.high) if v] or [1.0, 10.0])
        models = list(groups)
        spread = _draw_points(ax, fig, points,
                              [f"{models[p.model]}|{devices[p.device].device.profile_id}" for p in points])
        line_handles = draw_ram_limits(ax, limits) if limits else []
        line_handles += _draw_budgets(ax, budgets)
        if any(p.low is not None for p in points):
            line_handles.append(Line2D([], [], color="#777777", linewidth=0.8,
                                       label="prediction \u00b1 held-out error (leave-one-SoC-out)"))
        caption = "peak RAM (MB, measured; hollow = did not fit, drawn at the device's RAM)"
        if spread > 1:
            caption += f"\npoints with the same values are drawn side by side (up to {spread} at one spot)"
        ax.set_xlabel(caption)
        ax.set_ylabel("predicted latency (ms)")
        ax.set_title("Latency vs peak RAM per model and device", loc="left")
        ax.grid(True, which="major", axis="y", linewidth=0.3, alpha=0.6)
        _legend(fig, models, devices, line_handles)
        return fig


def _points(groups: list[list[PairResult]], device_index: dict[str, int]) -> list[_Point]:
    """The points of the rows with a latency: at the measured peak when the pair ran, hollow at
    the device's limit when it did not fit; a row that is neither (an error) is not drawn."""
    points = []
    for k, group in enumerate(groups):
        for row in group:
            if row.latency.ms is None or not math.isfinite(row.latency.ms):
                continue
            band = (row.latency.band.low_ms, row.latency.band.high_ms)
            if row.memory.peak_rss_mb is not None and row.verdict not in VERDICT_WORDS:
                points.append(_Point(k, device_index[row.device.profile_id], row.memory.peak_rss_mb, row.latency.ms,
                                     True, *band))
            elif row.fits is False:
                points.append(_Point(k, device_index[row.device.profile_id], float(row.memory.limit_mb),
                                     row.latency.ms, False, *band))
    return points


def _latency_axis(ax: Axes, values: Sequence[float]) -> None:
    """A log latency axis over ``values`` with a margin, ticked in plain ms like the colour bar."""
    lo, hi = min(values) / 1.3, max(values) * 1.3
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ticks, labels = colourbar_ticks(lo, hi)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FixedFormatter(labels))
    ax.yaxis.set_minor_locator(NullLocator())


def _draw_points(ax: Axes, fig: Figure, points: Sequence[_Point], names: Sequence[str]) -> int:
    """Each point (named ``model|device`` for a reader of the figure) and its band; points that
    would hide each other set side by side, centred on their spot. Returns the most at one spot."""
    colours = matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]  # a ListedColormap
    spread = 0
    for cluster in _coinciding(points, ax):
        spread = max(spread, len(cluster))
        for slot, i in enumerate(sorted(cluster, key=lambda i: (points[i].model, points[i].device))):
            p = points[i]
            colour = colours[p.model % len(colours)]
            shift = ScaledTranslation((slot - (len(cluster) - 1) / 2) * 6.5 / 72, 0, fig.dpi_scale_trans)
            ax.scatter([p.x], [p.y], marker=DEVICE_MARKERS[p.device % len(DEVICE_MARKERS)], s=28,
                       facecolors=colour if p.ran else "none", edgecolors="black" if p.ran else colour,
                       linewidths=0.4 if p.ran else 1.1, zorder=3, transform=ax.transData + shift, gid=names[i])
            if p.low is not None and p.high is not None:  # the band: prediction ± held-out error
                ax.plot([p.x, p.x], [p.low, p.high], color=colour, linewidth=0.8, alpha=0.7, zorder=2,
                        transform=ax.transData + shift, gid=f"band|{names[i]}")
    return spread


def _draw_budgets(ax: Axes, budgets: Sequence[int]) -> list[Line2D]:
    """The app budgets, the verdicts' line (fits below it, tight above it); their legend entry."""
    for budget in budgets:
        ax.axvline(budget, color="#555555", linestyle=":", linewidth=0.9, zorder=1, gid=f"budget|{budget}")
        ax.text(budget, 0.99, f" {budget} MB", transform=ax.get_xaxis_transform(), rotation=90, va="top",
                ha="right", fontsize=5.5, color="#555555")
    return [Line2D([], [], color="#555555", linestyle=":", label="app budget of a device "
                   "(fits below, tight above)")] if budgets else []


def _legend(fig: Figure, models: Sequence[str], devices: Sequence[PairResult], line_handles: list[Line2D]) -> None:
    """One legend in the right column, a headed section each (model colours, device shapes, the
    lines): legends placed side by side at the bottom and the right overlapped once the lines'
    entries grew (budgets, bands)."""
    colours = matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]  # a ListedColormap
    model_handles = [Line2D([], [], color=colours[k % len(colours)], marker="o", linestyle="", label=label)
                     for k, label in enumerate(models)]
    device_handles = [Line2D([], [], color="#555555", marker=DEVICE_MARKERS[j % len(DEVICE_MARKERS)],
                             linestyle="", markerfacecolor="#bbbbbb",
                             label=f"{d.device.label} ({d.device.tier}, {ram_text(d.device.ram_mb)})")
                      for j, d in enumerate(devices)]
    sections = (("model (colour)", model_handles), ("device (shape)", device_handles), ("lines", line_handles))
    handles = [h for title, group in sections if group
               for h in (Line2D([], [], linestyle="", marker="", label=title), *group)]
    legend = fig.legend(handles=handles, loc="outside right upper", frameon=False, alignment="left",
                        handlelength=1.6)
    headers = {title for title, _ in sections}
    for text in legend.get_texts():
        if text.get_text() in headers:
            text.set_fontweight("bold")
