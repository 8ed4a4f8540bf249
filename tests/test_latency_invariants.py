"""The hardware's invariants, over every predictor that can price a cell without Docker and over
the default (issue 35 item 1): the latency column must obey the phone, whatever the fit says.

Pure: zoo models exported in-process with the worker's own exporter, the shipped parameters, the
16 shipped profiles and, for armsim, its cost model over the stored instruction profiles. Each
invariant cites its source. Kinds covered: the default (``--predictor auto``) and every registered
kind available here without a sandbox (the estimator; nn-Meter too where its data are installed).
armsim's part runs on its cost model; cases that fail today are strict xfails naming the cause (the
armsim branch fixes its A55 view and in-order pricing): they flip to failures when it lands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pytest
import torch
from helpers import kinds_only

from lodevem import zoo
from lodevem.latency import pool as pool_module
from lodevem.latency.arithmetic import has_dot_product
from lodevem.latency.selection import HELD_OUT_NAME, Availability, CellKind
from lodevem.predict import Predictor
from lodevem.profiles import Cluster, Profile, load_profiles
from lodevem.worker import export_module

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import estimator_model as em  # noqa: E402  (the constraints' cited sources: one home)

MODELS = ("mobilenet_v2", "mobilenet_v3_small", "resnet18", "squeezenet1_1", "efficientnet_b0")
RUNTIMES = ("tflite", "ncnn")
LEVELS = ("fp32", "fp16", "int8", "int8-static")
PROFILES = load_profiles()
# Sources, cited by the invariants below.
ORDER_SOURCES = {core: source for core, (_, _, source) in em.ORDER.items()}
AMDAHL = ("Amdahl's law: N threads on N cores never take longer than 1 thread nor less than 1/N of its time; "
          "a run uses at most the cores of one cluster (the profiles' fastest cluster)")
CLOCK = "cycles / clock: one core type at a higher clock runs the same instructions in proportionally less time"
LITERT_FP16 = ("LiteRT dequantizes an fp16-weights file to fp32 at load and runs fp32 kernels unless XNNPACK's "
               "FORCE_FP16 flag is set (TensorFlow Blog, 'Half-precision Inference Doubles On-Device Inference "
               "Performance', 2023); ncnn runs fp32 and fp16 models in the same arithmetic (its Option defaults)")
XNNPACK_INT8 = em.XNNPACK_KERNELS
SAME_KIND = ("a ratio between two predictors is an artefact of the two: every variant of one model on one device is "
             "priced by one kind within a run (issue 35)")


def offline_kinds() -> list[str]:
    """Registered kinds that can price a shipped profile here without Docker (no sandbox)."""
    pool = pool_module.PredictorPool("auto", cache_dir=None)
    profile = PROFILES[0]
    return [name for name, kind in pool.kinds.items() if kind.unavailable(profile, "tflite") is None]


PRICERS = ["default", *offline_kinds()]


def mode(pricer: str) -> str:
    return "auto" if pricer == "default" else pricer


def synthetic(core: str, clock: float = 2.0, count: int = 4) -> Profile:
    return Profile(id=f"{core.lower()}-{str(clock).replace('.', '_')}", name=core, label=core, tier="tier1",
                   chipset="invariant test", ram_mb=2048, sources=["test"], cpu=[Cluster(core=core, count=count,
                                                                                      clock_ghz=clock)])


@pytest.fixture(scope="module")
def onnx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 exports of the zoo models, and the twins a user's fp16 and dynamic-int8 files export to
    (the worker's ``_twin_inputs`` precision metadata: ``lodevem.precision``)."""
    from lodevem.worker.export.quantized import float_twin_module, torch_quantization

    out = tmp_path_factory.mktemp("invariants")
    paths: dict[str, Path] = {}
    x = torch.zeros(1, 3, 224, 224)
    for name in MODELS:
        paths[name] = out / f"{name}.onnx"
        export_module(zoo.build(name).eval(), x, str(paths[name]))
    for name in ("mobilenet_v2", "resnet18"):
        paths[f"{name}@fp16-file"] = out / f"{name}_fp16.onnx"
        export_module(zoo.build(name).eval(), x, str(paths[f"{name}@fp16-file"]),
                      precision={"default": "fp16", "modules": {}, "quantization": None})
        dynamic = torch.ao.quantization.quantize_dynamic(zoo.build(name).eval(), {torch.nn.Linear}, torch.qint8)
        quantization = torch_quantization(dynamic)
        twin, modules = float_twin_module(dynamic)
        paths[f"{name}@int8-file"] = out / f"{name}_dynamic.onnx"
        export_module(twin, x, str(paths[f"{name}@int8-file"]),
                      precision={"default": "fp32", "modules": modules, "quantization": quantization})
    return paths


