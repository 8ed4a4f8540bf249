"""A file is what it is (issue 46): ``--levels`` are derived from float files only; a user's
already compressed file (quantize_dynamic int8 here) is one row under its own name and
precision, right after the derived levels of its float sibling, which it names (``variant_of``).

The end-to-end run goes through the real worker (``--backend process``): the export in the
sandbox is what tells the host each file's precision."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from lodevem import zoo
from lodevem.cli import cli
from lodevem.results import ModelFile
from lodevem.results.model_file import compressed, with_levels
from lodevem.sandbox.client import ModelSection, SparsitySection

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


def _file(tmp_path: Path, name: str) -> ModelFile:
    path = tmp_path / name
    path.write_bytes(name.encode())
    return ModelFile.from_path(path, name)


def test_levels_come_from_float_files_only_and_a_compressed_file_sits_beside_its_sibling(tmp_path: Path) -> None:
    net, other, int8 = (_file(tmp_path, n) for n in ("net_fp32.pt", "other.pt", "net_int8_pt2e.pt2"))
    found = {net.path: ModelSection(precision="fp32", input_shape=(1, 3, 32, 32), output_shape=(1, 10)),
             other.path: ModelSection(input_shape=(1, 3, 32, 32), output_shape=(1, 1000)),
             int8.path: ModelSection(precision="int8-static", quantization="static, PT2E",
                                     input_shape=(1, 3, 32, 32), output_shape=(1, 10))}
    models = with_levels([other, int8, net], ("fp32", "int8"), found)
    assert [(m.label, m.level, m.variant_of) for m in models] == [
        ("other.pt@fp32", None, None), ("other.pt@int8", "int8", None),
        ("net_fp32.pt@fp32", None, None), ("net_fp32.pt@int8", "int8", None),
        ("net_int8_pt2e.pt2", None, "net_fp32.pt")]
    # without --levels every file is one row; a compressed file without a float sibling comes last
    alone = with_levels([int8, other], (), found)
    assert [(m.label, m.variant_of) for m in alone] == [("other.pt", None), ("net_int8_pt2e.pt2", None)]


def test_what_counts_as_compressed() -> None:
    assert compressed(ModelSection()) is None and compressed(ModelSection(precision="fp32")) is None
    assert compressed(ModelSection(precision="fp16")) == "fp16"
    assert compressed(ModelSection(precision="int8-dynamic")) == "int8-dynamic"
    half = SparsitySection(zero_fraction=0.5, zero_channels=8, channels=16, masked_layers=0)
    assert compressed(ModelSection(sparsity=half)) == ("pruned" if half.pruned else None)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """tiny_cnn as saved, and the same network quantize_dynamic'ed by the user, with --levels fp32,int8."""
    root = tmp_path_factory.mktemp("own")
    models = root / "models"
    net = zoo.write("tiny_cnn", models)
    quantized = torch.ao.quantization.quantize_dynamic(torch.load(net, weights_only=False), {torch.nn.Linear},
                                                       dtype=torch.qint8)
    torch.save(quantized, models / "tiny_cnn_int8.pt")
    out = root / "results"
    here = os.getcwd()
    os.chdir(root)  # the user's working directory: shared files name paths relative to it
    try:
        result = CliRunner().invoke(cli, ["start", str(net), str(models / "tiny_cnn_int8.pt"), "--levels",
                                          "fp32,int8", "--profile", "nokia_c1", "--backend", "process", "--runtime",
                                          "torch", "--runs", "1", "--warmup", "0", "--output", str(out)],
                                    env={"COLUMNS": "200"})
    finally:
        os.chdir(here)
    return out, result


def test_the_users_int8_file_is_its_own_row_beside_the_float_levels(scenario) -> None:
    out, result = scenario
    assert result.exit_code == 0, result.output
    with open(out / "benchmark_results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["model_label"], r["level"], r["precision"], r["variant_of"]) for r in rows] == [
        ("tiny_cnn.pt@fp32", "", "fp32", ""), ("tiny_cnn.pt@int8", "int8", "int8-dynamic", ""),
        ("tiny_cnn_int8.pt", "", "int8-dynamic", "tiny_cnn.pt")]
    assert "tiny_cnn_int8.pt@" not in result.output
    assert "1 model, 3 files, 2 levels" in result.output


