"""`lodevem calibrate`: device benchmark logs, the fit, the round trip through `predict`, and
one-line errors. Real estimator, real in-process export of zoo models (lodevem's own code)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli
from lodevem.errors import InputError
from lodevem.latency.calibration import (
    CalibrationRecord,
    calibrated_source,
    fit_calibration,
    measurements_from_args,
    measurements_from_log,
    parse_benchmark_log,
    select_records,
)

ROOT = Path(__file__).resolve().parent.parent
LOGS = Path(__file__).resolve().parent / "fixtures" / "benchmark_logs"
PROFILE = "jiophone2"


@pytest.fixture()
def env(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An empty calibrations folder per test; one zoo export cache for the module's tests."""
    cache = Path(tmp_path_factory.getbasetemp()) / "i14a-cache"
    return {"LODEVEM_CALIBRATIONS": str(tmp_path / "calibrations"), "XDG_CACHE_HOME": str(cache)}


def run(env: dict[str, str], *args: str):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def predict_json(env: dict[str, str], *args: str) -> dict[tuple[str, str], dict]:
    result = run(env, "predict", *args, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    return {(r["model"], r["profile_id"]): r for r in rows}


def one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


# --------------------------------------------------------------------------- logs


def test_benchmark_model_log_gives_the_inference_average_in_ms() -> None:
    log = parse_benchmark_log((LOGS / "benchmark_model_xnnpack.txt").read_text(), "x.txt")
    assert (log.runtime, log.tool, log.threads) == ("tflite", "benchmark_model", 1)
    assert [(e.name, e.ms) for e in log.entries] == [("mobilenet_v2_1.0_224", pytest.approx(411.187))]


def test_benchmark_model_logcat_with_scientific_notation() -> None:
    log = parse_benchmark_log((LOGS / "benchmark_model_logcat.txt").read_text(), "x.txt")
    assert log.threads == 4
    assert [e.ms for e in log.entries] == [pytest.approx(1240.27)]  # 1.24027e+06 us


def test_benchncnn_log_gives_every_model_and_its_settings() -> None:
    log = parse_benchmark_log((LOGS / "benchncnn.txt").read_text(), "b.txt")
    assert (log.runtime, log.tool, log.threads) == ("ncnn", "benchncnn", 4)
    entries = {e.name: e.ms for e in log.entries}
    assert entries["mobilenet_v2"] == pytest.approx(72.16) and entries["squeezenet_int8"] == pytest.approx(48.97)
    assert len(entries) == 12 and "powersave=2" in log.settings


def test_an_unparseable_log_names_the_file() -> None:
    with pytest.raises(InputError, match="not_a_benchmark.txt: no timings found"):
        parse_benchmark_log((LOGS / "not_a_benchmark.txt").read_text(), str(LOGS / "not_a_benchmark.txt"))


def test_benchncnn_entries_map_to_zoo_models_int8_skipped() -> None:
    from lodevem.latency.estimator import Estimator

    model_map = Estimator.load().params["provenance"]["model_map"]
    log = parse_benchmark_log((LOGS / "benchncnn.txt").read_text(), "b.txt")
    found = {m.model: m for m in measurements_from_log((), log, "b.txt", model_map)}
    assert {"mobilenet_v1", "mobilenet_v2", "squeezenet1_1", "resnet18"} <= set(found)
    assert found["squeezenet1_1"].input_shape == (1, 3, 227, 227)  # benchncnn's own input
    assert found["resnet18"].ms == pytest.approx(256.48)  # not resnet18_int8
    named = measurements_from_log(("models/mobilenet_v1.pt", "mine.pt=efficientnet_b0"), log, "b.txt", model_map)
    assert [(m.model, m.ms) for m in named] == [("models/mobilenet_v1.pt", 104.85), ("mine.pt", 119.64)]
    with pytest.raises(InputError, match="no benchncnn entry for 'vgg16'"):
        measurements_from_log(("vgg16",), log, "b.txt", model_map)


def test_model_equals_ms_arguments() -> None:
    found = measurements_from_args(["a=b/model.pt=12.5", "mobilenet_v2=3e2"])
    assert [(m.model, m.ms) for m in found] == [("a=b/model.pt", 12.5), ("mobilenet_v2", 300.0)]
    for bad in ("mobilenet_v2", "mobilenet_v2=", "mobilenet_v2=-3", "=12", "x=nan"):
        with pytest.raises(InputError):
            measurements_from_args([bad])


# --------------------------------------------------------------------------- the fit


def _record(model: str, measured: float, compute: float, memory: float, runtime: str = "tflite",
            threads: int = 1) -> CalibrationRecord:
    return CalibrationRecord(PROFILE, model, model * 8, model * 8, measured, runtime, threads,
                             "2026-12-01T10:00:00+00:00", "", compute + memory, compute, memory,
                             "estimator:v1 (Cortex-A7@1.1GHz)", "test")


def test_one_record_is_one_factor_three_recover_compute_and_memory_factors() -> None:
    one = fit_calibration(PROFILE, [_record("a", 80.0, 60.0, 40.0)])
    assert one is not None and not one.split and one.factor(0.3) == pytest.approx(0.8)
    # measurements made with compute x0.7 and memory x1.5 exactly: the fit finds them back
    parts = [(90.0, 10.0), (50.0, 50.0), (20.0, 80.0), (70.0, 35.0)]
    records = [_record(str(i), 0.7 * c + 1.5 * m, c, m) for i, (c, m) in enumerate(parts)]
    fit = fit_calibration(PROFILE, records)
    assert fit is not None and fit.split
    assert (fit.compute_factor, fit.memory_factor) == (pytest.approx(0.7), pytest.approx(1.5))


def test_models_too_alike_fall_back_to_one_factor_with_a_reason() -> None:
    records = [_record(str(i), 50.0 * s, 30.0 * s, 20.0 * s) for i, s in enumerate((1.0, 2.0, 3.0))]
    fit = fit_calibration(PROFILE, records)
    assert fit is not None and not fit.split and fit.fallback and "too alike" in fit.fallback
    assert fit.factor(0.5) == pytest.approx(1.0)


def test_records_of_another_runtime_or_thread_count_are_applied_with_a_note() -> None:
    records = [_record("a", 80.0, 60.0, 40.0, runtime="ncnn", threads=4)]
    chosen, note = select_records(records, "tflite", 1)
    assert chosen == records and note and "ncnn, 4 threads" in note and "tflite, 1 thread" in note
    assert select_records(records, "ncnn", 4) == (records, None)


def test_calibrated_source_keeps_the_core_part_last() -> None:
    assert calibrated_source("estimator:v1 (Cortex-A53@2.0GHz)", 1) == "estimator:v1 calibrated(n=1) (Cortex-A53@2.0GHz)"
    assert (calibrated_source("estimator:v2 tflite (Cortex-A53@2.0GHz)", 3)
            == "estimator:v2 tflite calibrated(n=3) (Cortex-A53@2.0GHz)")


# --------------------------------------------------------------------------- round trip


def test_round_trip_own_model_reproduces_its_measurement_another_moves_by_the_same_factor(env) -> None:
    before = predict_json(env, "mobilenet_v2", "resnet18", "--profile", PROFILE, "--profile", "itel_it5626")
    measured = 0.8 * before[("mobilenet_v2", PROFILE)]["latency_ms"]
    result = run(env, "calibrate", "add", PROFILE, f"mobilenet_v2={measured}", "--runtime", "tflite",
                 "--note", "round trip")
    assert result.exit_code == 0, result.output
    records = list(Path(env["LODEVEM_CALIBRATIONS"]).glob("*.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["profile_id"] == PROFILE and record["runtime"] == "tflite" and record["threads"] == 1
    assert record["note"] == "round trip" and len(record["model_sha256"]) == 64 and record["date"].startswith("20")

    after = predict_json(env, "mobilenet_v2", "resnet18", "--profile", PROFILE, "--profile", "itel_it5626")
    own = after[("mobilenet_v2", PROFILE)]
    assert own["latency_ms"] == pytest.approx(measured, rel=0.01)
    assert "calibrated(n=1)" in own["latency_source"] and "calibration" in own["latency_uncertainty"]
    assert "calibrated on jiophone2 with mobilenet_v2" in own["latency_note"]
    factor = after[("resnet18", PROFILE)]["latency_ms"] / before[("resnet18", PROFILE)]["latency_ms"]
    assert factor == pytest.approx(0.8, rel=1e-6)
    # another profile is untouched
    assert after[("resnet18", "itel_it5626")] == before[("resnet18", "itel_it5626")]
    uncalibrated = predict_json(env, "resnet18", "--profile", PROFILE, "--uncalibrated")
    assert uncalibrated[("resnet18", PROFILE)] == before[("resnet18", PROFILE)]

    listing = run(env, "calibrate", "list")
    assert listing.exit_code == 0 and "jiophone2" in listing.output and "round trip" in listing.output


def test_calibrate_from_a_benchmark_model_log(env) -> None:
    log = LOGS / "benchmark_model_xnnpack.txt"
    result = run(env, "calibrate", "from-log", str(log), PROFILE, "mobilenet_v2", "--note", "xnnpack")
    assert result.exit_code == 0, result.output
    (path,) = Path(env["LODEVEM_CALIBRATIONS"]).glob("*.json")
    record = json.loads(path.read_text())
    assert record["measured_ms"] == pytest.approx(411.187) and (record["runtime"], record["threads"]) == ("tflite", 1)
    assert "benchmark_model log" in record["measured_by"] and "mobilenet_v2_1.0_224" in record["measured_by"]
    row = predict_json(env, "mobilenet_v2", "--profile", PROFILE, "--latency-runtime", "tflite")[("mobilenet_v2", PROFILE)]
    assert row["latency_ms"] == pytest.approx(411.187, rel=0.01) and "applied anyway" not in row["latency_note"]


def test_other_threads_are_applied_with_a_note(env) -> None:
    added = run(env, "calibrate", "add", PROFILE, "mobilenet_v2=300", "--runtime", "ncnn", "--threads", "4")
    assert added.exit_code == 0, added.output
    row = predict_json(env, "mobilenet_v2", "--profile", PROFILE)[("mobilenet_v2", PROFILE)]
    assert "calibrated(n=1)" in row["latency_source"]
    assert "calibration measured with ncnn, 4 threads, this prediction is for tflite, 1 thread: applied anyway" in row[
        "latency_note"]


def test_a_custom_profile_calibrated_from_a_benchncnn_log(env, tmp_path: Path) -> None:
    """The user's own phone: copy the template, measure with benchncnn, calibrate."""
    phones = tmp_path / "phones"
    phones.mkdir()
    shutil.copy(ROOT / "profiles" / "custom_template.yaml", phones / "my_phone.yaml")
    log = LOGS / "benchncnn.txt"
    models = ("mobilenet_v2", "resnet18", "shufflenet_v2_x1_0", "efficientnet_b0")
    result = run(env, "calibrate", "from-log", str(log), "my_phone", *models, "--profiles-dir", str(phones))
    assert result.exit_code == 0, result.output
    assert "my_phone is now calibrated for ncnn, 4 thread(s)" in result.output
    rows = predict_json(env, *models, "mobilenet_v1", "--profile", "my_phone", "--profiles-dir", str(phones),
                        "--threads", "4", "--latency-runtime", "ncnn")
    for model in models:
        row = rows[(model, "my_phone")]
        assert "calibrated(n=4)" in row["latency_source"] and "applied anyway" not in (row["latency_note"] or "")
    # four calibrated models: each within the fit's residual of its own measurement (not exact)
    measured = {"mobilenet_v2": 72.16, "resnet18": 256.48, "shufflenet_v2_x1_0": 34.02, "efficientnet_b0": 119.64}
    errors = [abs(rows[(m, "my_phone")]["latency_ms"] / ms - 1) for m, ms in measured.items()]
    assert max(errors) < 0.5 and math.isfinite(sum(errors))


# --------------------------------------------------------------------------- errors


def test_errors_are_one_line_with_exit_2(env) -> None:
    one_line_error(run(env, "calibrate", "add", "no_such_phone", "mobilenet_v2=12", "--runtime", "tflite"),
                   "unknown profile 'no_such_phone'")
    one_line_error(run(env, "calibrate", "add", PROFILE, "mobilenet_v2", "--runtime", "tflite"), "expected MODEL=MS")
    one_line_error(run(env, "calibrate", "add", PROFILE, "mobilenet_v2=fast", "--runtime", "tflite"), "'fast'")
    one_line_error(run(env, "calibrate", "from-log", str(LOGS / "not_a_benchmark.txt"), PROFILE, "mobilenet_v2"),
                   "not_a_benchmark.txt", "no timings found")
    one_line_error(run(env, "calibrate", "add", PROFILE, "no_such_model=12", "--runtime", "tflite"),
                   "no_such_model", "zoo model name")
    one_line_error(run(env, "predict", "mobilenet_v2", "--profile", "no_such_phone"), "unknown profile")
    one_line_error(run(env, "calibrate", "from-log", str(LOGS / "benchncnn.txt"), PROFILE, "mobilenet_v2",
                       "--runtime", "tflite"), "--runtime tflite", "benchncnn log")
    one_line_error(run(env, "calibrate", "add", PROFILE, "mobilenet_v2=12"), "--runtime is required")
    one_line_error(run(env, "calibrate", "from-log", str(LOGS / "benchmark_model_xnnpack.txt"), PROFILE, "resnet18",
                       "--threads", "4"), "--threads 4", "1 thread(s)")
    assert not Path(env["LODEVEM_CALIBRATIONS"]).exists()  # nothing was written by a failed calibrate


def test_a_malformed_record_is_skipped_with_a_one_line_warning_naming_it(env) -> None:
    folder = Path(env["LODEVEM_CALIBRATIONS"])
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{not json")
    result = CliRunner().invoke(cli, ["predict", "tiny_cnn", "--profile", PROFILE, "--json"], env=env)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "broken.json" in line]
    assert len(warnings) == 1 and "unreadable calibration record" in warnings[0] and "skipped" in warnings[0]
    (row,) = json.loads(result.stdout)
    assert "calibrated" not in row["latency_source"]
