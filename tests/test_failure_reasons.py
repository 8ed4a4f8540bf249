"""Every failed cell says why, where the user looks (issue 46): under the console table (one line
per failed cell, without --verbose), in the CSV (``failure_reason``) and in report.html (under the
cell); ``lodevem predict`` failing everywhere names the reason in its error line.

The run uses the fake backend (tests/fakes.py): it writes no export and derives nothing, so the
latency cells and the derived level's memory cells fail with the worker's own reasons."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner
from fakes import FakeBackend
from helpers import with_columns

from lodevem import zoo
from lodevem.cli import cli
from lodevem.commands import TERMINAL
from lodevem.profiles import load_profiles, select_profiles
from lodevem.reporter import write_all
from lodevem.results.failures import failure_lines, failures
from lodevem.results.outcome import StartResult
from lodevem.runner import RunConfig, run_benchmark

PROFILES = ("nokia_8110_4g", "nokia_c1")


def _run(tmp_path: Path):
    model = tmp_path / "models" / "net.pt"
    model.parent.mkdir()
    model.write_bytes(b"net")
    profiles = tuple(select_profiles(load_profiles(), ids=PROFILES))
    out = tmp_path / "out"
    config = RunConfig.of(models=(model,), profiles=profiles, output=out, jobs=1, runtimes=("torch",),
                          levels=("fp32", "int8"))
    outcome = run_benchmark(config, backend=FakeBackend(250.0))
    written = write_all(outcome.rows, profiles, outcome.manifest, out, plots=False)
    return out, StartResult(outcome.rows, profiles, outcome.warnings, written, [], None)


def test_each_failed_cell_has_its_reason_in_the_csv_the_console_and_the_page(tmp_path: Path, capsys) -> None:
    out, result = _run(tmp_path)
    derived = [r for r in result.rows if r.model.level == "int8"]
    assert derived and all({f.figure for f in failures(r)} == {"latency", "peak RAM"} for r in derived)
    with open(out / "benchmark_results.csv", newline="") as handle:
        rows = {(r["model_label"], r["profile_id"]): r for r in csv.DictReader(handle)}
    reason = rows[("net.pt@int8", "nokia_c1")]["failure_reason"]
    assert reason.startswith("latency: ") and "the fake backend writes no file" in reason
    assert "peak RAM: could not derive int8" in reason
    assert rows[("net.pt@fp32", "nokia_c1")]["failure_reason"].startswith("latency: ")  # no export: no number
    assert "peak RAM" not in rows[("net.pt@fp32", "nokia_c1")]["failure_reason"]  # it was measured

    TERMINAL.start(result)  # without --verbose
    shown = capsys.readouterr().out
    lines = failure_lines(result.rows)
    assert "Missing figures (" in shown
    assert any(line.startswith("net.pt@int8 on ") and "peak RAM: could not derive int8" in line for line in lines)
    for line in lines:  # one line per failed cell (devices sharing a reason together), each shown
        assert " ".join(line.split())[:60] in " ".join(shown.split())

    page = (out / "report.html").read_text()
    assert page.count('class="why"') == sum(len(failures(r)) for r in result.rows)
    assert "could not derive int8" in page


def test_predict_failing_everywhere_names_the_reason(tmp_path: Path) -> None:
    code = tmp_path / "net.py"
    code.write_text("import time\ntime.sleep(600)\n")  # the model's code hangs at import
    model = zoo.write("tiny_cnn", tmp_path)
    done = CliRunner().invoke(cli, ["predict", str(model), "--code", str(code), "--timeout", "5", "--profile",
                                    "nokia_c1", "--backend", "process"], env={"COLUMNS": "200"})
    assert done.exit_code == 1
    error = done.output.strip().splitlines()[-1]
    assert error.startswith("Error: no latency could be predicted") and "5 s wall-clock timeout" in error
    assert "n/a (tiny_cnn.pt on nokia_c1): " in done.output  # under the table too, without --verbose


def test_a_missing_figure_in_a_row_asked_for_exits_4(tmp_path: Path) -> None:
    from dataclasses import replace

    from lodevem.errors import BudgetBroken, PartialFailure

    _, result = _run(tmp_path)
    failure = result.failure
    assert isinstance(failure, PartialFailure) and failure.exit_code == 4
    assert "missing in 4 of 4 row(s)" in str(failure)  # every latency is missing: the fake exports nothing
    complete = [with_columns(r, latency_ms=1.0, latency_note=None) for r in result.rows if r.model.level is None]
    assert replace(result, rows=complete).failure is None
    # rows of another model an earlier run left in the table are not this run's to answer for
    assert replace(result, asked=frozenset({"net.pt@fp32"}), rows=complete + [r for r in result.rows if r.model.level]
                   ).failure is None
    # a broken gate (3) and a run with no memory figure at all (1) take precedence
    assert isinstance(replace(result, broken=["x"]).failure, BudgetBroken)
    assert replace(result, nothing="no row got a memory figure").failure.exit_code == 1


def test_exit_code_4_is_documented_in_help() -> None:
    from lodevem.cli import EXIT_CODES

    assert 4 in EXIT_CODES and len(set(EXIT_CODES)) == len(EXIT_CODES)
    shown = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    assert "4 partial failure" in shown
