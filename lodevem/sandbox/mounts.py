"""What a worker container sees: each host file the request names, bind-mounted read-only at a
fixed place, and the request rewritten to those places.

Why apart from the backend: the mount table is the sandbox's file boundary (what the user's code
can read, and the one folder it may write); kept in one short function, it can be read whole and
checked against the request's fields.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ..errors import SandboxError
from ..wire.protocol import artifact_files
from ..wire.requests import RequestFiles, WorkerRequest

PKG_IN_IMAGE = "/opt/lodevem/lodevem"


def container_mounts(request: WorkerRequest, out_dir: Optional[str],
                     host_pkg: Optional[Path]) -> tuple[list[Any], WorkerRequest]:
    """Bind mounts (Mount objects: host paths may contain ':' or ',') and the rewritten request."""
    from docker.types import Mount

    files = request.files()
    model = Path(request.model_path).resolve()
    inside_model = f"/input/{model.name}"
    mounts = [Mount(inside_model, str(model), type="bind", read_only=True)]
    if host_pkg is not None:
        mounts.append(Mount(PKG_IN_IMAGE, str(host_pkg), type="bind", read_only=True))
    onnx_inside = None
    if files.onnx_path:
        onnx = Path(files.onnx_path)
        if onnx.exists():
            if onnx.is_symlink() or not onnx.is_file():  # lodevem writes regular files only
                raise SandboxError(f"{onnx}: not a regular file; delete it (lodevem writes its cache itself)")
            onnx_inside = f"/onnx/{onnx.name}"
            # absolute: the engine refuses a relative bind source (a relative --output)
            mounts.append(Mount(onnx_inside, os.path.abspath(onnx), type="bind", read_only=True))
        elif out_dir is not None:
            onnx_inside = f"/output/{onnx.name}"
            mounts.append(Mount("/output", out_dir, type="bind", read_only=False))
    # converted_path (a .tflite, or an ncnn .param with its .bin): mounted read-only when it
    # exists (a measurement), else written into the scratch /output (a conversion).
    converted_inside = None
    if files.converted_path:
        converted = Path(files.converted_path)
        converted_files = [Path(f) for f in artifact_files(str(converted))]
        if converted.exists():
            for file in converted_files:
                if file.is_symlink() or not file.is_file():
                    raise SandboxError(f"{file}: not a regular file; delete it (lodevem writes its cache itself)")
                mounts.append(Mount(f"/converted/{file.name}", os.path.abspath(file), type="bind",
                                    read_only=True))
            converted_inside = f"/converted/{converted.name}"
        elif out_dir is not None:
            converted_inside = f"/output/{converted.name}"
            if not any(m["Target"] == "/output" for m in mounts):
                mounts.append(Mount("/output", out_dir, type="bind", read_only=False))
    # calibration_path (a conversion's int8 calibration inputs, an .npz the host wrote): read-only.
    calibration_inside = None
    if files.calibration_path:
        calibration = Path(files.calibration_path)
        if calibration.is_symlink() or not calibration.is_file():
            raise SandboxError(f"{calibration}: calibration data is not a regular file")
        calibration_inside = f"/calibration/{calibration.name}"
        mounts.append(Mount(calibration_inside, os.path.abspath(calibration), type="bind", read_only=True))
    # derive_out (action derive) and the channels-removed graph (export-onnx): written into the
    # same scratch /output as a new onnx_path.
    derive_inside = removed_inside = None
    if files.derive_out and out_dir is not None:
        derive_inside = f"/output/{Path(files.derive_out).name}"
    if files.channels_removed_path and out_dir is not None:
        removed_inside = f"/output/{Path(files.channels_removed_path).name}"
    if (derive_inside or removed_inside) and not any(m["Target"] == "/output" for m in mounts):
        mounts.append(Mount("/output", out_dir, type="bind", read_only=False))
    # evaluate: the samples .npz the host wrote (store kind "evaldata"), read-only
    data_inside = None
    if files.data_path:
        data = Path(files.data_path)
        if data.is_symlink() or not data.is_file():
            raise SandboxError(f"{data}: not a regular file; delete it (lodevem writes its cache itself)")
        data_inside = f"/data/{data.name}"
        mounts.append(Mount(data_inside, os.path.abspath(data), type="bind", read_only=True))
    # --code: each package folder or script read-only under its own /code/<n>/, whose folder the
    # worker puts on sys.path (so `import cocoa` finds /code/0/cocoa).
    code_inside = []
    for index, host_code in enumerate(request.code_paths):
        code = Path(host_code).resolve()
        inside = f"/code/{index}/{code.name}"
        mounts.append(Mount(inside, str(code), type="bind", read_only=True))
        code_inside.append(inside)
    return mounts, request.moved(inside_model, code_inside, RequestFiles(
        onnx_path=onnx_inside, converted_path=converted_inside, calibration_path=calibration_inside,
        derive_out=derive_inside, channels_removed_path=removed_inside, data_path=data_inside))
