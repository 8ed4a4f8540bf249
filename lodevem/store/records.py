"""The store's own records read back, typed: an artifact's sidecar and a JSON record's envelope.

Why typed: a sidecar vouches for the files beside it (their sizes and sha256), and a record's
value becomes a row's figure. Both live in a folder other users may write (``$LODEVEM_SHARED_STORE``),
so an edited one must be told from a good one field by field, never crash the run (an edited
sidecar once ended a run in a traceback) and never be believed: ``parse_sidecar`` /
``parse_envelope`` raise ``BadRecord`` naming the file and the field, and the store sets the
entry aside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from ..safe_io.records import BadRecord, parse_json

__all__ = ["FileRecord", "Sidecar", "parse_envelope", "parse_sidecar"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_FILES = 16  # an artifact is one to three files (ncnn: .param + .bin; an export + its twin)
_MAX_NAME = 255


@dataclass(frozen=True)
class FileRecord:
    """One published file as its sidecar records it."""

    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True)
class Sidecar:
    format_version: int
    kind: str
    maker: dict[str, Any]
    files: dict[str, Optional[FileRecord]]
    info: dict[str, Any]


def plain_name(name: Any) -> bool:
    """A file name the store itself would write: one component, no control character."""
    return (isinstance(name, str) and 0 < len(name) <= _MAX_NAME and "/" not in name and "\0" not in name
            and name not in (".", "..") and name.isprintable())


def _file(where: str, name: str, value: Any) -> Optional[FileRecord]:
    if value is None:
        return None
    field = f"files.{name}"
    if not isinstance(value, list) or len(value) != 3:
        raise BadRecord(where, field, "expected [size, mtime_ns, sha256]")
    size, mtime, sha = value
    for part, number in (("size", size), ("mtime_ns", mtime)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise BadRecord(where, f"{field}.{part}", "expected a whole number >= 0")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise BadRecord(where, f"{field}.sha256", "expected 64 lowercase hex digits")
    return FileRecord(size, mtime, sha)


def parse_sidecar(data: bytes, where: str) -> Sidecar:
    """A sidecar's bytes as a ``Sidecar``; ``BadRecord`` for anything lodevem does not write."""
    value = parse_json(data, where)
    if not isinstance(value, dict):
        raise BadRecord(where, "", "expected a JSON object")
    version, kind, maker, files, info = (value.get(k) for k in ("format_version", "kind", "maker", "files", "info"))
    if isinstance(version, bool) or not isinstance(version, int):
        raise BadRecord(where, "format_version", "expected a whole number")
    if not isinstance(kind, str):
        raise BadRecord(where, "kind", "expected text")
    if not isinstance(maker, dict):
        raise BadRecord(where, "maker", "expected an object")
    if not isinstance(files, dict) or not 0 < len(files) <= _MAX_FILES:
        raise BadRecord(where, "files", f"expected an object of 1..{_MAX_FILES} files")
    for name in files:
        if not plain_name(name):
            raise BadRecord(where, "files", "holds a name that is not a plain file name")
    if info is not None and not isinstance(info, dict):
        raise BadRecord(where, "info", "expected an object")
    return Sidecar(version, kind, maker, {n: _file(where, n, v) for n, v in files.items()}, info or {})


def parse_envelope(data: bytes, where: str) -> tuple[Any, Any]:
    """A JSON record's ``(format_version, value)``; ``BadRecord`` when it is not an envelope."""
    value = parse_json(data, where)
    if not isinstance(value, dict):
        raise BadRecord(where, "", "expected a JSON object")
    version = value.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise BadRecord(where, "format_version", "expected a whole number")
    if not isinstance(value.get("value"), dict):
        raise BadRecord(where, "value", "expected an object")
    return version, value["value"]
