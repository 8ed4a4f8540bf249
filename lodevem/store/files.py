"""lodevem's one way to write a file: atomically (a temporary in the same folder, then a rename),
so a reader, a crash or a Ctrl-C never sees half of it, and a failed write leaves nothing behind.

Why one module: the package had six copies of "write a temporary, ``os.replace`` it", each with
its own temporary name, cleanup and permissions (one forgot the cleanup, one left 0600 files).
Every host write of a whole file goes through here: ``write_atomic`` (text), ``write_json_file`` (the
one JSON writer: ``safe_io.json_text``, so no NaN ever reaches a file), ``atomic_file`` (a file
object, for writers that stream: torch.save, a sandbox's output copied under a byte cap),
``atomic_path`` (a path, for writers that want a name: matplotlib, ``shutil.copyfile``) and
``write_new`` (never replaces: a record that must not overwrite another). The worker, which runs
in the sandbox with the standard library only, keeps its own ``os.replace``.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

from ..safe_io import json_text

__all__ = ["atomic_file", "atomic_path", "write_atomic", "write_json_file", "write_new"]

# Results and caches are meant to be read by other users and tools; mkstemp makes 0600.
FILE_MODE = 0o644


def _temporary(path: Path) -> tuple[int, Path]:
    """A new, empty, private file beside ``path`` (``O_EXCL``: never an existing file or link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    return fd, Path(name)


@contextmanager
def atomic_file(path: Path | str, mode: str = "w", *, durable: bool = False) -> Iterator[IO[Any]]:
    """A file object (``mode`` ``"w"``: UTF-8 text, ``"wb"``: bytes) whose content appears at
    ``path`` only when the block ends without an exception; ``durable``: fsync'd before the rename
    (records a later run trusts without re-checking)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file mode must be 'w' or 'wb', not {mode!r}")
    target = Path(path)
    fd, tmp = _temporary(target)
    try:
        handle: IO[Any] = os.fdopen(fd, "wb") if mode == "wb" else os.fdopen(fd, "w", encoding="utf-8")
        with handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a name; renamed to ``path`` when
    the block ends without an exception, removed otherwise."""
    target = Path(path)
    fd, tmp = _temporary(target)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path | str, text: str, *, durable: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` so that a reader never sees half of it."""
    with atomic_file(path, "w", durable=durable) as handle:
        handle.write(text)


def write_json_file(path: Path | str, value: Any, *, durable: bool = False, **kwargs: Any) -> None:
    """THE JSON writer: ``value`` through ``safe_io.json_text`` (a non-finite float becomes null,
    ``allow_nan=False``; ``kwargs`` as ``json.dumps``), newline-terminated, written atomically."""
    write_atomic(path, json_text(value, **kwargs) + "\n", durable=durable)


def write_new(path: Path | str, text: str) -> bool:
    """Write ``text`` to ``path`` atomically and durably unless ``path`` exists: True when written,
    False when the name was taken (nothing is ever replaced: ``os.link`` fails on a taken name)."""
    target = Path(path)
    fd, tmp = _temporary(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        return True
    finally:
        tmp.unlink(missing_ok=True)
