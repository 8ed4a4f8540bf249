"""`lodevem start` end to end through the real Docker engine, plus resume and budget gates."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import InterruptAfter

from lodevem import measure, zoo
from lodevem.cli import cli
from lodevem.profiles import load_profiles, select_profiles
from lodevem.runner import STATE_FILE, RunConfig, label_models, run_benchmark
from lodevem.runner.state import RunState

pytestmark = pytest.mark.docker

# 256 MB (mobilenet_v2 under torch is OOM there: runtime ~220 MB + model), 512 MB, 1 GB.
PROFILES = ("nokia_8110_4g", "jiophone2", "nokia_c1")
FAST = ("--runs", "3", "--warmup", "1", "--backend", "docker", "--runtime", "torch")  # torch's footprint


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("models")
    return [zoo.write("tiny_cnn", folder), zoo.write("mobilenet_v2", folder)]


def start(models: list[Path], out: Path, *extra: str):
    args = ["start", *map(str, models), "--output", str(out), *FAST]
    for pid in PROFILES:
        args += ["--profile", pid]
    return CliRunner().invoke(cli, [*args, *extra], catch_exceptions=False)


@pytest.fixture(scope="module")
def first_run(docker_backend, models: list[Path], tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("results")
    return start(models, out), out


def test_start_writes_every_output(first_run) -> None:
    result, out = first_run
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    for name in ("benchmark_results.csv", "benchmark_results.json", "benchmark_results.tex",
                 "latency_heatmap.png", "latency_heatmap.pdf", "latency_vs_ram.png", "latency_vs_ram.pdf"):
        assert name in names
    with (out / "benchmark_results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(PROFILES)
    for column in ("model_label", "profile_id", "tier", "chipset", "ram_mb", "latency_ms", "latency_source",
                   "peak_rss_mb", "runtime_baseline_mb", "model_increment_mb", "cgroup_peak_mb", "verdict",
                   "limit_enforcement", "host_throughput_ips", "energy_mj", "fits"):
        assert column in rows[0]
    for row in rows:
        assert row["latency_source"].startswith("estimator:v4 tflite (Cortex-A7@")
        assert (row["latency_kind"], row["latency_runtime"]) == ("estimator", "tflite")
        assert float(row["latency_ms"]) > 0
        assert row["backend"] == "docker"
    payload = json.loads((out / "benchmark_results.json").read_text())
    manifest = payload.get("manifest") or payload.get("environment")
    assert manifest["command_line"] and len(payload["results"]) == len(rows)


def test_oom_row_is_formatted_as_the_readme_shows(first_run) -> None:
    result, out = first_run
    with (out / "benchmark_results.csv").open() as handle:
        rows = {(r["model_label"], r["profile_id"]): r for r in csv.DictReader(handle)}
    oom = rows[("mobilenet_v2.pt", "nokia_8110_4g")]
    assert oom["verdict"] == "oom" and oom["fits"] == "False"
    assert rows[("mobilenet_v2.pt", "nokia_c1")]["verdict"] == "fits"
    line = next(text for text in result.output.splitlines() if "Nokia 8110 4G" in text and "OOM" in text)
    assert re.search(r"OOM\s*│\s*—\s*│\s*✗", line), line


def test_latex_table_is_balanced_with_one_row_per_pair(first_run) -> None:
    _, out = first_run
    tex = (out / "benchmark_results.tex").read_text()
    assert tex.count(r"\toprule") == 1 and tex.count(r"\bottomrule") == 1
    assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}")  # the table and its stacked headers
    body = tex.split(r"\midrule", 1)[1].split(r"\bottomrule")[0]
    lines = [row for row in body.splitlines() if row.strip().endswith(r"\\")]
    headings = [row for row in lines if row.startswith(r"\multicolumn")]  # one per model
    data_rows = [row for row in lines if row not in headings]
    assert len(headings) == 2 and len(data_rows) == 2 * len(PROFILES)
    columns = re.search(r"\\begin\{tabular\}\{([a-z|]+)\}", tex).group(1).replace("|", "")
    for line in data_rows:
        assert line.count("&") == len(columns) - 1
    assert r"mobilenet\_v2.pt" in tex and "mobilenet_v2.pt" not in tex.replace(r"\_", "")


def test_second_run_is_served_from_cache(docker_backend, models: list[Path], first_run) -> None:
    _, out = first_run
    result = start(models, out)
    assert result.exit_code == 0
    with (out / "benchmark_results.csv").open() as handle:
        assert all(r["memory_cached"] == "True" for r in csv.DictReader(handle))


def test_budget_gates_exit_3(docker_backend, models: list[Path], first_run) -> None:
    _, out = first_run
    result = start(models, out, "--max-latency", "0.001")
    assert result.exit_code == 3 and "budget" in result.output
    result = start(models, out, "--fail-on-oom")
    assert result.exit_code == 3 and "mobilenet_v2.pt on Nokia 8110 4G" in result.output
    result = start(models, out, "--fail-on-oom", "--on", "tier2")
    assert result.exit_code == 0, result.output
    result = start(models, out, "--max-latency", "100000", "--fail-on-oom", "--on", "tier2")
    assert result.exit_code == 0


def test_interrupt_then_resume_does_not_redo_pairs(docker_backend, models: list[Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = select_profiles(load_profiles(), ids=PROFILES)
    config = RunConfig.of(models=tuple(models), profiles=tuple(profiles), warmup=1, runs=3, output=tmp_path,
                       backend="docker", jobs=1, no_cache=True)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(config, InterruptAfter(2))
    kept = RunState.load(tmp_path / STATE_FILE)
    assert kept is not None and len(kept.rows) >= 2
    done_before = kept.done()

    measured: list[tuple[str, int]] = []
    real = measure.measure_models

    def spy(models, limits, **kwargs):
        measured.extend((m.label, limit) for m in models for limit in limits)
        return real(models, limits, **kwargs)

    monkeypatch.setattr(measure, "measure_models", spy)
    outcome = run_benchmark(config.with_options(resume=True))
    assert len(outcome.rows) == 2 * len(profiles)
    assert {r.key for r in outcome.rows} >= done_before
    by_id = {p.id: p.ram_mb for p in profiles}
    for label, pid in done_before:  # a finished pair's (model, limit) is only re-run if another pair needs it
        others = [p for p in profiles if p.ram_mb == by_id[pid] and (label, p.id) not in done_before]
        if not others:
            assert (label, by_id[pid]) not in measured
    kept_rows = {r.key: r for r in kept.rows}
    for row in outcome.rows:
        if row.key in kept_rows:
            assert row == kept_rows[row.key]


def test_labels_are_unambiguous(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "model.pt").write_bytes(folder.encode())
    labels = [m.label for m in label_models([tmp_path / "a" / "model.pt", tmp_path / "b" / "model.pt",
                                             tmp_path / "a" / "model.pt"])]
    assert labels == ["a/model.pt", "b/model.pt"]
    with_levels = [m.label for m in label_models([tmp_path / "a" / "model.pt"], ("fp32", "int8"))]
    assert with_levels == ["model.pt@fp32", "model.pt@int8"]


def test_missing_model_file_is_a_one_line_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["start", str(tmp_path / "nope.pt"), "--output", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"Error: {tmp_path / 'nope.pt'}: model file not found"]


def test_no_model_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["start"])
    assert result.exit_code == 2 and "no model files given" in result.output


def test_unusable_model_file_stops_with_exit_2_naming_the_host_path(docker_backend, tmp_path: Path) -> None:
    import torch

    weights = tmp_path / "weights.pt"
    torch.save(zoo.build("tiny_cnn").state_dict(), weights)
    result = CliRunner().invoke(cli, ["start", str(weights), "--profile", "nokia_c1", "--output",
                                      str(tmp_path / "out"), *FAST], catch_exceptions=False)
    assert result.exit_code == 2
    error = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and f"{weights} is a state_dict only" in error[0]
    assert "torch.save(model, path)" in error[0] and "Traceback" not in result.output
