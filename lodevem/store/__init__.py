"""The one artifact store: every file and record a run keeps between runs, and the one digest.

What it holds, one folder per kind under the cache folder (``<output>/.cache`` for ``start``,
``~/.cache/lodevem`` for the Python API; ``cache_root`` names it once):

==============  ==============================================  ====================================
kind            what                                            made by
==============  ==============================================  ====================================
``onnx``        ONNX exports (the graph latency is predicted    the sandbox (``artifacts.ExportCache``)
                from, the file onnxruntime runs)
``converted``   tflite / ncnn conversions                       the sandbox (``artifacts.ConvertCache``)
``derived``     ``--levels`` variants                           the sandbox (``derive.derive_cached``)
``zoo``         ONNX graphs of zoo models, per name and version this process (lodevem's own code)
``measure``     one JSON record per measurement                 ``memory.cache.MeasureCache``
``latency``     one JSON record per prediction                  ``latency.cache.JsonCache``
==============  ==============================================  ====================================

Why one store: the caches used to check five different ways whether a file was still good (size,
size + mtime, existence alone), two ignored ``--no-cache``, and a conversion that FAILED was
still taken as a cache hit when the failing model had written the expected file itself. Here:

* a file artifact counts only with its **sidecar record** ``<file>.json`` (format version, what
  made it, each file's size, mtime and sha256), written last, after the files are in place;
* a sandbox run writes into a fresh **staging folder** (``staging()``); ``publish`` is called
  only after the run succeeded, checks the folder (regular files only, the expected names and
  nothing else, each under ``MAX_ARTIFACT_BYTES``) and renames the files into the store (same
  file system: atomic). A failed run's staging folder is deleted whole: nothing it wrote is ever
  copied or reused;
* ``use_cache=False`` (``--no-cache``) never reads, and still refreshes what it makes.

The one digest helper (``digest``: sha256 of canonical JSON; ``file_digest``: of a file's bytes)
names every key: measurement keys, the ``--resume`` state key, latency cache keys, calibration
digests, Slurm run keys.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from .files import atomic_file, atomic_path, write_atomic, write_json_file, write_new

__all__ = ["FORMAT_VERSION", "MAX_ARTIFACT_BYTES", "MAX_RECORD_BYTES", "Artifact", "ArtifactStore", "atomic_file",
           "atomic_path", "bytes_digest", "cache_root", "digest", "file_digest", "user_cache_dir", "write_atomic",
           "write_json_file", "write_new"]

# Bump when a stored layout changes: every record carries it, so older entries become misses.
FORMAT_VERSION = 2
# Largest file a sandbox run may hand to the store (the sandbox's scratch cap is the same 4 GiB).
MAX_ARTIFACT_BYTES = 4 * 2**30
# Largest JSON record read back (a measurement record is ~2 KB; a sidecar less).
MAX_RECORD_BYTES = 1 * 2**20  # = safe_io.CACHE_RECORD
CACHE_FOLDER = ".cache"


def cache_root(output: Path) -> Path:
    """THE place a run's cache folder is named: ``<output>/.cache``."""
    return Path(output) / CACHE_FOLDER


def user_cache_dir() -> Path:
    """THE user's cache folder: ``$XDG_CACHE_HOME/lodevem``, default ``~/.cache/lodevem`` (the
    Python API's exports, ``build-image``'s wheels and contexts under ``build/``)."""
    root = os.environ.get("XDG_CACHE_HOME")
    return (Path(root) if root else Path.home() / ".cache") / "lodevem"


def digest(description: Any) -> str:
    """sha256 (hex) of a JSON-able description, canonical: sorted keys, no whitespace."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"), default=str, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def bytes_digest(data: bytes) -> str:
    """sha256 (hex) of bytes already in memory (a profile file, a serialized graph)."""
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path | str) -> str:
    """sha256 of a file's bytes, streamed (the digest lodevem names model files by)."""
    from ..safe_io import sha256_file as file_sha256  # regular files only: a FIFO or /dev/zero is refused

    return file_sha256(str(path))


def _read_json(path: Path) -> Optional[Any]:
    """A JSON file lodevem wrote, read through ``safe_io`` (a regular file, no link, under
    ``MAX_RECORD_BYTES``), else None."""
    from ..safe_io import CACHE_RECORD, UnsafeInput, read_bytes

    try:
        return json.loads(read_bytes(path, CACHE_RECORD, follow=False).decode("utf-8"))
    except (UnsafeInput, ValueError):
        return None


def _stat(path: Path) -> Optional[list[int]]:
    try:
        info = path.lstat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns] if stat.S_ISREG(info.st_mode) else None


@dataclass(frozen=True)
class Artifact:
    """A published artifact: its files (the first is the main one), what made it, and the
    producer's own facts (``info``: e.g. the worker's model section of an export)."""

    kind: str
    paths: tuple[Path, ...]
    maker: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.paths[0]


