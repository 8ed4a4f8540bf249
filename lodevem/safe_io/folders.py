"""The artifact store's file system access: by descriptor, below its root, never through a link.

Why: ``$LODEVEM_SHARED_STORE`` is a folder several users write. Whoever can write it can plant a
link where lodevem expects a folder (``converted`` -> another user's project folder) or a file; a path
based ``mkdir``/``os.replace``/``open`` then follows it and another user's exports land outside
the store, or a planted file is read as lodevem's. Here every component below the root is
opened relative to its parent's descriptor with ``O_NOFOLLOW``; a link (or a file) where a
folder belongs is removed (a link) or set aside (anything else) and a real folder made in its
place, with one warning; files are created ``O_EXCL | O_NOFOLLOW`` and renamed by descriptor.
The root itself is the user's choice and may be a link.

What this does not close: a path handed to the sandbox (``Artifact.path``, a staging folder) is
resolved again by the sandbox; a writer of the shared folder who swaps a checked folder for a
link in the seconds between the check and that open can still redirect it (docs/security.md).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..errors import UnsafeInput
from .text import printable

__all__ = ["FOLDER_MODE", "Folder", "set_aside_name"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
FOLDER_MODE = 0o755
FILE_MODE = 0o644


def set_aside_name(name: str) -> str:
    """The name a bad entry is kept under (never a name the store looks up)."""
    return f".set-aside-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{name}"


def _shown(path: Path) -> str:
    return printable(str(path), 300, newlines=False)


class Folder:
    """An open folder of the store (its descriptor) and the path it is known by; ``close`` it,
    or use it as a context manager."""

    def __init__(self, fd: int, path: Path, warn: Callable[[str], None]) -> None:
        self.fd, self.path, self._warn = fd, path, warn

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @classmethod
    def walk(cls, root: Path, parts: tuple[str, ...], warn: Callable[[str], None], *, create: bool = True
             ) -> Optional["Folder"]:
        """``root/parts...`` opened component by component (``O_NOFOLLOW`` below the root); a
        missing folder is made when ``create`` (else None); a link or a non-folder where a folder
        belongs is replaced by a real folder, with a warning."""
        if create:
            root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(root, _DIR)
        except OSError as exc:
            if not create and exc.errno == errno.ENOENT:
                return None
            raise UnsafeInput(_shown(root), f"cannot open the store's folder: {exc.strerror or exc}") from None
        folder = cls(fd, Path(root), warn)
        for part in parts:
            inner = folder.subfolder(part, create=create)
            folder.close()
            if inner is None:
                return None
            folder = inner
        return folder

    @classmethod
    def direct(cls, path: Path, warn: Callable[[str], None]) -> "Folder":
        """``path`` opened as a folder, a link in its last component refused (not followed)."""
        try:
            return cls(os.open(path, _DIR | os.O_NOFOLLOW), Path(path), warn)
        except OSError as exc:
            raise UnsafeInput(_shown(path), f"cannot open the folder: {exc.strerror or exc}") from None

    def subfolder(self, name: str, *, create: bool = True) -> Optional["Folder"]:
        """The folder ``name`` in this one, opened without following a link (see ``walk``)."""
        path = self.path / name
        for _ in range(3):  # a writer racing us gets three tries, then the store is refused
            try:
                return Folder(os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=self.fd), path, self._warn)
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    os.mkdir(name, FOLDER_MODE, dir_fd=self.fd)
                except FileExistsError:
                    pass
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafeInput(_shown(path), f"cannot open: {exc.strerror or exc}") from None
                self._replace_with_folder(name)
        raise UnsafeInput(_shown(path), "keeps being replaced while lodevem opens it; refusing the store")

    def _replace_with_folder(self, name: str) -> None:
        info = os.lstat(name, dir_fd=self.fd)
        if stat.S_ISLNK(info.st_mode):
            target = printable(os.readlink(name, dir_fd=self.fd), 200, newlines=False)
            os.unlink(name, dir_fd=self.fd)  # the link only, never what it points at
            self._warn(f"store: {_shown(self.path / name)} was a link to {target}, not a folder: removed it and "
                       "made the folder (the store never follows a link)")
        else:
            aside = set_aside_name(name)
            os.rename(name, aside, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            self._warn(f"store: {_shown(self.path / name)} was not a folder: set aside as {aside}")
        os.mkdir(name, FOLDER_MODE, dir_fd=self.fd)

    # -- files ------------------------------------------------------------------------------------

    def lstat(self, name: str) -> Optional[os.stat_result]:
        try:
            return os.lstat(name, dir_fd=self.fd)
        except OSError:
            return None

    def open_file(self, name: str, max_bytes: int) -> int:
        """A read-only descriptor of the regular file ``name`` of at most ``max_bytes`` (a link,
        a FIFO or a device is ``UnsafeInput``, never opened through)."""
        path = self.path / name
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC, dir_fd=self.fd)
        except OSError as exc:
            why = "a link (never followed)" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
            raise UnsafeInput(_shown(path), f"cannot read: {why}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            os.close(fd)
            raise UnsafeInput(_shown(path), "not a regular file" if not stat.S_ISREG(info.st_mode)
                              else f"{info.st_size} bytes, over the {max_bytes} byte cap")
        return fd

    def read(self, name: str, max_bytes: int) -> bytes:
        fd = self.open_file(name, max_bytes)
        try:
            data = b""
            while chunk := os.read(fd, 1 << 20):
                data += chunk
                if len(data) > max_bytes:
                    raise UnsafeInput(_shown(self.path / name), f"grew past {max_bytes} bytes while read")
            return data
        finally:
            os.close(fd)

    def sha256(self, name: str, max_bytes: int) -> tuple[str, os.stat_result]:
        """The file's sha256 and the ``fstat`` of the very descriptor hashed."""
        fd = self.open_file(name, max_bytes)
        try:
            digest = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
            return digest.hexdigest(), os.fstat(fd)
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes) -> None:
        """``data`` as the file ``name``, atomically: a new temporary (``O_EXCL | O_NOFOLLOW``),
        then renamed over ``name`` by descriptor (a link there is replaced, never written through)."""
        tmp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, FILE_MODE, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.unlink(tmp)
            raise

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            self.set_aside(name)

    def set_aside(self, name: str) -> Optional[str]:
        """Rename ``name`` (whatever it is) out of the way; the new name, or None if it is gone."""
        aside = set_aside_name(name)
        try:
            os.rename(name, aside, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except FileNotFoundError:
            return None
        return aside

    def move_in(self, source: "Folder", name: str) -> None:
        """``source/name`` renamed to ``name`` here (same file system), by descriptor."""
        os.replace(name, name, src_dir_fd=source.fd, dst_dir_fd=self.fd)

    def same_as(self, path: Path) -> bool:
        """Whether ``path`` still names this folder (nothing swapped it since it was opened)."""
        try:
            now, mine = os.stat(path, follow_symlinks=False), os.fstat(self.fd)
        except OSError:
            return False
        return stat.S_ISDIR(now.st_mode) and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


@contextmanager
def opened(root: Path, parts: tuple[str, ...], warn: Callable[[str], None]) -> Iterator[Folder]:
    folder = Folder.walk(root, parts, warn)
    assert folder is not None  # create=True: made or refused
    with folder:
        yield folder
