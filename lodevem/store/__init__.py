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

Runs may share the kinds made from a file's bytes and pinned tools alone (``SHARED_KINDS``:
exports, conversions, derivations, zoo graphs, evaluation data and results, armsim profiles):
``$LODEVEM_SHARED_STORE`` names one folder that holds them for every run (``run_store``), so
runs into different ``--output`` folders (the demo's two, the test suite's hundreds) convert a
model once. Measurements and predictions stay in each run's own folder.

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
* ``use_cache=False`` (``--no-cache``) never reads, and still refreshes what it makes;
* nothing found is believed (the store may be a folder others write): a file counts only when
  its bytes hash to the sidecar's sha256 (hashed once per run, the first time it is used; size
  and mtime alone once let a swapped ``.tflite`` or data copy through), sidecars and records are
  parsed typed and bounded (``records``, ``safe_io.records``), every folder below the root is
  opened by descriptor without following a link (``safe_io.folders``), and a bad entry is set
  aside (``.set-aside-<time>-<name>``) and made again, with one line in ``warnings``.

The one digest helper (``digest``: sha256 of canonical JSON; ``file_digest``: of a file's bytes)
names every key: measurement keys, the ``--resume`` state key, latency cache keys, calibration
digests, Slurm run keys.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, TypeVar

from ..errors import UnsafeInput
from ..safe_io import json_text, printable
from ..safe_io.folders import FILE_MODE, Folder
from ..safe_io.records import BadRecord
from .files import atomic_file, atomic_path, write_atomic, write_json_file, write_new
from .records import FileRecord, parse_envelope, parse_sidecar

T = TypeVar("T")

__all__ = ["FORMAT_VERSION", "MAX_ARTIFACT_BYTES", "MAX_RECORD_BYTES", "SHARED_KINDS", "SHARED_STORE_ENV", "Artifact",
           "ArtifactStore", "atomic_file", "atomic_path", "bytes_digest", "cache_root", "digest", "file_digest",
           "run_store", "user_cache_dir", "write_atomic", "write_json_file", "write_new"]

# Bump when a stored layout changes: every record carries it, so older entries become misses.
FORMAT_VERSION = 2
# Largest file a sandbox run may hand to the store (the sandbox's scratch cap is the same 4 GiB).
MAX_ARTIFACT_BYTES = 4 * 2**30
# Largest JSON record read back (a measurement record is ~2 KB; a sidecar less).
MAX_RECORD_BYTES = 1 * 2**20  # = safe_io.CACHE_RECORD
CACHE_FOLDER = ".cache"
# What every run may take from another's (see the module docstring); every kind made in a staging
# folder is one of them, so staging and publishing stay on one file system.
SHARED_KINDS = frozenset({"onnx", "converted", "derived", "zoo", "evaldata", "accuracy", "armsim"})
SHARED_STORE_ENV = "LODEVEM_SHARED_STORE"


def cache_root(output: Path) -> Path:
    """THE place a run's cache folder is named: ``<output>/.cache``."""
    return Path(output) / CACHE_FOLDER


def run_store(root: Path, use_cache: bool = True) -> "ArtifactStore":
    """A run's store rooted at ``root`` (``cache_root(output)``, a library caller's cache folder),
    its ``SHARED_KINDS`` in ``$LODEVEM_SHARED_STORE`` when that is set."""
    shared = os.environ.get(SHARED_STORE_ENV)
    return ArtifactStore(root, use_cache=use_cache, shared=Path(shared) if shared else None)


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
    """Files and records under ``root`` (the cache folder), one sub-folder per kind; the
    ``SHARED_KINDS`` under ``shared`` instead when it is given.

    Nothing found is believed (``safe_io.folders``, ``records``): every folder below the root is opened by
    descriptor without following a link, every sidecar and record is parsed typed and bounded, and
    an artifact is used only once its files' sha256 match its sidecar (hashed the first time this
    store, one per run, uses them; memoised by inode, size and times). A bad entry is set aside
    and made again, with one line in ``warnings``."""

    def __init__(self, root: Path, use_cache: bool = True, shared: Optional[Path] = None) -> None:
        self.root, self.use_cache, self.shared = Path(root), use_cache, Path(shared) if shared else None
        self.warnings: list[str] = []
        self._lock = threading.Lock()
        self._verified: dict[tuple[Any, ...], str] = {}  # (folder, name, dev, ino, size, mtime, ctime) -> sha256
        self._sha_by_path: dict[str, str] = {}  # files this run verified or published

    def warn(self, message: str) -> None:
        with self._lock:
            if message not in self.warnings:
                self.warnings.append(message)

    def _base(self, kind: str) -> Path:
        return self.shared if self.shared is not None and kind in SHARED_KINDS else self.root

    def _open(self, kind: str) -> Folder:
        folder = Folder.walk(self._base(kind), (kind,), self.warn)
        assert folder is not None  # create=True
        return folder

    def folder(self, kind: str) -> Path:
        """The kind's folder, made (a link planted in its place replaced) and named by path for
        a caller that keeps its own files there."""
        self._open(kind).close()
        return self._base(kind) / kind

    def path(self, kind: str, name: str) -> Path:
        return self._base(kind) / kind / name

    # -- files made in the sandbox -------------------------------------------------------------

    @staticmethod
    def sidecar(main: Path) -> Path:
        return main.with_name(main.name + ".json")

    def _reject(self, folder: Folder, kind: str, names: Sequence[str], why: str) -> None:
        """Set a bad entry's files aside (never deleted: someone may want to look) and say so once."""
        for name in names:
            folder.set_aside(name)
        self.warn(f"store: {printable(kind, 40, newlines=False)}/{printable(names[0], 200, newlines=False)}: "
                  f"{why}; set it aside and made it again")

    def _verify(self, folder: Folder, name: str, recorded: FileRecord) -> Optional[str]:
        """None when ``name`` is a regular file whose bytes hash to ``recorded``, else why not."""
        info = folder.lstat(name)
        if info is None:
            return f"{name} is missing"
        if not stat.S_ISREG(info.st_mode):
            return f"{name} is not a regular file (a link is never followed)"
        if info.st_size != recorded.size:
            return f"{name} is {info.st_size} bytes, its record says {recorded.size}"
        key = (str(folder.path), name, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        found = self._verified.get(key)
        if found is None:
            try:
                found, after = folder.sha256(name, MAX_ARTIFACT_BYTES)
            except UnsafeInput as exc:
                return exc.detail
            if (after.st_ino, after.st_size, after.st_mtime_ns) == (info.st_ino, info.st_size, info.st_mtime_ns):
                self._verified[key] = found
        if found != recorded.sha256:
            return f"{name}'s content does not match the sha256 its record holds (changed after it was published)"
        self._sha_by_path[str(folder.path / name)] = found
        return None

    def lookup(self, kind: str, names: Sequence[str], maker: Mapping[str, Any]) -> Optional[Artifact]:
        """The artifact whose files are ``names`` (main first), if its sidecar says the same maker
        made exactly these files in this format and their bytes hash to what it records; else
        None. Optional files the producer may not write are named in the sidecar (absent: ``None``)."""
        if not self.use_cache:
            return None
        side = names[0] + ".json"
        with self._open(kind) as folder:
            if folder.lstat(side) is None:
                return None
            try:
                record = parse_sidecar(folder.read(side, MAX_RECORD_BYTES), str(folder.path / side))
            except (UnsafeInput, BadRecord) as exc:
                self._reject(folder, kind, [side, *names], f"not a record lodevem wrote ({_why(exc)})")
                return None
            if record.format_version != FORMAT_VERSION or record.kind != kind or record.maker != dict(maker):
                return None  # another format or maker: made again and replaced
            if not set(names) <= set(record.files):
                return None
            for name, recorded in record.files.items():
                if recorded is None:
                    if folder.lstat(name) is not None:
                        return None  # an optional file appeared since: made again
                    continue
                problem = self._verify(folder, name, recorded)
                if problem is not None:
                    self._reject(folder, kind, [side, *record.files], problem)
                    return None
            base = folder.path
        ordered = [base / n for n in names] + [base / n for n, s in record.files.items() if s and n not in names]
        return Artifact(kind, tuple(ordered), dict(maker), record.info)

    def discard(self, artifact: Artifact, why: str) -> None:
        """Set aside an artifact whose record a caller found unusable (its ``info`` not what the
        producer writes), with one warning; the next lookup is a miss and it is made again."""
        with self._open(artifact.kind) as folder:
            self._reject(folder, artifact.kind, [artifact.path.name + ".json", *[p.name for p in artifact.paths]], why)

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh, private (0700) folder for one sandbox run to write into; deleted afterwards,
        whatever is still in it (a failed run's files never leave it)."""
        root = self.shared or self.root  # beside the SHARED_KINDS' folders: one file system
        with self._staging_base(root) as base:
            name = f"run-{secrets.token_hex(8)}"
            os.mkdir(name, 0o700, dir_fd=base.fd)
            try:
                yield base.path / name
            finally:
                shutil.rmtree(name, ignore_errors=True, dir_fd=base.fd)

    def _staging_base(self, root: Path) -> Folder:
        folder = Folder.walk(root, (".staging",), self.warn)
        assert folder is not None
        return folder

    def _open_staged(self, staged: Path) -> Folder:
        """The staging folder a run wrote into, opened by descriptor from the store's root (no
        link followed on the way); a folder elsewhere (a caller's own) is opened without following
        a link in its last component."""
        root = self.shared or self.root
        if staged.parent == root / ".staging":
            folder = Folder.walk(root, (".staging", staged.name), self.warn, create=False)
            if folder is None:  # .staging was swapped for a link (now replaced) while the sandbox ran
                raise UnsafeInput(printable(str(staged), 300, newlines=False),
                                  "the staging folder was replaced while the sandbox wrote into it: refused")
            return folder
        return Folder.direct(staged, self.warn)

    def publish(self, kind: str, staged: Path, names: Sequence[str], maker: Mapping[str, Any],
                info: Optional[Mapping[str, Any]] = None, optional: Sequence[str] = (),
                max_bytes: int = MAX_ARTIFACT_BYTES) -> tuple[Optional[Artifact], str]:
        """Move a successful run's files from ``staged`` into the store: ``(artifact, "")``, or
        ``(None, why)`` when the folder holds anything but regular files named ``names`` (all
        present) and ``optional``, or a file over ``max_bytes``. The sidecar is written last."""
        allowed = set(names) | set(optional)
        found: dict[str, int] = {}
        try:
            source = self._open_staged(Path(staged))
        except UnsafeInput as exc:
            return None, exc.detail
        with source:
            for entry in os.scandir(source.fd):
                info_, shown = entry.stat(follow_symlinks=False), printable(entry.name, 200, newlines=False)
                if entry.name not in allowed:
                    return None, f"the sandbox left an unexpected file {shown!r} in its output: refused"
                if not stat.S_ISREG(info_.st_mode):
                    return None, f"the sandbox left {shown} as something other than a regular file: refused"
                if info_.st_size > max_bytes:
                    return None, f"the sandbox wrote {info_.st_size} bytes to {shown}, over the {max_bytes} byte cap"
                found[entry.name] = info_.st_size
            missing = [n for n in names if n not in found]
            if missing:
                return None, f"the sandbox reported success but did not write {', '.join(missing)}"
            ordered = [*[n for n in found if n != names[0]], names[0]]
            sums = {}
            for name in ordered:
                fd = source.open_file(name, max_bytes)
                try:
                    os.fchmod(fd, FILE_MODE)
                finally:
                    os.close(fd)
                sums[name] = source.sha256(name, max_bytes)[0]
            with self._open(kind) as folder:
                side = names[0] + ".json"
                folder.unlink(side)  # no stale record may vouch for half-moved files
                for name in ordered:
                    folder.move_in(source, name)
                for name in allowed - set(found):
                    folder.unlink(name)  # an optional file this run did not make
                files: dict[str, Optional[list[Any]]] = {n: None for n in allowed}
                for name in found:
                    now = folder.lstat(name)
                    files[name] = [now.st_size, now.st_mtime_ns, sums[name]] if now is not None else None
                    self._sha_by_path[str(folder.path / name)] = sums[name]
                folder.write(side, (json_text({"format_version": FORMAT_VERSION, "kind": kind, "maker": dict(maker),
                                               "files": files, "info": dict(info or {})}, indent=1, default=str)
                                    + "\n").encode())
                base = folder.path
        paths = tuple(base / n for n in [*names, *[o for o in optional if o in found]])
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
        """A store file's sha256 as verified or published in this run (no re-hash), else hashed now."""
        return self._sha_by_path.get(str(path)) or file_digest(path)

    # -- JSON records ----------------------------------------------------------------------------

    def get_record(self, kind: str, key: str, parse: Optional[Callable[[Any, str], T]] = None
                   ) -> Optional[Any]:
        """The record stored under ``key`` in this format (``parse(value, where)``'d when given:
        a ``BadRecord`` from it sets the record aside), or None (also with ``use_cache=False``)."""
        if not self.use_cache:
            return None
        name = f"{key}.json"
        with self._open(kind) as folder:
            if folder.lstat(name) is None:
                return None
            where = str(folder.path / name)
            try:
                version, value = parse_envelope(folder.read(name, MAX_RECORD_BYTES), where)
                if version != FORMAT_VERSION:
                    return None
                return parse(value, where) if parse is not None else value
            except (UnsafeInput, BadRecord) as exc:
                self._reject(folder, kind, [name], f"not a record lodevem wrote ({_why(exc)})")
                return None

    def put_record(self, kind: str, key: str, value: Mapping[str, Any]) -> None:
        with self._open(kind) as folder:
            folder.write(f"{key}.json", (json_text({"format_version": FORMAT_VERSION, "kind": kind,
                                                    "value": dict(value)}, indent=1, default=str) + "\n").encode())


def _why(exc: Exception) -> str:
    if isinstance(exc, BadRecord):
        return f"field '{exc.field}': {exc.problem}" if exc.field else exc.problem
    return getattr(exc, "detail", str(exc))
