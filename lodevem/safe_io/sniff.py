"""A model file's format told on the host from its bytes; the extension only confirms.

Why: the sandbox's worker already tells a file by its content (``worker.load.formats.sniff_format``),
but the host chose the runtime and the requests by the name: the same ONNX bytes got a figure as
``m.onnx`` and an error row as ``m.pt``, and TorchScript bytes named ``.onnx`` were sent as an
ONNX file and came back as an internal worker-request error. Here the host reads the first bytes
(and a zip's member names: its central directory only, nothing extracted or unpickled) through
the safe reader and decides; a name that disagrees is said in one line, and the content wins, so
the same bytes get the same figure under any name.

Decided by: a zip (``PK``) with ``serialized_exported_program.json`` / ``archive_format``
(``torch.export``, ``.pt2``), with ``constants.pkl`` or ``code/`` (TorchScript), with ``data.pkl``
(``torch.save``); a pickle protocol header ``0x80 0x02..0x05`` (legacy ``torch.save``); a protobuf
``ModelProto`` whose first field is ``ir_version`` (tag ``0x08``, a small varint) followed by
another ``ModelProto`` field (ONNX); the flatbuffer identifier ``TFL3`` at byte 4 (LiteRT, which
lodevem does not take: the worker says so).
"""

from __future__ import annotations

import enum
import os
import struct
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, Optional

from .files import MODEL_FILE, regular_fd

__all__ = ["ContentFormat", "content_suffix", "name_mismatch", "sniff"]

_HEAD_BYTES = 64
_MAX_ZIP_ENTRIES = 10_000  # a torch file has a few hundred members; more is left to the sandbox
# ModelProto field tags that may follow ir_version: producer_name/_version, domain, model_version,
# doc_string, graph, opset_import, metadata_props, training_info, functions, configuration
_ONNX_NEXT_TAGS = frozenset({0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42, 0x72, 0x7A, 0x82})


class ContentFormat(str, enum.Enum):
    ONNX = "onnx"
    TORCHSCRIPT = "torchscript"
    EXPORTED_PROGRAM = "exported_program"
    PICKLE = "pickle"  # torch.save, zip (data.pkl) or legacy
    TFLITE = "tflite"
    UNKNOWN = "unknown"  # the sandbox decides (and refuses what is no model)

    @property
    def torch(self) -> bool:
        return self in (ContentFormat.TORCHSCRIPT, ContentFormat.EXPORTED_PROGRAM, ContentFormat.PICKLE)


def _zip_members(fh: BinaryIO, size: int) -> Optional[list[str]]:
    """A zip's member names from its central directory, or None (too many, or unreadable)."""
    fh.seek(max(0, size - 65_557))
    tail = fh.read()
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) < end + 22:
        return None
    (entries,) = struct.unpack("<H", tail[end + 10:end + 12])
    if entries >= _MAX_ZIP_ENTRIES:
        return None
    fh.seek(0)
    try:
        with zipfile.ZipFile(fh) as zf:
            return [n.split("/", 1)[-1] for n in zf.namelist()]
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, struct.error):
        return None


def sniff(path: Path | str) -> ContentFormat:
    """The format of the regular file ``path`` from its content (``UnsafeInput`` for a FIFO, a
    device or a file past the model cap)."""
    fd = regular_fd(path, MODEL_FILE)
    with os.fdopen(fd, "rb") as fh:
        head = fh.read(_HEAD_BYTES)
        size = os.fstat(fh.fileno()).st_size
        if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
            names = _zip_members(fh, size) or []
            if any(n.endswith("serialized_exported_program.json") or n == "archive_format" for n in names):
                return ContentFormat.EXPORTED_PROGRAM
            if "constants.pkl" in names or any(n.startswith("code/") for n in names):
                return ContentFormat.TORCHSCRIPT
            return ContentFormat.PICKLE if "data.pkl" in names else ContentFormat.UNKNOWN
    if len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return ContentFormat.PICKLE
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return ContentFormat.TFLITE
    if len(head) >= 3 and head[0] == 0x08:
        at = 1
        while at < len(head) and head[at] & 0x80 and at < 10:  # the ir_version varint
            at += 1
        if at + 1 < len(head) and head[at + 1] in _ONNX_NEXT_TAGS:
            return ContentFormat.ONNX
    return ContentFormat.UNKNOWN


_SUFFIXES = {ContentFormat.ONNX: (".onnx",), ContentFormat.TFLITE: (".tflite",),
             ContentFormat.EXPORTED_PROGRAM: (".pt2", ".pt", ".pth"),
             ContentFormat.TORCHSCRIPT: (".pt", ".pth", ".ts", ".jit"),
             ContentFormat.PICKLE: (".pt", ".pth", ".bin", ".pkl", ".ckpt")}


@lru_cache(maxsize=4096)
def _sniffed(path: str, _identity: tuple[int, ...]) -> ContentFormat:
    try:
        return sniff(path)
    except (OSError, ValueError):
        return ContentFormat.UNKNOWN


def _cached(path: Path | str) -> ContentFormat:
    """``sniff``, once per file version (inode, size, mtime): the runner asks per row."""
    try:
        info = os.stat(path)
    except OSError:
        return ContentFormat.UNKNOWN
    return _sniffed(str(path), (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))


def content_suffix(path: Path | str) -> str:
    """The suffix the host treats ``path`` by: ``.onnx`` for ONNX bytes, ``.pt`` for a PyTorch
    file, whatever it is named; the file's own suffix when the content is not known here."""
    found = _cached(path)
    if found == ContentFormat.ONNX:
        return ".onnx"
    if found.torch:
        return ".pt"
    if found == ContentFormat.TFLITE:
        return ".tflite"
    return Path(path).suffix  # not told here: the sandbox's worker decides (and names what it is)


def name_mismatch(path: Path | str, label: str) -> Optional[str]:
    """One line when ``path``'s extension says another format than its bytes, else None."""
    found = _cached(path)
    suffix = Path(path).suffix.lower()
    if found == ContentFormat.UNKNOWN or suffix in _SUFFIXES.get(found, ()) or not suffix:
        return None
    said = {".onnx": "ONNX", ".pt": "PyTorch", ".pth": "PyTorch", ".pt2": "torch.export",
            ".tflite": "LiteRT"}.get(suffix)
    if said is None and found not in (ContentFormat.ONNX, ContentFormat.TFLITE):
        return None  # an unusual name for a torch file (.model, .weights): nothing to confirm
    what = {ContentFormat.ONNX: "ONNX", ContentFormat.TORCHSCRIPT: "TorchScript",
            ContentFormat.EXPORTED_PROGRAM: "torch.export (.pt2)", ContentFormat.PICKLE: "torch.save (pickle)",
            ContentFormat.TFLITE: "LiteRT (.tflite)"}[found]
    return f"{label}: named {suffix} but its bytes are {what}: treated as {what} (the content decides, not the name)"
