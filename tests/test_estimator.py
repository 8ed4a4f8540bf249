"""The offline latency estimator: its shipped parameters, its maths, and the fit that makes them.

No ONNX export is needed here: kernels are built directly, and the fit is checked on synthetic
latencies generated from known parameters (the real fit runs in ``scripts/fit_estimator.py``).
"""

from __future__ import annotations

import json
import sys
from typing import Optional
from pathlib import Path

import numpy as np
import pytest

from lodevem.errors import InputError
from lodevem.latency.estimator import DEFAULT_PARAMS, TERMS, Estimator, sum_work, work_vector
from lodevem.latency.kernels import Kernel
from lodevem.profiles import CORE_TYPES

REPO = Path(__file__).resolve().parents[1]


def conv(macs: int, ks: int = 1, stride: int = 1, category: str = "pointwise_conv", elems: int = 50_000) -> Kernel:
    return Kernel(index=0, name="conv#0", op="conv-relu", nnmeter_type="conv-bn-relu", features=None,
                  category=category, macs=macs, params=macs // 100, input_elems=elems, output_elems=elems,
                  input_hw=28, cin=64, cout=64, kernel_size=ks, stride=stride)


ELTWISE = Kernel(index=1, name="add#1", op="add", nnmeter_type="add", features=(28.0, 64.0, 64.0),
                 category="elementwise", macs=0, params=0, input_elems=100_352, output_elems=50_176,
                 input_hw=28, cin=64, cout=64, kernel_size=1, stride=1)


@pytest.fixture(scope="module")
def est() -> Estimator:
    return Estimator.load()


def test_params_file_has_provenance_and_every_core(est: Estimator) -> None:
    params = json.loads(DEFAULT_PARAMS.read_text())
    prov = params["provenance"]
    for key in ("fit_date", "script", "data_file", "data_sha256", "rows_used", "rows_excluded", "model_map"):
        assert key in prov, key
    assert prov["script"] == "scripts/fit_estimator.py"
    assert set(params["cores"]) == set(CORE_TYPES)
    assert all(params["terms"][t]["cycles_per_unit"] >= 0 for t in TERMS)
    a75 = params["cores"]["Cortex-A75"]
    assert a75["derived"] and "Arm" in a75["source"]
    assert params["uncertainty"]["lodo_mape_pct"] > 0
    assert params["fp16_speedup"]["value"] > 0
    assert est.version == "v1"


def latency_ms(est: Estimator, kernels: list[Kernel], core: str, clock_ghz: float, threads: int = 1,
               cluster_cores: Optional[int] = None) -> float:
    """Whole-model fp32 latency the way the predictor sums it: kernels, then the thread speedup."""
    total = sum(est.work_ms(work_vector(k), core, clock_ghz) for k in kernels)
    return total / est.thread_speedup(core, threads, cluster_cores)


def kernel_ms(est: Estimator, kernel: Kernel, core: str, clock_ghz: float) -> float:
    return est.work_ms(work_vector(kernel), core, clock_ghz)


def test_monotone_in_clock(est: Estimator) -> None:
    kernels = [conv(10_000_000), ELTWISE]
    for core in CORE_TYPES:
        times = [latency_ms(est, kernels, core, f) for f in (0.8, 1.2, 1.6, 2.0, 2.4)]
        assert all(a > b for a, b in zip(times, times[1:])), core


def test_monotone_in_work(est: Estimator) -> None:
    for category, ks, stride in (("pointwise_conv", 1, 1), ("dense_conv", 3, 1), ("dense_conv", 3, 2),
                                 ("depthwise_conv", 3, 1)):
        small, big = conv(1_000_000, ks, stride, category), conv(8_000_000, ks, stride, category)
        for core in CORE_TYPES:
            assert kernel_ms(est, big, core, 1.8) > kernel_ms(est, small, core, 1.8), (category, core)
    # More kernels = more work = more time.
    assert latency_ms(est, [conv(10**6)] * 3, "Cortex-A53", 2.0) > latency_ms(est, [conv(10**6)] * 2, "Cortex-A53", 2.0)


