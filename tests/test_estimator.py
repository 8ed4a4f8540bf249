"""The offline latency estimator: its shipped parameters, its maths, and the fit that makes them.

No ONNX export is needed here: kernels are built directly, and the fit is checked on synthetic
latencies generated from known parameters (the real fit runs in ``scripts/fit_estimator.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from lodevem.errors import InputError
from lodevem.latency.estimator import DEFAULT_PARAMS, TERMS, Estimator, sum_work, work_vector
from lodevem.latency.kernels import Kernel
from lodevem.profiles import CORE_TYPES
from lodevem.wire.registry import latency_runtimes

RUNTIMES = latency_runtimes()

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
    assert set(params["runtimes"]) == set(RUNTIMES)
    unc = params["uncertainty"]
    assert unc["lodo_mape_pct"] > 0 and unc["oneshot_mape_pct"] > 0  # issue 14's calibrate reads the latter
    assert {(k["threads"], k["precision"]) for k in unc["per_kind"]} >= {("1", "fp32"), ("multi", "fp32"),
                                                                           ("1", "int8"), ("multi", "fp16")}
    fp16 = params["precision"]["fp16"]
    assert 1.0 <= fp16["compute_speedup"] <= 2.0 and 1.0 <= fp16["depthwise_speedup"] <= 2.0  # the lane count
    # nested (scripts/fit_estimator.py without --sigma): every held-out SoC chose its prior width by
    # SoC-grouped inner folds of the other SoCs, and the params say how many and among which widths
    assert unc["folds"] == "soc" and unc["nested"] is True and "nested_note" not in unc
    inner = unc["inner_folds"]
    assert inner["grouped_by"] == "soc" and inner["k"] >= 2 and f"{inner['k']} SoC-grouped inner folds" in unc["method"]
    socs = {row[1] for row in unc["held_out_rows"]}
    assert sorted(c["soc"] for c in unc["fold_choices"]) == sorted(socs)  # one choice per outer fold
    assert all(c["sigma"] in inner["sigma_grid"] and len(c["inner_mape_pct"]) == len(inner["sigma_grid"])
               for c in unc["fold_choices"])
    assert prov["fit_options"]["sigma"] in inner["sigma_grid"] and prov["fit_time"]["cpu_s"] > 0
    assert len(unc["held_out_rows"]) == prov["rows_used"]
    assert est.version == "v4" and len(est.held_out_rows) == prov["rows_used"]


def latency_ms(est: Estimator, kernels: list[Kernel], core: str, clock_ghz: float, threads: int = 1,
               cluster_cores: Optional[int] = None, runtime: str = "tflite", precision: str = "fp32") -> float:
    """Whole-model latency the way the predictor sums it: kernel by kernel."""
    return sum(est.latency_ms(work_vector(k), core, clock_ghz, runtime, precision, threads, cluster_cores)
               for k in kernels)


def kernel_ms(est: Estimator, kernel: Kernel, core: str, clock_ghz: float, runtime: str = "tflite") -> float:
    return est.work_ms(work_vector(kernel), core, clock_ghz, runtime)


def test_monotone_in_clock(est: Estimator) -> None:
    kernels = [conv(10_000_000), ELTWISE]
    for runtime in RUNTIMES:
        for core in CORE_TYPES:
            times = [latency_ms(est, kernels, core, f, runtime=runtime) for f in (0.8, 1.2, 1.6, 2.0, 2.4)]
            assert all(a > b for a, b in zip(times, times[1:])), (core, runtime)


def test_monotone_in_work(est: Estimator) -> None:
    for runtime in RUNTIMES:
        for category, ks, stride in (("pointwise_conv", 1, 1), ("dense_conv", 3, 1), ("dense_conv", 3, 2),
                                     ("depthwise_conv", 3, 1)):
            small, big = conv(1_000_000, ks, stride, category), conv(8_000_000, ks, stride, category)
            for core in CORE_TYPES:
                assert kernel_ms(est, big, core, 1.8, runtime) > kernel_ms(est, small, core, 1.8, runtime), (
                    category, core, runtime)
        # More kernels = more work = more time.
        three = latency_ms(est, [conv(10**6)] * 3, "Cortex-A53", 2.0, runtime=runtime)
        assert three > latency_ms(est, [conv(10**6)] * 2, "Cortex-A53", 2.0, runtime=runtime)


def test_monotone_in_threads(est: Estimator) -> None:
    kernels = [conv(10_000_000), ELTWISE, conv(4_000_000, 3, 1, "depthwise_conv")]
    for runtime in RUNTIMES:
        for core in CORE_TYPES:
            for precision in ("fp32", "fp16", "int8"):
                times = [latency_ms(est, kernels, core, 1.5, n, None, runtime, precision) for n in (1, 2, 3, 4)]
                assert all(a > b for a, b in zip(times, times[1:])), (core, runtime, precision)
                # Capped by the cluster: 4 threads on a 2-core cluster = 2 threads.
                assert latency_ms(est, kernels, core, 1.5, 4, 2, runtime, precision) == times[1]


def test_deterministic() -> None:
    kernels = [conv(3_000_000), ELTWISE, conv(9_000_000, 3, 1, "dense_conv")]
    for runtime in RUNTIMES:
        a = [latency_ms(Estimator.load(), kernels, c, 1.5, 2, 4, runtime, "int8") for c in CORE_TYPES]
        b = [latency_ms(Estimator.load(), kernels, c, 1.5, 2, 4, runtime, "int8") for c in CORE_TYPES]
        assert a == b


def test_unknown_core_or_runtime_is_a_clear_error(est: Estimator) -> None:
    with pytest.raises(InputError, match=r"no parameters for core 'Cortex-A78'.*Cortex-A53"):
        kernel_ms(est, conv(10**6), "Cortex-A78", 2.0)
    with pytest.raises(InputError, match="positive"):
        kernel_ms(est, conv(10**6), "Cortex-A53", 0.0)
    with pytest.raises(InputError, match=r"no latency model for runtime 'onnxruntime'.*tflite, ncnn"):
        kernel_ms(est, conv(10**6), "Cortex-A53", 2.0, runtime="onnxruntime")
    with pytest.raises(InputError, match="runtime 'mnn'"):
        est.int8_speedup("Cortex-A53", runtime="mnn")
    with pytest.raises(InputError, match="precision 'bf16'"):
        est.latency_ms(work_vector(conv(10**6)), "Cortex-A53", 2.0, "ncnn", "bf16")
    assert est.runtime("tflite-xnnpack").name == "tflite"  # the dev data's spelling is an alias


def test_runtimes_differ_where_the_hardware_says(est: Estimator) -> None:
    """XNNPACK has no Winograd: a wide 3x3 stride-1 conv (256 -> 256 channels at 14x14) costs
    relatively more on tflite than on ncnn, compared with a 1x1 conv of the same MACs."""
    macs, elems = 9 * 256 * 256 * 196, 256 * 196
    w3, w1 = work_vector(conv(macs, 3, 1, "dense_conv", elems)), work_vector(conv(macs, 1, 1, elems=elems))
    ratio = {rt: est.work_ms(w3, "Cortex-A53", 2.0, rt) / est.work_ms(w1, "Cortex-A53", 2.0, rt) for rt in RUNTIMES}
    assert ratio["tflite"] == pytest.approx(1.0) and ratio["ncnn"] < 1.0


def test_threads_speed_up_and_are_capped_by_cluster(est: Estimator) -> None:
    for core in CORE_TYPES:
        s1, s2, s4 = (est.thread_speedup(core, n) for n in (1, 2, 4))
        assert s1 == 1.0 and 1.0 < s2 < s4 <= 4.0
        assert est.thread_speedup(core, 4, cluster_cores=2) == s2
    with pytest.raises(InputError):
        est.thread_speedup("Cortex-A53", 0)


def test_transfer_ratio_precision_factors(est: Estimator) -> None:
    work = work_vector(conv(5_000_000))
    assert est.transfer_ratio(work, "Cortex-A76", 2.42, "Cortex-A76", 2.42) == pytest.approx(1.0)
    # A slower core at a lower clock takes longer than nn-Meter's Pixel 4 A76.
    assert est.transfer_ratio(work, "Cortex-A53", 1.3, "Cortex-A76", 2.42) > 1.0
    assert all(est.int8_speedup(c) > 0 and est.int8_speedup(c, runtime="ncnn") > 0 for c in CORE_TYPES)
    # fp16 arithmetic only where the runtime executes it: ncnn on the FP16 cores (for its fp32 models
    # too: both levels cost the same), never under LiteRT (an fp16-weights file runs fp32)
    assert est.fp16_speedup("Cortex-A53", "ncnn") == 1.0 and est.precision_divisor(work, "Cortex-A53", "fp16") == 1.0
    assert est.fp16_speedup("Cortex-A55", "ncnn") > 1.0 and est.fp16_speedup("Cortex-A55", "tflite") == 1.0
    assert est.precision_divisor(work, "Cortex-A55", "fp16", "ncnn") == 1.0
    assert "no fp16 arithmetic" in est.precision_note("Cortex-A72", "fp16", "ncnn")
    assert "dequantizes fp16 weights" in est.precision_note("Cortex-A55", "fp16", "tflite")
    # XNNPACK's int8 speed rests on a bounded prior and few (or no) rows: said, not hidden, with its source.
    assert "bounded prior" in est.precision_note("Cortex-A53", "int8", "tflite")
    # the published anchor is cited where the prior lives (the parameters file the manifest records
    # by digest), not in every int8 row's note (issue 46: ~1,000 characters of kernel sources per row)
    note = est.precision_note("Cortex-A53", "int8", "tflite")
    assert "95.7" in est.runtime("tflite").int8.source and "runtimes.tflite.int8.source" in note
    assert len(note) < 200 and "XNNPACK src/" not in note
    assert est.precision_note("Cortex-A53", "int8", "ncnn") is None


def test_uncertainty_is_the_cells_own_kind(est: Estimator) -> None:
    one = est.uncertainty("Cortex-A53", "ncnn", 1, "fp32")
    assert one.startswith("±") and "held-out (leave-one-SoC-out) error" in one
    assert "of 1-thread fp32 ncnn cells (" in one and " held-out rows from " in one and " SoCs on Cortex-A53)" in one
    assert "multi-thread int8 ncnn" in est.uncertainty("Cortex-A53", "ncnn", 4, "int8")
    figs = {est.uncertainty_figure("Cortex-A53", "ncnn", t, p).mape_pct for t, p in ((1, "fp32"), (4, "fp32"), (4, "int8"))}
    assert len(figs) > 1  # not one global figure
    # A kind with too few rows falls back to a pooled figure and says over what.
    pooled = est.uncertainty_figure("Cortex-A53", "tflite", 1, "int8")
    assert pooled is not None and pooled.pooled and pooled.rows >= 8


def test_work_vector_classes() -> None:
    w = dict(zip(TERMS, work_vector(conv(2_000_000, 3, 1, "dense_conv"))))
    assert w["conv3x3s1_macs"] == 2.0 and w["gemm_conv_macs"] == 0.0 and w["kernels"] == 1.0
    assert w["winograd_io"] == pytest.approx(0.1)  # tile transforms: activations in + out, in millions
    w = dict(zip(TERMS, work_vector(conv(2_000_000, 3, 2, "dense_conv"))))
    assert w["gemm_conv_macs"] == 2.0 and w["winograd_io"] == 0.0  # strided dense convs: im2col + GEMM
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


def _truth(fe):
    """Known parameters inside the fit's bounds (the per-clock order of the cores, one fp16 divisor
    pair, int8 divisors per runtime and ISA group)."""
    import estimator_model as em

    scales = {"Cortex-A53": (1.0, 1.0), "Cortex-A7": (3.0, 2.0), "Cortex-A72": (0.65, 0.5), "Cortex-A73": (0.9, 0.6),
              "Cortex-A55": (1 / 1.38, 0.8), "Cortex-A75": (0.6, 0.4), "Cortex-A76": (0.3, 0.3)}
    return em.Fit(theta=np.array([0.25, 0.45, 1.2, 0.0, 20.0, 0.6, 0.3]), scales=scales,
                  runtime_factors={"ncnn": (1.0, 1.0), "tflite": (1.3, 0.5)},
                  q={c: (0.9 - 0.02 * i, 0.6 + 0.03 * i) for i, c in enumerate(scales)}, phi=(1.3, 1.1),
                  int8={"ncnn": {"armv7": 1.6, "armv8.0": 1.5, "armv8.2": 1.2},
                        "tflite": {"armv7": 1.4, "armv8.0": 1.4, "armv8.2": 2.5}},
                  mu8={"ncnn": 0.7, "tflite": 4.0}, sigma=0.1,
                  rows_per_core={c: 1 for c in scales}, runtimes_per_core={c: ("ncnn",) for c in scales},
                  precisions_per_runtime={"ncnn": ("fp32", "fp16", "int8"), "tflite": ("fp32", "int8")})


@pytest.mark.slow(reason="a full estimator fit on synthetic rows (scripts/fit_estimator.py), ~8 s CPU")
def test_fit_recovers_known_parameters(fit_module) -> None:
    fe = fit_module
    rng = np.random.RandomState(0)
    works = {f"m{i}": fe.ModelWork(f"m{i}", np.array(w), 1.0, 1.0) for i, w in enumerate(
        rng.uniform([0, 50, 0, 0, 0, 10, 20], [1500, 1500, 40, 3, 5, 250, 240], size=(9, len(TERMS))))}
    works.update({f"std:m{i}": fe.ModelWork(f"m{i}", works[f"m{i}"].work, 1.0, 1.0) for i in range(9)})
    truth = _truth(fe)
    boards = [("b1", "Cortex-A53", 1.2, "ncnn"), ("b2", "Cortex-A53", 2.0, "ncnn"), ("b3", "Cortex-A7", 1.2, "ncnn"),
              ("b8", "Cortex-A7", 1.0, "ncnn"),
              ("b4", "Cortex-A72", 1.8, "ncnn"), ("b5", "Cortex-A55", 2.0, "ncnn"), ("b6", "Cortex-A76", 2.4, "ncnn"),
              ("b7", "Cortex-A73", 2.3, "ncnn"), ("t1", "Cortex-A75", 2.0, "tflite"), ("t2", "Cortex-A72", 1.5, "tflite"),
              ("t3", "Cortex-A53", 1.4, "tflite"), ("t4", "Cortex-A55", 1.8, "tflite")]
    rows = []
    for device, core, clock, runtime in boards:
        for i in range(9):
            for threads in (1, 4):
                # ncnn runs its fp32 models in fp16 on the FP16 cores (the dev data's labels)
                first = "fp16" if runtime == "ncnn" and core in ("Cortex-A55", "Cortex-A76") else "fp32"
                for precision in (first, "int8"):
                    model = f"m{i}" + ("_int8" if precision == "int8" else "")
                    row = fe.Row(device, core, clock, threads, model, precision, 1.0, runtime, soc=device)
                    rows.append(fe.Row(device, core, clock, threads, model, precision,
                                       truth.predict_row(row, works), runtime, soc=device))
    fitted = fe.fit(rows, works, sigma=10.0)  # wide priors: the rows alone decide
    assert fitted.rms_log < 0.02
    assert fitted.phi[0] == pytest.approx(1.3, rel=0.05)
    assert fitted.mu8["ncnn"] == pytest.approx(0.7, rel=0.05)
    assert fitted.runtime_factors["tflite"][0] == pytest.approx(1.3, rel=0.05)
    for rt, groups in truth.int8.items():
        for group, kappa in groups.items():
            assert fitted.int8[rt][group] == pytest.approx(kappa, rel=0.05), (rt, group)
    for core, (s, _m) in truth.scales.items():
        assert fitted.scales[core][0] == pytest.approx(s, rel=0.05), core
        assert fitted.q[core][0] == pytest.approx(truth.q[core][0], abs=0.02), core
    summary = fe.score_summary(fe.lodo(rows, works, nested=False, sigma=10.0))
    assert summary["per_core"]["Cortex-A53"]["mape_pct"] < 2.0  # other boards of the core pin it


def test_every_fit_keeps_the_per_clock_order_of_the_cores(fit_module) -> None:
    """The order holds by construction, whatever the rows say: rows that put an A55 board 1.5x
    slower per clock than the A53 ones still fit an A55 no slower than an A53 (``ORDER``)."""
    import estimator_model as em

    fe = fit_module
    rows = fe.load_rows(fe.DEFAULT_DATA)
    works = fe.dev_works(rows, fe.DEFAULT_CACHE)
    slow_a55 = [r if r.core != "Cortex-A55" else fe.Row(r.device, r.core, r.clock_ghz, r.threads, r.model, r.precision,
                                                       r.avg_ms * 3.0, r.runtime, r.source, r.soc) for r in rows]
    fitted = fe.fit(slow_a55, works, sigma=1.0)
    for core, (parent, sign, _source) in em.ORDER.items():
        for side in (0, 1):
            mine, theirs = fitted.scales[core][side], fitted.scales[parent][side]
            assert (mine >= theirs * (1 - 1e-9)) if sign > 0 else (mine <= theirs * (1 + 1e-9)), (core, side)
    assert fitted.int8["tflite"]["armv8.2"] >= fitted.int8["tflite"]["armv8.0"] >= 1.0  # XNNPACK_INT8 bounds


@pytest.mark.slow(reason="benchmarks/latency_accuracy.py --score end to end: the estimator refitted on the dev data, ~24 s CPU")
def test_score_line_from_a_small_synthetic_file(fit_module, tmp_path) -> None:
    """The benchmark's --score path end to end on a tiny file: the SCORE line is the last line and
    parses; categories without rows say ``na``."""
    import subprocess

    fe = fit_module
    est = Estimator.load()
    cache = tmp_path / "onnx"
    works = fe.dev_works([fe.Row("x", "Cortex-A53", 1.0, 1, m, "fp32", 1.0, "tflite")
                          for m in ("mobilenet", "mobilenet_v2")], cache)
    path = tmp_path / "board.csv"
    lines = ["device,core,clock_ghz,threads,model,input,avg_ms,min_ms,runtime,precision,source"]
    for device, clock, threads, model in (("board A", 1.8, 1, "mobilenet"), ("board A", 1.8, 1, "mobilenet_v2"),
                                          ("board A", 1.8, 4, "mobilenet"), ("board B", 2.0, 1, "mobilenet")):
        # a row without a SoC is priced on the pooled memory system (latency.memory), as the scorer does
        ms = 1.1 * est.latency_ms(works[f"std:{model}"].on(None, "Cortex-A53"), "Cortex-A53", clock, "tflite", "fp32",
                                  threads)
        lines.append(f"{device},Cortex-A53,{clock},{threads},{model},1x3x224x224,{ms:.4f},,tflite-xnnpack,fp32,synthetic")
    lines.append("bad,Cortex-A53,abc,1,mobilenet,1x3x224x224,5,,tflite,fp32,synthetic")
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "latency_accuracy.py"), "--score", str(path),
                          "--predictor", "estimator", "--skip-timing", "--onnx-cache", str(cache)],
                         capture_output=True, text=True, check=True, env={**__import__("os").environ,
                                                                           "PYTHONPATH": str(REPO)})
    last = out.stdout.strip().splitlines()[-1]
    fields = dict(item.split("=") for item in last.removeprefix("SCORE ").split())
    assert last.startswith("SCORE ") and list(fields) == ["est_1t_fp32", "baseline_1t_fp32", "threads", "fp16",
                                                           "int8", "oneshot", "rows"]
    assert fields["rows"] == "4" and fields["fp16"] == "na" and fields["int8"] == "na"
    assert float(fields["est_1t_fp32"]) == pytest.approx(9.1, abs=0.2)  # every row is 1.1x the prediction
    assert float(fields["threads"]) == pytest.approx(9.1, abs=0.2)
    assert float(fields["oneshot"]) == pytest.approx(0.0, abs=0.1)  # one board-kind scale removes it
    assert "skipped board.csv line 6" in out.stdout


def test_the_fits_figures_and_provenance_are_typed_from_the_parameters_file() -> None:
    import json

    from lodevem.latency.estimator import DEFAULT_PARAMS, FitAccuracy

    raw = json.loads(DEFAULT_PARAMS.read_text())
    est = Estimator.load()
    assert est.accuracy.oneshot_mape_pct == raw["uncertainty"]["oneshot_mape_pct"]
    assert est.accuracy.lodo_mape_pct == raw["uncertainty"]["lodo_mape_pct"] == est.lodo_mape_pct
    assert est.provenance.model_map == raw["provenance"]["model_map"]
    assert est.provenance.data_sources == tuple(raw["provenance"]["data_sources"])
    bad = FitAccuracy.from_dict({"oneshot_mape_pct": "n/a", "lodo_mape_pct": float("nan"), "lodo_rows": True})
    assert (bad.oneshot_mape_pct, bad.lodo_mape_pct, bad.lodo_rows) == (None, None, None)


# --- folds by SoC --------------------------------------------------------------------------------

def test_dev_rows_name_their_soc_and_boards_of_one_soc_share_a_fold(fit_module, tmp_path) -> None:
    fe = fit_module
    rows = fe.load_rows(fe.DEFAULT_DATA)
    assert all(r.soc for r in rows)
    socs = {r.device: r.soc for r in rows}
    rk3399 = {d for d in socs if "RK3399" in d}
    assert len(rk3399) == 2 and {socs[d] for d in rk3399} == {"Rockchip RK3399"}  # OrangePi4 LTS is an RK3399
    assert {r.fold for r in rows if "RK3588" in r.device} == {"Rockchip RK3588"}  # both clusters, one fold
    assert {r.core for r in rows if r.soc == "Rockchip RK3588"} == {"Cortex-A55", "Cortex-A76"}
    # the strict loader (the dev data) refuses a row without its SoC
    lines = fe.DEFAULT_DATA.read_text().splitlines()
    head = lines[0].split(",")
    cells = next(__import__("csv").reader([lines[1]]))
    cells[head.index("soc")] = ""
    bad = tmp_path / "nosoc.csv"
    bad.write_text(lines[0] + "\n" + ",".join(f'"{c}"' for c in cells) + "\n")
    with pytest.raises(ValueError, match="no 'soc'"):
        fe.load_rows(bad)


def test_inner_folds_deal_socs_of_each_core_family_into_different_groups(fit_module) -> None:
    """The nested fit's inner folds: every SoC in exactly one group, by SoC (a SoC's boards and
    clusters together), SoCs of one core spread over the groups, the same on every run; as many
    groups as SoCs is an inner leave-one-SoC-out."""
    fe = fit_module
    socs = [(f"A53 soc {i}", "Cortex-A53") for i in range(6)] + [(f"A7 soc {i}", "Cortex-A7") for i in range(4)]
    rows = [fe.Row(f"board of {soc}", core, 1.5, 1, "m", "fp32", 10.0, soc=soc) for soc, core in socs]
    rows += [fe.Row("big cluster of A53 soc 0", "Cortex-A72", 1.8, 1, "m", "fp32", 5.0, soc="A53 soc 0")]
    groups = fe.inner_groups(rows, 5)
    assert len(groups) == 5 and sorted(s for g in groups for s in g) == sorted(s for s, _ in socs)
    assert groups == fe.inner_groups(list(reversed(rows)), 5)  # deterministic, not order-dependent
    for group in groups:  # no group holds two A7 SoCs (4 of them, 5 groups)
        assert sum(s.startswith("A7") for s in group) <= 1
    assert sorted(map(len, fe.inner_groups(rows, 100))) == [1] * len(socs)  # leave-one-SoC-out


def test_lodo_holds_out_every_board_of_a_soc_together(fit_module, monkeypatch) -> None:
    """A fold never trains on a board of the SoC it predicts (the optimistic folds of before), and
    a nested fold's choice of prior width never sees the SoC it is scored on."""
    fe = fit_module
    rows = [fe.Row(dev, core, 1.5, 1, "m", "fp32", 10.0, soc=soc) for dev, core, soc in (
        ("RK3399 board", "Cortex-A53", "Rockchip RK3399"), ("OrangePi4 LTS", "Cortex-A53", "Rockchip RK3399"),
        ("RK3399 board", "Cortex-A72", "Rockchip RK3399"), ("S410", "Cortex-A53", "Snapdragon 410"),
        ("no soc given", "Cortex-A53", ""))]

    class Fitted:
        x = None

        def predict_row(self, r, works):
            return r.avg_ms

    trained: list[set[str]] = []
    monkeypatch.setattr(fe, "fit_model", lambda train, works, sigma, x0=None: trained.append(
        {r.fold for r in train}) or Fitted())
    monkeypatch.setattr(fe, "baseline_constants", lambda *a: {})
    scored: list[tuple[str, set[str]]] = []
    monkeypatch.setattr(fe, "score", lambda result, consts, held, works, seen: scored.append(
        ({r.fold for r in held}.pop(), {r.device for r in held})) or [])
    choices: list = []
    fe.lodo(rows, {"m": None}, nested=True, choices=choices)
    assert dict(scored) == {"Rockchip RK3399": {"RK3399 board", "OrangePi4 LTS"}, "Snapdragon 410": {"S410"},
                            "no soc given": {"no soc given"}}  # a row without a SoC is its own device's fold
    outer = [t for t in trained if len(t) == 2]  # the outer fits: every SoC but the held-out one
    assert len(outer) == 3 and all(held not in train for (held, _), train in zip(scored, outer))
    assert [c.soc for c in choices] == [held for held, _ in scored] and all(t for t in trained)
    # no fit of a fold (inner or outer) ever saw its held-out SoC
    per_fold = len(trained) // 3
    for i, (held, _) in enumerate(scored):
        assert all(held not in t for t in trained[i * per_fold:(i + 1) * per_fold])
