"""What a container hands back: its scratch folder and the one distrustful copy out of it.

Why a module of its own: the Docker and Slurm backends both take a sandbox's output files with
the same rules (no link followed, regular files only, size-capped, renamed into place), so the
rules live once, beside neither backend.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from ..store.files import atomic_file

LOG_TAIL_LINES = 256

# Largest file a sandbox run may hand back (an ONNX export or a derived variant); the scratch
# folder is the only place the container can write outside its tmpfs.
MAX_OUTPUT_BYTES = 4 * 2**30
CONTAINER_UID = 1000


def log_tail(container: Any, max_bytes: int, *, stdout: bool, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``max_bytes`` of the container's stdout (or stderr), from its last ``lines``
    log lines: the host never reads the whole log."""
    data = container.logs(stdout=stdout, stderr=not stdout, tail=lines)
    return data[-max_bytes:].decode(errors="replace")


def tree_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder``, links not followed (what the sandbox wrote)."""
    total, stack = 0, [folder]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total


def scratch_dir() -> str:
    """A fresh scratch folder only this run and the container's user can enter (0700).

    As root the folder is handed to the container's uid; otherwise that uid cannot write a 0700
    folder of ours, so it stays 0700 and the run fails with the worker's own message.
    """
    path = tempfile.mkdtemp(prefix="lodevem-out-")
    if os.geteuid() == 0:
        os.chown(path, CONTAINER_UID, CONTAINER_UID)
    return path


def take_output(scratch: Path, name: str, target: Path, max_bytes: int = MAX_OUTPUT_BYTES) -> None:
    """Copy the file the container wrote as ``scratch/name`` to ``target``, trusting nothing about it.

    Why: the container (running the user's model, which is code) can replace its output with a
    symlink to any host file, or a FIFO, or make it huge. So the file is opened with O_NOFOLLOW
    (a link is refused, never followed), must be a regular file inside the scratch folder, and is
    copied by descriptor, size-capped, to a temporary name beside ``target`` that lodevem itself
    creates (O_EXCL) and then renames into place. Nothing there: nothing to take (the reply says why).
    """
    try:
        fd = os.open(scratch / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SandboxError(f"the sandbox left {name} as something other than a regular file ({exc.strerror}): "
                           "refused") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SandboxError(f"the sandbox left {name} as something other than a regular file: refused")
        if info.st_size > max_bytes:
            raise SandboxError(f"the sandbox wrote {info.st_size} bytes to {name}, over the {max_bytes} byte cap")
        with atomic_file(target, "wb", durable=True) as sink:
            copied = 0
            while chunk := os.read(fd, 1 << 20):
                copied += len(chunk)
                if copied > max_bytes:
                    raise SandboxError(f"the sandbox wrote more than {max_bytes} bytes to {name}")
                sink.write(chunk)
            if copied != info.st_size:  # validated before it takes the final name
                raise SandboxError(f"{name} changed while it was copied ({copied} of {info.st_size} bytes)")
    finally:
        os.close(fd)