def test_deterministic() -> None:
    kernels = [conv(3_000_000), ELTWISE, conv(9_000_000, 3, 1, "dense_conv")]
    a = [latency_ms(Estimator.load(), kernels, c, 1.5, threads=2, cluster_cores=4) for c in CORE_TYPES]
    b = [latency_ms(Estimator.load(), kernels, c, 1.5, threads=2, cluster_cores=4) for c in CORE_TYPES]
    assert a == b


def test_unknown_core_is_a_clear_error(est: Estimator) -> None:
    with pytest.raises(InputError, match=r"no parameters for core 'Cortex-A78'.*Cortex-A53"):
        kernel_ms(est, conv(10**6), "Cortex-A78", 2.0)
    with pytest.raises(InputError, match="positive"):
        kernel_ms(est, conv(10**6), "Cortex-A53", 0.0)


def test_threads_speed_up_and_are_capped_by_cluster(est: Estimator) -> None:
    for core in CORE_TYPES:
        s1, s2, s4 = (est.thread_speedup(core, n) for n in (1, 2, 4))
        assert s1 == 1.0 and 1.0 < s2 < s4 <= 4.0
        assert est.thread_speedup(core, 4, cluster_cores=2) == s2
    with pytest.raises(InputError):
        est.thread_speedup("Cortex-A53", 0)


def test_transfer_ratio_and_int8(est: Estimator) -> None:
    work = work_vector(conv(5_000_000))
    assert est.transfer_ratio(work, "Cortex-A76", 2.42, "Cortex-A76", 2.42) == pytest.approx(1.0)
    # A slower core at a lower clock takes longer than nn-Meter's Pixel 4 A76.
    assert est.transfer_ratio(work, "Cortex-A53", 1.3, "Cortex-A76", 2.42) > 1.0
    assert all(est.int8_speedup(c) > 0 for c in CORE_TYPES)


def test_uncertainty_names_derived_cores(est: Estimator) -> None:
    assert est.uncertainty("Cortex-A53").startswith("±") and "LODO MAPE" in est.uncertainty("Cortex-A53")
    assert "not measured" in est.uncertainty("Cortex-A75")


def test_work_vector_classes() -> None:
    w = dict(zip(TERMS, work_vector(conv(2_000_000, 3, 1, "dense_conv"))))
    assert w["conv3x3s1_macs"] == 2.0 and w["gemm_conv_macs"] == 0.0 and w["kernels"] == 1.0
    w = dict(zip(TERMS, work_vector(conv(2_000_000, 3, 2, "dense_conv"))))
    assert w["gemm_conv_macs"] == 2.0  # strided dense convs run as im2col + GEMM
    assert sum_work([ELTWISE, ELTWISE])[TERMS.index("bytes")] == pytest.approx(2 * ELTWISE.bytes_moved / 1e6)


# --- the fit script, on synthetic data with known parameters -----------------------------------

@pytest.fixture(scope="module")
def fit_module():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import fit_estimator
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return fit_estimator


