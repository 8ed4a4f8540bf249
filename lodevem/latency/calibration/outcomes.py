"""What the ``calibrate`` subcommands answer, as records the terminal shows.

Why here, beside the records: the answers are made of ``CalibrationRecord``s and read by the
report wing, which imports no face (``lodevem.predict.calibrate`` does the work).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .records import CalibrationRecord

__all__ = ["CalibrationOutcome", "RecordListing", "Removed"]


@dataclass(frozen=True)
class CalibrationOutcome:
    """What ``calibrate add`` / ``from-log`` did: the records written (file, record), the profile's
    fit now (``fit`` its description, None without one; ``mismatch`` why some records do not
    apply), and the profiles sharing its chipset and core (``siblings``)."""

    profile_id: str
    runtime: str
    threads: int
    written: tuple[tuple[Path, CalibrationRecord], ...]
    fit: Optional[str]
    mismatch: Optional[str]
    siblings: tuple[str, ...]
    chipset: str
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Removed:
    """One record ``calibrate remove`` deleted: its ID (the file's stem) and the record."""

    record_id: str
    record: CalibrationRecord


@dataclass(frozen=True)
class RecordListing:
    """``calibrate list``: the records (file, record) in ``folder``, of ``profile_id`` when given."""

    folder: Path
    profile_id: Optional[str]
    records: tuple[tuple[Path, CalibrationRecord], ...]
    warnings: tuple[str, ...]
