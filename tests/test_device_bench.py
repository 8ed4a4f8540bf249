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