def test_fit_recovers_known_parameters(fit_module) -> None:
    fe = fit_module
    rng = np.random.RandomState(0)
    works = {f"m{i}": fe.ModelWork(f"m{i}", np.array(w), 1.0, 1.0) for i, w in enumerate(
        rng.uniform([0, 50, 0, 0, 10, 20], [1500, 1500, 40, 3, 250, 240], size=(9, len(TERMS))))}
    truth = fe.Fit(theta=np.array([0.25, 0.45, 1.2, 0.0, 0.6, 0.3]),
                   scales={"Cortex-A53": (1.0, 1.0), "Cortex-A7": (3.0, 2.0), "Cortex-A72": (0.65, 0.5),
                           "Cortex-A76": (0.32, 0.35), "Cortex-A55": (1 / 1.38, 1 / 1.38)},
                   phi=1.2, q={}, q_pairs={}, q_overall=0.8, rows_per_core={})
    boards = [("b1", "Cortex-A53", 1.2), ("b2", "Cortex-A53", 2.0), ("b3", "Cortex-A7", 1.2), ("b7", "Cortex-A7", 1.0),
              ("b4", "Cortex-A72", 1.8), ("b8", "Cortex-A72", 2.0), ("b5", "Cortex-A55", 2.0),
              ("b6", "Cortex-A76", 2.4)]
    rows = []
    for device, core, clock in boards:
        fp16 = core in ("Cortex-A55", "Cortex-A76")
        for name, mw in works.items():
            for threads in (1, 4):
                ms = truth.predict(mw.work, core, clock, threads, fp16)
                rows.append(fe.Row(device, core, clock, threads, name, "fp16" if fp16 else "fp32", ms))
    fitted = fe.fit(rows, works)
    assert fitted.phi == pytest.approx(1.2, rel=1e-3)
    assert fitted.q["Cortex-A53"] == pytest.approx(0.8, rel=1e-6)
    for core, (s, _m) in truth.scales.items():
        assert fitted.scales[core][0] == pytest.approx(s, rel=1e-3), core
    assert "Cortex-A75" in fitted.derived  # no rows: documented derivation, never silently missing
    summary = fe.lodo_summary(fe.lodo(rows, works))
    assert summary["estimator"]["mape_pct"] < 1.0


def test_fit_converts_multi_thread_rows_per_model(fit_module) -> None:
    """Networks scale differently with threads (data README): a board measured only at 4 threads
    is brought to 1 thread with each model's parallel fraction from other boards of its core."""
    fe = fit_module
    rng = np.random.RandomState(1)
    works = {f"m{i}": fe.ModelWork(f"m{i}", np.array(w), 1.0, 1.0) for i, w in enumerate(
        rng.uniform([0, 50, 0, 0, 10, 20], [1500, 1500, 40, 3, 250, 240], size=(9, len(TERMS))))}
    q_of = {name: 0.6 + 0.04 * i for i, name in enumerate(works)}  # 0.60 ... 0.92
    truth = fe.Fit(theta=np.array([0.25, 0.45, 1.2, 0.0, 0.6, 0.3]),
                   scales={"Cortex-A53": (1.0, 1.0), "Cortex-A72": (0.65, 0.5), "Cortex-A7": (3.0, 2.0)},
                   phi=1.0, q={}, q_pairs={}, q_overall=0.0, rows_per_core={})
    rows = []
    for device, core, clock, threads in [("b1", "Cortex-A53", 1.2, (1, 4)), ("b2", "Cortex-A53", 2.0, (1, 4)),
                                         ("b3", "Cortex-A53", 1.5, (4,)), ("b4", "Cortex-A72", 1.8, (1, 2)),
                                         ("b5", "Cortex-A72", 2.0, (1, 2)), ("b6", "Cortex-A7", 1.2, (1, 4))]:
        for name, mw in works.items():
            for t in threads:
                ms = truth.predict(mw.work, core, clock) / fe.amdahl(q_of[name], t)
                rows.append(fe.Row(device, core, clock, t, name, "fp32", ms))
    fitted = fe.fit(rows, works)
    assert fitted.fit_q("Cortex-A53", "m3") == pytest.approx(q_of["m3"], rel=1e-6)
    assert fitted.fit_q("Cortex-A75", "m3") == fitted.q["Cortex-A75"]  # no pairs: the core's, never missing
    assert fitted.rms_log < 1e-4  # b3's 4-thread rows convert exactly
    assert fitted.scales["Cortex-A72"][0] == pytest.approx(0.65, rel=1e-3)
    assert fe.fit(rows, works, per_model_threads=False).rms_log > 10 * fitted.rms_log
