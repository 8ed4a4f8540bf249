"""Compression levels: each variant is derived and run by the real worker (``python -m
lodevem.worker`` in a subprocess, as the host drives it), and the files ``derive`` writes are
checked here by loading them (tests may load files they created themselves).

Models: tiny_cnn for fp16 (x86 fp16 kernels are slow), a Linear-only MLP for dynamic int8,
mobilenet_v2 for int8-static and pruned (a CNN with depthwise convs and residual adds, the
structure phones run). Helper classes live in a module written into the worker's cwd, so the
worker can unpickle them like a user's own code.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from lodevem import levels, worker, zoo
from lodevem.derive import DERIVABLE, derive_cached, derive_variants
from lodevem.errors import DeriveFailed, InputError
from lodevem.results import ModelFile
from lodevem.sandbox.client import WorkerClient
from lodevem.sandbox.process_backend import ProcessBackend
from lodevem.store import ArtifactStore

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # torch.ao quantization, torch.jit
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

FAST = {"warmup": 1, "runs": 3}
SHAPE = [1, 3, 224, 224]

HELPERS = textwrap.dedent('''
    import torch
    from torch import nn


    class Branchy(nn.Module):
        """Data-dependent control flow: torch.fx cannot trace it."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            if x.mean() > 0:
                return self.conv(x)
            return self.conv(-x)


    class WithDet(nn.Module):
        """torch.linalg.det has no float16 kernel on CPU."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            return torch.linalg.det(self.fc(x).reshape(-1, 4, 4))
''')


def run_worker(request: dict[str, Any], cwd: Path, timeout: float = 180) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "lodevem.worker", "--request", json.dumps(request)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line, got {proc.stdout!r}\nstderr: {proc.stderr}"
    result = json.loads(lines[0])
    assert proc.returncode in (0, 3) and result["ok"] is (proc.returncode == 0), proc.stderr
    assert result["worker_version"] == worker.WORKER_VERSION
    if proc.returncode == 3:
        assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, result


def ok(rc_result: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    rc, result = rc_result
    assert rc == 0, result["error"]
    return result


def error_of(rc_result: tuple[int, dict[str, Any]], kind: str) -> str:
    rc, result = rc_result
    assert rc == 3 and result["error"]["kind"] == kind, result["error"]
    message = result["error"]["message"]
    assert message and "\n" not in message
    return message


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worker's cwd; holds ``levelhelpers.py`` so the worker can unpickle its classes."""
    d = tmp_path_factory.mktemp("levels_cwd")
    (d / "levelhelpers.py").write_text(HELPERS)
    return d


@pytest.fixture(scope="module")
def files(scratch: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("level_models")
    out = {"mobilenet_v2": zoo.write("mobilenet_v2", d), "tiny_cnn": zoo.write("tiny_cnn", d)}
    out["mlp"] = d / "mlp.pt"
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10)).eval()
    torch.save(mlp, out["mlp"])
    out["tiny_ts"] = d / "tiny_ts.pt"
    torch.jit.save(torch.jit.trace(zoo.build("tiny_cnn"), torch.randn(1, 3, 64, 64)), out["tiny_ts"])
    sys.path.insert(0, str(scratch))
    try:
        helpers = importlib.import_module("levelhelpers")
        out["branchy"], out["det"] = d / "branchy.pt", d / "det.pt"
        torch.save(helpers.Branchy().eval(), out["branchy"])
        torch.save(helpers.WithDet().eval(), out["det"])
    finally:
        sys.path.remove(str(scratch))
        sys.modules.pop("levelhelpers", None)
    return out


