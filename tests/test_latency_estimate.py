"""One prediction, made once: the cost model's ``Estimate``, the numeric uncertainty band, and the
compute/memory parts a calibration scales (issue 20 item 1, issue 22 item 3's data side).

Real components throughout: the shipped estimator parameters, zoo models exported with the
worker's own exporter, the real runner row and CSV writer.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import kinds_only

from lodevem.latency.calibration import CalibrationRecord, CalibrationSet, CalibrationStore, now_iso
from lodevem.latency.estimator import Estimator, work_vector
from lodevem.latency.kernels import extract_kernels
from lodevem.measure import MemoryMeasurement
from lodevem.predict import LatencyPrediction
from lodevem.profiles import Cluster, Profile, load_profiles
from lodevem.report.files import write_csv
from lodevem.results import MeasuredModel, ModelFile, PeakMemory, SandboxFacts, pair_result


@pytest.fixture(scope="module")
def onnx(zoo_onnx) -> dict[str, Path]:
    return {name: zoo_onnx(name) for name in ("mobilenet_v2", "resnet18")}


def profile(core: str, clock: float, pid: str, count: int = 4) -> Profile:
    return Profile(id=pid, name=pid, label=pid, tier="tier1", chipset="test", ram_mb=2048, sources=["test"],
                   cpu=[Cluster(core=core, count=count, clock_ghz=clock)])


def test_the_estimate_is_the_sum_of_its_kernels_at_their_own_arithmetic(onnx: dict[str, Path]) -> None:
    """One pass per graph gives what the per-kernel calls give, split into compute and memory."""
    est = Estimator.load()
    graph = extract_kernels(onnx["mobilenet_v2"])
    works = [work_vector(k) for k in graph.kernels]
    arithmetic = ["int8" if k.category == "fc" else "fp32" for k in graph.kernels]
    estimate = est.estimate(works, arithmetic, "Cortex-A55", 1.8, "ncnn", threads=2, cluster_cores=4, noted=("int8",))
    for work, precision, kernel, source in zip(works, arithmetic, estimate.kernels, graph.kernels):
        assert kernel.ms == pytest.approx(est.latency_ms(work, "Cortex-A55", 1.8, "ncnn", precision, 2, 4))
        assert kernel.memory_ms > 0 and kernel.arithmetic == {"fp32": "fp16"}.get(precision, precision)  # ncnn: fp16
        assert kernel.compute_ms > 0 if source.category.endswith("conv") else kernel.compute_ms >= 0
    assert estimate.ms == pytest.approx(estimate.compute_ms + estimate.memory_ms)
    assert estimate.arithmetic == "int8" and estimate.figure is not None
    assert f"±{estimate.figure.mape_pct:.1f}%" in estimate.uncertainty
    with pytest.raises(ValueError):  # one arithmetic per kernel, no silent truncation
        est.estimate(works, arithmetic[:-1], "Cortex-A55", 1.8)


def test_every_cell_states_its_uncertainty_as_numbers(onnx: dict[str, Path]) -> None:
    """latency_low_ms / latency_high_ms are the ± band the text states, from the figure of the
    cell's own kind for its own runtime: A7 keeps its own ncnn figure, its tflite cell the pooled one."""
    est = Estimator.load()
    a7 = profile("Cortex-A7", 1.3, "a7")
    for runtime in ("tflite", "ncnn"):
        cell = kinds_only("estimator", runtime=runtime).cells(onnx["resnet18"], [a7])["a7"]
        figure = est.uncertainty_figure("Cortex-A7", runtime, 1, "fp32")
        assert figure is not None and cell.uncertainty_pct == figure.mape_pct
        assert cell.latency_low_ms == pytest.approx(cell.latency_ms * (1 - figure.mape_pct / 100))
        assert cell.latency_high_ms == pytest.approx(cell.latency_ms * (1 + figure.mape_pct / 100))
        assert f"±{figure.mape_pct:.1f}%" in cell.uncertainty
        assert (figure.scope == "Cortex-A7") == (runtime == "ncnn")  # A7's own ncnn rows; tflite pooled
    bad = onnx["resnet18"].with_name("bad.onnx")
    bad.write_bytes(b"not onnx")
    none = kinds_only("estimator").cells(bad, [a7])["a7"]
    assert none.latency_ms is None and (none.latency_low_ms, none.latency_high_ms) == (None, None)


