"""Measuring on the (fake) phone: push, run the runtime's benchmark binary, parse, remove."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lodevem.device import AdbClient, read_device
from lodevem.device.bench import PhoneBench, binary_for
from lodevem.errors import DeviceDisconnected, DeviceError, InputError
from lodevem.runtimes.tflite.log import parse_run

FAKE = Path(__file__).resolve().parent / "fixtures" / "fake_adb"
sys.path.insert(0, str(FAKE))
from phones import aarch64_elf, calls, phone_with_standin, phones_fixture, pushed  # noqa: E402,F401
from tiny_tflite import tiny_tflite  # noqa: E402


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_tflite(tmp_path / "tiny.tflite", width=384, layers=4)


@pytest.fixture
def arm64_binary(tmp_path: Path) -> Path:
    return aarch64_elf(tmp_path / "benchmark_model")


def test_a_model_measured_on_the_phone_gives_the_binarys_own_statistics(phones, model, arm64_binary) -> None:
    state = phones({"FAKE123": phone_with_standin()})
    client = AdbClient("FAKE123")
    info = read_device(client)
    binary = binary_for("tflite", arm64_binary)
    assert binary.abi == "arm64-v8a" and len(binary.sha256) == 64
    with PhoneBench(client, info, binary) as bench:
        found = bench.measure(model, threads=1, warmup=2, runs=12)
    stats = found.run.stats
    assert stats.count == 12 and 0 < stats.min_ms <= stats.mean_ms <= stats.max_ms
    assert stats.std_ms is not None and stats.std_ms >= 0 and stats.p50_ms is None  # benchmark_model prints none
    assert found.run.peak_memory_mb is not None and 10 < found.run.peak_memory_mb < 4096  # the stand-in's ru_maxrss
    types = {op.node_type: op for op in found.op_profile}
    assert set(types) == {"FULLY_CONNECTED", "RELU", "ADD"}
    assert types["FULLY_CONNECTED"].count == 4 and types["RELU"].count == 4 and types["ADD"].count == 1
    assert types["FULLY_CONNECTED"].avg_ms > 0
    assert found.measured_on == "measured on Fake Go 1 (FK6739)" and found.binary_sha256 == binary.sha256
    assert pushed(state, "FAKE123") == []  # the phone left as found
    runs = [a for a in calls(state) if any("benchmark_model" in w for w in a) and "push" not in a and "chmod" not in a]
    assert len(runs) == 2 and "--num_threads=1" in runs[0] and "--num_runs=12" in runs[0]
    assert "--report_peak_memory_footprint=true" in runs[0] and "--enable_op_profiling=true" in runs[1]


def test_a_missing_binary_is_the_phones_own_exec_failure(phones, model, arm64_binary) -> None:
    state = phones({"FAKE123": phone_with_standin()})
    client = AdbClient("FAKE123")
    bench = PhoneBench(client, read_device(client), binary_for("tflite", arm64_binary)).__enter__()
    client.shell(["rm", "-f", bench.remote_binary])  # gone before it runs
    with pytest.raises(DeviceError, match="inaccessible or not found"):
        bench.measure(model, 1, 1, 3)
    bench.remove()
    assert pushed(state, "FAKE123") == []


def test_a_wrong_abi_is_refused_before_anything_is_pushed(phones, model, arm64_binary) -> None:
    phone = phone_with_standin()
    phone["props"].update({"ro.product.cpu.abi": "armeabi-v7a", "ro.product.cpu.abilist": "armeabi-v7a,armeabi"})
    state = phones({"FAKE123": phone})
    client = AdbClient("FAKE123")
    with pytest.raises(InputError, match="built for arm64-v8a; the phone runs armeabi-v7a"):
        with PhoneBench(client, read_device(client), binary_for("tflite", arm64_binary)):
            pass
    assert not any("push" in a for a in calls(state))


def test_a_kernel_that_cannot_exec_it_says_so_in_its_own_words(phones, model, arm64_binary) -> None:
    """A 64-bit CPU with a 32-bit userland that still lists arm64 (some Go phones): the kernel's refusal."""
    phones({"FAKE123": phone_with_standin(exec_abis=["armeabi-v7a"])})
    client = AdbClient("FAKE123")
    with PhoneBench(client, read_device(client), binary_for("tflite", arm64_binary)) as bench:
        with pytest.raises(DeviceError, match="not executable: 64-bit ELF file"):
            bench.measure(model, 1, 1, 3)


