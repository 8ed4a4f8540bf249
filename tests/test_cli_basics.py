"""The CLI's foundation: help, version, list, check, and error exits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem import __version__
from lodevem.cli import cli


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_help_lists_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("list", "check"):
        assert command in result.output


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0 and __version__ in result.output


def test_list_all_and_by_tier() -> None:
    result = run("list")
    assert result.exit_code == 0
    assert result.output.count("tier1") >= 6 and "(16)" in result.output
    result = run("list", "--tier", "tier3")
    assert result.exit_code == 0 and "(4)" in result.output
    for pid in ("nokia_8110_4g", "jiophone2", "nokia_2720_flip", "itel_it5626"):
        assert pid in result.output
    assert "nokia_c1" not in result.output


def test_bad_tier_is_a_usage_error() -> None:
    result = run("list", "--tier", "tier9")
    assert result.exit_code == 2
    assert "tier1" in result.output and "tier3" in result.output


def test_malformed_profile_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\nram_mb: -3\n")
    result = run("list", "--profiles-dir", str(tmp_path))
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and str(bad) in lines[0]
    assert "Traceback" not in result.output


def test_check_prints_every_check() -> None:
    result = run("check")
    for name in ("Docker daemon", "cgroups", "torch", "nn-Meter"):
        assert name in result.output
    assert result.exit_code in (0, 1)
    assert ("✗" in result.output) == (result.exit_code == 1)


def test_every_command_and_exit_code_is_documented_in_the_commands_page() -> None:
    from lodevem.cli import EXIT_CODES

    commands = (Path(__file__).resolve().parent.parent / "docs" / "commands.md").read_text()
    for name in cli.commands:
        assert f"## `lodevem {name}`" in commands, f"docs/commands.md lacks a section for `lodevem {name}`"
    for code in EXIT_CODES:
        assert f"\n| {code} |" in commands
    start_options = {opt for param in cli.commands["start"].params for opt in param.opts if opt.startswith("--")}
    for option in start_options - {"--help"}:
        assert f"`{option}" in commands, f"docs/commands.md's start options table lacks {option}"


def test_latency_runtime_offers_only_runtimes_with_a_latency_model(tmp_path: Path) -> None:
    """``--latency-runtime`` lists what the runtime registry says has a latency model (tflite,
    ncnn), not every runtime ``--runtime`` measures under; torch is a one-line usage error."""
    from lodevem.wire.registry import RUNTIMES, latency_runtimes

    assert latency_runtimes() == ("tflite", "ncnn") and set(RUNTIMES) > set(latency_runtimes())
    for command in ("start", "predict"):
        shown = run(command, "--help", env={"COLUMNS": "200"}).output
        assert "[tflite|ncnn]" in shown and "torch|onnxruntime|tflite|ncnn]" not in shown.split("--latency-runtime")[1]
    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["predict", str(model), "--latency-runtime", "torch"])
    assert result.exit_code == 2 and "'torch' is not one of 'tflite', 'ncnn'" in result.output
    runtimes = run("start", "--help", env={"COLUMNS": "200"}).output
    assert "torch" in runtimes.split("--runtime")[1]  # measurement runtimes are still all four


@pytest.fixture(scope="module")
def predict_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """No calibrations, no nn-Meter data (the estimator, whatever the machine has), one export cache."""
    base = tmp_path_factory.mktemp("predict-width")
    (base / "nnmeter").mkdir()
    return {"XDG_CACHE_HOME": str(base / "cache"), "LODEVEM_CALIBRATIONS": str(base / "calibrations"),
            "LODEVEM_NNMETER_DATA": str(base / "nnmeter")}


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_predict_prints_starts_latency_cell_and_its_input_at_the_terminals_width(width: int,
                                                                                predict_env: dict[str, str]) -> None:
    """Issue 29: ``predict`` at COLUMNS=N uses N columns (its title no longer wraps at the table's
    40), keeps every device name on one line, and prints start's latency cell (the number, its
    predictor's mark, its range) and the input shape with where it came from."""
    from lodevem.profiles import load_profiles, select_profiles

    result = run("predict", "tiny_cnn", "resnet18", "--tier", "tier3", env={**predict_env, "COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    title = "lodevem latency: 2 models \u00d7 4 device profiles; input 1x3x224x224 (default)"
    if width >= len(title):
        assert lines[0] == title
    else:
        assert " ".join(result.stdout.split()).startswith(title)
    for profile in select_profiles(load_profiles(), tiers=["tier3"]):
        assert any(profile.label in line for line in lines), profile.label
    cells = re.findall(r"\d[\d,]*\.\d\* \(\d[\d,]*\.\d\u2013\d[\d,]*\.\d\)", result.stdout)
    assert len(cells) == 8  # every pair: value, the estimator's mark, its band
    assert "predicted for 1 thread under tflite" in " ".join(result.stdout.split())


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_list_keeps_every_device_name_whole_at_any_width(width: int) -> None:
    """``lodevem list`` leaves the hardware details out on a narrow terminal (named under the
    table), never the device's ID, name, RAM or tier, and never cuts one."""
    from lodevem.profiles import load_profiles

    result = run("list", env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= width and "\u2026" not in result.output
    for profile in load_profiles():
        row = next(line for line in lines if f" {profile.id} " in line)
        assert profile.label in row and profile.tier in row and profile.ram_label in row
    flat = " ".join(result.output.split())
    header = next(line for line in lines if line.startswith("\u2503"))
    hidden = [name for name in ("Chipset", "Cores", "Clock", "App budget") if name not in header]
    if hidden:
        assert f"Not shown at this width: {', '.join(hidden)} (a " in flat
    else:
        assert "Not shown" not in flat
    assert (width >= 200) <= (not hidden)  # 200 columns show everything
