"""Peak RAM under every runtime (torch, onnxruntime, LiteRT, ncnn) against the REAL Docker engine.

The conversions (litert-torch, pnnx) run in the real converter image, the tflite and ncnn
measurements in their own lean images (built here once per session when missing: ~2.5 min for
the converter image with cached wheels). Model files are the zoo's; a model with custom code is
a TorchScript file, which carries its code, so nothing of this module is imported in the sandbox.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from fakes import Counting
from torch import nn

from lodevem import measure, zoo
from lodevem.profiles import load_profiles, select_profiles
from lodevem.runner import RunConfig, run_benchmark
from lodevem.sandbox.client import MeasureSettings, WorkerClient

pytestmark = pytest.mark.docker

RUNTIMES = ("torch", "onnxruntime", "tflite", "ncnn")


@pytest.fixture(scope="session")
def runtime_backend(app_backend):
    """The session's DockerBackend, with the litert, ncnn and converter images (conftest)."""
    return app_backend


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rt-models")
    for name in ("tiny_cnn", "mobilenet_v2"):
        zoo.write(name, folder)
    return folder


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One measurement cache folder (its sibling ``converted/`` holds the conversions) for the
    tests that do not test caching: each model is converted once per session."""
    return tmp_path_factory.mktemp("rt-cache") / "measure"


def _measure(model: Path, limit: int, backend, runtime: str, cache_dir: Path, use_cache: bool = False,
             warmup: int = 1, runs: int = 3) -> measure.MemoryMeasurement:
    settings = MeasureSettings(runtime=runtime, warmup=warmup, runs=runs)
    return measure.measure_models([model], [limit], client=WorkerClient(backend), settings=settings, jobs=1,
                                  timeout_s=300, cache_dir=cache_dir, use_cache=use_cache)[(str(model), limit)]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_each_runtime_is_measured(runtime_backend, models: Path, shared_cache: Path, runtime: str) -> None:
    m = _measure(models / "mobilenet_v2.pt", 1024, runtime_backend, runtime, shared_cache)
    assert m.verdict == "fits", m.error
    assert m.runtime == runtime
    assert m.peak.rss_mb is not None and m.peak.runtime_baseline_mb is not None and m.peak.model_increment_mb is not None
    # mobilenet_v2's fp32 weights are 13.5 MB: every runtime's increment holds at least those
    assert m.peak.model_increment_mb > 10 and m.peak.rss_mb > m.peak.runtime_baseline_mb
    assert m.host.mean_ms is not None and m.host.mean_ms > 0
    if runtime in ("tflite", "ncnn"):  # torch never imported: import torch alone is ~218 MB
        assert m.peak.runtime_baseline_mb < 100, m
        converter = {"tflite": "litert-torch==0.10.0", "ncnn": "pnnx==20261020"}[runtime]
        assert m.sandbox.image_id == f"{runtime_backend.identity_for(runtime)}|{converter}"  # the lean image, not bench
        assert runtime_backend.identity_for(runtime) != runtime_backend.identity
    else:
        assert m.sandbox.image_id == runtime_backend.identity


def test_lean_runtimes_need_less_than_torch(runtime_backend, models: Path, shared_cache: Path) -> None:
    peaks = {r: _measure(models / "mobilenet_v2.pt", 1024, runtime_backend, r, shared_cache).peak.rss_mb
             for r in RUNTIMES}
    assert all(p is not None for p in peaks.values()), peaks
    assert max(peaks["tflite"], peaks["ncnn"]) < peaks["onnxruntime"] < peaks["torch"], peaks


@pytest.mark.parametrize("runtime, limit", [("torch", 150), ("onnxruntime", 64), ("tflite", 56), ("ncnn", 56)])
def test_tight_limit_is_oom_under_each_runtime(runtime_backend, models: Path, shared_cache: Path, runtime: str,
                                               limit: int) -> None:
    """Below mobilenet_v2's peak under that runtime (torch ~293, onnxruntime ~103, LiteRT ~80,
    ncnn ~72 MB) but above the runtime alone for the lean ones: killed, or over the limit."""
    m = _measure(models / "mobilenet_v2.pt", limit, runtime_backend, runtime, shared_cache)
    assert m.verdict == "oom", (m.verdict, m.error)
    assert m.limit_mb == limit and m.runtime == runtime


class DataDependent(nn.Module):
    """Scripted (the file carries its code); litert-torch converts through torch.export, which
    cannot take a ScriptModule: a real converter failure on a model torch runs fine."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if bool(y.sum() > 0):
            return y.relu()
        return -y


@pytest.fixture(scope="session")
def unconvertible(models: Path) -> Path:
    path = models / "data_dependent.pt"
    with warnings.catch_warnings():  # "torch.jit.script is deprecated": still what carries the code
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(DataDependent().eval()).save(str(path))
    return path