@pytest.fixture(scope="module")
def predictors() -> dict[str, Predictor]:
    return {p: kinds_only(mode(p)) for p in PRICERS}


def cell(predictors: dict[str, Predictor], pricer: str, path: Path, profile: Profile, runtime: str,
         level: Optional[str] = None, threads: int = 1) -> Any:
    got = predictors[pricer].cells(path, [profile], threads, level, runtime=runtime)[profile.id]
    assert got.latency_ms is not None and got.latency_ms > 0, got.note
    return got


def ms(*args: Any, **kwargs: Any) -> float:
    return float(cell(*args, **kwargs).latency_ms)


@pytest.mark.parametrize("pricer", PRICERS)
def test_per_clock_order_of_the_cores(pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """At one clock, one runtime and one level, 1 thread: a Cortex-A7 is slower than an A53, an A55
    is not slower than an A53, an A75 and an A76 are faster than an A55 (sources: ``ORDER_SOURCES``)."""
    assert set(ORDER_SOURCES) >= {"Cortex-A7", "Cortex-A55", "Cortex-A75", "Cortex-A76"}
    cores = {c: synthetic(c) for c in ("Cortex-A7", "Cortex-A53", "Cortex-A55", "Cortex-A75", "Cortex-A76")}
    for name in MODELS:
        for runtime in RUNTIMES:
            for level in LEVELS:
                t = {c: ms(predictors, pricer, onnx[name], p, runtime, level) for c, p in cores.items()}
                where = (name, runtime, level, t)
                assert t["Cortex-A7"] > t["Cortex-A53"], (ORDER_SOURCES["Cortex-A7"], where)
                assert t["Cortex-A55"] <= t["Cortex-A53"], (ORDER_SOURCES["Cortex-A55"], where)
                assert t["Cortex-A75"] < t["Cortex-A55"] and t["Cortex-A76"] < t["Cortex-A55"], (
                    ORDER_SOURCES["Cortex-A75"], where)


@pytest.mark.parametrize("pricer", PRICERS)
def test_latency_scales_as_one_over_clock(pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """One core type at twice the clock takes half the time (``CLOCK``), on every shipped profile."""
    for profile in PROFILES:
        cluster = profile.fastest_cluster
        doubled = profile.model_copy(update={"id": profile.id + "-x2", "cpu": [
            Cluster(core=cluster.core, count=cluster.count, clock_ghz=2 * cluster.clock_ghz)]})
        for runtime in RUNTIMES:
            base = cell(predictors, pricer, onnx["mobilenet_v2"], profile, runtime, "int8-static")
            fast = cell(predictors, pricer, onnx["mobilenet_v2"], doubled, runtime, "int8-static")
            # the core's cycles halve; the DRAM's time is the SoC's, not the clock's (issue 44)
            assert fast.compute_ms == pytest.approx(base.compute_ms / 2, rel=1e-9), (CLOCK, profile.id, runtime)
            assert base.latency_ms / 2 <= fast.latency_ms * (1 + 1e-9) and fast.latency_ms < base.latency_ms, \
                (CLOCK, profile.id, runtime)


@pytest.mark.parametrize("pricer", PRICERS)
def test_threads_never_slower_never_more_than_n_and_capped_by_the_cluster(
        pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """``AMDAHL``: 1 <= t(1) / t(N) <= min(N, cores of the cluster); more threads than cores = as many as cores."""
    for profile in PROFILES:
        cores = profile.fastest_cluster.count
        for runtime in RUNTIMES:
            for name in ("mobilenet_v2", "resnet18"):
                one = ms(predictors, pricer, onnx[name], profile, runtime, "fp32", threads=1)
                for n in (2, 4, 8):
                    t = ms(predictors, pricer, onnx[name], profile, runtime, "fp32", threads=n)
                    assert one / min(n, cores) <= t * (1 + 1e-12) and t <= one, (AMDAHL, profile.id, runtime, n)
                    if n > cores:
                        capped = ms(predictors, pricer, onnx[name], profile, runtime, "fp32", threads=cores)
                        assert t == pytest.approx(capped, rel=1e-12), (AMDAHL, profile.id, n)


@pytest.mark.parametrize("pricer", PRICERS)
def test_int8_static_is_faster_than_fp32_under_xnnpack_and_more_so_with_the_dot_product(
        pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """``XNNPACK_INT8``: full-integer int8 beats fp32 under tflite on every profile; its gain on a
    dot-product core (A55, A75, A76) is larger than on the A53 and the A7 at the same clock."""
    for name in MODELS:
        for profile in PROFILES:
            fp32 = ms(predictors, pricer, onnx[name], profile, "tflite", "fp32")
            int8 = ms(predictors, pricer, onnx[name], profile, "tflite", "int8-static")
            assert int8 < fp32, (XNNPACK_INT8, name, profile.id, fp32, int8)
        gain = {}
        for core in ("Cortex-A7", "Cortex-A53", "Cortex-A55", "Cortex-A75", "Cortex-A76"):
            p = synthetic(core)
            gain[core] = (ms(predictors, pricer, onnx[name], p, "tflite", "fp32")
                          / ms(predictors, pricer, onnx[name], p, "tflite", "int8-static"))
        for dot in (c for c in gain if has_dot_product(c)):
            assert gain[dot] > gain["Cortex-A53"] and gain[dot] > gain["Cortex-A7"], (XNNPACK_INT8, name, gain)


@pytest.mark.parametrize("pricer", PRICERS)
def test_fp16_weights_cost_what_fp32_costs(pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """``LITERT_FP16``: the fp16 level (an fp16-weights file) costs exactly the fp32 level, under
    tflite (dequantized at load) and under ncnn (the same arithmetic for both), on every profile."""
    for name in MODELS:
        for profile in PROFILES:
            for runtime in RUNTIMES:
                assert ms(predictors, pricer, onnx[name], profile, runtime, "fp16") == pytest.approx(
                    ms(predictors, pricer, onnx[name], profile, runtime, "fp32"), rel=1e-12), (LITERT_FP16, name,
                                                                                              profile.id, runtime)


@pytest.mark.parametrize("pricer", PRICERS)
def test_a_users_file_and_the_derived_level_of_its_precision_get_the_same_figure(
        pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """A user's fp16 file (a half() model) = ``--levels fp16`` of the fp32 model; a user's dynamic
    int8 file = ``--levels int8``: the same variant, one price (issue 35: 12.4 vs 25.6 ms before)."""
    for name in ("mobilenet_v2", "resnet18"):
        for profile in PROFILES:
            for runtime in RUNTIMES:
                for level in ("fp16", "int8"):
                    mine = cell(predictors, pricer, onnx[f"{name}@{level}-file"], profile, runtime)
                    twin = cell(predictors, pricer, onnx[name], profile, runtime, level)
                    assert mine.latency_ms == pytest.approx(twin.latency_ms, rel=1e-9), (name, level, profile.id,
                                                                                        runtime)
                    assert mine.uncertainty_pct == twin.uncertainty_pct


@pytest.mark.parametrize("pricer", PRICERS)
def test_the_same_network_as_a_module_a_zoo_name_or_an_export_gets_one_figure(
        pricer: str, onnx: dict[str, Path], predictors: dict[str, Predictor], tmp_path: Path) -> None:
    """The Python API prices a zoo name and an ``nn.Module`` from their graph, as ``start`` prices a
    file's export: how a network is given does not change its latency (issue 35: the same network
    as a pickled module, TorchScript or ONNX got 5.4 ms by armsim and 4.6 ms by the estimator)."""
    from lodevem import Predictor as Api

    profile = next(p for p in PROFILES if p.id == "itel_a23_pro")
    with Api(profile, predictor=mode(pricer), cache_dir=tmp_path, use_calibrations=False) as api:
        by_name = api.predict("mobilenet_v2")
        by_module = api.predict(zoo.build("mobilenet_v2").eval())
    exported = cell(predictors, pricer, onnx["mobilenet_v2"], profile, "tflite")
    assert by_name.latency_ms == pytest.approx(by_module.latency_ms, rel=1e-9)
    assert by_name.latency_ms == pytest.approx(exported.latency_ms, rel=1e-9)
    assert by_name.latency_source == by_module.latency_source == exported.latency_source


def test_every_variant_of_a_model_on_a_device_is_priced_by_one_predictor(
        onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """``SAME_KIND``: under the default, all levels and the user's twin files of one model on one
    profile come from one predictor kind."""
    for profile in PROFILES:
        for runtime in RUNTIMES:
            sources = {cell(predictors, "default", onnx["mobilenet_v2"], profile, runtime, level).latency_source
                       .split(":")[0] for level in LEVELS}
            sources |= {cell(predictors, "default", onnx[f"mobilenet_v2@{twin}-file"], profile, runtime)
                        .latency_source.split(":")[0] for twin in ("fp16", "int8")}
            assert len(sources) == 1, (SAME_KIND, profile.id, runtime, sources)


def test_default_cells_state_the_nested_held_out_error_of_their_kind(
        onnx: dict[str, Path], predictors: dict[str, Predictor]) -> None:
    """Every default cell's band is the prediction +- the default's nested held-out error for the
    cell's kind (what ``benchmarks/latency_accuracy.py`` prints), under one name."""
    from lodevem.latency.arithmetic import band_arithmetic, executed

    pool = predictors["default"].pool
    order = tuple(n for n, k in pool.kinds.items() if k.availability is Availability.EVERY_INSTALL)
    selection = pool.selection(order)
    for profile in PROFILES:
        core = profile.fastest_cluster.core
        for runtime in RUNTIMES:
            for level, threads in (("fp32", 1), ("fp16", 4), ("int8-static", 1), ("int8", 4)):
                got = cell(predictors, "default", onnx["resnet18"], profile, runtime, level, threads)
                arithmetic = band_arithmetic([executed(runtime, core, {"int8-static": "int8"}.get(level, level))])
                band = selection.band(CellKind(core, threads, arithmetic, runtime))
                assert band is not None and got.uncertainty_pct == band.mape_pct, (profile.id, runtime, level)
                assert got.latency_low_ms == pytest.approx(got.latency_ms * (1 - band.mape_pct / 100))
                assert got.latency_high_ms == pytest.approx(got.latency_ms * (1 + band.mape_pct / 100))
                assert HELD_OUT_NAME in (got.uncertainty or "")


def test_the_default_does_not_depend_on_which_images_exist(onnx: dict[str, Path], monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The same ``start`` after ``make demo`` (no armsim image) and after ``make test`` (armsim
    built) gives the same latencies: the default never uses an OPTIONAL kind. The armsim image is
    reported missing, then present (its kind then says it can run everywhere)."""
    from lodevem.latency.armsim.kind import ArmsimKind

    def cells() -> list[Any]:
        predictor = kinds_only("auto")
        return [predictor.cells(onnx["mobilenet_v2"], PROFILES, 1, level, runtime=rt)
                for rt in RUNTIMES for level in LEVELS]

    monkeypatch.setattr(ArmsimKind, "unavailable", lambda self, profile, runtime: "lodevem-armsim:0.1.0 not built")
    missing = cells()
    monkeypatch.setattr(ArmsimKind, "unavailable", lambda self, profile, runtime: None)
    assert cells() == missing


# --- armsim: its cost model over the stored instruction profiles -------------------------------------

ARMSIM_CORES = {"cortex-a7": "Cortex-A7", "cortex-a53": "Cortex-A53", "cortex-a55": "Cortex-A55",
                "cortex-a72": "Cortex-A72", "cortex-a73": "Cortex-A73", "cortex-a75": "Cortex-A75",
                "cortex-a76": "Cortex-A76"}
# The one order the dev data contradict (docs/armsim-accuracy.md): ncnn 2022's int8 resnet18 runs slower per clock
# on the RK3588's A55 (303 ms at 1.8 GHz = 546 ms x GHz) than on the A53 boards (390-449 ms x GHz), and armsim,
# fitted on those rows, follows the measurement.
NCNN_INT8_A55 = ("measured: ncnn 2022 int8 resnet18 is slower per clock on the RK3588 A55 than on the A53 boards "
                 "(546 vs 390-449 ms x GHz); armsim follows the dev data")
# efficientnet_b0's int8 file spends a third of its time in XNNPACK's fp32 sigmoid between quantized layers, and
# the ARMv8.2 int8 factor fitted on ncnn rows outweighs what SDOT saves (docs/armsim-accuracy.md).
EFFNET_INT8 = ("efficientnet_b0 int8-static: fp32 sigmoids between quantized layers; the ARMv8.2 int8 factor comes "
               "from ncnn rows only (no XNNPACK int8 row on an in-order ARMv8.2 core to fit one)")


@pytest.fixture(scope="module")
def armsim() -> tuple[Any, list[Any]]:
    import fit_armsim as fa

    from lodevem.latency.armsim.costmodel import load
    from lodevem.latency.armsim.shipped import SHIPPED_PROFILES

    # the dev boards' graphs and the zoo models' shipped profiles (scripts/profile_armsim_zoo.py)
    return load(), fa.load_profiles(fa.DEFAULT_PROFILES) + fa.load_profiles(SHIPPED_PROFILES)


def _armsim_ms(armsim: tuple[Any, list[Any]], graph: str, runtime: str, precisions: tuple[str, ...], uarch: str,
               clock: float = 2.0, threads: int = 1, version: Optional[str] = None) -> float:
    model, profiles = armsim
    found = [p for p in profiles if p.graph_key == graph and p.runtime == runtime and p.uarch == uarch
             and p.precision in precisions and (version is None or p.runtime_version == version)]
    if not found:
        raise AssertionError(f"no stored armsim profile of {graph} {runtime} {precisions} under {uarch}")
    return float(model.predict_ms(sorted(found, key=lambda p: p.runtime_version)[0], ARMSIM_CORES[uarch], clock,
                                  threads)[0])


FLOAT = ("fp32", "fp16")  # ncnn's fp32 level runs fp16 arithmetic on ARMv8.2 views: the same level
ARMSIM_ORDER_CASES = [
    pytest.param("std:mobilenet_v2", "tflite", FLOAT),
    pytest.param("std:mobilenet_v3_small", "tflite", FLOAT),
    pytest.param("mobilenet_v2", "ncnn", FLOAT),
    pytest.param("resnet18", "ncnn", FLOAT),
    pytest.param("squeezenet", "ncnn", FLOAT),
    pytest.param("efficientnet_b0", "ncnn", FLOAT),
    pytest.param("resnet18", "ncnn", ("int8",), marks=pytest.mark.xfail(strict=True, reason=NCNN_INT8_A55)),
    pytest.param("squeezenet", "ncnn", ("int8",)),
]


@pytest.mark.parametrize("graph,runtime,precisions", ARMSIM_ORDER_CASES)
def test_armsim_a55_is_not_slower_per_clock_than_the_a53(armsim: Any, graph: str, runtime: str,
                                                        precisions: tuple[str, ...]) -> None:
    """``ORDER_SOURCES['Cortex-A55']``, on the zoo graphs' stored profiles (1 thread, 2 GHz)."""
    a53 = _armsim_ms(armsim, graph, runtime, precisions, "cortex-a53", version=None)
    a55 = _armsim_ms(armsim, graph, runtime, precisions, "cortex-a55")
    assert a55 <= a53, (ORDER_SOURCES["Cortex-A55"], graph, runtime, a55, a53)


@pytest.mark.parametrize("graph,runtime,big", [("std:mobilenet_v2", "tflite", "cortex-a75"),
                                               ("std:mobilenet_v3_small", "tflite", "cortex-a75"),
                                               ("mobilenet_v2", "ncnn", "cortex-a76"), ("resnet18", "ncnn", "cortex-a76")])
def test_armsim_big_cores_are_faster_per_clock_than_the_a55(armsim: Any, graph: str, runtime: str, big: str) -> None:
    """``ORDER_SOURCES['Cortex-A75']`` (the A76 for ncnn, whose A75 has no stored profile)."""
    assert _armsim_ms(armsim, graph, runtime, FLOAT, big) < _armsim_ms(armsim, graph, runtime, FLOAT, "cortex-a55")


@pytest.mark.parametrize("graph", ["mobilenet_v2", "resnet18", "squeezenet", "efficientnet_b0"])
def test_armsim_a7_is_slower_per_clock_than_the_a53(armsim: Any, graph: str) -> None:
    """``ORDER_SOURCES['Cortex-A7']`` (ncnn: LiteRT publishes no armv7 wheel)."""
    assert _armsim_ms(armsim, graph, "ncnn", FLOAT, "cortex-a7") > _armsim_ms(armsim, graph, "ncnn", FLOAT, "cortex-a53")


def test_armsim_scales_as_one_over_clock_and_obeys_amdahl(armsim: Any) -> None:
    """``CLOCK`` and ``AMDAHL`` on every stored profile its cost model prices."""
    model, profiles = armsim
    for p in profiles:
        core = ARMSIM_CORES[p.uarch]
        one = model.predict_ms(p, core, 1.0, 1)[0]
        assert model.predict_ms(p, core, 2.0, 1)[0] == pytest.approx(one / 2, rel=1e-9), (CLOCK, p.graph_key)
        for n in (2, 4):
            t = model.predict_ms(p, core, 1.0, n)[0]
            assert one / n <= t * (1 + 1e-12) and t <= one, (AMDAHL, p.graph_key, core, n)


@pytest.mark.parametrize("model", [
    "mobilenet_v2", "mobilenet_v3_small", "resnet18", "squeezenet1_1",
    pytest.param("efficientnet_b0", marks=pytest.mark.xfail(strict=True, reason=EFFNET_INT8))])
def test_armsim_int8_static_gains_more_with_the_dot_product(armsim: Any, model: str) -> None:
    """``XNNPACK_INT8`` for armsim, on the shipped zoo profiles: int8-static is faster than fp32 on every
    view, and gains more on the A55 view (SDOT) than on the A53 view."""
    def gain(uarch: str) -> float:
        return (_armsim_ms(armsim, f"zoo:{model}", "tflite", ("fp32",), uarch)
                / _armsim_ms(armsim, f"zoo:{model}", "tflite", ("int8",), uarch))

    assert gain("cortex-a55") > gain("cortex-a53") > 1.0
