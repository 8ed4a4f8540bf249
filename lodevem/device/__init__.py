"""A phone in the loop: read a phone over adb, write its profile, measure on it, calibrate from it.

Why a package of its own: everything here talks to a device the user owns or rents (``adb``),
whose every answer is untrusted; the rest of lodevem only ever sees the typed records this
package returns. Modules, one concern each: ``adb`` (the executable, argument vectors, timeouts,
bounded output, disconnects as errors), ``info`` (getprop, /proc and cpufreq parsed into
``DeviceInfo``), ``profile`` (a device profile YAML from it), ``bench`` (push a runtime file and
the runtime's own benchmark binary, run it, read its log back, remove what was pushed),
``rows`` (a measurement as a results row) and ``calibrate`` (``calibrate adb``).
The how-to is docs/device.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .adb import AdbClient, DeviceDisconnected, DeviceError, check_serial
from .info import DeviceInfo, DeviceListing, parse_devices, read_device
from .profile import device_profile, write_profile

__all__ = ["AdbClient", "DeviceDisconnected", "DeviceError", "DeviceInfo", "DeviceListing", "PhoneRow",
           "check_serial", "device_profile", "list_devices", "parse_device_option", "profile_from_phone",
           "read_device", "write_profile"]

DEVICE_PREFIX = "adb:"


@dataclass(frozen=True)
class PhoneRow:
    """One phone ``adb devices -l`` lists, with what it said about itself when it is usable
    (``info`` None: not in state ``device``, or ``problem`` says why it could not be read)."""

    listing: DeviceListing
    info: Optional[DeviceInfo] = None
    problem: Optional[str] = None


def list_devices(executable: Optional[str] = None) -> list[PhoneRow]:
    """Every phone adb sees; each usable one read (``read_device``); one that fails to answer is
    listed with the one-line reason, the others still read."""
    rows = []
    for listing in parse_devices(AdbClient(executable=executable).run(["devices", "-l"]).stdout):
        if listing.state != "device":
            rows.append(PhoneRow(listing))
            continue
        try:
            rows.append(PhoneRow(listing, read_device(AdbClient(listing.serial, executable))))
        except DeviceError as exc:
            rows.append(PhoneRow(listing, problem=str(exc)))
    return rows


def parse_device_option(value: str) -> str:
    """``adb:SERIAL`` (``--device``) -> the checked serial."""
    from ..errors import InputError

    if not value.startswith(DEVICE_PREFIX):
        raise InputError(f"--device {value[:80]!r}: expected adb:SERIAL (a serial `lodevem device` lists)")
    return check_serial(value[len(DEVICE_PREFIX):])


def profile_from_phone(serial: str, folder: Path, profile_id: Optional[str] = None, tier: Optional[str] = None,
                       overwrite: bool = False, executable: Optional[str] = None) -> tuple[Path, DeviceInfo]:
    """``lodevem device profile``: read the phone and write ``FOLDER/<id>.yaml``."""
    info = read_device(AdbClient(check_serial(serial), executable))
    path, _ = write_profile(info, folder, profile_id, tier, overwrite)
    return path, info
