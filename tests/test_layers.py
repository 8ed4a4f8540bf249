"""Where the time goes (issue 44): every predicted latency split by node type, in the shape of
LiteRT's ``benchmark_model --enable_op_profiling`` "Summary by node type"; ``layers.csv`` and
report.html's section read it back escaped. Latencies come from the real estimator on real zoo
graphs, never typed in."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from helpers import kinds_only

from lodevem.latency.layers import LAYER_COLUMNS, node_type, summarize_layers
from lodevem.latency.records import KernelLatency
from lodevem.profiles import load_profiles
from lodevem.report.layers import LAYERS_NAME, layers_html, write_layers_csv


@pytest.fixture(scope="module")
def cells(zoo_onnx) -> dict[str, object]:
    predictor = kinds_only("estimator", breakdown=True)
    profile = next(p for p in load_profiles() if p.id == "tecno_pop6")
    out = {}
    for name in ("mobilenet_v2", "resnet18"):
        out[name] = predictor.cells(zoo_onnx(name), [profile], 1, None, runtime="tflite")[profile.id]
    return out


def test_the_summary_adds_up_to_the_prediction_largest_first(cells: dict[str, object]) -> None:
    for name, cell in cells.items():
        rows = summarize_layers(cell.kernels, cell.latency_ms)
        assert sum(r.ms for r in rows) == pytest.approx(cell.latency_ms, rel=1e-9)
        assert sum(r.count for r in rows) == len(cell.kernels)
        assert [r.ms for r in rows] == sorted((r.ms for r in rows), reverse=True)
        assert rows[-1].cum_pct == pytest.approx(100.0) and sum(r.pct for r in rows) == pytest.approx(100.0)
        assert rows[0].node_type == "CONV_2D", name  # convolutions dominate both
    types = {r.node_type for r in summarize_layers(cells["mobilenet_v2"].kernels)}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "FULLY_CONNECTED"} <= types
    assert "DEPTHWISE_CONV_2D" not in {r.node_type for r in summarize_layers(cells["resnet18"].kernels)}


def test_node_types_are_litert_names() -> None:
    assert node_type(KernelLatency("k", "dwconv-bn-relu", "depthwise_conv", None)) == "DEPTHWISE_CONV_2D"
    assert node_type(KernelLatency("k", "maxpool", "pool", None)) == "MAX_POOL_2D"
    assert node_type(KernelLatency("k", "hswish", "elementwise", None)) == "HARD_SWISH"


def test_csv_and_html_section_escape_what_they_show(cells: dict[str, object], tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    path = write_layers_csv(tmp_path / LAYERS_NAME, [(hostile, "tecno_pop6", cells["resnet18"]),
                                                     ("=cmd()", "tecno_pop6", cells["mobilenet_v2"])])
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert tuple(rows[0]) == LAYER_COLUMNS and {r["model"] for r in rows} == {hostile, "'=cmd()"}
    page = layers_html(tmp_path)
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "CONV_2D" in page
    assert "No per-layer figures" in layers_html(tmp_path / "nowhere")
    assert write_layers_csv(tmp_path / "none.csv", [("m", "p", None)]) is None
