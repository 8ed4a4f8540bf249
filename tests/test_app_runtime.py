"""The app's runtime by default (issue 28): which runtime measures a row, which file it converts.

The planning half runs against the fake backend of ``fakes`` (it records the worker requests the
runner sends; nothing is loaded): which file and ``quantize`` a tflite row's conversion gets,
which levels are derived with PyTorch, and what a run does when the default runtime cannot be
measured. The measured figures of these rows come from the real containers in
tests/test_compression_table.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
from fakes import FakeBackend

from lodevem.errors import BackendUnavailable
from lodevem.measure import calibration_note
from lodevem.profiles import load_profiles, select_profiles
from lodevem.report.console import memory_runtime_line
from lodevem.runner import RunConfig, converted_level, run_benchmark


class Recording(FakeBackend):
    """The fake backend, keeping every request it was sent; ``missing``: runtimes it cannot measure."""

    def __init__(self, missing: tuple[str, ...] = ()) -> None:
        super().__init__(240.0)
        self.requests: list[Any] = []
        self.missing = missing

    def identity_for(self, runtime: str) -> str:
        if runtime in self.missing:
            raise BackendUnavailable(f"Docker image lodevem-litert:0.1.0 not found: build it with "
                                     f"`lodevem build-image --runtime {runtime}`")
        return super().identity_for(runtime)

    def run(self, request: Any, limit_mb: Optional[int], timeout_s: float, **kw: Any) -> Any:
        with self.lock:
            self.requests.append(request)
        return super().run(request, limit_mb, timeout_s, **kw)


def _config(model: Path, out: Path, **kw: Any) -> RunConfig:
    profiles = tuple(select_profiles(load_profiles(), ids=("nokia_8110_4g",)))
    return RunConfig.of(models=(model,), profiles=profiles, output=out, jobs=1, warmup=0, runs=1, **kw)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.pt"
    path.write_bytes(b"never loaded by the fake backend")
    return path


def test_the_default_runtime_is_the_one_latencies_are_predicted_for() -> None:
    assert RunConfig.of(models=(), profiles=()).resolved_runtimes == ("tflite",)
    assert RunConfig.of(models=(), profiles=(), latency_runtime="ncnn").resolved_runtimes == ("ncnn",)
    assert RunConfig.of(models=(), profiles=(), runtimes=("torch", "ncnn")).resolved_runtimes == ("torch", "ncnn")
    assert RunConfig.of(models=(), profiles=(), runtime="torch, litert").runtimes == ("torch", "tflite")  # 0.1's form


def test_an_unknown_runtime_is_refused_by_name() -> None:
    from lodevem.errors import InputError

    with pytest.raises(InputError, match="runtime mnn: expected one of"):
        RunConfig.of(models=(), profiles=(), runtimes=("mnn",))


def test_levels_are_made_by_the_runtimes_own_converter_from_the_fp32_source(model: Path, tmp_path: Path) -> None:
    fake = Recording()
    run_benchmark(_config(model, tmp_path / "out", runtimes=("tflite", "torch"),
                          levels=("fp32", "fp16", "int8", "int8-static", "pruned")), backend=fake)
    conversions = [r for r in fake.requests if r.action == "export-tflite"]
    # the fp32 source, at each level (the fake writes no file, so pruned has nothing to convert)
    assert {r.quantize for r in conversions} == {None, "fp16", "int8", "int8-static"}
    assert {r.model_path for r in conversions} == {str(model)}
    # PyTorch derives only what torch rows measure (and the pruned model), once per level
    derived = [r.level for r in fake.requests if r.action == "derive"]
    assert sorted(derived) == ["fp16", "int8", "int8-static", "pruned"]
    assert converted_level("tflite", "pruned") is None and converted_level("torch", "fp16") is None
    assert converted_level("ncnn", "int8-static") == "int8-static"


def test_every_row_says_which_runtime_its_memory_figure_is_for(model: Path, tmp_path: Path) -> None:
    rows = run_benchmark(_config(model, tmp_path / "out", levels=("fp32", "fp16")), backend=Recording()).rows
    by_level = {r.model.level: r for r in rows}
    # the fake's conversion fails: the file as given is measured under torch instead, saying why (issue 38)
    fp32 = by_level[None]
    assert fp32.memory.runtime_shown == "torch (fallback)" and fp32.memory.peak_rss_mb is not None
    assert fp32.memory.note and fp32.memory.note.startswith("tflite conversion failed") and "\n" not in fp32.memory.note
    # the fp16 level is what the converter makes: no torch form, so its row names why, in one line
    fp16 = by_level["fp16"]
    assert fp16.memory.runtime_shown == "tflite" and fp16.verdict == "error" and fp16.memory.error
    assert "tflite conversion failed" in fp16.memory.error and "\n" not in fp16.memory.error
    assert memory_runtime_line(rows).startswith("Peak RAM measured under torch (fallback), tflite (CSV column")
    assert "converter could not take the file" in memory_runtime_line(rows)
    from lodevem.report.files import latex_table
    from lodevem.report.methodology import run_facts
    from lodevem.report.paperkit import methodology_markdown

    assert "Peak RAM\\\\(MB, tflite)" in latex_table([fp16])
    torch_rows = run_benchmark(_config(model, tmp_path / "torch", runtimes=("torch", "tflite")),
                               backend=Recording()).rows
    mixed = [next(r for r in torch_rows if r.memory.runtime_shown == "torch"), fp16]  # figures under two runtimes
    assert "Peak RAM\\\\(MB)" in latex_table(mixed) and " (torch) &" in latex_table(mixed)
    outcome = run_benchmark(_config(model, tmp_path / "t2", runtimes=("torch",)), backend=Recording())
    assert "loaded and run with PyTorch" in methodology_markdown(run_facts(outcome.rows, outcome.manifest))


def test_without_the_default_runtime_the_run_measures_torch_and_says_why(model: Path, tmp_path: Path) -> None:
    outcome = run_benchmark(_config(model, tmp_path / "out"), backend=Recording(missing=("tflite",)))
    assert {r.memory.runtime_shown for r in outcome.rows} == {"torch"}
    assert all(r.memory.peak_rss_mb is not None for r in outcome.rows)  # figures, not error rows
    assert any("peak RAM measured under torch, not tflite" in w and "build-image --runtime tflite" in w
               for w in outcome.warnings)


def test_a_runtime_the_user_named_is_not_replaced(model: Path, tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="build-image --runtime tflite"):
        run_benchmark(_config(model, tmp_path / "out", runtimes=("tflite",)), backend=Recording(missing=("tflite",)))


def test_the_int8_static_note_names_its_calibration() -> None:
    assert calibration_note(None) .startswith("int8-static scales come from synthetic inputs, not from real data")
    assert "32 synthetic inputs (standard normal, seed 0), not from real data" in calibration_note(
        "32 synthetic inputs (standard normal, seed 0)")
    assert calibration_note("images/ (200 inputs)") == "int8-static scales come from images/ (200 inputs)"


# --- through the real Docker engine and converters -------------------------------------------------

def _fx_int8_torchscript(path: Path) -> Path:
    """A user's own static-int8 file as the README's example saves it: FX, traced to TorchScript."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    from lodevem import zoo

    torch.backends.quantized.engine = "x86" if "x86" in torch.backends.quantized.supported_engines else "qnnpack"
    model = zoo.build("tiny_cnn").eval()
    x = torch.randn(1, 3, 64, 64)
    prepared = prepare_fx(model, get_default_qconfig_mapping(torch.backends.quantized.engine), (x,))
    with torch.no_grad():
        prepared(x)
        torch.jit.save(torch.jit.trace(convert_fx(prepared), x), str(path))
    return path


