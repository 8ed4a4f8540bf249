"""The methodology of a real torch+tflite+ncnn x levels run states what the rows say, and only that.

One tiny model, three runtimes, two levels, one device, through the REAL Docker engine (the
measurement, LiteRT, ncnn and converter images). Each statement of methodology.md is checked
against the CSV rows and the JSON manifest the same run wrote: the counts (1 model, 2 files,
3 runtimes, 2 levels - not "6 models"), the runtime each row group's latency stands for, every
image id and runtime/converter version, the input shape, the variants, and no limitation the run
contradicts (it measured on-device runtimes, so it must not claim their baseline is unknown).
"""

from __future__ import annotations

import csv
import json
import re

import pytest
from click.testing import CliRunner

from lodevem import zoo
from lodevem.cli import cli
from lodevem.wire.shape_sources import SOURCE_WORDS

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def run(docker_backend, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, str]], dict]:
    folder = tmp_path_factory.mktemp("models")
    model = zoo.write("tiny_cnn", folder)
    out = tmp_path_factory.mktemp("results")
    result = CliRunner().invoke(cli, ["start", str(model), "--runtime", "torch,tflite,ncnn", "--levels", "fp32,fp16",
                                      "--profile", "nokia_c1", "--runs", "2", "--warmup", "0", "--backend", "docker",
                                      "--output", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "benchmark_results.csv").open()))
    environment = json.loads((out / "benchmark_results.json").read_text())["environment"]
    return (out / "methodology.md").read_text(), rows, environment


def test_counts_are_models_files_runtimes_levels(run) -> None:
    md, rows, _ = run
    assert len(rows) == 6  # 1 file x 2 levels x 3 runtimes x 1 device
    assert "for 1 model, 2 files, 3 runtimes, 2 levels on 1 device profile" in md
    assert not re.search(r"\b[36] models\b", md)  # ("fp16 models" is the runtimes' sentence)


def test_each_row_groups_latency_runtime_is_stated(run) -> None:
    md, rows, _ = run
    pairs = {(r["runtime"], r["latency_runtime"]) for r in rows if r["latency_ms"]}
    assert ("ncnn", "ncnn") in pairs and ("tflite", "tflite") in pairs
    for measured, predicted in pairs:
        assert f"rows measured under {measured} show the latency predicted for {predicted}" in md
    assert "the latencies stand for" not in md  # one runtime for all rows would be false here


def test_every_image_and_runtime_version_is_named(run) -> None:
    md, _, environment = run
    images = environment["backend"]["images"]
    assert {"lodevem-bench:0.1.0", "lodevem-litert:0.1.0", "lodevem-ncnn:0.1.0"} <= set(images), images
    assert any(tag.startswith("lodevem-convert") for tag in images)
    for tag, ident in images.items():
        assert f"{tag} {ident.removeprefix('docker:')[:19]}" in md, tag
    for name in ("tflite", "ncnn"):
        pinned = environment["runtimes"][name]
        assert pinned["version"] and pinned["converter_version"]
        assert f"{pinned['converter']} {pinned['converter_version']}" in md
        assert pinned["version"] in md


def test_shape_variants_budget_and_no_contradicted_limitation(run) -> None:
    md, rows, _ = run
    source = rows[0]["input_shape_source"]
    assert source in SOURCE_WORDS, source  # a word, not a flag (no "'--input-shape" in the CSV)
    assert f"Every model was run with input {rows[0]['input_shape']} ({SOURCE_WORDS[source]})." in md
    assert "variants derived by lodevem from each model: fp16" in md
    assert not re.search(r"(?<![-\w])--[a-z]", md), re.findall(r"--[a-z-]+", md)  # no CLI option in the paper text
    assert f"Nokia C1 (Go) {rows[0]['app_budget_mb']} MB" in md
    # tflite and ncnn were measured: their baselines are figures of this run, not an unknown
    assert "has a smaller baseline of its own" not in md
    for runtime in ("torch", "tflite", "ncnn"):
        baselines = [float(r["runtime_baseline_mb"]) for r in rows if r["runtime"] == runtime and r["runtime_baseline_mb"]]
        if baselines:
            assert f"{runtime} {min(baselines):g}" in md, runtime
    assert "Device RAM is not all available to an app" not in md  # the budget says how much is