@pytest.mark.fresh_store  # it checks what its run's own .cache holds
def test_conversion_failure_is_an_error_row_and_the_run_goes_on(runtime_backend, unconvertible: Path,
                                                                tmp_path: Path) -> None:
    profiles = tuple(select_profiles(load_profiles(), ids=["nokia_8110_4g"]))
    config = RunConfig.of(models=(unconvertible,), profiles=profiles, warmup=1, runs=2, output=tmp_path / "out",
                       backend="docker", runtime="torch,tflite", jobs=1, predictor="estimator", timeout_s=300)
    rows = {r.model.label.rsplit("[", 1)[-1].rstrip("]"): r for r in run_benchmark(config, backend=runtime_backend).rows}
    assert set(rows) == {"torch", "tflite"}
    # under torch the 256 MB phone's RAM holds it, its 103 MB app budget does not (PyTorch alone is ~220 MB)
    assert rows["torch"].verdict == "tight" and rows["torch"].model.label == "data_dependent.pt [torch]"
    # the tflite row is not an error: torch runs the file the converter refused, and the row says so (issue 38)
    tflite = rows["tflite"]
    assert tflite.verdict == "tight" and tflite.memory.runtime_shown == "torch (fallback)"
    note = tflite.memory.note or ""
    assert note.startswith("tflite conversion failed: ") and "cannot convert" in note, note
    assert str(unconvertible) in note  # names the user's file, not the sandbox's path
    assert "\n" not in note and len(note) < 800 and "measured under torch instead" in note
    assert not list((tmp_path / "out" / ".cache" / "converted").glob("*.tflite"))  # nothing half-written kept


@pytest.mark.fresh_store  # it checks what its run's own .cache holds
@pytest.mark.parametrize("runtime", ["tflite", "ncnn"])
def test_second_run_hits_the_caches(runtime_backend, models: Path, tmp_path: Path, runtime: str) -> None:
    cache = tmp_path / "measure"
    first = Counting(runtime_backend)
    value = _measure(models / "tiny_cnn.pt", 512, first, runtime, cache, use_cache=True)
    assert value.verdict == "fits" and not value.cached
    assert first.actions.count(f"export-{runtime}") == 1 and first.actions.count("measure") == 1
    converted = sorted(p.name for p in (tmp_path / "converted").iterdir())
    assert converted and all("-1x3x224x224-" in name for name in converted)

    cached = Counting(runtime_backend)  # a new run: the conversion and measurement come from the store
    hit = _measure(models / "tiny_cnn.pt", 512, cached, runtime, cache, use_cache=True)
    assert hit.cached and hit.peak.rss_mb == value.peak.rss_mb and cached.runs == 0

    again = Counting(runtime_backend)  # --no-cache: every cache is bypassed, the conversion too
    remeasured = _measure(models / "tiny_cnn.pt", 512, again, runtime, cache, use_cache=False)
    assert remeasured.verdict == "fits"
    assert again.actions.count(f"export-{runtime}") == 1 and again.actions.count("measure") == 1


def test_runtime_option_takes_a_comma_list_and_names_what_is_wrong(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lodevem.cli import cli

    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["start", str(model), "--runtime", "torch, tflite,mnn", "--output",
                                      str(tmp_path / "o")])
    assert result.exit_code == 2 and "mnn: expected one of torch, onnxruntime, tflite, ncnn" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()
    help_text = CliRunner().invoke(cli, ["build-image", "--help"]).output
    assert "--runtime" in help_text and "lodevem-convert" in help_text


@pytest.fixture(scope="session")
def tiny_onnx(models: Path) -> Path:
    path = models / "tiny_cnn.onnx"
    torch.onnx.export(zoo.build("tiny_cnn").eval(), (torch.randn(1, 3, 224, 224),), str(path), dynamo=False)
    return path


def test_onnx_file_converts_to_ncnn_and_says_why_not_to_tflite(runtime_backend, tiny_onnx: Path,
                                                                shared_cache: Path) -> None:
    ncnn = _measure(tiny_onnx, 512, runtime_backend, "ncnn", shared_cache)
    assert ncnn.verdict == "fits" and ncnn.peak.runtime_baseline_mb is not None and ncnn.peak.runtime_baseline_mb < 100, ncnn
    # no .tflite can be made from an .onnx: onnxruntime measures it instead, and the figure says why
    tflite = _measure(tiny_onnx, 512, runtime_backend, "tflite", shared_cache)
    assert tflite.verdict == "fits" and tflite.runtime == "onnxruntime", tflite
    assert tflite.fallback is not None and tflite.fallback.reason.startswith(
        "tflite conversion failed: an .onnx cannot be made into a .tflite here: litert-torch converts PyTorch "
        "programs only, and ONNX-to-TFLite converters go through TensorFlow")


def test_a_tflite_or_ncnn_row_shows_the_latency_predicted_for_its_runtime(runtime_backend, models: Path,
                                                                          tmp_path: Path) -> None:
    profiles = tuple(select_profiles(load_profiles(), ids=["nokia_8110_4g"]))
    config = RunConfig.of(models=(models / "tiny_cnn.pt",), profiles=profiles, warmup=1, runs=2, output=tmp_path / "out",
                       backend="docker", runtime="torch,ncnn", jobs=1, predictor="estimator", timeout_s=300,
                       latency_runtime="tflite")
    rows = {r.memory.runtime: r for r in run_benchmark(config, backend=runtime_backend).rows}
    assert rows["torch"].verdict == "tight" and rows["ncnn"].verdict == "fits"  # the 103 MB app budget
    assert "tflite" in rows["torch"].latency.source and "ncnn" in rows["ncnn"].latency.source
    assert rows["torch"].latency.ms and rows["ncnn"].latency.ms and rows["torch"].latency.ms != rows["ncnn"].latency.ms
