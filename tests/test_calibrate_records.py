"""Calibration records as validated data (issue 21 item 3, issue 22 item 7): bounds checked on
write and on read, a bad record one warning and skipped, no NaN/Infinity in JSON, unique record
names, ``calibrate remove``, ``calibrate list`` with IDs, ``--same-chipset``, and the 0.1 flag forms
(``--list``, ``--remove``) still working with a deprecation line. Real estimator and exports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli
from lodevem.errors import InputError
from lodevem.latency.calibration import CalibrationRecord, CalibrationStore, now_iso

PROFILE = "jiophone2"
SIBLING = "nokia_2720_flip"  # the same Snapdragon 205 and Cortex-A7


@pytest.fixture()
def env(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = Path(tmp_path_factory.getbasetemp()) / "i14a-cache"
    return {"LODEVEM_CALIBRATIONS": str(tmp_path / "calibrations"), "XDG_CACHE_HOME": str(cache)}


def run(env: dict[str, str], *args: str):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def predict(env: dict[str, str], *args: str) -> dict[tuple[str, str], dict]:
    result = run(env, "predict", *args, "--json")
    assert result.exit_code == 0, result.output
    assert "NaN" not in result.stdout and "Infinity" not in result.stdout
    return {(r["model"], r["profile_id"]): r for r in json.loads(result.stdout)}


def _record(**change) -> dict:
    good = dict(profile_id=PROFILE, model_label="mobilenet_v2", model_sha256="a" * 64, graph_sha256="b" * 64,
                measured_ms=400.0, runtime="tflite", threads=1, date=now_iso(), note="", predicted_ms=500.0,
                compute_ms=300.0, memory_ms=200.0, predictor="estimator:v2 (Cortex-A7@1.3GHz)",
                measured_by="test", input_shape=[1, 3, 224, 224], schema=1)
    return {**good, **change}


@pytest.mark.parametrize("value", ["1e308", "1e-300", "5e-324", "inf", "nan", "0", "-3"])
def test_out_of_range_measurements_are_refused_before_anything_is_written(env, value: str) -> None:
    result = run(env, "calibrate", "add", PROFILE, f"mobilenet_v2={value}", "--runtime", "tflite")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not Path(env["LODEVEM_CALIBRATIONS"]).exists()


def test_a_factor_far_from_one_is_refused_on_write(env) -> None:
    """0.002 ms for mobilenet_v2 is in the latency range but 1/100,000 of the prediction: a unit error."""
    result = run(env, "calibrate", "add", PROFILE, "mobilenet_v2=0.002", "--runtime", "tflite")
    assert result.exit_code == 2 and "factor" in result.output and "outside" in result.output, result.output
    assert not Path(env["LODEVEM_CALIBRATIONS"]).exists()


_HOSTILE = {
    "ratio-zero.json": _record(measured_ms=0.0),
    "infinite.json": '{"measured_ms": Infinity}',
    "huge-ratio.json": _record(measured_ms=1e7, predicted_ms=1e-3, compute_ms=1e-3, memory_ms=0.0),
    "wrong-types.json": _record(measured_ms="400", threads="1"),
    "bool-threads.json": _record(threads=True),
    "split-lies.json": _record(compute_ms=1e6),
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "escape.json": _record(note="\x1b]0;pwned\x07\x1b[2J", runtime="\x1b[31mtflite"),
    "list.json": "[1, 2]",
}


def test_hostile_records_are_skipped_one_warning_each_never_a_crash(env) -> None:
    folder = Path(env["LODEVEM_CALIBRATIONS"])
    folder.mkdir(parents=True)
    for name, content in _HOSTILE.items():
        (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))
    os.mkfifo(folder / "fifo.json")
    (folder / "zero.json").symlink_to("/dev/zero")
    with open(folder / "sparse.json", "wb") as handle:  # 2 GB that costs no disk
        handle.truncate(2 * 2**30)
    (folder / "good.json").write_text(json.dumps(_record()))
    for args in (["predict", "mobilenet_v2", "--profile", PROFILE, "--json"], ["calibrate", "list"]):
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output and "\x1b" not in result.output and "\x07" not in result.output
        warned = [line for line in result.stderr.splitlines() if "warning" in line]
        for name in [*_HOSTILE, "fifo.json", "zero.json", "sparse.json"]:
            assert sum(f"/{name}:" in line for line in warned) == 1, (name, result.stderr)
        assert not any("good.json" in line for line in warned)
    rows = predict(env, "mobilenet_v2", "--profile", PROFILE)
    assert "calibrated(n=1)" in rows[("mobilenet_v2", PROFILE)]["latency_source"]  # the good record applies


def test_records_are_validated_on_write_and_names_are_unique(tmp_path: Path) -> None:
    store = CalibrationStore(tmp_path)
    record = CalibrationRecord.from_dict(_record(), "test")
    first, second = store.add(record), store.add(record)  # the same measurement twice in one second
    assert first != second and first.is_file() and second.is_file()
    assert len(store.records()) == 2 and not store.warnings
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
    with pytest.raises(InputError, match="factor"):
        CalibrationRecord.from_dict(_record(measured_ms=1e-3), "test")
    with pytest.raises(InputError, match="outside"):
        CalibrationRecord(**{**_record(measured_ms=float("inf")), "input_shape": None})


def test_two_calibrations_in_the_same_second_keep_both_records(env) -> None:
    for ms in ("400", "401"):
        assert run(env, "calibrate", "add", PROFILE, f"mobilenet_v2={ms}", "--runtime", "tflite").exit_code == 0
    for ms in ("400", "401"):  # the very same measurement again: still a record of its own
        assert run(env, "calibrate", "add", PROFILE, f"mobilenet_v2={ms}", "--runtime", "tflite").exit_code == 0
    assert len(list(Path(env["LODEVEM_CALIBRATIONS"]).glob("*.json"))) == 4


def test_list_shows_ids_and_the_folder_and_remove_deletes_by_id_or_profile(env) -> None:
    assert run(env, "calibrate", "add", PROFILE, "mobilenet_v2=400", "--runtime", "tflite").exit_code == 0
    assert run(env, "calibrate", "add", PROFILE, "resnet18=900", "--runtime", "tflite").exit_code == 0
    assert run(env, "calibrate", "add", "itel_it5626", "mobilenet_v2=300", "--runtime", "tflite").exit_code == 0
    folder = Path(env["LODEVEM_CALIBRATIONS"])
    ids = sorted(p.stem for p in folder.glob("*.json"))
    listing = run(env, "calibrate", "list")
    assert listing.exit_code == 0 and str(folder) in listing.output.replace("\n", "")
    assert all(i in listing.output for i in ids)
    itel = next(i for i in ids if i.startswith("itel"))
    removed = run(env, "calibrate", "remove", itel)
    assert removed.exit_code == 0 and itel in removed.output
    assert not (folder / f"{itel}.json").exists() and len(list(folder.glob("*.json"))) == 2
    assert run(env, "calibrate", "remove", PROFILE).exit_code == 0
    assert not list(folder.glob("*.json"))
    missing = run(env, "calibrate", "remove", "no-such-record")
    assert missing.exit_code == 2 and "no-such-record" in missing.output and len(missing.output.splitlines()) == 1


def test_same_chipset_applies_only_when_asked_and_says_so(env) -> None:
    before = predict(env, "mobilenet_v2", "--profile", SIBLING)[("mobilenet_v2", SIBLING)]
    measured = 0.8 * predict(env, "mobilenet_v2", "--profile", PROFILE)[("mobilenet_v2", PROFILE)]["latency_ms"]
    plain = run(env, "calibrate", "add", PROFILE, f"mobilenet_v2={measured}", "--runtime", "tflite")
    assert plain.exit_code == 0 and SIBLING in plain.output and "--same-chipset" in plain.output
    row = predict(env, "mobilenet_v2", "--profile", SIBLING)[("mobilenet_v2", SIBLING)]
    assert row["latency_ms"] == before["latency_ms"] and "calibrated" not in row["latency_source"]
    assert "not calibrated: jiophone2" in row["latency_note"] and "--same-chipset" in row["latency_note"]

    assert run(env, "calibrate", "remove", PROFILE).exit_code == 0
    shared = run(env, "calibrate", "add", PROFILE, f"mobilenet_v2={measured}", "--runtime", "tflite",
                 "--same-chipset")
    assert shared.exit_code == 0 and "calibrated by these records too" in shared.output
    row = predict(env, "mobilenet_v2", "--profile", SIBLING)[("mobilenet_v2", SIBLING)]
    assert row["latency_ms"] == pytest.approx(0.8 * before["latency_ms"], rel=1e-6)
    assert "calibration of jiophone2 applied: same chipset" in row["latency_note"]
    assert "calibrated(n=1)" in row["latency_source"]
    other = predict(env, "mobilenet_v2", "--profile", "itel_it5626")[("mobilenet_v2", "itel_it5626")]
    assert "calibrated" not in other["latency_source"]  # another chipset: untouched


def test_a_note_with_a_terminal_escape_is_refused_on_write(env) -> None:
    result = run(env, "calibrate", "add", PROFILE, "mobilenet_v2=400", "--runtime", "tflite", "--note", "ok\x1b[2J")
    assert result.exit_code == 2 and "control character" in result.output and "\x1b" not in result.output
    assert not Path(env["LODEVEM_CALIBRATIONS"]).exists()


def test_the_flag_forms_of_0_1_still_work_with_a_deprecation_line(env) -> None:
    """``calibrate PROFILE MODEL=MS``, ``--list`` and ``--remove`` run the subcommand they became
    and say so on stderr, in one line naming it; stdout is the subcommand's own."""
    added = run(env, "calibrate", PROFILE, "mobilenet_v2=400", "--runtime", "tflite")
    assert added.exit_code == 0, added.output
    (line,) = [line for line in added.stderr.splitlines() if line.startswith("deprecated:")]
    assert "`lodevem calibrate add`" in line
    assert f"{PROFILE}: mobilenet_v2 measured 400 ms" in added.stdout
    listing = run(env, "calibrate", "--list", PROFILE)
    assert listing.exit_code == 0 and "`lodevem calibrate list`" in listing.stderr
    assert listing.stdout == run(env, "calibrate", "list", PROFILE).stdout
    removed = run(env, "calibrate", f"--remove={PROFILE}")
    assert removed.exit_code == 0 and "`lodevem calibrate remove`" in removed.stderr
    assert removed.stdout.startswith("removed ") and not list(Path(env["LODEVEM_CALIBRATIONS"]).glob("*.json"))

