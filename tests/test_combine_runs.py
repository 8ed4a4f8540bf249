"""Runs combined into one table (issue 46): a second ``start`` of other models into a results
folder with the same settings adds its rows (one CSV, JSON, .tex, report.html); other settings
are refused in one line naming each difference; ``lodevem report DIR... --output`` combines
folders. The fake backend (tests/fakes.py) answers the worker protocol without loading anything."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import FakeBackend

from lodevem.cli import cli
from lodevem.errors import InputError
from lodevem.profiles import load_profiles, select_profiles
from lodevem.reporter import write_all
from lodevem.runner import RunConfig, run_benchmark

PROFILES = ("nokia_8110_4g", "nokia_c1")


def _model(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "models" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(name.encode())
    return path


def _run(models: list[Path], out: Path, **kw):
    profiles = tuple(select_profiles(load_profiles(), ids=kw.pop("profiles", PROFILES)))
    config = RunConfig.of(models=tuple(models), profiles=profiles, output=out, jobs=1, runtimes=("torch",), **kw)
    outcome = run_benchmark(config, backend=FakeBackend(250.0))
    write_all(outcome.rows, profiles, outcome.manifest, out, plots=False)
    return outcome


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_second_run_of_other_models_joins_the_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run([_model(tmp_path, "net_fp32.pt")], out)
    second = _run([_model(tmp_path, "net_int8.pt")], out)
    assert [r.model.label for r in second.rows] == ["net_fp32.pt"] * 2 + ["net_int8.pt"] * 2
    assert any("join them in one table" in w for w in second.warnings)
    assert [r["model_label"] for r in _csv(out / "benchmark_results.csv")] == [r.model.label for r in second.rows]
    payload = json.loads((out / "benchmark_results.json").read_text())
    assert [m["label"] for m in payload["environment"]["models"]] == ["net_fp32.pt", "net_int8.pt"]
    assert [run["models"] for run in payload["environment"]["extra"]["combined"]] == [["net_fp32.pt"], ["net_int8.pt"]]
    tex = (out / "benchmark_results.tex").read_text()
    assert "net\\_fp32.pt" in tex and "net\\_int8.pt" in tex
    html = (out / "report.html").read_text()
    assert "net_fp32.pt" in html and "net_int8.pt" in html
    # the first command again refreshes its own rows and keeps the other model's
    again = _run([_model(tmp_path, "net_fp32.pt")], out)
    assert sorted({r.model.label for r in again.rows}) == ["net_fp32.pt", "net_int8.pt"]


def test_the_earlier_table_keeps_its_order(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _run([_model(tmp_path, n) for n in ("b.pt", "a.pt", "c.pt")], out, levels=("fp32", "int8"))
    order = list(dict.fromkeys(r.model.label for r in first.rows))
    second = _run([_model(tmp_path, "d.pt")], out)
    assert list(dict.fromkeys(r.model.label for r in second.rows)) == [*order, "d.pt"]


def test_other_settings_are_refused_naming_each_difference(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run([_model(tmp_path, "a.pt")], out)
    before = (out / "benchmark_results.csv").read_text()
    with pytest.raises(InputError) as refused:
        _run([_model(tmp_path, "b.pt")], out, runs=7, profiles=("nokia_c1",))
    message = str(refused.value)
    assert "\n" not in message and "holds a run with other settings" in message
    assert "device profiles nokia_c1 here, nokia_8110_4g,nokia_c1 there" in message and "--runs 7 here, 50 there" in message
    assert (out / "benchmark_results.csv").read_text() == before  # nothing lost
    replaced = _run([_model(tmp_path, "b.pt")], out, runs=7, overwrite=True)
    assert {r.model.label for r in replaced.rows} == {"b.pt"}


def test_report_combines_folders_with_the_same_settings(tmp_path: Path) -> None:
    _run([_model(tmp_path, "a.pt")], tmp_path / "one")
    _run([_model(tmp_path, "b.pt")], tmp_path / "two")
    _run([_model(tmp_path, "c.pt")], tmp_path / "three", threads=2)
    runner = CliRunner()
    done = runner.invoke(cli, ["report", str(tmp_path / "one"), str(tmp_path / "two"), "--output", str(tmp_path / "all")])
    assert done.exit_code == 0, done.output
    labels = [r["model_label"] for r in _csv(tmp_path / "all" / "benchmark_results.csv")]
    assert labels == ["a.pt", "a.pt", "b.pt", "b.pt"]
    for name in ("benchmark_results.json", "benchmark_results.tex", "report.html", "methodology.md"):
        assert (tmp_path / "all" / name).is_file()
    refused = runner.invoke(cli, ["report", str(tmp_path / "one"), str(tmp_path / "three"), "--output",
                                  str(tmp_path / "mixed")])
    assert refused.exit_code == 2
    line = refused.output.strip()
    assert len(line.splitlines()) == 1 and "--threads 2 here, 1 there" in line, refused.output
    several = runner.invoke(cli, ["report", str(tmp_path / "one"), str(tmp_path / "two")])
    assert several.exit_code == 2 and "--output" in several.output
    one = runner.invoke(cli, ["report", str(tmp_path / "one")])  # one folder: its report.html again
    assert one.exit_code == 0 and "report.html" in one.output
