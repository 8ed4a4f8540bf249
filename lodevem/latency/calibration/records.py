"""Calibration records: one model measured on one device, with what lodevem predicted for it,
checked against the schema's bounds whenever one is made or read (the folder is the user's)."""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Optional

from ...errors import InputError
from ...safe_io import clip, printable
from ...store import digest
from ...wire.registry import on_device_runtimes

__all__ = ["MAX_FACTOR", "MAX_MS", "MAX_THREADS", "MEASURED_RUNTIMES", "MIN_FACTOR", "MIN_MS", "SCOPES",
           "CalibrationRecord", "check_ms", "now_iso"]

# Runtimes a measurement on a device can be made with (the registry's on-device runtimes, whose
# benchmark tools the log parsers know), and "other" for anything else.
MEASURED_RUNTIMES: tuple[str, ...] = (*on_device_runtimes(), "other")
_SCHEMA = 1


# The record schema's bounds, checked when a record is written *and* when one is read (the
# folder is the user's: hand-edited, copied from elsewhere, or planted). Why these figures:
# * a latency is 1 µs .. 1e7 ms (2.8 h): no inference on a phone is faster than a microsecond
#   (one kernel launch), and nothing slower is a latency a table could compare;
# * a factor (measured / predicted) is 1/100 .. 100: boards with the same core differ 1.6-1.8x
#   (the module docstring); a factor 100 off is a wrong unit (us given as ms) or the wrong model;
# * threads 1..16 (the CLI's range), input shapes of 1..8 dimensions of 1..65536.
MIN_MS = 1e-3
MAX_MS = 1e7
MIN_FACTOR = 0.01
MAX_FACTOR = 100.0
MAX_THREADS = 16
_TEXT_CAPS = {"profile_id": 128, "model_label": 300, "model_sha256": 64, "graph_sha256": 64, "runtime": 16,
              "date": 40, "note": 1000, "predictor": 300, "measured_by": 600, "scope": 16, "chipset": 200,
              "core": 80}
SCOPES = ("profile", "same-chipset")