SHARED = ("benchmark_results.csv", "benchmark_results.json", "benchmark_results.tex", "methodology.md",
          "methodology.tex", "references.bib", "report.html")


def test_no_shared_file_names_a_path_of_the_machine(scenario) -> None:
    out, result = scenario
    assert result.exit_code == 0, result.output
    root = out.parent
    machine = {str(root), os.path.realpath(root), str(Path.home()), os.getcwd(), "/tmp/pytest-of"}
    for name in SHARED:
        text = (out / name).read_text()
        leaked = [p for p in machine if p in text]
        assert leaked == [], f"{name} names {leaked}"
    with open(out / "benchmark_results.csv", newline="") as handle:
        paths = {r["model_path"] for r in csv.DictReader(handle)}
    assert paths == {"models/tiny_cnn.pt", "models/tiny_cnn_int8.pt"}  # relative to the working directory
    page = (out / "report.html").read_text()
    assert "sha256" in page and "models/tiny_cnn_int8.pt" in page  # the manifest keeps its digests


def test_scrub_rewrites_absolute_paths_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodevem.report.shared import Scrub

    monkeypatch.chdir(tmp_path)
    scrub = Scrub(tmp_path / "out")
    assert scrub.text(f"{tmp_path}/models/net.pt: not a model.") == "models/net.pt: not a model."
    assert scrub.text(f"cache {tmp_path}/out/.cache/x.onnx") == "cache out/.cache/x.onnx"
    assert scrub.text("/srv/ada/secret/net.pt failed") == "net.pt failed"
    for kept in ("https://github.com/microsoft/nn-Meter", "tflite/ncnn", "1/2 threads", "peak / budget",
                 "models/net.pt"):
        assert scrub.text(kept) == kept
    assert scrub.value({"a": [f"{tmp_path}", ("/x/y.npz",)]}) == {"a": [".", ("y.npz",)]}


def test_a_quantize_dynamic_torchscript_gets_a_latency_under_tflite_and_ncnn(tmp_path: Path) -> None:
    """The PyTorch Mobile way (quantize_dynamic, then TorchScript): its latency is predicted from its
    float structure with its int8 Linear layers priced as the int8-dynamic level, like the same
    model pickled, instead of ``unavailable`` (no ONNX form of quantized::linear_dynamic)."""
    import json

    net = torch.load(zoo.write("tiny_cnn", tmp_path), weights_only=False)
    quantized = torch.ao.quantization.quantize_dynamic(net, {torch.nn.Linear}, dtype=torch.qint8)
    torch.save(quantized, tmp_path / "pickled_int8.pt")
    torch.jit.trace(quantized, torch.randn(1, 3, 224, 224)).save(str(tmp_path / "mobile_int8.pt"))
    for runtime in ("tflite", "ncnn"):
        done = CliRunner().invoke(cli, ["predict", str(tmp_path / "mobile_int8.pt"), str(tmp_path / "pickled_int8.pt"),
                                        str(tmp_path / "tiny_cnn.pt"), "--profile", "nokia_c1", "--latency-runtime",
                                        runtime, "--backend", "process", "--json"])
        assert done.exit_code == 0, done.output
        cells = {c["model"]: c for c in json.loads(done.output[done.output.index("["):])}
        mobile, pickled, fp32 = (cells[n]["latency_ms"] for n in ("mobile_int8.pt", "pickled_int8.pt", "tiny_cnn.pt"))
        assert mobile is not None and "int8-dynamic file" in cells["mobile_int8.pt"]["latency_note"]
        assert mobile == pytest.approx(pickled, rel=0.15) and mobile < fp32  # its int8 layers priced as int8
