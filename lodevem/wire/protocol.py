"""The wire protocol: versions, names, the result JSON and the one-line error (the requests,
one record per action, are ``wire.requests``).

Everything here is what host code needs to talk to the worker; ``lodevem.worker`` re-exports it.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Mapping

from . import registry as _registry
from .error_kinds import ERROR_KINDS, UNUSABLE_FILE_KINDS  # noqa: F401  (the protocol's vocabulary, re-exported)
from .precision import ARITHMETIC, LEVELS  # noqa: F401  (re-exported)
from .registry import CONVERT_ACTIONS

# The wire format's version, in every request and reply (as pyperf versions its records); the host
# refuses a reply of another version ("rebuild the image"). 2: one request record per action;
# 3: one reply class on both sides (``wire.replies.WorkerReply``), no ``timings_s``; 4: one reply
# record per action (``wire.replies.REPLIES``), the runtime section without its onnxruntime field.
SCHEMA_VERSION = 4
WORKER_RELEASE = "2"  # bump when measurement semantics change, for people reading cached results


# Everything the worker can run, relative to the lodevem package (a folder: all its files, at any
# depth). One home: the image build bakes exactly these files (``sandbox.image_context``), the host
# bind-mounts its package over them at run time, and the worker version digests them, so an edit
# to any of them (the zoo's MAC counter, a subpackage) keys new cache entries.
WORKER_SOURCES: tuple[str, ...] = ("__init__.py", "version.py", "errors.py", "wire", "worker", "zoo", "runtimes")
_NOT_SOURCE_DIRS = ("__pycache__",)
_NOT_SOURCE_SUFFIXES = (".pyc", ".pyo")


def worker_source_files(package: Path) -> list[Path]:
    """The files of ``WORKER_SOURCES`` under ``package`` (a lodevem package folder), sorted by
    their path relative to it; bytecode caches are not sources."""
    found: list[Path] = []
    for entry in WORKER_SOURCES:
        path = package / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        found += [p for p in candidates if p.is_file() and p.suffix not in _NOT_SOURCE_SUFFIXES
                  and not any(part in _NOT_SOURCE_DIRS for part in p.relative_to(package).parts)]
    return sorted(found, key=lambda p: p.relative_to(package).as_posix())


def source_digest(package: Path) -> str:
    """A digest of every file the worker can run under ``package`` (``worker_source_files``).

    Why: the host keys its caches on the worker version the worker reports, and an edit to code
    the worker runs without a manual bump of ``WORKER_RELEASE`` would otherwise reuse results
    made by the old code. Host and sandbox run this same function over their copy of the
    package, so an image built from other code reports another version and the host refuses it.
    """
    digest = hashlib.sha256()
    for path in worker_source_files(package):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


WORKER_VERSION = f"{WORKER_RELEASE}+{source_digest(Path(__file__).resolve().parent.parent)}"
EXIT_OK, EXIT_ERROR = 0, 3
# The actions (a converted runtime's is its converter's, read from the registry at each use: a
# runtime registered later is an action too), the runtimes and the compression levels are the
# registry's and the precision vocabulary's: one home each (lodevem.levels reads the same names).
ACTIONS: Mapping[str, None] = _registry.Live(lambda: dict.fromkeys((
    "measure", "export-onnx", "inspect", "derive", *CONVERT_ACTIONS.values(), "armsim-profile", "evaluate",
    "decode-images")))
RUNTIMES: Mapping[str, None] = _registry.Live(lambda: dict.fromkeys(_registry.RUNTIMES))
# state_dict: weights (a state_dict or a training checkpoint) loaded into the module --arch built.
FORMATS = ("pickled_module", "torchscript", "exported_program", "onnx", "state_dict")
DEFAULT_INPUT_SHAPE = [1, 3, 224, 224]
PROGRESS_PREFIX = "lodevem-worker: "
# armsim-profile (docs/armsim.md): the emulated ISAs and the precision paths one can ask for
# (auto: what the runtime does by default on that ISA).
ARMSIM_ISAS = ("armv7", "armv8.0", "armv8.2")
ARMSIM_PRECISIONS = ("auto", *(a for a in ARITHMETIC if a != "int8"))  # int8 is the file's, not a switch


class WorkerError(Exception):
    """A failure the worker can explain in one line; becomes ``error: {kind, message}``, exit 3."""

    def __init__(self, kind: str, message: str) -> None:
        assert kind in ERROR_KINDS, kind
        super().__init__(message)
        self.kind, self.message = kind, " ".join(message.split())


def artifact_files(converted_path: str) -> list[str]:
    """Every file of a converted model: a ``.tflite`` is one file; an ncnn model is its
    ``.param`` (the graph, named by ``converted_path``) and the ``.bin`` beside it (the weights).
    The host and the sandbox both move and mount exactly these."""
    if converted_path.endswith(".param"):
        return [converted_path, converted_path[: -len(".param")] + ".bin"]
    return [converted_path]


def progress(message: str) -> None:
    """Progress goes to stderr so the host can show liveness without touching the result line."""
    sys.stderr.write(PROGRESS_PREFIX + message + "\n")
    sys.stderr.flush()


def first_line(exc: "BaseException | str", limit: int = 300) -> str:
    """The first non-empty line of an exception message, trimmed: enough to quote, never a dump."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        lines = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception): ", ln)][-1:] or lines  # the real cause
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