def check_ms(value: Any, what: str) -> float:
    """``value`` as a latency in ms within [MIN_MS, MAX_MS]; else ``InputError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what}: expected a number of milliseconds, got {type(value).__name__}")
    number = float(value)
    if not (math.isfinite(number) and MIN_MS <= number <= MAX_MS):
        raise InputError(f"{what}: {number:g} ms is outside {MIN_MS:g}..{MAX_MS:g} ms, the latencies a device "
                         "can measure")
    return number


@dataclass(frozen=True)
class CalibrationRecord:
    """One model measured on one device, with what lodevem predicted for it at the time.

    ``graph_sha256`` digests the model's kernel-graph *structure*, so the same architecture
    given as a ``.pt`` file or as a zoo name is recognised as the calibration model itself.
    ``predicted_ms`` = ``compute_ms`` + ``memory_ms`` (the estimator's split of the prediction).
    ``scope`` ``same-chipset`` (``calibrate --same-chipset``): the record also calibrates every
    profile whose ``chipset`` and core are this one's; ``profile`` (default): its own only.

    Every record is checked against the schema's bounds (``MIN_MS``.. ``MAX_MS``, ``MIN_FACTOR``..
    ``MAX_FACTOR``, finite, positive; see docs/security.md) when it is made and when it is read:
    ``validated`` raises a one-line ``InputError`` naming where the record came from.
    """

    profile_id: str
    model_label: str
    model_sha256: str
    graph_sha256: str
    measured_ms: float
    runtime: str
    threads: int
    date: str
    note: str
    predicted_ms: float
    compute_ms: float
    memory_ms: float
    predictor: str
    measured_by: str
    input_shape: Optional[tuple[int, ...]] = None
    schema: int = _SCHEMA
    scope: str = "profile"
    chipset: str = ""
    core: str = ""

    def __post_init__(self) -> None:
        self.validated(f"calibration of {clip(str(self.model_label), 80)} on {clip(str(self.profile_id), 80)}")

    @property
    def ratio(self) -> float:
        """measured / predicted: the single factor this record implies."""
        return self.measured_ms / self.predicted_ms

    @property
    def key(self) -> tuple[str, str, str, int]:
        """A newer record with the same key replaces an older one (a re-measurement)."""
        return (self.profile_id, self.graph_sha256, self.runtime, self.threads)

    def validated(self, where: str) -> "CalibrationRecord":
        """This record when every field is within the schema (see the class docstring)."""
        for name, cap in _TEXT_CAPS.items():
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InputError(f"{where}: field {name} must be text, got {type(value).__name__}")
            if len(value) > cap:
                raise InputError(f"{where}: field {name} is {len(value)} characters, at most {cap}")
            if not value.isprintable():  # a terminal escape in a note would reach every table
                raise InputError(f"{where}: field {name} holds a control character "
                                 f"({printable(next(c for c in value if not c.isprintable()))})")
        for name in ("measured_ms", "predicted_ms"):
            check_ms(getattr(self, name), f"{where}: field {name}")
        for name in ("compute_ms", "memory_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and 0 <= value <= MAX_MS):
                raise InputError(f"{where}: field {name} must be a finite number of ms >= 0")
        if abs(self.compute_ms + self.memory_ms - self.predicted_ms) > 1e-6 * self.predicted_ms + 1e-9:
            raise InputError(f"{where}: compute_ms + memory_ms must equal predicted_ms")
        if not MIN_FACTOR <= self.ratio <= MAX_FACTOR:
            raise InputError(f"{where}: measured {self.measured_ms:g} ms against {self.predicted_ms:g} ms predicted "
                             f"is a factor {self.ratio:.3g}, outside {MIN_FACTOR:g}..{MAX_FACTOR:g} (a wrong unit "
                             "or another model?)")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 1 <= self.threads <= MAX_THREADS:
            raise InputError(f"{where}: field threads must be a whole number 1..{MAX_THREADS}")
        if self.runtime not in MEASURED_RUNTIMES:
            raise InputError(f"{where}: field runtime must be one of {', '.join(MEASURED_RUNTIMES)}")
        if self.scope not in SCOPES:
            raise InputError(f"{where}: field scope must be one of {', '.join(SCOPES)}")
        if self.schema != _SCHEMA:
            raise InputError(f"{where}: schema {self.schema!r}, this lodevem reads schema {_SCHEMA}")
        shape = self.input_shape
        if shape is not None and not (isinstance(shape, tuple) and 1 <= len(shape) <= 8 and all(
                isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= 65536 for d in shape)):
            raise InputError(f"{where}: field input_shape must be 1..8 whole numbers 1..65536")
        try:
            _dt.datetime.fromisoformat(self.date)
        except ValueError:
            raise InputError(f"{where}: field date is not an ISO 8601 date") from None
        return self

    def file_name(self, serial: int = 0) -> str:
        """``PROFILE--STAMP--DIGEST.json``; the digest covers the whole record and ``serial``, so
        two measurements in the same second get two names (``CalibrationStore.add`` picks a free one)."""
        stamp = re.sub(r"[^0-9]", "", self.date)[:14]
        return f"{self.profile_id}--{stamp}--{digest([self.to_dict(), serial])[:12]}.json"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape) if self.input_shape else None
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "CalibrationRecord":
        """A record from parsed JSON, type-checked (no coercion of text to numbers) and validated."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: not a lodevem calibration record (expected a JSON object)")
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in names - set(data) if n not in ("input_shape", "schema", "scope", "chipset", "core"))
        if missing:
            raise InputError(f"{where}: not a lodevem calibration record (missing {', '.join(missing)})")
        values = {k: v for k, v in data.items() if k in names}
        shape = values.get("input_shape")
        if shape is not None:
            values["input_shape"] = tuple(shape) if isinstance(shape, list) else shape
        record = object.__new__(cls)  # validated with ``where`` below, not __post_init__'s text
        for f in fields(cls):
            object.__setattr__(record, f.name, values.get(f.name, f.default))
        return record.validated(where)


def now_iso() -> str:
    """The record's date: UTC, seconds, ISO 8601."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()

