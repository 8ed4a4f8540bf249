"""Each figure rendered and read back from its matplotlib objects: tick labels distinct and
readable, every point nameable by its legends, no point hidden under another.

The data is the issue's: five models on the six tier2 phones, three of them (a whole module, its
checkpoint and its state_dict) with identical latency and peak RAM; and a heatmap whose latencies
span 14.0-14.4 ms, where the colour bar used to print "14, 14, 14". No Docker, no torch.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from helpers import with_columns
from matplotlib.figure import Figure
from test_reporter import make_row

from lodevem.profiles import Profile, load_profiles, select_profiles
from lodevem.report.figure_kit import colourbar_ticks
from lodevem.report.plots import heatmap_figure, latency_heatmap, min_ram_figure
from lodevem.report.scatter import latency_vs_ram, scatter_figure
from lodevem.results import PairResult

TIER2_MS = {"itel_a23_pro": 14.4, "itel_p37": 12.0, "nokia_c1": 48.9, "redmi_a1": 14.2,
            "samsung_a03_core": 12.1, "tecno_pop5_go": 14.5}
MODELS = (("cocoa_fp32.pt", 1.0, 237.8), ("cocoa_ckpt.pt", 1.0, 237.8), ("cocoa_weights.pt", 1.0, 237.8),
          ("cocoa_int8_fx.pt", 0.59, 244.9), ("script_net.pt", 0.23, 230.0))


@pytest.fixture(scope="module")
def tier2() -> list[Profile]:
    return select_profiles(load_profiles(), tiers=["tier2"])


@pytest.fixture(scope="module")
def rows(tier2: list[Profile]) -> list[PairResult]:
    made = [make_row(p, model=m, latency=TIER2_MS[p.id] * scale, peak=peak) for m, scale, peak in MODELS for p in tier2]
    # one pair that did not fit, drawn at its device's RAM
    return made + [make_row(tier2[0], model="big.pt", verdict="oom", peak=None, latency=300.0)]


def drawn(fig: Figure) -> Figure:
    fig.canvas.draw()  # tick labels and positions are final only after a draw
    return fig


def labels(texts) -> list[str]:
    return [t.get_text() for t in texts if t.get_text()]


@pytest.mark.parametrize("vmin, vmax", [(14.0, 14.4), (14.2, 14.9), (9.5, 10.4), (2.4, 48.9), (3.1, 2480.0),
                                        (0.4, 90_000.0), (14.0 / 1.5, 14.0 * 1.5), (1.0, 1.02)])
def test_colourbar_ticks_are_distinct_and_inside(vmin: float, vmax: float) -> None:
    ticks, text = colourbar_ticks(vmin, vmax)
    assert 3 <= len(ticks) <= 8 and len(set(text)) == len(text) == len(ticks)
    assert all(vmin <= t <= vmax for t in ticks) and ticks == sorted(ticks)
    assert all(len(t) <= 8 for t in text)  # "14.2", "1,000": no 14.4296...


def test_heatmap_colour_bar_has_unique_ticks(rows: list[PairResult], tier2: list[Profile]) -> None:
    narrow = [with_columns(r, latency_ms=14.0 + 0.1 * i) for i, r in enumerate(r for r in rows
                                                                           if r.model.label == "cocoa_fp32.pt")]
    for data in (rows, narrow[:5]):
        fig = drawn(heatmap_figure(data, tier2))
        main, bar = fig.axes[0], next(a for a in fig.axes if "(log)" in a.get_title(loc="left"))
        bar_text = labels(bar.get_yticklabels())
        assert len(bar_text) >= 3 and len(set(bar_text)) == len(bar_text), bar_text
        assert labels(bar.yaxis.get_minorticklabels()) == []
        low, high = bar.get_ylim()
        assert all(low * (1 - 1e-9) <= t <= high * (1 + 1e-9) for t in bar.get_yticks())
        models = list(dict.fromkeys(r.model.label for r in data))
        assert labels(main.get_yticklabels()) == models
        devices = {r.device.label for r in data}
        assert {t.split(" \u00b7 ")[0] for t in labels(main.get_xticklabels())} == devices
    assert labels(fig.axes[0].get_yticklabels()) == ["cocoa_fp32.pt"]
    assert [float(t) for t in labels(bar.get_yticklabels())] == pytest.approx([14.0, 14.1, 14.3, 14.4])


def test_scatter_names_every_point_and_hides_none(rows: list[PairResult], tier2: list[Profile]) -> None:
    fig = drawn(scatter_figure(rows, tier2))
    ax = fig.axes[0]
    legend_text = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    models = list(dict.fromkeys(r.model.label for r in rows))
    assert set(models) <= legend_text
    assert {f"{p.label} ({p.tier}, {'512 MB' if p.ram_mb == 512 else f'{p.ram_mb // 1024} GB'})"
            for p in tier2} <= legend_text
    points = [c for c in ax.collections if c.get_gid()]
    assert all(c.get_gid().count("|") == 1 for c in points)
    gids = [c.get_gid() for c in points]
    assert len(gids) == len(set(gids)) == len(rows)  # one mark per (model, device), the OOM one too
    # every (model, device) has its own colour + shape pair, so the legends name each point
    style = {}
    for c in points:
        model, device = c.get_gid().split("|")
        style[(model, device)] = (tuple(np.round(c.get_facecolor()[0], 3)) if len(c.get_facecolor()) else None,
                                  tuple(np.round(c.get_edgecolor()[0], 3)), c.get_paths()[0].vertices.tobytes())
    assert len(set(style.values())) == len(style)
    # the three identical models are drawn side by side, not on top of each other
    where = {c.get_gid(): c.get_offset_transform().transform(c.get_offsets())[0] for c in points}
    for a, b in itertools.combinations(where, 2):
        assert np.hypot(*(where[a] - where[b])) >= 5.0, (a, b)  # pixels at the canvas's dpi
    assert "side by side" in ax.get_xlabel()
    # ... each group centred on its spot: the shifts (along x only) of a group add up to nothing,
    # so those of the whole figure do (the slots were once centred by another model's count)
    shifts = [where[f"{r.model.label}|{r.device.profile_id}"]
              - ax.transData.transform((r.memory.peak_rss_mb or r.memory.limit_mb, r.latency.ms)) for r in rows]
    assert max(abs(dx) for dx, _ in shifts) > 5 and sum(dx for dx, _ in shifts) == pytest.approx(0.0, abs=0.5)
    assert all(dy == pytest.approx(0.0, abs=0.5) for _, dy in shifts)
    y_text = labels(ax.get_yticklabels())
    assert len(y_text) >= 3 and len(set(y_text)) == len(y_text)
    assert labels(ax.yaxis.get_minorticklabels()) == []
    x_text = labels(ax.get_xticklabels())
    assert len(set(x_text)) == len(x_text) and "256" in x_text


def test_min_ram_figure_ticks_and_bar_labels() -> None:
    fig = drawn(min_ram_figure({"mobilenet_v2.pt": 300.0, "tiny_cnn.pt": 40.0}, {256: ["tier3"], 512: ["tier2", "tier3"]}))
    ax = fig.axes[0]
    x_text = labels(ax.get_xticklabels())
    assert len(set(x_text)) == len(x_text) >= 3
    assert labels(ax.get_yticklabels()) == ["tiny_cnn.pt", "mobilenet_v2.pt"]
    assert [t.get_text() for t in ax.texts] == ["40 MB", "300 MB"]


def test_figures_are_written(rows: list[PairResult], tier2: list[Profile], tmp_path: Path) -> None:
    written = latency_heatmap(rows, tier2, tmp_path) + latency_vs_ram(rows, tier2, tmp_path)
    assert sorted(p.name for p in written) == ["latency_heatmap.pdf", "latency_heatmap.png",
                                               "latency_vs_ram.pdf", "latency_vs_ram.png"]


def test_scatter_draws_budgets_and_bands_on_axes_fitted_to_them(tier2: list[Profile]) -> None:
    """The verdicts' app budgets are drawn, every latency has its band, and the RAM axis spans the
    points and the budgets, not the 2 GB phones' RAM far to the right of every point."""
    rows = [make_row(p, latency=10.0 * (i + 1), peak=60.0 + i, latency_low_ms=7.0 * (i + 1),
                     latency_high_ms=13.0 * (i + 1), app_budget_mb=p.app_budget_mb) for i, p in enumerate(tier2)]
    fig = drawn(scatter_figure(rows, tier2))
    ax = fig.axes[0]
    budgets = sorted({p.app_budget_mb for p in tier2})
    drawn_budgets = sorted(int(line.get_gid().split("|")[1]) for line in ax.lines
                           if (line.get_gid() or "").startswith("budget|"))
    assert drawn_budgets == budgets
    bands = {line.get_gid(): line.get_ydata() for line in ax.lines if (line.get_gid() or "").startswith("band|")}
    assert len(bands) == len(rows)
    assert all(list(y) == [7.0 * (i + 1), 13.0 * (i + 1)] for i, y in enumerate(bands.values()))
    lo, hi = ax.get_xlim()
    assert lo <= 60.0 and hi >= max(budgets) and hi < 2048  # no 2 GB line squeezing the points
    assert ax.get_ylim()[0] <= 7.0 and ax.get_ylim()[1] >= 13.0 * len(rows)
    legend_text = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    assert "prediction \u00b1 held-out error (leave-one-SoC-out)" in legend_text


@pytest.mark.parametrize("models", [1, 3])
def test_every_label_of_a_figure_is_inside_its_canvas(models: int, tier2: list[Profile]) -> None:
    """The heatmap's colour-bar name was cut off on a one-model figure: every text drawn (titles,
    tick labels, the bar's name, the legend under it) lies inside the canvas."""
    rows = [make_row(p, model=f"m{m}.pt", latency=TIER2_MS[p.id] * (m + 1)) for m in range(models) for p in tier2[:2]]
    for fig in (heatmap_figure(rows, tier2[:2]), scatter_figure(rows, tier2[:2])):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)  # the canvas savefig draws on, with its renderer
        drawn(fig)
        renderer = fig.canvas.get_renderer()
        canvas = fig.bbox
        texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent"))
                 if t.get_text() and t.get_visible()]
        assert texts
        for text in texts:
            box = text.get_window_extent(renderer)
            assert box.x0 >= canvas.x0 - 1 and box.x1 <= canvas.x1 + 1 and box.y0 >= canvas.y0 - 1 \
                and box.y1 <= canvas.y1 + 1, (text.get_text(), box, canvas)
