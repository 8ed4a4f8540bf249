"""What a worker container sees: each host file the request names, bind-mounted read-only at a
fixed place, and the request rewritten to those places.

Why apart from the backend: the mount table is the sandbox's file boundary (what the user's code
can read, and the one folder it may write); kept in one short function, it can be read whole and
checked against the request's fields.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import SandboxError
from ..wire.protocol import artifact_files
from ..wire.requests import RequestFiles, WorkerRequest

PKG_IN_IMAGE = "/opt/lodevem/lodevem"


def container_mounts(request: WorkerRequest, out_dir: Optional[str],
                     host_pkg: Optional[Path]) -> tuple[list[Any], WorkerRequest]:
    """Bind mounts (Mount objects: host paths may contain ':' or ',') and the rewritten request."""
    files = request.files()
    model = Path(request.model_path).resolve()
    table = _MountTable(out_dir)
    inside_model = table.read_only(f"/input/{model.name}", str(model))
    if host_pkg is not None:
        table.read_only(PKG_IN_IMAGE, str(host_pkg))
    onnx = table.onnx(files.onnx_path) if files.onnx_path else None
    converted = table.converted(files.converted_path) if files.converted_path else None
    calibration = (table.host_file(files.calibration_path, "calibration", "calibration data is not a regular file")
                   if files.calibration_path else None)  # a conversion's int8 calibration inputs (.npz)
    # derive_out (action derive) and the channels-removed graph (export-onnx): new files in /output
    derive, removed = table.written(files.derive_out), table.written(files.channels_removed_path)
    if derive or removed:
        table.output()
    # evaluate: the samples .npz the host wrote (store kind "evaldata")
    data = table.host_file(files.data_path, "data", _NOT_OURS) if files.data_path else None
    return table.mounts, request.moved(inside_model, table.code(request.code_paths), RequestFiles(
        onnx_path=onnx, converted_path=converted, calibration_path=calibration, derive_out=derive,
        channels_removed_path=removed, data_path=data))


_NOT_OURS = "not a regular file; delete it (lodevem writes its cache itself)"


class _MountTable:
    """The mounts of one container, built file by file: each host file read-only at its own
    place, and one writable scratch ``/output`` (``out_dir``) shared by every file the worker
    writes, mounted once, only when something is written there.

    Why every file the host wrote is checked to be a regular file: the cache folder is the
    user's, and a symlink planted there would mount whatever it points at into the sandbox."""

    def __init__(self, out_dir: Optional[str]) -> None:
        from docker.types import Mount

        self.mount_type = Mount
        self.out_dir = out_dir
        self.mounts: list[Any] = []

    def read_only(self, inside: str, host: str) -> str:
        self.mounts.append(self.mount_type(inside, host, type="bind", read_only=True))
        return inside

    def output(self) -> None:
        """The scratch /output, once (a derivation and an export may both write there)."""
        if self.out_dir is not None and not any(m["Target"] == "/output" for m in self.mounts):
            self.mounts.append(self.mount_type("/output", self.out_dir, type="bind", read_only=False))

    def written(self, host: Optional[str]) -> Optional[str]:
        """Where the worker writes a new file the host takes back (None without a scratch folder)."""
        return f"/output/{Path(host).name}" if host and self.out_dir is not None else None

    def host_file(self, host: str, folder: str, refusal: str) -> str:
        """A file the host wrote, read-only under ``/<folder>/``; refused unless a regular file."""
        path = Path(host)
        if path.is_symlink() or not path.is_file():
            raise SandboxError(f"{path}: {refusal}")
        # absolute: the engine refuses a relative bind source (a relative --output)
        return self.read_only(f"/{folder}/{path.name}", os.path.abspath(path))

    def onnx(self, host: str) -> Optional[str]:
        """The ONNX export: mounted read-only when it exists (a measurement), else written into
        the scratch /output (an export)."""
        onnx = Path(host)
        if onnx.exists():
            return self.host_file(host, "onnx", _NOT_OURS)
        if self.out_dir is None:
            return None
        self.output()
        return self.written(host)

    def converted(self, host: str) -> Optional[str]:
        """A conversion (a .tflite, or an ncnn .param with its .bin): each of its files read-only
        when it exists (a measurement), else written into the scratch /output (a conversion)."""
        converted = Path(host)
        if converted.exists():
            for file in artifact_files(str(converted)):
                self.host_file(file, "converted", _NOT_OURS)
            return f"/converted/{converted.name}"
        if self.out_dir is None:
            return None
        self.output()
        return self.written(host)

    def code(self, code_paths: Sequence[str]) -> list[str]:
        """--code: each package folder or script read-only under its own /code/<n>/, whose folder
        the worker puts on sys.path (so `import cocoa` finds /code/0/cocoa)."""
        return [self.read_only(f"/code/{index}/{Path(host).resolve().name}", str(Path(host).resolve()))
                for index, host in enumerate(code_paths)]