def test_a_file_that_is_not_an_android_binary_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "benchmark_model"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(InputError, match="not an Android executable"):
        binary_for("tflite", script)
    with pytest.raises(InputError, match="prebuilt nightly"):
        binary_for("tflite", None)


def test_a_disconnect_mid_measurement_is_typed(phones, model, arm64_binary) -> None:
    phones({"FAKE123": phone_with_standin(disconnect_after=12)})
    client = AdbClient("FAKE123")
    info = read_device(client)  # 6 calls
    with pytest.raises(DeviceDisconnected):
        with PhoneBench(client, info, binary_for("tflite", arm64_binary)) as bench:
            bench.measure(model, 1, 1, 3)
            bench.measure(model, 1, 1, 3)


def test_the_stat_line_parser_reads_every_form() -> None:
    log = ["INFO: Num threads: [2]", "INFO: count=3 first=100 curr=90 min=90 max=100 avg=95 std=4",
           "INFO: count=50 curr=2000(all same)", "INFO: Inference timings in us: Init: 1, Inference (avg): 2000"]
    run = parse_run(log)
    assert run is not None and run.threads == 2 and run.stats.count == 50
    assert run.stats.mean_ms == pytest.approx(2.0) and run.stats.std_ms == 0.0
    assert parse_run(["I tflite  : count=5 first=1e+06 curr=2e+06 min=1e+06 max=2e+06 avg=1.5e+06 std=5e+05"]
                     ).stats.max_ms == pytest.approx(2000.0)
    assert parse_run(["ERROR: Benchmarking failed."]) is None


# -- the runner's stage: rows, and a disconnect mid-run ------------------------------------------

