"""Tests for lodevem.worker, driven the way the host drives it: a subprocess speaking JSON.

Every worker call runs ``python -m lodevem.worker`` from a scratch directory (so classes defined in
this test module are *not* importable there, as in the container) and checks the protocol: exactly
one JSON line on stdout, exit code 0 or 3, no traceback on stderr for the errors the worker
explains. The nn-Meter check exports the 11 zoo models in-process with the worker's own export
function (zoo models are trusted code) and runs nn-Meter's converter and kernel detector offline.
"""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from lodevem import worker, zoo

pytestmark = [  # fixtures use torch.jit and eager quantization, both deprecated in torch 2.13
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning"),
]

FAST = {"warmup": 1, "runs": 3}
MB = 1024  # kB per MiB


def run_worker(request: dict[str, Any], cwd: Path, timeout: float = 180) -> tuple[int, dict[str, Any], str]:
    """Run the worker like the host does; assert the stdout contract; return (rc, result, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "lodevem.worker", "--request", json.dumps(request)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be exactly one JSON line, got {proc.stdout!r}\nstderr: {proc.stderr}"
    result = json.loads(lines[0])
    assert proc.returncode in (0, 3), proc.stderr
    assert result["ok"] is (proc.returncode == 0)
    assert result["schema_version"] == worker.SCHEMA_VERSION and result["worker_version"] == worker.WORKER_VERSION
    return proc.returncode, result, proc.stderr


def assert_clean_error(rc: int, result: dict[str, Any], stderr: str, kind: str) -> str:
    """A worker-explained error: exit 3, the expected kind, one-line message, no traceback."""
    assert rc == 3, result
    assert result["error"]["kind"] == kind, result["error"]
    message = result["error"]["message"]
    assert "\n" not in message and message
    assert "Traceback" not in stderr, stderr
    return message


class _LocalNet(nn.Module):
    """Defined in the test module, so its pickle cannot be loaded where the worker runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class _Chatty(nn.Module):
    """Prints from forward (C++ stdout once scripted) and needs a [N, 12] input."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("hello from forward")
        return self.fc(x.flatten(1))


class _Raises(nn.Module):
    """Its forward fails for a reason of its own, whatever the input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() > 0:
            raise ValueError("weights not calibrated")
        return x


class _TwoInputs(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x * mask


class _BadState:
    """A pickle whose own code raises while it is loaded (not a damaged file)."""

    def __reduce__(self):
        return (int, ("not a number",))


class _FFT(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).real


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker_cwd")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One file per format and per bad-file kind."""
    d = tmp_path_factory.mktemp("models")
    tiny = zoo.build("tiny_cnn")
    out = {"pickled_module": zoo.write("tiny_cnn", d), "mobilenet_v2": zoo.write("mobilenet_v2", d)}
    out["torchscript"] = d / "tiny_ts.pt"  # zoo models are not scriptable (class annotations); trace works
    torch.jit.save(torch.jit.trace(tiny, torch.randn(1, 3, 64, 64)), out["torchscript"])
    out["exported_program"] = d / "tiny.pt2"
    torch.export.save(torch.export.export(tiny, (torch.randn(1, 3, 64, 64),)), out["exported_program"])
    out["onnx"] = d / "tiny.onnx"
    worker.export_module(tiny, torch.randn(1, 3, 96, 96), str(out["onnx"]))
    out["fp16"] = d / "tiny_fp16.pt"
    torch.save(zoo.build("tiny_cnn").half(), out["fp16"])
    out["int8"] = d / "mlp_int8.pt"
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 10)).eval()
    torch.save(torch.ao.quantization.quantize_dynamic(mlp, {nn.Linear}, dtype=torch.qint8), out["int8"])
    out["chatty_ts"] = d / "chatty_ts.pt"
    torch.jit.save(torch.jit.script(_Chatty()), out["chatty_ts"])
    out["fft_ts"] = d / "fft_ts.pt"
    torch.jit.save(torch.jit.script(_FFT()), out["fft_ts"])
    out["raises_ts"] = d / "raises_ts.pt"
    torch.jit.save(torch.jit.script(_Raises()), out["raises_ts"])
    out["two_inputs_ts"] = d / "two_inputs_ts.pt"
    torch.jit.save(torch.jit.script(_TwoInputs()), out["two_inputs_ts"])
    out["bad_state.pt"] = d / "bad_state.pt"
    torch.save(_BadState(), out["bad_state.pt"])
    out.update(_bad_files(d, tiny))
    return out


