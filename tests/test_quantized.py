"""Quantized and fp16 files predicted as what they are (issue 12, items 3 and 4).

Each file is written the way a user writes it (torch.ao eager dynamic and static, FX converted and
saved as traced or scripted TorchScript or pickled, onnxruntime.quantization QDQ and QOperator,
``model.half()``, an fp16 ONNX export), exported by the worker's own export action (in-process
here, the host runs the same code in the sandbox), and its kernels extracted with the real
nn-Meter detector. The latency relations are checked with the real estimator on every core of
the bundled profiles: a static int8 file is the fp32 figure / the fitted int8 factor, dynamic int8
changes only the fc kernels, and a half() file gives exactly the ``--levels fp16`` figure.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from helpers import kinds_only
from torch import nn

from lodevem import worker
from lodevem.latency.kernels import extract_kernels
from lodevem.profiles import load_profiles
from lodevem.sandbox.client import ModelSection
from lodevem.wire import protocol, replies
from lodevem.worker import actions
from lodevem.worker.export.quantized import PRECISION_KEY, node_module
from lodevem.worker.memory import MemoryPhases

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

SHAPE = (1, 3, 32, 32)


def _body() -> list[nn.Module]:
    return [nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(32, 10)]


def _write_models(folder: Path) -> dict[str, Path]:
    """Every variant as a user saves it; nn.Sequential of torch's own classes, so the files load
    anywhere (no user code needed)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from torch.ao.quantization import (
        DeQuantStub,
        QuantStub,
        convert,
        fuse_modules,
        get_default_qconfig,
        get_default_qconfig_mapping,
        prepare,
        quantize_dynamic,
    )
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.manual_seed(0)
    torch.backends.quantized.engine = "x86" if "x86" in torch.backends.quantized.supported_engines else "qnnpack"
    engine = torch.backends.quantized.engine
    x = torch.randn(SHAPE)
    fp32 = nn.Sequential(*_body()).eval()
    with torch.no_grad():  # non-trivial BN statistics
        for m in fp32.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    paths = {name: folder / name for name in ("fp32.pt", "dynamic.pt", "static.pt", "fx_traced.pt", "fx_scripted.pt",
                                              "fx_pickled.pt", "half.pt", "fp32.onnx", "fp16.onnx", "qdq.onnx",
                                              "qoperator.onnx")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save(fp32, paths["fp32.pt"])
        torch.save(quantize_dynamic(copy.deepcopy(fp32), {nn.Linear}), paths["dynamic.pt"])
        static = nn.Sequential(QuantStub(), *copy.deepcopy(fp32), DeQuantStub()).eval()
        static = fuse_modules(static, [["1", "2", "3"], ["5", "6", "7"]])
        static.qconfig = get_default_qconfig(engine)
        prepare(static, inplace=True)
        static(x)
        convert(static, inplace=True)
        torch.save(static, paths["static.pt"])
        prepared = prepare_fx(copy.deepcopy(fp32), get_default_qconfig_mapping(engine), (x,))
        prepared(x)
        fx = convert_fx(prepared)
        torch.jit.save(torch.jit.trace(fx, x), paths["fx_traced.pt"])
        torch.jit.save(torch.jit.script(fx), paths["fx_scripted.pt"])
        torch.save(fx, paths["fx_pickled.pt"])
        torch.save(copy.deepcopy(fp32).half(), paths["half.pt"])
        export = {"opset_version": 13, "input_names": ["input"], "output_names": ["output"], "dynamo": False}
        torch.onnx.export(fp32, (x,), str(paths["fp32.onnx"]), **export)
        torch.onnx.export(copy.deepcopy(fp32).half(), (x.half(),), str(paths["fp16.onnx"]), **export)

        class Calibration(CalibrationDataReader):
            def __init__(self) -> None:
                rng = np.random.default_rng(0)
                self.batches = iter([{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(4)])

            def get_next(self) -> Any:
                return next(self.batches, None)

        quantize_static(str(paths["fp32.onnx"]), str(paths["qdq.onnx"]), Calibration(), quant_format=QuantFormat.QDQ)
        quantize_static(str(paths["fp32.onnx"]), str(paths["qoperator.onnx"]), Calibration(),
                        quant_format=QuantFormat.QOperator)
    return paths


def _export(model: Path, out: Path) -> dict[str, Any]:
    """The worker's export-onnx action, in-process; returns its ``model`` section as the wire has it."""
    req = worker.ExportOnnxRequest(model_path=str(model), onnx_path=str(out), input_shape=list(SHAPE))
    res = replies.ExportOnnxReply()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actions.run(req, res, MemoryPhases(0))
    assert res.model is not None
    return res.model.to_dict()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _write_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def exported(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, tuple[Path, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("onnx")
    return {name: (out / f"{name}.onnx", _export(path, out / f"{name}.onnx")) for name, path in models.items()}


@pytest.fixture(scope="module")
def profiles() -> list[Any]:
    """One bundled profile per core: the relations must hold on every core lodevem models."""
    by_core: dict[str, Any] = {}
    for profile in load_profiles():
        by_core.setdefault(profile.fastest_cluster.core, profile)
    return list(by_core.values())


def _plain_copy(path: Path, tmp: Path) -> Path:
    """The same twin without its precision metadata: what lodevem predicted for it before."""
    model = onnx.load(str(path))
    for prop in [p for p in model.metadata_props if p.key == PRECISION_KEY]:
        model.metadata_props.remove(prop)
    target = tmp / f"plain_{path.name}"
    onnx.save(model, str(target))
    return target


EXPECTED = {
    "fp32.pt": ("fp32", None), "fp32.onnx": ("fp32", None),
    "dynamic.pt": ("int8-dynamic", "dynamic, torch.ao eager"),
    "static.pt": ("int8-static", "static, torch.ao eager"),
    "fx_traced.pt": ("int8-static", "static, TorchScript"),
    "fx_scripted.pt": ("int8-static", "static, TorchScript"),
    "fx_pickled.pt": ("int8-static", "static, torch.ao FX"),
    "half.pt": ("fp16", None), "fp16.onnx": ("fp16", None),
    "qdq.onnx": ("int8-static", "static, onnxruntime QDQ"),
    "qoperator.onnx": ("int8-static", "static, onnxruntime QOperator"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_precision_detected_and_kernels_found(exported: dict[str, Any], name: str) -> None:
    path, model = exported[name]
    precision, quantization = EXPECTED[name]
    section = ModelSection.parse(model)  # what the host keeps of the reply
    assert section.precision == precision
    assert (section.quantization or "").startswith(quantization or "") and bool(section.quantization) == bool(quantization)
    graph = extract_kernels(path)
    ops = [k.op for k in graph.kernels]
    # ORT's quantizer fuses the ReLU into the convolution before quantizing: conv, not conv-relu
    conv = "conv" if name in ("qdq.onnx", "qoperator.onnx") else "conv-relu"
    assert ops == [conv, "maxpool", conv, "gap", "fc"], ops
    kinds = {k.op: k.precision for k in graph.kernels}
    if precision == "int8-static":
        assert set(kinds.values()) == {"int8"}
    elif precision == "int8-dynamic":  # Linear only: the convolutions stay fp32
        assert kinds == {conv: "fp32", "maxpool": "fp32", "gap": "fp32", "fc": "int8"}
    else:
        assert set(kinds.values()) == {precision}
    assert graph.precision == precision


def test_twin_has_the_fp32_graph_work(exported: dict[str, Any]) -> None:
    """The float twin of a torch-quantized or half() file is the fp32 model's graph: same kernels,
    same MACs and parameters, so only the precision can move the prediction."""
    reference = extract_kernels(exported["fp32.pt"][0])
    for name in ("dynamic.pt", "static.pt", "fx_traced.pt", "fx_scripted.pt", "fx_pickled.pt", "half.pt",
                 "fp16.onnx"):
        graph = extract_kernels(exported[name][0])
        assert [(k.op, k.macs, k.params, k.cin, k.cout) for k in graph.kernels] == \
               [(k.op, k.macs, k.params, k.cin, k.cout) for k in reference.kernels], name


def test_static_int8_is_fp32_over_the_fitted_factor_on_every_core(exported: dict[str, Any], profiles: list[Any],
                                                                  tmp_path: Path) -> None:
    predictor = kinds_only("estimator")
    for name in ("static.pt", "fx_traced.pt", "fx_scripted.pt", "fx_pickled.pt", "qdq.onnx", "qoperator.onnx"):
        path = exported[name][0]
        int8 = predictor.cells(path, profiles)
        plain = _plain_copy(path, tmp_path)
        plain_fp32 = predictor.cells(plain, profiles)
        plain_int8 = predictor.cells(plain, profiles, level="int8-static")  # the fitted per-core factors
        for p in profiles:
            assert int8[p.id].latency_ms == pytest.approx(plain_int8[p.id].latency_ms), (name, p.id)
            assert int8[p.id].latency_ms != pytest.approx(plain_fp32[p.id].latency_ms, rel=1e-3), (name, p.id)
            assert "5/5 kernels hold int8" in int8[p.id].note and "int8-static file" in int8[p.id].note
            if name.endswith(".pt"):  # torch's twin is the fp32 graph: the same as --levels int8-static
                level = predictor.cells(exported["fp32.pt"][0], [p], level="int8-static")[p.id]
                assert int8[p.id].latency_ms == pytest.approx(level.latency_ms)


def test_dynamic_int8_file_is_priced_as_the_int8_level(exported: dict[str, Any], profiles: list[Any]) -> None:
    """A quantize_dynamic file and ``--levels int8`` of its fp32 twin get the same figure, kernel by
    kernel (issue 35: a user's file and the derived level of one precision are priced alike): the
    runtime's dynamic-range kernels (XNNPACK's cover Conv2D and Fully Connected) run int8 compute
    with float tensors, so the file is faster than fp32, and the other kernels are fp32's."""
    from lodevem.runtimes import adapter

    covered = adapter("tflite").dynamic_int8[0] or ()
    predictor = kinds_only("estimator", breakdown=True)
    fp32 = predictor.cells(exported["fp32.pt"][0], profiles)
    dyn = predictor.cells(exported["dynamic.pt"][0], profiles)
    level = predictor.cells(exported["fp32.pt"][0], profiles, level="int8")
    for p in profiles:
        for base, kernel, as_level in zip(fp32[p.id].kernels, dyn[p.id].kernels, level[p.id].kernels):
            assert kernel.ms == pytest.approx(as_level.ms), (p.id, kernel.name)
            if kernel.category not in covered:
                assert kernel.ms == pytest.approx(base.ms), (p.id, kernel.name)
        assert dyn[p.id].latency_ms == pytest.approx(level[p.id].latency_ms)
        assert dyn[p.id].latency_ms < fp32[p.id].latency_ms
        assert "kernels hold int8-dynamic" in dyn[p.id].note


def test_fp16_files_equal_levels_fp16(exported: dict[str, Any], profiles: list[Any]) -> None:
    """A half() file and an fp16 ONNX give the --levels fp16 figure of the fp32 model, and under
    both app runtimes that is the fp32 figure on every core: LiteRT dequantizes fp16 weights at load
    (fp32 arithmetic); ncnn computes fp32 and fp16 models alike, in fp16 where the core has fp16
    arithmetic (ARMv8.2) and in fp32 elsewhere (``latency.arithmetic``, the runtimes' adapters)."""
    predictor = kinds_only("estimator")
    for runtime in ("tflite", "ncnn"):
        fp32 = predictor.cells(exported["fp32.pt"][0], profiles, runtime=runtime)
        level = predictor.cells(exported["fp32.pt"][0], profiles, level="fp16", runtime=runtime)
        for name in ("half.pt", "fp16.onnx"):
            got = predictor.cells(exported[name][0], profiles, runtime=runtime)
            for p in profiles:
                where = (runtime, name, p.id)
                assert got[p.id].latency_ms == pytest.approx(level[p.id].latency_ms), where
                assert got[p.id].latency_ms == pytest.approx(fp32[p.id].latency_ms), where
                if runtime == "tflite":
                    assert "dequantizes fp16 weights" in got[p.id].note, where


def test_precision_metadata_is_per_node(exported: dict[str, Any]) -> None:
    meta = json.loads(next(p.value for p in onnx.load(str(exported["dynamic.pt"][0])).metadata_props
                           if p.key == PRECISION_KEY))
    assert meta["precision"] == "int8-dynamic" and meta["default"] == "fp32"
    assert list(meta["nodes"].values()) == ["int8"] and node_module(next(iter(meta["nodes"]))) == "9"
    assert node_module("/features/features.0/conv/Conv") == "features.0.conv"
    assert node_module("/fc/Gemm") == "fc" and node_module("/Add") == ""


def test_pickled_quantized_conv_loads_in_the_worker(models: dict[str, Path], tmp_path: Path) -> None:
    """torch.load alone cannot rebuild a pickled quantized ConvReLU2d ('_modules' missing); the
    worker, run as the host runs it, loads and measures the eager static and FX pickles."""
    for name in ("static.pt", "fx_pickled.pt"):
        src = models[name]
        with pytest.raises(AttributeError, match="has no attribute"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.load(src, weights_only=False)(torch.randn(SHAPE))
        request = {"action": "measure", "model_path": str(src), "warmup": 0, "runs": 1, "input_shape": list(SHAPE)}
        proc = subprocess.run([sys.executable, "-m", "lodevem.worker", "--request", json.dumps(request)],
                              capture_output=True, text=True, timeout=180, cwd=tmp_path)
        result = json.loads(proc.stdout.splitlines()[-1])
        assert result["ok"], result.get("error")
        assert result["model"]["format"] == "pickled_module"


def test_dynamic_onnx_is_refused_in_one_line(models: dict[str, Path], tmp_path: Path) -> None:
    from onnxruntime.quantization import quantize_dynamic

    src = models["fp32.onnx"]
    target = tmp_path / "ortdyn.onnx"
    quantize_dynamic(str(src), str(target))
    with pytest.raises(protocol.WorkerError) as info:
        _export(target, tmp_path / "twin.onnx")
    assert info.value.kind == "export_failed" and "quantize_static" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.docker
def test_start_predicts_quantized_and_half_files_as_what_they_are(docker_backend, models: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    """End to end through the Docker sandbox: every row has a latency and a peak RAM, the CSV says
    what each file computes in, static int8 = fp32 / the fitted factor and the half() file equals
    ``--levels fp16`` of the fp32 file on a core with fp16 arithmetic (A55) and one without (A7)."""
    import csv

    from click.testing import CliRunner

    from lodevem.cli import cli

    files = [models[n] for n in ("fp32.pt", "half.pt", "static.pt", "dynamic.pt", "qdq.onnx")]
    common = ["--runs", "2", "--warmup", "1", "--backend", "docker", "--predictor", "estimator", "--runtime", "torch",
              "--profile", "itel_a70", "--profile", "nokia_c1", "--input-shape", ",".join(map(str, SHAPE))]

    def rows(out: Path, *args: str) -> dict[tuple[str, str], dict[str, str]]:
        result = CliRunner().invoke(cli, ["start", *args, "--output", str(out), *common], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        with (out / "benchmark_results.csv").open() as handle:
            return {(Path(r["model_label"]).name, r["profile_id"]): r for r in csv.DictReader(handle)}

    got = rows(tmp_path / "files", *map(str, files))
    levels = rows(tmp_path / "levels", str(models["fp32.pt"]), "--levels", "fp32,fp16,int8-static")
    for row in got.values():
        assert float(row["latency_ms"]) > 0 and float(row["peak_rss_mb"]) > 0, row
    expected = {"fp32.pt": ("fp32", ""), "half.pt": ("fp16", ""), "static.pt": ("int8-static", "static, torch.ao eager"),
                "dynamic.pt": ("int8-dynamic", "dynamic, torch.ao eager"), "qdq.onnx": ("int8-static", "static, onnxruntime QDQ")}
    for (label, _pid), row in got.items():
        assert row["precision"] == expected[label][0], row
        assert row["quantization"].startswith(expected[label][1]) and bool(row["quantization"]) == bool(expected[label][1])
    for pid, core in (("itel_a70", "Cortex-A55"), ("nokia_c1", "Cortex-A7")):
        fp32 = float(got[("fp32.pt", pid)]["latency_ms"])
        static_level = next(r for (label, p), r in levels.items() if p == pid and label.endswith("@int8-static"))
        assert float(got[("static.pt", pid)]["latency_ms"]) == pytest.approx(float(static_level["latency_ms"]), rel=1e-3)
        if core == "Cortex-A7":  # int8 computes faster than fp32 there; on this small net the per-kernel
            # overhead and the SoC's DRAM time (estimator v4) take a share int8 does not shrink as much
            assert float(got[("static.pt", pid)]["latency_ms"]) < fp32, core
        fp16_level = next(r for (label, p), r in levels.items() if p == pid and label.endswith("@fp16"))
        assert fp16_level["precision"] == "fp16"
        assert float(got[("half.pt", pid)]["latency_ms"]) == pytest.approx(float(fp16_level["latency_ms"]), rel=1e-3)


def test_onnxruntime_measures_the_models_own_export_not_the_twin(models: dict[str, Path],
                                                                  exported: dict[str, Any], tmp_path: Path) -> None:
    """--runtime onnxruntime on an int8 or fp16 PyTorch file: the twin (fp32 weights) is refused in
    one line; the plain export (twin=false) keeps the model's QDQ ops / fp16 weights and runs."""
    for name, marker in (("static.pt", "QuantizeLinear"), ("half.pt", None)):
        runtime = tmp_path / f"{name}-runtime.onnx"
        req = worker.ExportOnnxRequest(model_path=str(models[name]), onnx_path=str(runtime), input_shape=list(SHAPE),
                                       twin=False)
        res = replies.ExportOnnxReply()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actions.run(req, res, MemoryPhases(0))
        exported_model = onnx.load(str(runtime))
        assert not any(p.key == PRECISION_KEY for p in exported_model.metadata_props)
        if marker:
            assert marker in {n.op_type for n in exported_model.graph.node}
        else:
            assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in exported_model.graph.initializer)
        for onnx_path, ok in ((runtime, True), (exported[name][0], False)):
            measure = worker.MeasureRequest(model_path=str(models[name]), runtime="onnxruntime",
                                            onnx_path=str(onnx_path), input_shape=list(SHAPE), warmup=0, runs=1)
            res = replies.MeasureReply()
            if ok:
                actions.run(measure, res, MemoryPhases(0))
                assert res.latency is not None
            else:
                with pytest.raises(protocol.WorkerError, match="float twin"):
                    actions.run(measure, res, MemoryPhases(0))


def test_reply_precision_is_checked_by_the_host() -> None:
    """The host keeps only known precisions and a two-part quantization from the untrusted reply."""
    good = ModelSection.parse({"precision": "int8-static", "quantization": {"scheme": "static", "backend": "onnxruntime QDQ"}})
    assert (good.precision, good.quantization) == ("int8-static", "static, onnxruntime QDQ")
    bad = ModelSection.parse({"precision": "int3", "quantization": {"scheme": ["x"], "backend": "y"}})
    assert (bad.precision, bad.quantization) == (None, None)
    assert ModelSection.parse({"precision": 8, "quantization": "static"}) == ModelSection()


def test_unknown_precision_metadata_is_refused(exported: dict[str, Any], tmp_path: Path) -> None:
    """The twin is written by the sandbox: the host checks its metadata instead of trusting it."""
    from lodevem.errors import InputError

    for value in ('{"precision": "int8-static", "default": "int4", "nodes": {}}', "not json"):
        model = onnx.load(str(exported["static.pt"][0]))
        next(p for p in model.metadata_props if p.key == PRECISION_KEY).value = value
        path = tmp_path / "tampered.onnx"
        onnx.save(model, str(path))
        with pytest.raises(InputError, match=PRECISION_KEY):
            extract_kernels(path)


def test_real_network_twins_keep_every_kernel(tmp_path: Path) -> None:
    """mobilenet_v2 (residual adds, depthwise convs) quantized two ways users do it: FX static
    int8 written as traced TorchScript (what ``derive --levels int8-static`` writes) and an
    onnxruntime QDQ file. The twin has the fp32 graph's 64 kernels and MACs, all of them int8."""
    import onnxsim
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    from lodevem import zoo
    from lodevem.worker.derive.variants import derive_variant, write_variant

    x = torch.randn(1, 3, 224, 224)
    module = zoo.build("mobilenet_v2").eval()
    torch.save(module, tmp_path / "fp32.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        variant, _, _ = derive_variant(module, "int8-static", x, keep_original=True)
        write_variant(variant, x, str(tmp_path / "fx_int8.pt"))
        torch.onnx.export(module, (x,), str(tmp_path / "fp32.onnx"), opset_version=13, input_names=["input"],
                          output_names=["output"], dynamo=False)
    simplified, _ = onnxsim.simplify(onnx.load(str(tmp_path / "fp32.onnx")))
    onnx.save(simplified, str(tmp_path / "fp32.onnx"))

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32)}])

        def get_next(self) -> Any:
            return next(self.batches, None)

    quantize_static(str(tmp_path / "fp32.onnx"), str(tmp_path / "qdq.onnx"), Calibration(),
                    quant_format=QuantFormat.QDQ)
    reference = extract_kernels(_export_to(tmp_path, "fp32.pt"))
    assert len(reference.kernels) == 64
    for name in ("fx_int8.pt", "qdq.onnx"):
        graph = extract_kernels(_export_to(tmp_path, name))
        assert graph.precision == "int8-static"
        assert len(graph.kernels) == 64 and graph.macs == reference.macs, name
        assert {k.precision for k in graph.kernels} == {"int8"}, name


def _export_to(folder: Path, name: str) -> Path:
    out = folder / f"{name}.twin.onnx"
    req = worker.ExportOnnxRequest(model_path=str(folder / name), onnx_path=str(out))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actions.run(req, replies.ExportOnnxReply(), MemoryPhases(0))
    return out