class _Converts:
    """The run's conversion cache as the stage asks it: the .tflite it made for a model (here the
    LiteRT file built above; the Docker-lane test in test_device_start.py converts for real)."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def convert(self, path, sha, runtime, shape):
        from types import SimpleNamespace

        return SimpleNamespace(path=self.files[Path(path).name], error=None)


def _stage_run(files: dict[str, Path]):
    from types import SimpleNamespace

    config = SimpleNamespace(runtimes=("tflite",), memory=SimpleNamespace(threads=1, warmup=1, runs=5))
    progress = SimpleNamespace(working_on=lambda text: None, stage=lambda text: None)
    return SimpleNamespace(config=config, session=SimpleNamespace(converts=_Converts(files)), progress=progress,
                           warnings=[])


def _models(tmp_path: Path, names: list[str]):
    from lodevem.results import ModelFile

    found = []
    for name in names:
        (tmp_path / name).write_bytes(name.encode())  # the user's file: only its digest is read here
        found.append(ModelFile.from_path(tmp_path / name, name))
    return found


def test_the_stage_gives_measured_rows_and_a_disconnect_keeps_what_was_measured(phones, tmp_path, arm64_binary):
    from lodevem.runner.device_stage import DeviceStage, open_phone
    from lodevem.runner.stages import schedule

    files = {"a.pt": tiny_tflite(tmp_path / "a.tflite", width=256), "b.pt": tiny_tflite(tmp_path / "b.tflite", 320)}
    # read_device: 7 calls; the bench's folder and binary: 3; one model: push, 2 runs, rm = 4 -> gone at the 15th
    state = phones({"FAKE123": phone_with_standin(disconnect_after=14)})
    phone = open_phone("adb:FAKE123", arm64_binary, ("tflite",), 120.0)
    stage = DeviceStage(_models(tmp_path, ["a.pt", "b.pt"]), phone)
    run = _stage_run(files)
    try:
        rows = [row for _, row in schedule(run, stage) if row is not None]
    finally:
        stage.finish()
    assert [r.model.label for r in rows] == ["a.pt"]
    row = rows[0]
    assert row.latency.kind == "measured" and row.latency.source.startswith("measured on Fake Go 1 (FK6739)")
    assert row.latency.uncertainty is None and row.latency.band.low_ms is None and row.latency.calibrations == ()
    assert row.phone.measured_on == "Fake Go 1 (FK6739)" and row.phone.runs == 5 and row.memory.backend == "adb"
    assert row.phone.latency_min_ms <= row.latency.ms <= row.phone.latency_max_ms
    assert row.phone.peak_mb == row.memory.peak_rss_mb and row.phone.peak_mb > 0
    assert {op.node_type for op in row.phone.op_profile} == {"FULLY_CONNECTED", "RELU", "ADD"}
    assert row.phone.binary_sha256 == phone.binary.sha256 and row.device.profile_id == "phone_fake_go_1"
    assert len(run.warnings) == 1 and run.warnings[0].startswith("b.pt: the phone disconnected")
    assert "error: closed" in run.warnings[0]
    assert calls(state)[-1][:3] == ["-s", "FAKE123", "shell"]  # the stage still tried to clean up


def test_the_stage_leaves_the_phone_as_found(phones, tmp_path, arm64_binary):
    from lodevem.runner.device_stage import DeviceStage, open_phone
    from lodevem.runner.stages import schedule

    state = phones({"FAKE123": phone_with_standin()})
    stage = DeviceStage(_models(tmp_path, ["a.pt"]), open_phone("adb:FAKE123", arm64_binary, ("tflite",), 120.0))
    run = _stage_run({"a.pt": tiny_tflite(tmp_path / "a.tflite")})
    try:
        rows = [row for _, row in schedule(run, stage)]
    finally:
        stage.finish()
    assert len(rows) == 1 and rows[0] is not None and run.warnings == []
    assert pushed(state, "FAKE123") == [] and not any(p.is_dir() for p in (state / "fs" / "FAKE123" / "data" /
                                                                           "local" / "tmp").iterdir())


def test_open_phone_refuses_a_runtime_without_a_file(phones, arm64_binary):
    from lodevem.runner.device_stage import open_phone

    with pytest.raises(InputError, match="use --runtime tflite"):
        open_phone("adb:FAKE123", arm64_binary, ("torch",), 10.0)
    with pytest.raises(InputError, match="expected adb:SERIAL"):
        open_phone("FAKE123", arm64_binary, ("tflite",), 10.0)
    with pytest.raises(InputError, match="device serial"):
        open_phone("adb:-rf;reboot", arm64_binary, ("tflite",), 10.0)


def test_a_hostile_benchmark_log_is_bounded_and_never_trusted(phones, model, arm64_binary) -> None:
    noise = ("\x1b]0;pwned\x07\x1b[2J" + "x" * 200_000 + "\n"
             "INFO: count=1 first=1 curr=1 min=1 max=1 avg=1e+99 std=0\n"  # before the real runs: not the figure
             "============================== Summary by node type ==============================\n"
             "\t$(reboot);rm -rf /\t1\t1.0\t1.0%\t1.0%\t0\t1\n"
             "INFO: LiteRT version: 9.9.9;reboot\n")
    state = phones({"FAKE123": phone_with_standin(log_noise=noise)})
    client = AdbClient("FAKE123")
    with PhoneBench(client, read_device(client), binary_for("tflite", arm64_binary)) as bench:
        found = bench.measure(model, threads=1, warmup=1, runs=4)
    assert found.run.stats.count == 4 and found.run.stats.mean_ms < 1e6  # the real stat line, not the planted one
    assert all(";" not in op.node_type and "$" not in op.node_type for op in found.op_profile)
    assert found.run.version == "9.9.9"  # only the version's own characters are kept
    assert pushed(state, "FAKE123") == []
    for argv in calls(state):
        assert not any("reboot" in a or "pwned" in a for a in argv)
