"""The accuracy trade-off figure (``--eval-data``): top-1 against predicted latency and against
measured peak RAM, one row of two panels per device, the Pareto front of each panel marked.

Why per device: latency differs per device (its core) and so does what fits (its RAM), so "which
variant to ship" is a per-phone question. A point is on the Pareto front when no other point of
the panel is at least as accurate and at least as fast (small) with one of the two strictly
better: the variants worth considering; every other point is beaten on both axes by one of them.
Only rows that ran (fits or tight) and have a top-1 are drawn; the rest have no point to place.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from matplotlib.figure import Figure

from ..profiles import Profile
from ..results import PairResult
from .cells import ACCURACY, group_by_model, ordered_devices

MAX_DEVICES = 8  # more devices than this make a figure no page holds; the first eight in tier order


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (lower x and higher y are better), in x order."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox <= x and oy >= y) and (ox < x or oy > y) for j, (ox, oy) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1]))


def _latency(row: PairResult) -> Optional[float]:
    return row.latency.ms


def _peak(row: PairResult) -> Optional[float]:
    return row.memory.peak_rss_mb


def accuracy_figure(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]]) -> Optional[Figure]:
    """None when no row has both an accuracy and a figure to plot it against."""
    drawable = [r for r in rows if r.accuracy.top1_pct is not None and r.ran]
    if not drawable:
        return None
    devices = [d for d in ordered_devices(rows, profiles)
               if any(r.device.profile_id == d.device.profile_id for r in drawable)]
    devices = devices[:MAX_DEVICES]
    labels = list(group_by_model(rows, profiles))
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    fig = Figure(figsize=(7.0, 1.2 + 2.2 * len(devices)), layout="constrained")
    axes = fig.subplots(len(devices), 2, squeeze=False)
    for d, device in enumerate(devices):
        mine = [r for r in drawable if r.device.profile_id == device.device.profile_id]
        for c, (figure, unit) in enumerate(((_latency, "predicted latency (ms)"), (_peak, "peak RAM (MB)"))):
            ax = axes[d][c]
            placed = [(r, figure(r)) for r in mine if figure(r) is not None]
            points = [(float(v), float(r.accuracy.top1_pct)) for r, v in placed]  # type: ignore[arg-type]
            front = pareto_front(points)
            for i, (row, _) in enumerate(placed):
                ax.scatter(*points[i], s=28, color=colours[row.model.label], zorder=3,
                           edgecolors="black" if i in front else "none", linewidths=1.0)
            if len(front) > 1:
                ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="0.4", lw=0.8, ls="--",
                        zorder=2, drawstyle="steps-post")
            ax.set_xlabel(unit)
            ax.set_ylabel("top-1 (%)")
            ax.set_title(f"{device.device.label} ({device.device.tier})", loc="left")
            ax.grid(True, lw=0.3, alpha=0.5)
    handles = [axes[0][0].scatter([], [], s=28, color=colours[label], label=label) for label in labels
               if any(r.model.label == label for r in drawable)]
    handles.append(axes[0][0].scatter([], [], s=28, color="white", edgecolors="black", label="on the Pareto front"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), frameon=False)
    samples = sorted({r.accuracy.samples for r in drawable if r.accuracy.samples})
    fig.suptitle(f"Accuracy trade-off: top-1 on {', '.join(map(str, samples))} --eval-data samples under each "
                 "row's runtime", fontsize=9)
    return fig


def accuracy_tradeoff(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]], out_dir: Path) -> list[Path]:
    """``accuracy_tradeoff.png`` / ``.pdf``; nothing when no row has an accuracy to draw."""
    from .figure_kit import paper_style, save_figure

    with paper_style():
        fig = accuracy_figure(rows, profiles)
        return save_figure(fig, out_dir, ACCURACY) if fig is not None else []
