"""``lodevem device`` and the adb client against the fake phone (tests/fixtures/fake_adb)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli
from lodevem.device import AdbClient, DeviceDisconnected, DeviceError, read_device
from lodevem.device.adb import check_serial, device_word
from lodevem.device.info import parse_cpuinfo, parse_devices
from lodevem.errors import InputError
from lodevem.profiles import load_profiles

FAKE = Path(__file__).resolve().parent / "fixtures" / "fake_adb"
sys.path.insert(0, str(FAKE))
from phones import calls, cpuinfo, go_phone, phones_fixture  # noqa: E402,F401  (the `phones` fixture)

HOSTILE = "$(touch /tmp/pwned); rm -rf / `id` | \x1b]0;title\x07 ../../etc/passwd"


def test_device_lists_the_phone_with_its_facts(phones) -> None:
    phones({"FAKE123": go_phone(), "emulator-5554": {"state": "offline"}})
    result = CliRunner().invoke(cli, ["device"])
    assert result.exit_code == 0, result.output
    assert "FAKE123  device  Fake Go 1 (FK6739)  4x A53 @ 1.80 GHz  1903 MB RAM  arm64-v8a  Android 12" in result.output
    assert "emulator-5554  offline" in result.output


def test_device_info_reads_every_fact_and_where_from(phones) -> None:
    phones({"FAKE123": go_phone()})
    info = read_device(AdbClient("FAKE123"))
    assert (info.model, info.soc, info.soc_property, info.abi) == ("Fake Go 1", "FK6739", "ro.soc.model", "arm64-v8a")
    assert info.android_version == "12" and info.sdk == 31 and info.low_ram is True
    assert [c.core for c in info.cores] == ["Cortex-A53"] * 4 and {c.max_khz for c in info.cores} == {1_800_000}
    assert info.mem_total_kb == 1_948_672 and info.ram_mb == 1903 and info.unknown == ()


def test_profile_written_from_the_phone_loads_like_a_shipped_one(phones, tmp_path: Path) -> None:
    phones({"FAKE123": go_phone()})
    out = tmp_path / "my-phones"
    result = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(out)])
    assert result.exit_code == 0, result.output
    written = out / "phone_fake_go_1.yaml"
    assert written.is_file()
    profile = {p.id: p for p in load_profiles([out])}["phone_fake_go_1"]
    assert profile.tier == "tier2" and profile.chipset == "FK6739" and profile.ram_mb == 1903
    assert profile.cores_label == "4x A53" and profile.fastest_cluster.clock_ghz == pytest.approx(1.8)
    assert profile.app_budget_mb == int(1903 * 0.406)  # the shipped Go profiles' share
    assert any("ro.soc.model" in s for s in profile.sources) and any("MemTotal" in s for s in profile.sources)
    assert profile.power_w is None and "unknown" in (profile.power_source or "")
    again = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(out)])
    assert again.exit_code == 2 and "exists" in again.output
    listed = CliRunner().invoke(cli, ["list", "--profiles-dir", str(out)])
    assert listed.exit_code == 0 and "phone_fake_go_1" in listed.output


def test_full_android_phone_gets_the_full_android_budget_and_tier1(phones, tmp_path: Path) -> None:
    phone = go_phone()
    phone["props"]["ro.config.low_ram"] = "false"
    phones({"FAKE123": phone})
    result = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(tmp_path), "--id", "mine"])
    assert result.exit_code == 0, result.output
    profile = {p.id: p for p in load_profiles([tmp_path])}["mine"]
    assert profile.tier == "tier1" and profile.app_budget_mb == int(1903 * 0.314)


def test_unknown_core_is_refused_not_guessed(phones, tmp_path: Path) -> None:
    phones({"FAKE123": go_phone(cpuinfo=cpuinfo(["0xd46"] * 4))})  # Cortex-A510: no estimator parameters
    info = read_device(AdbClient("FAKE123"))
    assert info.cores[0].core == "Cortex-A510"  # a part lodevem knows, a core it does not model
    result = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "cpu0's core type" in result.output and "Traceback" not in result.output
    assert not list(tmp_path.glob("*.yaml"))
    phones({"FAKE123": go_phone(cpufreq={})})
    result = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "clock" in result.output


def test_hostile_answers_never_reach_a_shell_or_a_file_path(phones, tmp_path: Path) -> None:
    phone = go_phone()
    phone["props"].update({"ro.product.model": HOSTILE[:60], "ro.soc.model": "A" * 5000,
                           "ro.board.platform": "mt\x1b[2J6739;reboot", "ro.product.cpu.abi": "arm64-v8a; reboot",
                           "ro.build.version.release": "12$(reboot)"})
    state = phones({"FAKE123": phone})
    info = read_device(AdbClient("FAKE123"))
    assert info.soc == "mt[2J6739;reboot" and info.soc_property == "ro.board.platform"  # huge one refused
    assert info.abi is None and info.android_version is None
    assert all(not any(c in (info.model or "") for c in "\x1b\x07") for _ in [0])
    result = CliRunner().invoke(cli, ["device", "profile", "FAKE123", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = list(tmp_path.glob("*.yaml"))
    assert len(written) == 1 and re.fullmatch(r"phone_[a-z0-9_]+\.yaml", written[0].name)
    assert "\x1b" not in written[0].read_text() and "\x1b" not in result.output
    for argv in calls(state):  # what lodevem sent: its own words only, never the phone's text
        for word in argv[argv.index("shell") + 1:] if "shell" in argv else []:
            assert re.fullmatch(r"[A-Za-z0-9_./=:,+-]+", word), word
        assert not any("reboot" in a or "pwned" in a for a in argv)


def test_serials_and_device_words_are_checked() -> None:
    for bad in ("-s", "--help", "a b", "x;reboot", "$(id)", "", "a" * 200, "ser\nial"):
        with pytest.raises(InputError):
            check_serial(bad)
    for ok in ("0123456789ABCDEF", "emulator-5554", "192.168.1.20:5555", "adb-XYZ._adb-tls-connect._tcp"):
        assert check_serial(ok) == ok
    for bad in ("a b", "x;y", "$(id)", "`id`", "a|b", "a>b", "'q'", "a&b"):
        with pytest.raises(DeviceError):
            device_word(bad)


def test_a_disconnect_is_a_typed_error_in_adbs_own_words(phones) -> None:
    phones({"FAKE123": go_phone(disconnect_after=1)})
    client = AdbClient("FAKE123")
    client.shell(["getprop"])
    with pytest.raises(DeviceDisconnected, match="error: closed"):
        client.shell(["cat", "/proc/cpuinfo"])
    with pytest.raises(DeviceDisconnected, match="not found"):
        client.shell(["cat", "/proc/meminfo"])
    phones({})
    with pytest.raises(DeviceDisconnected, match="no devices/emulators found"):
        AdbClient().run(["shell", "true"])
    result = CliRunner().invoke(cli, ["device", "profile", "GONE1", "--output", "x"])
    assert result.exit_code == 1 and "not connected" in result.output and "Traceback" not in result.output


def test_no_adb_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(cli, ["device"])
    assert result.exit_code == 1 and "adb not found" in result.output


def test_parsers_bound_what_a_phone_says() -> None:
    listed = parse_devices("List of devices attached\n-evil device model:x\nOK1 device usb:1-1 model:A\n"
                           + "x" * 100000 + "\n")
    assert [(d.serial, d.state) for d in listed] == [("-evil", "refused"), ("OK1", "device")]
    assert len(parse_cpuinfo("processor : 0\nCPU part : 0xd03\nCPU implementer : 0x41\n\n" * 500)) == 64
