"""The Slurm backend's shared folder: the files a job reads, copied where every node sees them.

Why a class of its own: which host file a job may read, and under which name, is the Slurm
backend's file boundary (as ``mounts`` is the container's); it is one short object, read whole.
Models, calibration samples and evaluation data are copied once per content under
``<workdir>/models``; the files a job writes go to its run folder's ``out/``.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from ..errors import ModelFileError, SandboxError
from ..store import atomic_path, file_digest
from ..wire.protocol import artifact_files
from ..wire.registry import CONVERT_ACTIONS
from ..wire.requests import RequestFiles, WorkerRequest


class SharedFolder:
    """``share`` copies a host file into ``<workdir>/models`` (once per content); ``request_for``
    rewrites a request's every path to the shared copies and the run folder's ``out/``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._lock = threading.Lock()
        self._copied: dict[str, Path] = {}  # content digest -> its copy in models/

    def share(self, path: Path) -> Path:
        """The copy of ``path`` under ``models/`` named by its content (copied once per content:
        a file rewritten in place, even with its old size and time, is hashed and copied anew)."""
        key = f"{file_digest(path)}{path.suffix}"  # regular files only
        with self._lock:
            if key in self._copied:
                return self._copied[key]
        target = self.workdir / "models" / f"{key[:32]}{path.suffix}"
        if not target.is_file() or file_digest(target) != key[:64]:
            with atomic_path(target) as tmp:
                shutil.copyfile(path, tmp)
        with self._lock:
            self._copied[key] = target
        return target

    def request_for(self, request: WorkerRequest, run_dir: Path) -> WorkerRequest:
        """The request with every path rewritten into the shared folder."""
        model, files = Path(request.model_path), request.files()
        if not model.is_file():
            raise ModelFileError(f"{request.model_path}: model file not found")
        onnx = None
        if files.onnx_path:
            given = Path(files.onnx_path)
            if request.action == "export-onnx" or not given.exists():
                onnx = str(run_dir / "out" / given.name)
            else:
                if given.is_symlink() or not given.is_file():
                    raise SandboxError(f"{given}: not a regular file; delete it (lodevem writes its cache itself)")
                onnx = str(self.share(given))
        derive_out = str(run_dir / "out" / Path(files.derive_out).name) if files.derive_out else None
        converted = None
        if files.converted_path and request.action in CONVERT_ACTIONS.values():  # the job writes it
            converted = str(run_dir / "out" / Path(files.converted_path).name)
        elif files.converted_path:
            # A conversion in the run's artifact store: read in place by the nodes (the store is
            # under --output, which must be on the shared file system, as --slurm-workdir is).
            for file in map(Path, artifact_files(files.converted_path)):
                if file.is_symlink() or not file.is_file():
                    raise SandboxError(f"{file}: not a regular file; delete it (lodevem writes its cache itself)")
            converted = str(Path(files.converted_path).resolve())
        removed = (str(run_dir / "out" / Path(files.channels_removed_path).name)
                   if files.channels_removed_path else None)
        # --code: read in place, so it must be on a filesystem the nodes share (as lodevem's install).
        code = [str(Path(p).resolve()) for p in request.code_paths]
        calibration = str(self.share(Path(files.calibration_path))) if files.calibration_path else None
        data = str(self.share(Path(files.data_path))) if files.data_path else None  # evaluate's samples
        return request.moved(str(self.share(model)), code, RequestFiles(
            onnx_path=onnx, converted_path=converted, calibration_path=calibration, derive_out=derive_out,
            channels_removed_path=removed, data_path=data))