@pytest.fixture(scope="module")
def derived(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every derivable level of mobilenet_v2, written by the host API through the process backend."""
    out_dir = tmp_path_factory.mktemp("derived")
    written = derive_variants(files["mobilenet_v2"], DERIVABLE, out_dir, WorkerClient(ProcessBackend()))
    return {f.level: f for f in written}


# --- protocol -----------------------------------------------------------------------------------

def test_protocol_knows_the_levels() -> None:
    assert worker.LEVELS == tuple(levels.LEVELS)
    assert "level_failed" in worker.ERROR_KINDS and "derive" in worker.ACTIONS
    assert worker.WORKER_VERSION.startswith(worker.WORKER_RELEASE + "+")
    for level in DERIVABLE:
        worker.WorkerRequest.from_json({"action": "derive", "model_path": "m.pt", "level": level, "derive_out": "o.pt"})
    for bad in ({"level": "int4", "derive_out": "o.pt"}, {"level": "int8"}, {"derive_out": "o.pt"},
                {"level": "fp32", "derive_out": "o.pt"}, {"level": "int8", "derive_out": "o.pt", "runtime": "onnxruntime"}):
        with pytest.raises(worker.WorkerError) as info:
            worker.WorkerRequest.from_json({"action": "derive", "model_path": "m.pt", **bad})
        assert info.value.kind == "bad_request"
    for action in ("measure", "export-onnx", "inspect"):  # a level's variant is measured as the file derive wrote
        with pytest.raises(worker.WorkerError, match="level is only for action derive"):
            worker.WorkerRequest.from_json({"action": action, "model_path": "m.pt", "level": "int8"})


# --- each level in the worker --------------------------------------------------------------------

def derive(model: Path, level: str, cwd: Path, **extra: Any) -> tuple[int, dict[str, Any]]:
    """One ``derive`` run of the real worker, writing the variant into ``cwd``."""
    out = cwd / f"{model.stem}_{level}_{len(list(cwd.glob('*.pt')))}.pt"
    return run_worker({"action": "derive", "model_path": str(model), "level": level, "derive_out": str(out),
                       **extra}, cwd)


def test_fp16_halves_parameter_bytes(files: dict[str, Path], scratch: Path) -> None:
    res = ok(derive(files["tiny_cnn"], "fp16", scratch, input_shape=[1, 3, 64, 64]))
    variant = res["variant"]
    assert variant["level"] == "fp16" and variant["params_after"] == variant["params_before"]
    # every float tensor halves; BN's int64 num_batches_tracked counters stay
    assert 0.49 <= variant["param_bytes_after"] / variant["param_bytes_before"] <= 0.51
    assert (res["model"]["dtype"], res["model"]["input_dtype"]) == ("float16", "float16")
    assert res["model"]["param_bytes"] == variant["param_bytes_after"]
    assert variant["serialized_bytes"] < 0.6 * res["model"]["file_bytes"]


def test_int8_dynamic_quantizes_linear_layers(files: dict[str, Path], scratch: Path) -> None:
    res = ok(derive(files["mlp"], "int8", scratch, input_shape=[1, 256]))
    variant = res["variant"]
    assert variant["details"]["quantized_layers"] == 3
    assert worker.NOTE_DYNAMIC in variant["notes"][0]
    assert variant["serialized_bytes"] < 0.4 * res["model"]["file_bytes"]  # int8 weights: ~1/4 of fp32
    assert res["model"]["dtype"] == "qint8" and res["model"]["input_dtype"] == "float32"


def test_int8_static_shrinks_a_cnn_three_times(files: dict[str, Path], scratch: Path) -> None:
    res = ok(derive(files["mobilenet_v2"], "int8-static", scratch))
    variant = res["variant"]
    assert variant["serialized_bytes"] * 3 <= res["model"]["file_bytes"], variant
    assert variant["serialized_format"] == "torchscript"  # FX-quantized GraphModules do not pickle
    assert variant["param_bytes_after"] * 3 <= variant["param_bytes_before"]
    assert variant["details"]["quantized_layers"] >= 52 and variant["details"]["calibration_batches"] == 8
    assert res["model"]["dtype"] == "qint8"


def test_pruned_measure_reports_a_smaller_model(files: dict[str, Path], scratch: Path) -> None:
    res = ok(derive(files["mobilenet_v2"], "pruned", scratch))
    variant = res["variant"]
    details = variant["details"]
    assert variant["params_after"] < 0.5 * variant["params_before"]
    assert details["macs_after"] < 0.5 * details["macs_before"] and details["kept_layers"] == ["classifier.1"]
    assert 0.4 <= details["removed_fraction_min"] <= details["removed_fraction_max"] <= 0.6
    assert worker.NOTE_PRUNED in variant["notes"]


# --- derived files -------------------------------------------------------------------------------

def _load(path: Path, fmt: str) -> nn.Module:
    if fmt == "torchscript":
        return torch.jit.load(str(path), map_location="cpu")
    return torch.load(path, map_location="cpu", weights_only=False)


def test_derive_writes_loadable_files(derived: dict[str, Any], files: dict[str, Path]) -> None:
    assert sorted(derived) == sorted(DERIVABLE)
    original_size = files["mobilenet_v2"].stat().st_size
    for level, f in derived.items():
        assert f.variant_path.name == f"mobilenet_v2_{level}.pt" and f.variant_path.stat().st_size == f.size_bytes
        assert f.format == ("torchscript" if level == "int8-static" else "pickled_module")
        model = _load(f.variant_path, f.format)
        dtype = torch.float16 if level == "fp16" else torch.float32
        with torch.inference_mode():  # a small image: x86 fp16 kernels are slow
            assert tuple(model(torch.randn(1, 3, 96, 96, dtype=dtype)).shape) == (1, 1000), level
    assert derived["fp16"].size_bytes < 0.55 * original_size
    assert derived["int8-static"].size_bytes * 3 <= original_size
    assert "convolutions stay fp32" in derived["int8"].note
    assert "not fine-tuned" in derived["pruned"].note
    assert not list(derived["fp16"].variant_path.parent.glob("*.tmp*"))


def test_derived_int8_static_file_reports_its_packed_weights(derived: dict[str, Any], scratch: Path) -> None:
    """Quantized TorchScript keeps its weights in packed ScriptObjects, outside the state_dict."""
    res = ok(run_worker({"action": "inspect", "model_path": str(derived["int8-static"].variant_path)}, scratch))
    assert res["model"]["format"] == "torchscript" and res["model"]["dtype"] == "qint8"
    assert res["model"]["params"] == derived["int8-static"].params > 3_000_000


def test_pruned_file_halves_each_pruned_layer(derived: dict[str, Any], files: dict[str, Path]) -> None:
    original = torch.load(files["mobilenet_v2"], weights_only=False)
    pruned = _load(derived["pruned"].variant_path, "pickled_module")
    widths = {n: m.out_channels for n, m in original.named_modules() if isinstance(m, nn.Conv2d)}
    after = {n: m.out_channels for n, m in pruned.named_modules() if isinstance(m, nn.Conv2d)}
    assert widths.keys() == after.keys()
    removed = {n: 1 - after[n] / w for n, w in widths.items() if after[n] != w}
    assert len(removed) >= 0.9 * len(widths)  # every conv is coupled to a prunable channel group
    assert all(0.4 <= r <= 0.6 for r in removed.values()), removed
    assert pruned.classifier[1].out_features == 1000  # the classifier keeps its outputs
    assert zoo.count_params(pruned) == derived["pruned"].params < 0.5 * zoo.count_params(original)
    assert zoo.count_mflops(pruned, SHAPE) < 0.5 * zoo.count_mflops(original, SHAPE)


def test_derive_refuses_fp32_and_reports_failures(files: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nothing to derive"):
        derive_variants(files["mobilenet_v2"], ["fp32"], tmp_path, WorkerClient(ProcessBackend()))
    with pytest.raises(InputError, match="unknown level"):
        derive_variants(files["mobilenet_v2"], ["int4"], tmp_path, WorkerClient(ProcessBackend()))
    # a TorchScript file is pruned through its exported program (TS2EP, its layers rebuilt: worker.load.programs)
    (pruned,) = derive_variants(files["tiny_ts"], ["pruned"], tmp_path / "ts", WorkerClient(ProcessBackend()),
                                input_shape=[1, 3, 64, 64])
    assert pruned.variant_path is not None and pruned.variant_path.is_file() and "structured" in pruned.note
    # a graph torch's TorchScript converter rejects (dynamic int8 Linear): one line, nothing written
    dynamic = tmp_path / "dynamic_ts.pt"
    with torch.no_grad():
        quantized = torch.ao.quantization.quantize_dynamic(torch.load(files["mlp"], weights_only=False),
                                                           {nn.Linear}, dtype=torch.qint8)
        torch.jit.save(torch.jit.trace(quantized, torch.randn(1, 256)), str(dynamic))
    with pytest.raises(DeriveFailed) as info:
        derive_variants(dynamic, ["pruned"], tmp_path / "dyn", WorkerClient(ProcessBackend()), input_shape=[1, 256])
    assert "TS2EPConverter" in info.value.failures["pruned"] and info.value.written == []
    assert not list((tmp_path / "dyn").iterdir())


class _CountingBackend(ProcessBackend):
    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return super().run(*args, **kwargs)


def test_derive_cached_derives_once(files: dict[str, Path], tmp_path: Path) -> None:
    backend = _CountingBackend()
    model = ModelFile.from_path(files["mlp"], level="int8")
    first = derive_cached(model, ArtifactStore(tmp_path), WorkerClient(backend), input_shape=[1, 256])
    again = derive_cached(model, ArtifactStore(tmp_path), WorkerClient(backend), input_shape=[1, 256])
    assert backend.runs == 1 and again == first and first.variant_path.parent == tmp_path / "derived"
    derive_cached(model, ArtifactStore(tmp_path, use_cache=False), WorkerClient(backend), input_shape=[1, 256])
    assert backend.runs == 2  # --no-cache derives again
    assert first.format == "pickled_module" and first.size_bytes < 0.4 * files["mlp"].stat().st_size


# --- ONNX export with a level ----------------------------------------------------------------------

def test_export_pruned_graph_has_fewer_macs_and_passes_nn_meter(derived: dict[str, Any], scratch: Path,
                                                                 tmp_path: Path) -> None:
    pytest.importorskip("nn_meter")
    from lodevem.latency.kernels import extract_kernels

    original = tmp_path / "original.onnx"
    worker.export_module(zoo.build("mobilenet_v2"), torch.randn(SHAPE), str(original))  # trusted zoo model
    pruned = tmp_path / "pruned.onnx"
    res = ok(run_worker({"action": "export-onnx", "model_path": str(derived["pruned"].variant_path),
                         "onnx_path": str(pruned)}, scratch))
    assert res["model"]["params"] == derived["pruned"].params
    full, small = extract_kernels(original), extract_kernels(pruned)  # nn-Meter's converter + kernel detector
    assert len(small.kernels) == len(full.kernels) > 50
    assert small.macs < 0.5 * full.macs
    # onnxruntime runs the pruned graph
    res = ok(run_worker({"action": "measure", "model_path": str(derived["pruned"].variant_path),
                         "runtime": "onnxruntime", "onnx_path": str(pruned), **FAST}, scratch))
    assert res["model"]["params"] == derived["pruned"].params


# --- failures ---------------------------------------------------------------------------------------

def test_untraceable_model_fails_int8_static_in_one_line(files: dict[str, Path], scratch: Path) -> None:
    message = error_of(derive(files["branchy"], "int8-static", scratch, input_shape=[1, 3, 16, 16]), "level_failed")
    assert "trac" in message and "control flow" in message


def test_fp16_op_failure_is_a_level_failure(files: dict[str, Path], scratch: Path) -> None:
    message = error_of(derive(files["det"], "fp16", scratch, input_shape=[2, 16]), "level_failed")
    assert "Half" in message
    # a shape the original model rejects as well is the input's fault, not the level's
    error_of(derive(files["det"], "fp16", scratch, input_shape=[2, 15]), "bad_input_shape")
