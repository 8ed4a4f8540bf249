"""Verdicts a reviewer can trust (issue 22): app budgets, fits/tight/OOM, input shapes, notes.

The budget verdicts run against the REAL Docker engine: a tiny model under PyTorch peaks far
above the 103 MB app budget of the 256 MB Nokia 8110 while fitting its RAM, so it is `tight`
there, and fits the 1 GB Nokia C1's 415 MB budget. The rest are unit tests of the rules.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import with_columns

from lodevem import zoo
from lodevem.cli import cli
from lodevem.errors import ProfileError
from lodevem.gates import Budget, check_budget
from lodevem.profiles import load_profile_file, load_profiles
from lodevem.report.summaries import _lowest_tier_text, model_summaries
from lodevem.results import VERDICTS, budget_verdict
from lodevem.results.notes import quantization_note
from lodevem.runner.state import RunState, interrupted_note

# under torch: its ~220 MB runtime makes the tiny model tight on the 256 MB phone (under the default,
# tflite, it fits: tests/test_app_runtime.py)
FAST = ("--runs", "2", "--warmup", "0", "--backend", "docker", "--profile", "nokia_8110_4g",
        "--profile", "nokia_c1", "--runtime", "torch")


# --------------------------------------------------------------------------- profiles


def test_every_shipped_profile_has_a_sourced_budget_within_its_ram() -> None:
    for profile in load_profiles():
        assert profile.app_budget_mb is not None and 0 < profile.app_budget_mb <= profile.ram_mb, profile.id
        assert any(site in (profile.app_budget_source or "") for site in ("github.com", "hacks.mozilla.org"))
        assert profile.app_budget_mb < profile.ram_mb  # no app gets all of a phone's RAM


def _profile(tmp_path: Path, extra: str) -> Path:
    text = Path(load_profiles()[0].path).read_text()
    lines = [line for line in text.splitlines() if not line.startswith("app_budget")]
    path = tmp_path / "tier1" / "mine.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines).replace("id: ", "id: mine_", 1) + "\n" + extra)
    return path


def test_budget_validation_is_one_line_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"mine\.yaml: field 'app_budget_mb': 5000 MB is more than ram_mb"):
        load_profile_file(_profile(tmp_path, "app_budget_mb: 5000\napp_budget_source: me\n"))
    with pytest.raises(ProfileError, match=r"app_budget_mb.*greater than 0"):
        load_profile_file(_profile(tmp_path, "app_budget_mb: 0\napp_budget_source: me\n"))
    with pytest.raises(ProfileError, match="field 'app_budget_source' is missing"):
        load_profile_file(_profile(tmp_path, "app_budget_mb: 100\n"))
    assert load_profile_file(_profile(tmp_path, "")).app_budget_mb is None  # optional for a user's profile


def test_budget_verdict_rule() -> None:
    assert VERDICTS[:3] == ("fits", "tight", "oom")
    assert budget_verdict("fits", 237.0, 103) == "tight"
    assert budget_verdict("fits", 90.0, 103) == "fits"
    assert budget_verdict("fits", 237.0, None) == "fits"  # no budget: the RAM decides alone
    assert budget_verdict("oom", None, 103) == "oom"


# --------------------------------------------------------------------------- notes


def test_partial_quantization_note_names_the_float_layers() -> None:
    note = quantization_note("int8-dynamic", (("dense_conv", "fp32", 4), ("fc", "int8", 1), ("pool", "fp32", 1)))
    assert note.startswith("only Linear layers are int8: conv layers run fp32")
    assert "int8-static" in note
    assert quantization_note("int8-static", (("dense_conv", "int8", 4), ("fc", "int8", 1))) is None
    assert quantization_note("fp32", (("dense_conv", "fp32", 4),)) is None


def test_lowest_tier_is_tested_not_claimed_when_the_tier_below_was_not_tried() -> None:

    from test_reporter import make_row

    by_id = {p.id: p for p in load_profiles()}
    c1 = make_row(by_id["nokia_c1"], peak=100.0)  # tier2, fits
    assert _lowest_tier_text([c1], [c1]).startswith("lowest tier tested: tier2")
    assert "tier3 not tried" in _lowest_tier_text([c1], [c1])
    kaios = with_columns(make_row(by_id["nokia_8110_4g"]), verdict="oom", peak_rss_mb=None)
    assert _lowest_tier_text([c1, kaios], [c1]).startswith("lowest tier it runs on: tier2")


def test_interrupted_note_counts_this_runs_pairs(tmp_path: Path) -> None:
    import time

    from test_reporter import make_row

    assert interrupted_note(tmp_path, time.time()).startswith("No pair had finished: nothing was saved")
    started = time.time() - 1
    RunState("k", [make_row(load_profiles()[0])]).save(tmp_path / ".lodevem-state.json")
    note = interrupted_note(tmp_path, started)
    assert note.startswith("1 pair(s) finished and saved") and "--resume" in note
    assert "finished so far are kept" not in note


def test_default_shape_check_sees_a_linear_made_for_another_size() -> None:
    import torch.nn as nn

    from lodevem.worker.load.shapes import DefaultShapeCheck, recorded_input_shape

    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 48 * 48, 10))
    check = DefaultShapeCheck(net, [1, 3, 224, 224])
    try:
        import torch

        with torch.inference_mode():
            net(torch.zeros(1, 3, 224, 224))
    except RuntimeError:
        pass  # the matmul fails at 224: the hook saw the features first
    finally:
        check.close()
    assert "matches a 96x96 input" in check.warning() and "--input-shape 1,3,96,96" in check.warning()
    gray = nn.Sequential(nn.Conv2d(1, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    assert "takes 1 channel(s)" in DefaultShapeCheck(gray, [1, 3, 224, 224]).warning()
    net.example_input_shape = (1, 3, 96, 96)
    assert recorded_input_shape(net) == [1, 3, 96, 96]


# --------------------------------------------------------------------------- real engine


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo.write("tiny_cnn", tmp_path_factory.mktemp("models"))


def _start(out: Path, *models: Path, extra: tuple[str, ...] = ()):
    return CliRunner().invoke(cli, ["start", *map(str, models), "--output", str(out), *FAST, *extra],
                              catch_exceptions=False)


@pytest.mark.docker
def test_tiny_model_is_tight_under_the_256mb_budget_and_gates(docker_backend, tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _start(out, tiny)
    assert result.exit_code == 0, result.output
    rows = {r["profile_id"]: r for r in csv.DictReader((out / "benchmark_results.csv").open())}
    kaios, c1 = rows["nokia_8110_4g"], rows["nokia_c1"]
    assert kaios["verdict"] == "tight" and kaios["app_budget_mb"] == "103"
    assert float(kaios["peak_rss_mb"]) > 103 and float(kaios["headroom_mb"]) < 0
    assert c1["verdict"] == "fits" and float(c1["headroom_mb"]) == pytest.approx(415 - float(c1["peak_rss_mb"]), abs=0.1)
    assert kaios["input_shape"] == "1x3x224x224" and kaios["input_shape_source"] == "default"
    said = " ".join(result.output.split())  # the console wraps long lines
    assert "input 1x3x224x224 (default)" in said
    assert "! tight" in said and "of which runtime" in said
    assert "--runtime tflite" in said  # the smaller-runtime hint on a torch row that is not fits
    # gates: tight is not OOM, but --fail-on-tight catches it
    again = _start(out, tiny, extra=("--fail-on-oom",))
    assert again.exit_code == 0, again.output
    tight = _start(out, tiny, extra=("--fail-on-tight",))
    assert tight.exit_code == 3 and "tight: peak" in " ".join(tight.output.split())
    parsed = [r for r in RunState.load(out / ".lodevem-state.json").rows]
    assert check_budget(parsed, Budget(fail_on_tight=True))[0].startswith("tiny_cnn.pt on Nokia 8110")
    assert any("of which runtime" in line for line in model_summaries(parsed))


@pytest.mark.docker
def test_start_adds_other_models_and_refuses_other_settings(docker_backend, tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    other = zoo.write("tiny_cnn", tmp_path / "other")
    renamed = other.rename(other.with_name("other_net.pt"))
    assert _start(out, tiny).exit_code == 0
    before = (out / "benchmark_results.csv").read_text()
    refused = _start(out, renamed, extra=("--runs", "7"))
    assert refused.exit_code == 2
    line = refused.output.strip().splitlines()[-1]
    assert "holds a run with other settings (--runs 7 here" in line and "--overwrite" in line
    assert (out / "benchmark_results.csv").read_text() == before  # nothing lost
    added = _start(out, renamed)  # the same settings: one table of both
    assert added.exit_code == 0, added.output
    assert {label for label, _ in RunState.load(out / ".lodevem-state.json").done()} == {"tiny_cnn.pt", "other_net.pt"}
    replaced = _start(out, renamed, extra=("--overwrite",))
    assert replaced.exit_code == 0, replaced.output
    assert "tiny_cnn.pt" not in (out / "benchmark_results.csv").read_text()


@pytest.mark.docker
def test_inspect_uses_a_recorded_shape_and_warns_on_a_default_the_layers_contradict(docker_backend,
                                                                                  tmp_path: Path) -> None:
    import torch
    import torch.nn as nn

    recorded = zoo.build("tiny_cnn")
    recorded.example_input_shape = (1, 3, 96, 96)
    torch.save(recorded, tmp_path / "recorded.pt")
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path / "recorded.pt"), "--backend", "docker"])
    assert result.exit_code == 0, result.output
    assert "1x3x96x96 float32 (recorded in the file)" in result.output
    plain = CliRunner().invoke(cli, ["inspect", str(tiny_path(tmp_path)), "--backend", "docker"])
    assert "1x3x224x224 float32 (default)" in plain.output
    made_for_96 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 48 * 48, 10))
    torch.save(made_for_96, tmp_path / "net96.pt")
    failed = CliRunner().invoke(cli, ["inspect", str(tmp_path / "net96.pt"), "--backend", "docker"])
    said = " ".join(failed.output.split())
    assert failed.exit_code != 0 and "matches a 96x96 input" in said and "--input-shape 1,3,96,96" in said, said


def tiny_path(folder: Path) -> Path:
    return zoo.write("tiny_cnn", folder / "plain")


@pytest.mark.docker
def test_dynamic_int8_conv_net_row_says_its_convs_run_fp32(docker_backend, tmp_path: Path) -> None:
    import torch
    import torch.nn as nn

    net = torch.ao.quantization.quantize_dynamic(zoo.build("tiny_cnn"), {nn.Linear}, dtype=torch.qint8)
    torch.save(net, tmp_path / "tiny_dyn.pt")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["start", str(tmp_path / "tiny_dyn.pt"), "--output", str(out), "--runs", "2",
                                      "--warmup", "0", "--backend", "docker", "--profile", "nokia_c1"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader((out / "benchmark_results.csv").open()))
    assert row["precision"] == "int8-dynamic"
    assert "only Linear layers are int8" in row["latency_note"] and "int8-static" in row["latency_note"]


def test_console_and_tex_state_range_marks_and_verdicts() -> None:

    from rich.console import Console
    from test_reporter import make_row

    from lodevem.reporter import latex_table, results_table

    by_id = {p.id: p for p in load_profiles()}
    rows = [with_columns(make_row(by_id["nokia_8110_4g"], peak=237.0, latency=49.7), verdict="tight", app_budget_mb=103,
                    headroom_mb=-134.0, latency_low_ms=39.7, latency_high_ms=59.7, input_shape="1x3x96x96",
                    input_shape_source="recorded in the file"),
            with_columns(make_row(by_id["nokia_c1"], peak=237.0, latency=20.0), app_budget_mb=415, headroom_mb=178.0,
                    latency_calibrations=("nokia_c1: x0.9 from 1 measurement",), input_shape="1x3x96x96",
                    input_shape_source="recorded in the file")]
    console = Console(record=True, width=200)
    console.print(results_table(rows))
    text = console.export_text()
    assert "input 1x3x96x96 (recorded in the file)" in text
    assert "49.7* (39.7\u201359.7)" in text and "20.0*\u00a7" in text and "! tight" in text and "-134" in text
    assert "\u00a7 scaled by a calibration" in text
    tex = latex_table(rows)
    footnote = tex.split(r"\bottomrule")[1]
    assert r"\textsuperscript{*} offline estimator: $\pm$25.0\%" in footnote  # the mark and its held-out figure
    assert r"49.7 $\pm$ 10.0\textsuperscript{*}" in tex  # the band in the latency column
    assert r"\textsuperscript{\S}" in footnote and "tight = above the budget" in footnote
    assert "& tight" in tex.split(r"\bottomrule")[0]