@pytest.mark.docker
def test_start_without_runtime_measures_tflite_and_a_users_int8_file_falls_back(docker_backend,
                                                                                 tmp_path: Path) -> None:
    import csv

    from click.testing import CliRunner

    from lodevem import zoo
    from lodevem.cli import cli

    fp32 = zoo.write("tiny_cnn", tmp_path / "models")
    int8 = _fx_int8_torchscript(tmp_path / "models" / "tiny_int8.pt")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["start", str(fp32), str(int8), "--profile", "nokia_c1", "--output",
                                      str(out), "--runs", "2", "--warmup", "0", "--backend", "docker",
                                      "--predictor", "estimator", "--input-shape", "1,3,64,64"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = {Path(r["model_label"]).name: r for r in csv.DictReader((out / "benchmark_results.csv").open())}
    plain, users = rows["tiny_cnn.pt"], rows["tiny_int8.pt"]
    assert plain["memory_runtime"] == plain["runtime"] == "tflite" and plain["verdict"] == "fits"
    assert float(plain["peak_rss_mb"]) < 103  # LiteRT's footprint, not PyTorch's ~220 MB
    assert float(plain["converted_mb"]) > 0 and plain["memory_note"] == ""
    # litert-torch cannot convert a TorchScript int8 file: torch measures it, and the row says why
    assert users["memory_runtime"] == "torch (fallback)" and users["runtime"] == "torch"
    assert float(users["peak_rss_mb"]) > 103 and users["verdict"] == "fits"  # PyTorch: ~220 MB, on 1 GB
    assert users["memory_note"].startswith("tflite conversion failed") and "measured under torch" in users["memory_note"]
    assert "\n" not in users["memory_note"] and users["converted_mb"] == ""
    said = " ".join(result.output.split())
    assert "under tflite, torch (fallback) with the device's RAM" in said  # the table's footer (not --verbose)
    assert "torch (fallback): a converter refused the file" in said