class ArtifactStore:
    """Files and records under ``root`` (the cache folder), one sub-folder per kind."""

    def __init__(self, root: Path, use_cache: bool = True) -> None:
        self.root, self.use_cache = Path(root), use_cache

    def folder(self, kind: str) -> Path:
        return self.root / kind

    def path(self, kind: str, name: str) -> Path:
        return self.root / kind / name

    # -- files made in the sandbox -------------------------------------------------------------

    @staticmethod
    def sidecar(main: Path) -> Path:
        return main.with_name(main.name + ".json")

    def lookup(self, kind: str, names: Sequence[str], maker: Mapping[str, Any]) -> Optional[Artifact]:
        """The artifact whose files are ``names`` (main first), if its sidecar says the same maker
        made exactly these files (size and mtime unchanged since) in this format; else None.
        Optional files the producer may not write are named in the sidecar (absent: ``None``)."""
        if not self.use_cache:
            return None
        folder = self.folder(kind)
        record = _read_json(self.sidecar(folder / names[0]))
        if not isinstance(record, dict) or record.get("format_version") != FORMAT_VERSION:
            return None
        if record.get("kind") != kind or record.get("maker") != dict(maker):
            return None
        files = record.get("files")
        if not isinstance(files, dict) or not set(names) <= set(files):
            return None
        for name, stats in files.items():
            now = _stat(folder / name)
            if (stats is None) != (now is None) or (now is not None and now != list(stats)[:2]):
                return None  # a file changed, vanished or appeared since it was published
        info = record.get("info")
        ordered = [folder / n for n in names] + [folder / n for n, s in files.items() if s and n not in names]
        return Artifact(kind, tuple(ordered), dict(maker), info if isinstance(info, dict) else {})

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh, private folder for one sandbox run to write into; deleted afterwards,
        whatever is still in it (a failed run's files never leave it)."""
        base = self.root / ".staging"
        base.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def publish(self, kind: str, staged: Path, names: Sequence[str], maker: Mapping[str, Any],
                info: Optional[Mapping[str, Any]] = None, optional: Sequence[str] = (),
                max_bytes: int = MAX_ARTIFACT_BYTES) -> tuple[Optional[Artifact], str]:
        """Move a successful run's files from ``staged`` into the store: ``(artifact, "")``, or
        ``(None, why)`` when the folder holds anything but regular files named ``names`` (all
        present) and ``optional``, or a file over ``max_bytes``. The sidecar is written last."""
        allowed = set(names) | set(optional)
        found: dict[str, int] = {}
        try:
            entries = list(os.scandir(staged))
        except OSError as exc:
            return None, f"the sandbox's output folder is unreadable ({exc.strerror or exc})"
        for entry in entries:
            info_ = entry.stat(follow_symlinks=False)
            if entry.name not in allowed:
                return None, f"the sandbox left an unexpected file {entry.name!r} in its output: refused"
            if not stat.S_ISREG(info_.st_mode):
                return None, f"the sandbox left {entry.name} as something other than a regular file: refused"
            if info_.st_size > max_bytes:
                return None, f"the sandbox wrote {info_.st_size} bytes to {entry.name}, over the {max_bytes} byte cap"
            found[entry.name] = info_.st_size
        missing = [n for n in names if n not in found]
        if missing:
            return None, f"the sandbox reported success but did not write {', '.join(missing)}"
        folder = self.folder(kind)
        folder.mkdir(parents=True, exist_ok=True)
        main = folder / names[0]
        self.sidecar(main).unlink(missing_ok=True)  # no stale record may vouch for half-moved files
        ordered = [*[n for n in found if n != names[0]], names[0]]
        sums = {name: file_digest(staged / name) for name in ordered}
        for name in ordered:
            os.chmod(staged / name, 0o644)
            os.replace(staged / name, folder / name)
        for name in allowed - set(found):
            (folder / name).unlink(missing_ok=True)  # an optional file this run did not make
        files: dict[str, Optional[list[Any]]] = {n: None for n in allowed}
        for name in found:
            stats = _stat(folder / name)
            files[name] = [*stats, sums[name]] if stats else None
        write_json_file(self.sidecar(main), {"format_version": FORMAT_VERSION, "kind": kind, "maker": dict(maker),
                                        "files": files, "info": dict(info or {})}, indent=1, default=str)
        paths = tuple(folder / n for n in [*names, *[o for o in optional if o in found]])
        return Artifact(kind, paths, dict(maker), dict(info or {})), ""

    def publish_local(self, kind: str, name: str, maker: Mapping[str, Any], write: Any,
                      info: Optional[Mapping[str, Any]] = None) -> Artifact:
        """An artifact this process makes itself (a zoo graph from lodevem's own code, validated
        evaluation data): ``write(path)`` writes into staging, then it is published like a sandbox's."""
        with self.staging() as staged:
            write(staged / name)
            artifact, error = self.publish(kind, staged, [name], maker, info)
        if artifact is None:
            raise OSError(error)
        return artifact

    def file_sha256(self, path: Path) -> str:
        """A published file's sha256 as its sidecar records it (no re-hash), else hashed now."""
        record = _read_json(self.sidecar(path))
        files = record.get("files") if isinstance(record, dict) else None
        stats = files.get(path.name) if isinstance(files, dict) else None
        if isinstance(stats, list) and len(stats) == 3 and _stat(path) == stats[:2]:
            return str(stats[2])
        return file_digest(path)

    # -- JSON records ----------------------------------------------------------------------------

    def get_record(self, kind: str, key: str) -> Optional[dict[str, Any]]:
        """The record stored under ``key`` in this format, or None (also with ``use_cache=False``)."""
        if not self.use_cache:
            return None
        payload = _read_json(self.folder(kind) / f"{key}.json")
        if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
            return None
        value = payload.get("value")
        return value if isinstance(value, dict) else None

    def put_record(self, kind: str, key: str, value: Mapping[str, Any]) -> None:
        write_json_file(self.folder(kind) / f"{key}.json",
                   {"format_version": FORMAT_VERSION, "kind": kind, "value": dict(value)}, indent=1, default=str)
