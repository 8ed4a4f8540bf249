"""The calibrations folder: where it is, and its records read and written safely."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

from ...errors import InputError
from ...safe_io import CALIBRATION_RECORD, clip, json_text, printable, read_text
from ...store.files import write_new
from .records import CalibrationRecord

if TYPE_CHECKING:
    from ...profiles import Profile

__all__ = ["CALIBRATIONS_ENV", "CalibrationStore", "default_calibrations_dir", "shares_chipset"]

CALIBRATIONS_ENV = "LODEVEM_CALIBRATIONS"
CONFIG_ENV = "XDG_CONFIG_HOME"


def default_calibrations_dir(explicit: Optional[Path | str] = None) -> Path:
    """``--calibrations DIR``, else ``$LODEVEM_CALIBRATIONS``, else the user's config folder."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(CALIBRATIONS_ENV)
    if env:
        return Path(env)
    config = os.environ.get(CONFIG_ENV)
    root = Path(config) if config else Path.home() / ".config"
    return root / "lodevem" / "calibrations"


class CalibrationStore:
    """The calibrations folder: one JSON file per record, written atomically under a name no
    other record holds; read through ``safe_io`` (regular files of at most 64 KiB), each record
    validated, a bad one skipped with a one-line warning in ``warnings`` (never a crash)."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.warnings: list[str] = []

    def add(self, record: CalibrationRecord) -> Path:
        record.validated("the new calibration record")
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json_text(record.to_dict(), indent=1) + "\n"
        for serial in range(1000):
            path = self.folder / record.file_name(serial)
            if write_new(path, text):  # atomic, durable, and never overwrites another record
                return path
        raise InputError(f"{self.folder}: no free calibration record name for {record.profile_id}")

    def remove(self, path: Path) -> None:
        """Delete one record file (``calibrate --remove``)."""
        path.unlink()

    def records(self, profile_id: Optional[str] = None) -> list[tuple[Path, CalibrationRecord]]:
        """Every valid record (of one profile), oldest first. A missing folder holds none; a file
        that is not a valid record is skipped with a warning naming it (in ``warnings``)."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                text = read_text(path, CALIBRATION_RECORD, errors="strict")
                try:
                    data = json.loads(text, parse_constant=_no_constant)
                except RecursionError:
                    raise InputError(f"{path}: nested too deep for a calibration record") from None
                except ValueError as exc:
                    raise InputError(f"{path}: unreadable calibration record ({clip(str(exc))})") from None
                record = CalibrationRecord.from_dict(data, str(path))
            except InputError as exc:
                warning = printable(f"{exc}; skipped (fix or remove it)", newlines=False)
                if warning not in self.warnings:
                    self.warnings.append(warning)
                continue
            if profile_id is None or record.profile_id == profile_id:
                found.append((path, record))
        return sorted(found, key=lambda item: (item[1].date, item[0].name))

    def current(self, profile_id: str) -> list[CalibrationRecord]:
        """A profile's records in force: the newest per (model graph, runtime, threads)."""
        return _newest(r for _, r in self.records(profile_id))

    def siblings(self, profile: "Profile") -> list[CalibrationRecord]:
        """Records of other profiles with ``profile``'s chipset and one of its cores, newest per key."""
        return _newest(r for _, r in self.records() if r.profile_id != profile.id
                       and shares_chipset(profile, r.chipset, {r.core}))


def shares_chipset(profile: "Profile", chipset: str, cores: set[str]) -> bool:
    """Whether ``profile`` has ``chipset`` and one of ``cores``: what ``--same-chipset`` carries
    a calibration across (the same SoC, so the same cores, clocks and memory)."""
    return profile.chipset == chipset and bool(cores & {c.core for c in profile.cpu})


def _newest(records: Iterable[CalibrationRecord]) -> list[CalibrationRecord]:
    latest: dict[tuple[str, str, str, int], CalibrationRecord] = {}
    for record in records:
        latest[record.key] = record
    return list(latest.values())


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a calibration record may hold")

