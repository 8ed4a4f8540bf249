"""The runner's planning without Docker: one measurement per (model, distinct RAM limit), cache
hits on a second run, ``--resume`` after an interrupt, and rows for a model whose variant cannot
be derived. The fake backend (tests/fakes.py) answers the worker protocol without loading
anything, so these tests exercise the real client, scheduler, cache, state file and rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from fakes import FakeBackend, InterruptAfter

from lodevem.errors import InputError
from lodevem.profiles import load_profiles, select_profiles
from lodevem.runner import STATE_FILE, RunConfig, run_benchmark
from lodevem.runner.state import RunState

# 256 MB, 512 MB twice, 1 GB twice: five profiles, three distinct limits.
PROFILES = ("nokia_8110_4g", "jiophone2", "nokia_2720_flip", "nokia_c1", "tecno_pop5_go")


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    paths = []
    for name in ("small.pt", "big.pt"):
        path = tmp_path / "models" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(name.encode())  # never loaded: the fake backend only reads the name
        paths.append(path)
    return paths


def config(files: list[Path], out: Path, **kw) -> RunConfig:
    profiles = tuple(select_profiles(load_profiles(), ids=PROFILES))
    kw.setdefault("runtimes", ("torch",))  # the planning of torch runs (the fake backend converts nothing)
    return RunConfig.of(models=tuple(files), profiles=profiles, output=out, jobs=1, **kw)


NEED = {"small.pt": 240.0, "big.pt": 600.0}


def test_each_model_is_measured_once_per_distinct_limit(files: list[Path], tmp_path: Path) -> None:
    fake = FakeBackend(NEED)
    outcome = run_benchmark(config(files, tmp_path / "out", infer=False), backend=fake)
    assert len(fake.calls) == 2 * 3
    assert sorted(c[1] for c in fake.calls if c[0] == "big.pt") == [256, 512, 1024]
    assert len(outcome.rows) == 2 * len(PROFILES)
    verdicts = {(r.model.label, r.device.profile_id): r.verdict for r in outcome.rows}
    # 240 MB runs under the 256 MB limit but is above the phone's 103 MB app budget: tight
    assert verdicts[("small.pt", "nokia_8110_4g")] == "tight" and verdicts[("big.pt", "jiophone2")] == "oom"
    assert verdicts[("big.pt", "nokia_c1")] == "tight"  # 600 MB: within 1 GB, above its 415 MB budget
    # the fake exports nothing: each latency cell says why instead of a number
    assert all(r.latency.ms is None and "no ONNX export" in (r.latency.note or "") for r in outcome.rows)
    # one export per distinct file, before any measurement
    assert fake.actions[:2] == ["export-onnx", "export-onnx"]


def test_limits_far_above_the_peak_are_inferred(files: list[Path], tmp_path: Path) -> None:
    fake = FakeBackend(NEED)
    rows = {r.key: r for r in run_benchmark(config(files, tmp_path / "out"), backend=fake).rows}
    # small (240 MB): the 1 GB reference, 512 MB inferred, 256 MB measured; big (600 MB): all measured
    assert sorted((c[0], c[1]) for c in fake.calls) == [("big.pt", 256), ("big.pt", 512), ("big.pt", 1024),
                                                         ("small.pt", 256), ("small.pt", 1024)]
    inferred = rows[("small.pt", "jiophone2")]
    assert inferred.verdict == "tight" and inferred.memory.inferred_from_mb == 1024  # 240 MB > the 207 MB budget
    assert inferred.memory.limit_enforcement == "inferred from the 1024 MB run: peak 240.0 MB ≪ 512 MB"
    assert rows[("big.pt", "jiophone2")].memory.inferred_from_mb is None
    measured = {r.key: r for r in run_benchmark(config(files, tmp_path / "naive", infer=False),
                                                backend=FakeBackend(NEED)).rows}
    assert {k: r.verdict for k, r in rows.items()} == {k: r.verdict for k, r in measured.items()}


def test_resume_keeps_and_completes_inferred_rows(files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    fake = FakeBackend(NEED)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(config(files, out), InterruptAfter(3), backend=fake)
    kept = RunState.load(out / STATE_FILE)
    assert kept is not None and any(r.memory.inferred_from_mb for r in kept.rows)
    resumed = run_benchmark(config(files, out, resume=True), backend=fake)
    assert len(resumed.rows) == 2 * len(PROFILES)
    kept_rows = {r.key: r for r in kept.rows}
    assert all(row == kept_rows[row.key] for row in resumed.rows if row.key in kept_rows)
    small_512 = {r.device.profile_id: r for r in resumed.rows if r.model.label == "small.pt"}["nokia_2720_flip"]
    assert small_512.memory.inferred_from_mb == 1024
    assert len(fake.calls) == 5  # the reference run is served from the cache, never run twice


def test_second_run_is_served_from_the_cache(files: list[Path], tmp_path: Path) -> None:
    fake = FakeBackend(NEED)
    first = run_benchmark(config(files, tmp_path / "out"), backend=fake)
    calls = len(fake.calls)
    second = run_benchmark(config(files, tmp_path / "out"), backend=fake)
    assert len(fake.calls) == calls
    assert all(r.memory.cached for r in second.rows) and not any(r.memory.cached for r in first.rows)
    assert [r.memory.peak_rss_mb for r in second.rows] == [r.memory.peak_rss_mb for r in first.rows]
    run_benchmark(config(files, tmp_path / "out", no_cache=True), backend=fake)
    assert len(fake.calls) == 2 * calls


def test_resume_measures_only_what_is_missing(files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    fake = FakeBackend(NEED)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(config(files, out, no_cache=True, infer=False), InterruptAfter(3), backend=fake)
    kept = RunState.load(out / STATE_FILE)
    assert kept is not None and 3 <= len(kept.rows) < 2 * len(PROFILES)
    before = len(fake.calls)
    resumed = run_benchmark(config(files, out, no_cache=True, resume=True, infer=False), backend=fake)
    assert len(resumed.rows) == 2 * len(PROFILES)
    kept_rows = {r.key: r for r in kept.rows}
    assert all(row == kept_rows[row.key] for row in resumed.rows if row.key in kept_rows)
    # only (model, limit) pairs that still had a profile without a row were measured again
    by_id = {p.id: p.ram_mb for p in config(files, out).profiles}
    needed = {(Path(label).name, by_id[pid]) for label, pid in
              {(m, p) for m in ("small.pt", "big.pt") for p in PROFILES} - kept.done()}
    assert {(c[0], c[1]) for c in fake.calls[before:]} == needed
    resumed_state_rows = RunState.load(out / STATE_FILE).rows
    # a resume with other options would overwrite those rows: it refuses, and keeps them
    with pytest.raises(InputError, match=r"holds an interrupted run with other settings \(--runs 7 here, 50 there\)"):
        run_benchmark(config(files, out, no_cache=True, resume=True, runs=7, infer=False), backend=fake)
    assert RunState.load(out / STATE_FILE).rows == resumed_state_rows


def test_an_interrupt_leaves_a_valid_partial_table(files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(config(files, out, no_cache=True), InterruptAfter(3), backend=FakeBackend(NEED))
    with (out / "benchmark_results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    kept = RunState.load(out / STATE_FILE)
    assert 3 <= len(rows) == len(kept.rows) < 2 * len(PROFILES)
    payload = json.loads((out / "benchmark_results.json").read_text())
    assert len(payload["results"]) == len(rows) and payload["environment"]["command_line"] == []


@pytest.mark.parametrize("garbage", [b"\x00\xffnot json", b"[1, 2, 3]", b'{"schema_version": 1, "config_key": "k", '
                                     b'"rows": [{"model_label": "half a row"}]}'])
def test_a_state_file_lodevem_cannot_read_is_set_aside(files: list[Path], tmp_path: Path, garbage: bytes) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / STATE_FILE).write_bytes(garbage)
    outcome = run_benchmark(config(files, out, resume=True), backend=FakeBackend(NEED))
    assert len(outcome.rows) == 2 * len(PROFILES)
    assert any("not a run state lodevem wrote" in w and "started afresh" in w for w in outcome.warnings)
    aside = list(out.glob(f"{STATE_FILE}.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage


def test_a_variant_that_cannot_be_derived_gets_error_rows(files: list[Path], tmp_path: Path) -> None:
    fake = FakeBackend(NEED)
    outcome = run_benchmark(config(files[:1], tmp_path / "out", levels=("fp32", "int8")), backend=fake)
    rows = {(r.model.label, r.device.profile_id): r for r in outcome.rows}
    assert rows[("small.pt@fp32", "nokia_c1")].verdict == "fits"
    failed = rows[("small.pt@int8", "nokia_c1")]
    assert failed.verdict == "error" and failed.memory.error.startswith("could not derive int8")
    # the fp32 file at 1 GB (the reference) and 256 MB, 512 MB inferred; the failed variant is never run
    assert sorted(c[1] for c in fake.calls) == [256, 1024]


def test_every_sandbox_run_gets_the_timeout_asked_for(files: list[Path], tmp_path: Path) -> None:
    """--timeout bounds exports and derivations too (onnxruntime exports once had a 300 s floor)."""
    fake = FakeBackend(NEED)
    run_benchmark(config(files, tmp_path / "out", runtimes=("onnxruntime",), timeout_s=20.0, levels=("fp32", "fp16")),
                  backend=fake)
    assert {action for action, _ in fake.timeouts} >= {"export-onnx", "derive"}
    assert {timeout for _, timeout in fake.timeouts} == {20.0}
