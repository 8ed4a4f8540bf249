"""``start model.pt --device adb:FAKE``: the real pipeline (export and LiteRT conversion in the
converter image, memory under LiteRT) plus the fake phone, whose stand-in benchmark_model runs the
.tflite lodevem converted. Docker lane."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem import zoo
from lodevem.cli import cli

FAKE = Path(__file__).resolve().parent / "fixtures" / "fake_adb"
sys.path.insert(0, str(FAKE))
from phones import aarch64_elf, calls, phone_with_standin, phones_fixture, pushed  # noqa: E402,F401

pytestmark = pytest.mark.docker


def test_start_with_a_phone_gives_a_measured_row(app_backend, phones, tmp_path: Path) -> None:
    state = phones({"FAKE123": phone_with_standin()})
    model = zoo.write("tiny_cnn", tmp_path)
    binary = aarch64_elf(tmp_path / "benchmark_model")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["start", str(model), "--profile", "nokia_8110_4g", "--runtime", "tflite",
                                      "--device", "adb:FAKE123", "--benchmark-binary", str(binary), "--warmup", "1",
                                      "--runs", "8", "--jobs", "1", "--backend", "docker", "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads((out / "benchmark_results.json").read_text())["results"]
    assert {r["profile_id"] for r in rows} == {"nokia_8110_4g", "phone_fake_go_1"}
    predicted = next(r for r in rows if r["profile_id"] == "nokia_8110_4g")
    measured = next(r for r in rows if r["profile_id"] == "phone_fake_go_1")
    assert predicted["latency_kind"] != "measured" and predicted["measured_on"] is None
    assert measured["latency_kind"] == "measured" and measured["measured_on"] == "Fake Go 1 (FK6739)"
    assert measured["latency_source"].startswith("measured on Fake Go 1 (FK6739): benchmark_model")
    assert measured["latency_uncertainty"] is None and measured["latency_calibrations"] == []
    assert measured["device_runs"] == 8 and measured["device_binary_sha256"] and measured["backend"] == "adb"
    assert measured["device_latency_min_ms"] <= measured["latency_ms"] <= measured["device_latency_max_ms"]
    assert measured["device_latency_std_ms"] >= 0 and measured["device_peak_mb"] > 0
    ops = {op["node_type"]: op for op in measured["device_op_profile"]}
    assert "CONV_2D" in ops and all(op["count"] >= 1 and op["avg_ms"] >= 0 for op in ops.values())
    with open(out / "benchmark_results.csv", newline="") as fh:
        csv_rows = list(csv.DictReader(fh))
    assert any(r["measured_on"] == "Fake Go 1 (FK6739)" and "CONV_2D x" in r["device_op_profile"] for r in csv_rows)
    pushes = [a for a in calls(state) if "push" in a]
    assert len(pushes) == 2 and pushes[1][3].endswith(".tflite") and pushes[1][4].startswith("/data/local/tmp/lodevem-")
    assert pushed(state, "FAKE123") == []


def test_calibrate_adb_records_three_models_and_later_predictions_say_calibrated(app_backend, phones,
                                                                                tmp_path: Path) -> None:
    phones({"FAKE123": phone_with_standin()})
    binary = aarch64_elf(tmp_path / "benchmark_model")
    folder, records = tmp_path / "phones", tmp_path / "calibrations"
    wrote = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(folder)])
    assert wrote.exit_code == 0, wrote.output
    sibling = (folder / "phone_fake_go_1.yaml").read_text().replace("id: phone_fake_go_1", "id: other_fk6739")
    (folder / "other_fk6739.yaml").write_text(sibling)  # another phone with the same SoC
    result = CliRunner().invoke(cli, ["calibrate", "adb", "phone_fake_go_1", "--device", "adb:FAKE123",
                                      "--benchmark-binary", str(binary), "--model", "tiny_cnn", "--model",
                                      "mobilenet_v3_small", "--model", "squeezenet1_1", "--warmup", "1", "--runs", "5",
                                      "--profiles-dir", str(folder), "--calibrations", str(records),
                                      "--backend", "docker"])
    assert result.exit_code == 0, result.output
    kept = [json.loads(p.read_text()) for p in records.glob("*.json")]
    assert sorted(r["model_label"] for r in kept) == ["mobilenet_v3_small.pt", "squeezenet1_1.pt", "tiny_cnn.pt"]
    assert {r["runtime"] for r in kept} == {"tflite"} and {r["scope"] for r in kept} == {"same-chipset"}
    assert all(r["measured_by"].startswith("measured on Fake Go 1 (FK6739): benchmark_model mean of 5 runs")
               for r in kept)
    assert "other_fk6739" in result.output  # the sibling is named as calibrated too
    later = CliRunner().invoke(cli, ["predict", "mobilenet_v2", "--profile", "phone_fake_go_1", "--profile",
                                     "other_fk6739", "--profiles-dir", str(folder), "--calibrations", str(records),
                                     "--json", "--backend", "docker"])
    assert later.exit_code == 0, later.output
    cells = {c["profile_id"]: c for c in json.loads(later.output)}
    for profile_id in ("phone_fake_go_1", "other_fk6739"):
        assert "calibrated(n=3)" in cells[profile_id]["latency_source"], cells[profile_id]
        assert cells[profile_id]["latency_calibrations"]


def test_predict_with_a_phone_adds_a_measured_cell(app_backend, phones, tmp_path: Path) -> None:
    phones({"FAKE123": phone_with_standin()})
    binary = aarch64_elf(tmp_path / "benchmark_model")
    result = CliRunner().invoke(cli, ["predict", "tiny_cnn", "--profile", "nokia_8110_4g", "--device", "adb:FAKE123",
                                      "--benchmark-binary", str(binary), "--json", "--backend", "docker"])
    assert result.exit_code == 0, result.output
    cells = {c["profile_id"]: c for c in json.loads(result.output)}
    assert set(cells) == {"nokia_8110_4g", "phone_fake_go_1"}
    assert cells["nokia_8110_4g"]["latency_kind"] != "measured"
    phone = cells["phone_fake_go_1"]
    assert phone["latency_kind"] == "measured" and phone["latency_source"].startswith("measured on Fake Go 1 (FK6739)")
    assert phone["latency_ms"] > 0 and phone["latency_uncertainty"] is None