def test_the_row_and_csv_carry_the_band(onnx: dict[str, Path], tmp_path: Path) -> None:
    jiophone = next(p for p in load_profiles() if p.id == "jiophone2")
    cell = kinds_only("estimator").cells(onnx["mobilenet_v2"], [jiophone])["jiophone2"]
    memory = MemoryMeasurement(verdict="error", limit_mb=512, runtime="torch", threads=1, peak=PeakMemory(),
                               error="not measured in this test", model=MeasuredModel("0" * 64),
                               sandbox=SandboxFacts(backend="process", limit_enforcement="", image_id="",
                                                    worker_version="", wall_s=0.0))
    model = ModelFile.from_path(onnx["mobilenet_v2"], "mobilenet_v2.onnx")
    row = pair_result(model, jiophone, cell, memory, threads=1)
    assert (row.latency.band.low_ms, row.latency.band.high_ms) == (cell.latency_low_ms, cell.latency_high_ms)
    assert row.latency.band.low_ms < row.latency.ms < row.latency.band.high_ms
    with open(write_csv([row], tmp_path / "results.csv"), newline="") as f:
        read = next(csv.DictReader(f))
    assert float(read["latency_low_ms"]) == pytest.approx(row.latency.band.low_ms, rel=1e-3)
    assert float(read["latency_high_ms"]) == pytest.approx(row.latency.band.high_ms, rel=1e-3)


def test_calibration_scales_the_parts_of_the_estimate(onnx: dict[str, Path], tmp_path: Path) -> None:
    """The record keeps the cell's own compute/memory split (runtime factors applied), and the
    calibrated cell's band is the one-shot calibration error's."""
    a53 = profile("Cortex-A53", 2.0, "a53")
    predictor = kinds_only("estimator", runtime="ncnn")
    cells = {n: predictor.cells(p, [a53])["a53"] for n, p in onnx.items()}
    for cell in cells.values():
        assert cell.compute_ms + cell.memory_ms == pytest.approx(cell.latency_ms)
        assert 0 < cell.compute_share < 1 and cell.graph_sha256
    # a dense-conv net is more compute-bound than a depthwise one
    assert cells["resnet18"].compute_share > cells["mobilenet_v2"].compute_share
    resnet = cells["resnet18"]
    store = CalibrationStore(tmp_path / "cal")
    store.add(CalibrationRecord(profile_id="a53", model_label="resnet18", model_sha256="x", graph_sha256=resnet.graph_sha256,
                                measured_ms=resnet.latency_ms * 1.25, runtime="ncnn", threads=1, date=now_iso(),
                                note="", predicted_ms=resnet.latency_ms, compute_ms=resnet.compute_ms,
                                memory_ms=resnet.memory_ms, predictor=resnet.latency_source, measured_by="test"))
    calibrated = CalibrationSet(tmp_path / "cal").apply(resnet, a53, predictor.pool.estimator)
    assert calibrated.latency_ms == pytest.approx(resnet.latency_ms * 1.25)
    assert calibrated.compute_ms + calibrated.memory_ms == pytest.approx(calibrated.latency_ms)
    assert "this model is a calibration model" in calibrated.note
    oneshot = predictor.pool.estimator.params["uncertainty"]["oneshot_mape_pct"]
    assert calibrated.uncertainty_pct == oneshot
    assert calibrated.latency_high_ms == pytest.approx(calibrated.latency_ms * (1 + oneshot / 100))
    assert isinstance(LatencyPrediction.from_dict(calibrated.to_dict()), LatencyPrediction)
