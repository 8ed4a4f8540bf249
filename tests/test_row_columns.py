"""The CSV and JSON columns of a results row, pinned (issue 48): the row record may be regrouped
into typed parts, but every column, its order and its values stay what a reader of an earlier
results file already parses. The golden files in tests/data/row_columns/ were written by the
flat row of main b092872; ``LODEVEM_WRITE_GOLDEN=1`` rewrites them (only for a deliberate schema
change, which also bumps ``RESULTS_SCHEMA_VERSION``)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from lodevem.latency.records import LatencyPrediction
from lodevem.profiles import load_profiles
from lodevem.report.files import csv_columns, read_json, write_csv, write_json
from lodevem.report.shared import shared_rows
from lodevem.results import (
    Accuracy,
    ConvertedFile,
    Fallback,
    HostTimings,
    MeasuredModel,
    MemoryMeasurement,
    ModelFile,
    PairResult,
    PeakMemory,
    PhoneMeasurement,
    SandboxFacts,
)
from lodevem.runner.state import RunState
from lodevem.runtimes.logs import OpTime

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "row_columns"

# The CSV header and the keys of each JSON row, in order, as every results file has had them: the
# golden CSV's header, written by main's flat row before the row was regrouped (rewritten only with
# LODEVEM_WRITE_GOLDEN=1, for a deliberate schema change).
COLUMNS = (GOLDEN / "rows.csv").read_text(encoding="utf-8").splitlines()[0].split(",")


def _rows(tmp_path: Path) -> list[PairResult]:
    """A row with every part filled (a fallback with its note, notes holding "; ", calibrations,
    a phone measurement, accuracy) and a row of failures (no latency, an error)."""
    path = tmp_path / "m.onnx"
    path.write_bytes(b"x" * 3000)
    model = dataclasses.replace(ModelFile.from_path(path, "m.onnx"), level="int8-static", precision="int8",
                                label="m [tflite]")
    profile = next(p for p in load_profiles() if p.id == "jiophone2").model_copy(
        update={"power_w": 0.8, "power_source": "a cited figure"})
    latency = LatencyPrediction(
        latency_ms=12.5, latency_source="estimator:v4 tflite (x)", threads=1, core="Cortex-A53", clock_ghz=1.3,
        runtime="tflite", uncertainty="±20%", note="first note; second part", calibrations=("x1.1", "y"),
        latency_low_ms=10.0, latency_high_ms=15.0, uncertainty_pct=20.0, held_out_rows=40, held_out_socs=9,
        held_out_pool="Cortex-A53", kind="estimator")
    memory = MemoryMeasurement(
        verdict="fits", limit_mb=512, runtime="torch", threads=1, error=None, phase=None, cached=True,
        peak=PeakMemory(rss_mb=100.0, runtime_baseline_mb=60.0, model_increment_mb=40.0, cgroup_mb=101.0),
        sandbox=SandboxFacts(backend="docker", limit_enforcement="docker cgroup v2 memory=512MB", image_id="img",
                             worker_version="w", wall_s=1.0),
        model=MeasuredModel(sha256="0" * 64),
        host=HostTimings(mean_ms=3.0, std_ms=0.5, p50_ms=2.9, p95_ms=3.6, throughput_ips=330.0),
        inferred_from_mb=1024,
        converted=ConvertedFile(size_bytes=2**20, precision="int8", scheme="per-channel; sym", seconds=4.5),
        fallback=Fallback("tflite's converter refused the file", "torch"), note="synthetic calibration")
    accuracy = Accuracy(top1_pct=70.0, top5_pct=90.0, samples=100, drop_pts=1.5, note="a; b")
    full = PairResult.from_records(model, profile, latency, memory, threads=1, floor_mb=300,
                                   channels_removed_ms=9.0, accuracy=accuracy)
    full = dataclasses.replace(full, phone=PhoneMeasurement(
        measured_on="Pixel (Tensor)", runs=5, latency_min_ms=1.0, latency_max_ms=2.0, latency_std_ms=0.1,
        latency_p50_ms=1.5, peak_mb=50.0, op_profile=(OpTime("CONV_2D", 36, 20.42, 71.2),), runtime_version="2.3",
        binary_sha256="a" * 64))
    failed = PairResult.from_records(
        model, profile, LatencyPrediction(None, "none", 1, "Cortex-A53", 1.3, note="no graph"),
        dataclasses.replace(memory, fallback=None, note=None, verdict="error", error="boom",
                            peak=dataclasses.replace(memory.peak, rss_mb=None)),
        threads=1)
    return [full, failed]


def _plain(row: PairResult) -> object:
    return json.loads(json.dumps(row.to_dict(), default=str))


def _golden(name: str, text: str) -> str:
    if os.environ.get("LODEVEM_WRITE_GOLDEN"):
        (GOLDEN / name).write_text(text, encoding="utf-8")
    return (GOLDEN / name).read_text(encoding="utf-8")


def test_the_csv_header_and_json_keys_are_pinned(tmp_path: Path) -> None:
    assert csv_columns() == COLUMNS
    rows = _rows(tmp_path)
    assert all(list(r.to_dict()) == COLUMNS for r in rows)


def test_a_row_writes_the_pinned_csv_and_json_values(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    write_csv(rows, tmp_path / "r.csv")
    write_json(rows, {}, tmp_path / "r.json")
    csv_text = (tmp_path / "r.csv").read_text(encoding="utf-8")
    results = json.dumps(json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["results"], indent=1,
                         ensure_ascii=False) + "\n"
    assert csv_text == _golden("rows.csv", csv_text)
    assert results == _golden("rows.json", results)


def test_rows_read_back_write_the_same_columns(tmp_path: Path) -> None:
    """A results file and a run state read back (``lodevem report DIR``, --resume) give rows that
    write the very values they were read from."""
    rows = shared_rows(_rows(tmp_path), tmp_path)  # as written: no path of this machine
    write_json(rows, {}, tmp_path / "r.json")
    back, _ = read_json(tmp_path / "r.json")
    assert [_plain(r) for r in back] == [_plain(r) for r in rows]
    assert back == rows
    RunState("k", rows).save(tmp_path / "state.json")
    state = RunState.load(tmp_path / "state.json")
    assert state is not None and state.rows == rows


def test_an_older_results_file_reads_back_to_the_pinned_values(tmp_path: Path) -> None:
    """tests/data/report_run (a real run, older than some columns, with a ``torch (fallback)``
    row) read back and written again: the values it was read into, pinned."""
    rows, _ = read_json(DATA / "report_run" / "benchmark_results.json")
    results = json.dumps([r.to_dict() for r in rows], indent=1, ensure_ascii=False, default=str) + "\n"
    assert results == _golden("report_run_read_back.json", results)