def _bad_files(d: Path, tiny: nn.Module) -> dict[str, Path]:
    out = {name: d / name for name in ("state_dict.pt", "checkpoint.pt", "optim_only.pt", "notes.txt", "image.png",
                                       "list.pkl", "truncated_zip.pt", "truncated_legacy.pt", "empty.pt",
                                       "local_class.pt")}
    torch.save(tiny.state_dict(), out["state_dict.pt"])
    optimizer = torch.optim.SGD(tiny.parameters(), lr=0.1)
    torch.save({"epoch": 3, "model": tiny, "optimizer": optimizer.state_dict()}, out["checkpoint.pt"])
    torch.save({"epoch": 3, "model_state_dict": tiny.state_dict(), "optimizer": optimizer.state_dict()},
               out["optim_only.pt"])
    out["notes.txt"].write_text("epochs: 90\nlr: 0.1\n")
    out["image.png"].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    out["list.pkl"].write_bytes(pickle.dumps([1, 2, 3]))
    whole = zoo.write("tiny_cnn", d / "tmp").read_bytes()
    out["truncated_zip.pt"].write_bytes(whole[: len(whole) // 2])
    legacy = d / "legacy.pt"
    torch.save(tiny, legacy, _use_new_zipfile_serialization=False)
    out["truncated_legacy.pt"].write_bytes(legacy.read_bytes()[: legacy.stat().st_size // 2])
    out["empty.pt"].write_bytes(b"")
    torch.save(_LocalNet(), out["local_class.pt"])
    out["legacy"] = legacy
    return out


# --- protocol basics (no torch in the worker for these) ------------------------------------------

def test_protocol_module_imports_without_torch() -> None:
    code = "import sys, lodevem.worker as w; print(w.SCHEMA_VERSION, 'torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(worker.SCHEMA_VERSION), "False", "False"]


def test_request_round_trip_and_validation() -> None:
    req = worker.MeasureRequest(model_path="m.pt", input_shape=[1, 3, 32, 32], runs=7)
    assert worker.WorkerRequest.from_json(req.to_json()) == req
    for bad in ({"action": "measure", "model_path": "m.pt", "colour": "red"},
                {"action": "measure", "model_path": "m.pt", "schema_version": 1},
                {"action": "measure", "model_path": "m.pt", "level": "int4"},
                {"action": "measure", "model_path": "m.pt", "runs": 0},
                {"action": "measure", "model_path": "m.pt", "input_shape": [1, 0, 3]},
                {"action": "fly", "model_path": "m.pt"}, {"model_path": "m.pt"}, [1, 2]):
        with pytest.raises(worker.WorkerError) as info:
            worker.WorkerRequest.from_json(json.dumps(bad))
        assert info.value.kind == "bad_request"


@pytest.mark.parametrize("request_text", ['{"action": "measure", "model_path": "m.pt", "colour": "red"}',
                                          '{"action": "measure", "model_path": "m.pt", "level": "int4"}',
                                          '{"action": "measure", "model_path": "m.pt", "schema_version": 99}',
                                          "not json"])
def test_bad_request_is_a_clean_error(request_text: str, scratch: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "lodevem.worker", "--request", request_text],
                          capture_output=True, text=True, cwd=scratch)
    result = json.loads(proc.stdout)
    assert_clean_error(proc.returncode, result, proc.stderr, "bad_request")


def test_request_file_and_stdin_transport(scratch: Path) -> None:
    request = json.dumps({"action": "inspect", "model_path": str(scratch / "absent.pt")})
    path = scratch / "request.json"
    path.write_text(request)
    for args, stdin in ((["--request-file", str(path)], None), (["--request", "-"], request)):
        proc = subprocess.run([sys.executable, "-m", "lodevem.worker", *args], input=stdin,
                              capture_output=True, text=True, cwd=scratch)
        assert_clean_error(proc.returncode, json.loads(proc.stdout), proc.stderr, "not_found")
    proc = subprocess.run([sys.executable, "-m", "lodevem.worker"], capture_output=True, text=True, cwd=scratch)
    assert_clean_error(proc.returncode, json.loads(proc.stdout), proc.stderr, "bad_request")


def test_percentile_matches_numpy() -> None:
    np = pytest.importorskip("numpy")
    xs = [random.Random(1).uniform(0, 100) for _ in range(37)]
    for q in (0, 50, 90, 95, 99, 100):
        assert worker.percentile(sorted(xs), q) == pytest.approx(float(np.percentile(xs, q)))


# --- formats ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["pickled_module", "torchscript", "exported_program", "onnx"])
def test_measure_round_trips_every_format(fmt: str, files: dict[str, Path], scratch: Path) -> None:
    runtime = "onnxruntime" if fmt == "onnx" else "torch"
    rc, res, stderr = run_worker({"action": "measure", "model_path": str(files[fmt]), "runtime": runtime, **FAST},
                                 scratch)
    assert rc == 0, res["error"]
    assert res["model"]["format"] == fmt and res["runtime"]["name"] == runtime
    assert res["model"]["params"] > 50_000 and len(res["model"]["sha256"]) == 64
    expected_shape = {"exported_program": [1, 3, 64, 64], "onnx": [1, 3, 96, 96]}.get(fmt, [1, 3, 224, 224])
    assert res["model"]["input_shape"] == expected_shape  # recorded by the format where it can be
    lat = res["latency"]
    assert len(lat["samples_ms"]) == 3 and lat["runs"] == 3 and lat["warmup"] == 1 and lat["threads"] == 1
    assert 0 < lat["min_ms"] <= lat["p50_ms"] <= lat["p90_ms"] <= lat["p99_ms"] <= lat["max_ms"] < 10_000
    assert lat["min_ms"] <= lat["mean_ms"] <= lat["max_ms"]
    assert lat["throughput_ips"] == pytest.approx(1000 / lat["mean_ms"])
    for phase in ("start", "imported", "loaded", "warmup 1/1", "run 3/3", "done"):
        assert f"{worker.PROGRESS_PREFIX}{phase}" in stderr


def test_inspect_reports_without_timing(files: dict[str, Path], scratch: Path) -> None:
    rc, res, _ = run_worker({"action": "inspect", "model_path": str(files["torchscript"])}, scratch)
    assert rc == 0 and "latency" not in res and "onnx" not in res  # inspect's record has neither section
    model = res["model"]  # TorchScript cannot record its input shape: the default applies
    assert (model["format"], model["params"], model["input_shape"]) == ("torchscript", 61338, [1, 3, 224, 224])
    assert model["dtype"] == model["input_dtype"] == "float32" and model["param_bytes"] >= 4 * 61338


# --- files that are not usable models ----------------------------------------------------------------

BAD_FILES = [
    ("state_dict.pt", "state_dict", ["state_dict", "26 tensors", "'features.0.0.weight'", "torch.save(model, path)"]),
    ("checkpoint.pt", "optimizer_checkpoint", ["training checkpoint", "under key 'model'", "torch.jit.save"]),
    ("optim_only.pt", "optimizer_checkpoint", ["'model_state_dict'", "'optimizer'"]),
    ("notes.txt", "not_a_model", ["text file", "torch.export.save"]),
    ("image.png", "not_a_model", ["PNG image"]),
    ("list.pkl", "not_a_model", ["pickled list"]),
    ("truncated_zip.pt", "corrupt", ["truncated or corrupt"]),
    ("truncated_legacy.pt", "corrupt", ["truncated or corrupt"]),
    ("empty.pt", "corrupt", ["empty"]),
    ("missing.pt", "not_found", ["not found"]),
    ("local_class.pt", "unsupported_format", ["code is not available in the sandbox", "--code"]),
]


@pytest.mark.parametrize("name,kind,fragments", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_get_one_line_explanations(name: str, kind: str, fragments: list[str], files: dict[str, Path],
                                             scratch: Path) -> None:
    path = files.get(name, scratch / name)
    rc, res, stderr = run_worker({"action": "measure", "model_path": str(path), **FAST}, scratch)
    message = assert_clean_error(rc, res, stderr, kind)
    for fragment in fragments:
        assert fragment in message, message


def test_legacy_torch_save_format_still_loads(files: dict[str, Path], scratch: Path) -> None:
    rc, res, _ = run_worker({"action": "inspect", "model_path": str(files["legacy"])}, scratch)
    assert rc == 0 and res["model"]["format"] == "pickled_module"


def test_bad_input_shape_quotes_the_model(files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "measure", "model_path": str(files["pickled_module"]), "input_shape": [1, 1, 32, 32], **FAST}
    message = assert_clean_error(*run_worker(request, scratch), "bad_input_shape")
    assert "[1, 1, 32, 32]" in message and "to have 3 channels, but got 1 channels" in message
    # TorchScript wraps the cause in an interpreter banner; the message quotes the cause.
    request = {"action": "measure", "model_path": str(files["chatty_ts"]), **FAST}
    message = assert_clean_error(*run_worker(request, scratch), "bad_input_shape")
    assert "mat1 and mat2 shapes cannot be multiplied" in message and "--input-shape" in message


@pytest.mark.parametrize("name, kind, fragments", [
    ("raises_ts", "model_failed", ["forward failed", "ValueError: weights not calibrated"]),
    ("two_inputs_ts", "bad_input_shape", ["more than one input", "wrapper module"]),
    ("bad_state.pt", "model_failed", ["ran code from the file", "ValueError", "not a number"]),
])
def test_a_model_that_fails_is_not_blamed_on_the_shape(name: str, kind: str, fragments: list[str],
                                                        files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "measure", "model_path": str(files[name]), **FAST}
    message = assert_clean_error(*run_worker(request, scratch), kind)
    for fragment in fragments:
        assert fragment in message, message
    assert "truncated" not in message and ("set input_shape" not in message)


def test_model_prints_do_not_corrupt_stdout(files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "measure", "model_path": str(files["chatty_ts"]), "input_shape": [2, 12], **FAST}
    rc, res, stderr = run_worker(request, scratch)  # asserts stdout is a single JSON line
    assert rc == 0 and "hello from forward" in stderr
    assert res["latency"]["throughput_ips"] == pytest.approx(2 * 1000 / res["latency"]["mean_ms"])


def test_fp16_model_gets_half_input(files: dict[str, Path], scratch: Path) -> None:
    rc, res, _ = run_worker({"action": "measure", "model_path": str(files["fp16"]), **FAST}, scratch)
    assert rc == 0, res["error"]
    assert res["model"]["dtype"] == res["model"]["input_dtype"] == "float16"
    assert res["model"]["param_bytes"] < 4 * res["model"]["params"]


def test_int8_model_still_gets_float_input(files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "measure", "model_path": str(files["int8"]), "input_shape": [1, 3, 4, 4], **FAST}
    rc, res, _ = run_worker(request, scratch)
    assert rc == 0, res["error"]
    assert (res["model"]["dtype"], res["model"]["input_dtype"]) == ("qint8", "float32")
    assert res["model"]["params"] == 48 * 64 + 64 * 10  # packed int8 weights count as parameters


# --- memory -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mbv2_torch(files: dict[str, Path], scratch: Path) -> dict[str, Any]:
    rc, res, _ = run_worker({"action": "measure", "model_path": str(files["mobilenet_v2"]), **FAST}, scratch)
    assert rc == 0, res["error"]
    return res


@pytest.fixture(scope="module")
def mbv2_onnx(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, scratch: Path) -> Path:
    """mobilenet_v2 exported by the real worker into a host-style cache path."""
    path = tmp_path_factory.mktemp("cache") / "mobilenet_v2-1x3x224x224.onnx"
    rc, res, _ = run_worker({"action": "export-onnx", "model_path": str(files["mobilenet_v2"]),
                             "onnx_path": str(path)}, scratch)
    assert rc == 0, res["error"]
    return path


def test_rss_phases_are_plausible(mbv2_torch: dict[str, Any]) -> None:
    mem = mbv2_torch["memory"]
    phases = [mem[k] for k in ("rss_start_kb", "rss_after_import_kb", "rss_after_load_kb", "rss_after_warmup_kb",
                               "rss_end_kb")]
    assert mem["rss_start_kb"] < mem["rss_after_import_kb"] <= mem["rss_after_load_kb"]
    assert all(mem["hwm_kb"] >= p for p in phases)
    assert mem["runtime_baseline_kb"] == mem["rss_after_import_kb"] > 100 * MB
    assert mem["model_increment_kb"] == mem["hwm_kb"] - mem["runtime_baseline_kb"] > 0
    assert mem["rss_after_load_kb"] - mem["rss_after_import_kb"] > 10 * MB  # 14 MB of fp32 weights
    assert mem["minor_faults"] > 0 and mem["major_faults"] >= 0
    if mem["cgroup"] is not None:
        assert mem["cgroup"]["version"] in (1, 2)


def test_onnxruntime_baseline_is_smaller_than_torch(mbv2_torch: dict[str, Any], mbv2_onnx: Path,
                                                    files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "measure", "model_path": str(mbv2_onnx), "runtime": "onnxruntime", **FAST}
    rc, res, _ = run_worker(request, scratch)
    assert rc == 0, res["error"]
    assert res["runtime"]["name"] == "onnxruntime" and res["runtime"]["version"]
    assert res["model"]["params"] > 3_000_000  # filled from the graph after memory was recorded
    ort_mem, torch_mem = res["memory"], mbv2_torch["memory"]
    assert ort_mem["runtime_baseline_kb"] < torch_mem["runtime_baseline_kb"] / 2
    assert ort_mem["hwm_kb"] < torch_mem["hwm_kb"]
    # A .pt model runs under onnxruntime only through an existing export (never torch in this process).
    request = {"action": "measure", "model_path": str(files["mobilenet_v2"]), "runtime": "onnxruntime",
               "onnx_path": str(mbv2_onnx), **FAST}
    rc, res, _ = run_worker(request, scratch)
    assert rc == 0 and res["model"]["format"] == "pickled_module" and res["runtime"]["name"] == "onnxruntime"
    assert res["model"]["params"] == 3_504_872  # the PyTorch model's count, recorded in the export
    request["onnx_path"] = str(scratch / "not-exported-yet.onnx")
    assert "export-onnx first" in assert_clean_error(*run_worker(request, scratch), "bad_request")


# --- ONNX export --------------------------------------------------------------------------------

FUSION_RULES = {f"BF_{op}_relu": {"obey": True} for op in ("conv", "dwconv", "add")}
EXPECTED_KERNELS = {"mobilenet_v2": 64, "resnet18": 31}  # from the toolchain notes


def nn_meter_kernels(onnx_path: Path, rules: Path) -> list[dict[str, Any]]:
    """nn-Meter's own pipeline for model_type "onnx", minus the latency regressors."""
    import onnx
    from nn_meter.ir_converter.onnx_converter import OnnxConverter
    from nn_meter.kernel_detector import KernelDetector

    detector = KernelDetector(str(rules))
    detector.load_graph(OnnxConverter(onnx.load(str(onnx_path))).convert())
    return detector.get_kernels()


@pytest.fixture(scope="module")
def fusion_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Minimal predictor-free rules: TFLite's conv/dwconv/add + relu fusions, as the CPU predictor's."""
    pytest.importorskip("nn_meter")
    path = tmp_path_factory.mktemp("nnmeter") / "fusion_rules.json"
    path.write_text(json.dumps(FUSION_RULES))
    return path


def test_export_through_worker_is_nn_meter_ready_and_cached(mbv2_onnx: Path, files: dict[str, Path],
                                                            fusion_rules: Path, scratch: Path) -> None:
    assert len(nn_meter_kernels(mbv2_onnx, fusion_rules)) == EXPECTED_KERNELS["mobilenet_v2"]
    request = {"action": "export-onnx", "model_path": str(files["mobilenet_v2"]), "onnx_path": str(mbv2_onnx)}
    rc, res, stderr = run_worker(request, scratch)
    assert rc == 0 and res["onnx"]["cached"] is True and res["onnx"]["exporter"] == "legacy"
    # A cache hit is cheap because it never imports torch (its wall time is a figure of
    # benchmarks/worker_overheads.py, not an assert: the machine is shared).
    assert res["runtime"] is None and "imported torch" not in stderr
    assert (res["model"]["format"], res["model"]["params"]) == ("pickled_module", 3_504_872)  # from the export
    assert res["onnx"]["opset"] == worker.ONNX_OPSET and res["onnx"]["nodes"] > 50


@pytest.mark.parametrize("fmt", ["pickled_module", "exported_program", "torchscript"])
def test_export_every_torch_format(fmt: str, files: dict[str, Path], fusion_rules: Path, scratch: Path) -> None:
    out = scratch / f"export-{fmt}.onnx"
    rc, res, _ = run_worker({"action": "export-onnx", "model_path": str(files[fmt]), "onnx_path": str(out)}, scratch)
    assert rc == 0, res["error"]
    onnx_info = res["onnx"]
    assert (onnx_info["exporter"], onnx_info["opset"], onnx_info["cached"]) == ("legacy", worker.ONNX_OPSET, False)
    assert Path(onnx_info["path"]) == out and onnx_info["nodes"] >= 10
    assert res["runtime"]["name"] == "torch" and not list(scratch.glob("*.tmp*"))
    assert len(nn_meter_kernels(out, fusion_rules)) == 7  # tiny_cnn: 4 conv+relu, maxpool, gap, fc


def test_onnx_model_exports_as_is(files: dict[str, Path], fusion_rules: Path, scratch: Path) -> None:
    out = scratch / "as-is.onnx"
    rc, res, _ = run_worker({"action": "export-onnx", "model_path": str(files["onnx"]), "onnx_path": str(out)},
                            scratch)
    assert rc == 0 and res["onnx"]["exporter"] == "as-is" and res["model"]["format"] == "onnx"
    assert len(nn_meter_kernels(out, fusion_rules)) == 7


def test_unexportable_op_is_named(files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "export-onnx", "model_path": str(files["fft_ts"]), "onnx_path": str(scratch / "fft.onnx")}
    message = assert_clean_error(*run_worker(request, scratch), "export_failed")
    assert "'aten::fft_rfft'" in message and not (scratch / "fft.onnx").exists()


def test_every_zoo_model_passes_nn_meter(fusion_rules: Path, zoo_onnx, capsys: pytest.CaptureFixture[str]) -> None:
    rows = []
    for name in zoo.names():
        zoo_onnx(name)  # the session's export by worker.export_module, shared with the latency tests
        section = zoo_onnx.sections[name]
        export_s = section["export_s"]
        kernels = nn_meter_kernels(Path(section["path"]), fusion_rules)
        assert len(kernels) >= 5, name
        assert EXPECTED_KERNELS.get(name, len(kernels)) == len(kernels), name
        rows.append(f"{name:20s} nodes {section['nodes']:4d} kernels {len(kernels):4d} export {export_s:5.2f} s")
    with capsys.disabled():
        print("\n" + "\n".join(rows))


def test_an_absurd_input_shape_is_refused_before_it_is_allocated(files: dict[str, Path], scratch: Path) -> None:
    request = {"action": "export-onnx", "model_path": str(files["pickled_module"]), "onnx_path": str(scratch / "x.onnx"),
               "input_shape": [1, 3, 100000, 100000]}
    message = assert_clean_error(*run_worker(request, scratch), "bad_input_shape")
    assert "111.8 GiB" in message and "--input-shape" in message
