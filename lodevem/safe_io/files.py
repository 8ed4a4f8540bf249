"""Reading a path a user or a container names: regular files only, each kind size-capped.

See the package docstring (``lodevem.safe_io``) for why; ``docs/security.md`` lists the caps.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, Optional

from ..errors import UnsafeInput
from .text import ENTRY_CHARS, clip, printable


@dataclass(frozen=True)
class Kind:
    """What a file is read as: its name in messages and the most bytes lodevem reads of it."""

    name: str
    max_bytes: int


# One file of a --code folder (hashed, never parsed): far above any hand-written module.
CODE_FILE = Kind("--code file", 64 * 2**20)
# All files of the --code entries together (hashed by streaming; the files are never held).
CODE_TOTAL_BYTES = 512 * 2**20
# A device benchmark log (--from-log): a benchncnn run of every model is ~10 KB, a logcat a few MB.
LOG = Kind("benchmark log", 16 * 2**20)
# A device profile (YAML): a real one is about 1 kB.
PROFILE = Kind("profile", 1 * 2**20)
# A calibration record: ~1 KB of JSON written by lodevem itself.
CALIBRATION_RECORD = Kind("calibration record", 64 * 2**10)
# A record lodevem wrote into its caches (a sidecar, a measurement): a few KB.
CACHE_RECORD = Kind("cache record", 1 * 2**20)
# A results file read back (report.files.read_json): 1,000 pairs are ~2 MB.
RESULTS_FILE = Kind("results file", 256 * 2**20)
# What the host keeps of a sandboxed run's output: the last bytes only.
OUTPUT_TAIL_BYTES = 64 * 2**10  # stderr (the model's prints, tracebacks)
REPLY_TAIL_BYTES = 1 * 2**20  # stdout (the worker's one-line JSON reply; a few KB in practice)


def _shown(path: Path | str) -> str:
    """A path as an error names it: escaped and capped (a file name can hold an ANSI escape)."""
    return clip(printable(str(path), None, newlines=False), ENTRY_CHARS * 4)


def _kind_of(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a symbolic link" if stat.S_ISLNK(mode) else "a device")


def _check(path: Path, info: os.stat_result, kind: Kind) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeInput(_shown(path), f"not a regular file ({_kind_of(info.st_mode)}); a {kind.name} must be "
                                        "a plain file")
    if info.st_size > kind.max_bytes:
        raise UnsafeInput(_shown(path), f"file is {info.st_size} bytes; a {kind.name} may be at most "
                                        f"{_size(kind.max_bytes)}")


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n > 2**20 else f"{n // 2**10} KiB"


def regular_fd(path: Path | str, kind: Kind, *, follow: bool = True, within: Optional[Path] = None) -> int:
    """An open, read-only descriptor of ``path`` once it is known to be a regular file within
    ``kind``'s cap. ``follow=False`` (what a container wrote): a link itself is refused.
    ``within`` (a folder of the user's, e.g. an ImageFolder tree): ``path`` is relative to it and
    opened one component at a time, each relative to its parent's descriptor with ``O_NOFOLLOW``,
    so no link is followed at any step and nothing outside ``within`` is opened, even when the
    tree changes while it is read."""
    if within is not None:
        return _fd_within(Path(within), Path(path), kind)
    path = Path(path)
    try:
        _check(path, os.stat(path) if follow else os.lstat(path), kind)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags | (0 if follow else os.O_NOFOLLOW))
    except OSError as exc:
        raise UnsafeInput(_shown(path), f"cannot read: {exc.strerror or exc}") from None
    return _checked(fd, path, kind)


def _checked(fd: int, path: Path, kind: Kind) -> int:
    """``fd`` once ``fstat`` on the descriptor itself says it is a regular file within the cap (a
    file swapped after the path was checked is caught here); closed otherwise."""
    try:
        _check(path, os.fstat(fd), kind)
    except BaseException:
        os.close(fd)
        raise
    return fd


def folder_fd(root: Path, relative: Path = Path()) -> int:
    """A descriptor of the folder ``root/relative`` (to list it, or to open what is in it): each
    component below ``root`` opened relative to its parent's descriptor with ``O_NOFOLLOW``, so no
    link is followed and nothing outside ``root`` is opened, even when the tree changes meanwhile."""
    shown = root / relative
    if relative.is_absolute() or ".." in relative.parts:
        raise UnsafeInput(_shown(shown), "not a path inside the folder")
    cloexec = getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | cloexec)
    except OSError as exc:
        raise UnsafeInput(_shown(root), f"cannot read the folder: {exc.strerror or exc}") from None
    for part in relative.parts:
        try:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | cloexec, dir_fd=fd)
        except OSError as exc:  # ELOOP / ENOTDIR: a link or a file where a folder was
            os.close(fd)
            raise UnsafeInput(_shown(shown), f"cannot read the folder: {exc.strerror or exc} (no link is followed)"
                              ) from None
        os.close(fd)
        fd = inner
    return fd


def _fd_within(root: Path, relative: Path, kind: Kind) -> int:
    shown = root / relative
    if not relative.parts:
        raise UnsafeInput(_shown(shown), "not a path inside the folder")
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    parent = folder_fd(root, relative.parent)
    try:
        try:
            _check(shown, os.lstat(relative.parts[-1], dir_fd=parent), kind)
            fd = os.open(relative.parts[-1], flags | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=parent)
        except OSError as exc:
            raise UnsafeInput(_shown(shown), f"cannot read: {exc.strerror or exc} (no link is followed)") from None
    finally:
        os.close(parent)
    return _checked(fd, shown, kind)


def open_regular(path: Path | str, kind: Kind, *, follow: bool = True) -> BinaryIO:
    """A binary file object on ``regular_fd``'s checked descriptor, for a reader that streams a
    large user file (eval data) instead of taking it whole: the same refusals, no size read up
    front beyond ``kind``'s cap check."""
    return os.fdopen(regular_fd(path, kind, follow=follow), "rb")


def _chunks(fd: int, path: Path, kind: Kind, budget: Optional[list[int]] = None) -> Iterator[bytes]:
    """The file's bytes in chunks, stopping with ``UnsafeInput`` past the cap (``budget``: a
    one-item list of bytes left across several files, shared by a --code digest)."""
    read = 0
    while chunk := os.read(fd, 1 << 20):
        read += len(chunk)
        if read > kind.max_bytes:
            raise UnsafeInput(_shown(path), f"grew past {_size(kind.max_bytes)} while read; a {kind.name} "
                              f"may be at most {_size(kind.max_bytes)}")
        if budget is not None:
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise UnsafeInput(_shown(path), f"the --code entries hold more than "
                                  f"{_size(CODE_TOTAL_BYTES)} of files; pass the package folder, not its parent")
        yield chunk


def read_bytes(path: Path | str, kind: Kind, *, follow: bool = True, within: Optional[Path] = None) -> bytes:
    """The bytes of a regular file of at most ``kind.max_bytes``; anything else is ``UnsafeInput``
    (``within``: ``path`` is relative to that folder, no link followed: ``regular_fd``)."""
    fd = regular_fd(path, kind, follow=follow, within=within)
    try:
        return b"".join(_chunks(fd, Path(within or "", path), kind))
    except OSError as exc:
        raise UnsafeInput(_shown(path), f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, kind: Kind, *, follow: bool = True, errors: str = "replace") -> str:
    """``read_bytes`` decoded as UTF-8 (undecodable bytes replaced unless ``errors='strict'``)."""
    data = read_bytes(path, kind, follow=follow)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise UnsafeInput(_shown(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_tail(path: Path | str, max_bytes: int) -> str:
    """The last ``max_bytes`` of a file a sandboxed run wrote (its output), links not followed;
    '' when it is missing or not a regular file (the run's outcome says what went wrong)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        os.lseek(fd, max(0, info.st_size - max_bytes), os.SEEK_SET)
        return os.read(fd, max_bytes).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def hash_into(digest: "hashlib._Hash", path: Path, budget: list[int]) -> None:
    """Feed ``path`` of a --code folder to ``digest`` without holding it: a symlink is hashed as
    a link (its target string, never followed: it may point at a device), a regular file by
    streaming its bytes (``budget`` shared by all files of the digest), anything else (a FIFO,
    a socket, a device) is ``UnsafeInput``."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UnsafeInput(_shown(f"--code {path}"), f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        digest.update(b"link\0" + os.fsencode(os.readlink(path)) + b"\0")
        return
    fd = regular_fd(path, CODE_FILE, follow=False)
    inner = hashlib.sha256()
    try:
        for chunk in _chunks(fd, path, CODE_FILE, budget):
            inner.update(chunk)
    except OSError as exc:
        raise UnsafeInput(_shown(f"--code {path}"), f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    digest.update(b"file\0" + inner.digest())


# A model file or a file lodevem hashes for a cache key: hashed by streaming, never held; the cap
# only stops a sparse or endless file (the largest phone model is a few hundred MB).
MODEL_FILE = Kind("model file", 16 * 2**30)


def sha256_file(path: Path | str, kind: Kind = MODEL_FILE) -> str:
    """sha256 of a regular file's bytes, streamed through ``regular_fd`` (a FIFO, a device or a
    file past ``kind``'s cap is ``UnsafeInput``, never read)."""
    digest = hashlib.sha256()
    fd = regular_fd(path, kind)
    try:
        for chunk in _chunks(fd, Path(path), kind):
            digest.update(chunk)
    except OSError as exc:
        raise UnsafeInput(_shown(path), f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return digest.hexdigest()
