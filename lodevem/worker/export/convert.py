"""What the conversions to the on-device runtimes' formats share: the load and check of the
source model, the reply's ``converted`` section, the temporary name a file is written under.
Each runtime's converter is in its folder (``runtimes/<name>/convert.py``), dispatched by the
registry's ``CONVERT_ACTIONS`` (``worker.guest``).

Why in the worker: converting loads the user's file, which is code, so it runs in the sandbox
like every other load, under the work memory limit, in the converter image (``lodevem-convert``:
torch + litert-torch + pnnx, ~2 GB, kept out of the measurement images). The host caches the
result by the source's sha256, the input shape and the converter's version, and measures it in
the runtime's own lean image.

A model the converter cannot handle is an ``export_failed`` error with the converter's one-line
reason: the host turns it into an ``error`` row for that runtime and the run goes on.

A compression level (``req.quantize``) is made by the runtime's own toolchain from the float
model, not by converting a PyTorch-quantized module (which the converters cannot read).

The reply's ``converted`` section says what the file IS, read back from its bytes
(``artifact_info``): its precision, a one-line scheme, and what calibrated it.
Outputs are written under a temporary name in the target's folder and renamed into place, so a
killed conversion never leaves a file the cache would take for a finished one.
"""

from __future__ import annotations

import os
import time
from importlib import metadata
from typing import Any, Optional

from ...wire.precision import LEVEL_FILE_PRECISION
from ...wire.protocol import artifact_files
from ...wire.replies import WorkerReply
from ...wire.requests import ConvertRequest, WorkerRequest
from ...wire.sections import ConvertedSection
from ..actions import _import_torch, _load_torch
from ..memory import MemoryPhases
from ..timing import timed_passes
from .calibration import Calibration


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _converted_section(req: ConvertRequest, fmt: str, converter: str, shape: list[int], t0: float, *,
                       precision: str, scheme: str, calibration: Optional[Calibration], census: dict[str, Any],
                       own: bool = False, int8_is_full_integer: bool = False) -> ConvertedSection:
    """What was written, with the file facts read back from its bytes; says so when the file is not
    the precision the level should give (a model with no op the quantizer handles stays float).
    ``own``: a user's quantized file converted as it is, whose precision is its own.
    ``int8_is_full_integer``: the runtime has no dynamic-range int8, so its int8 level is int8-static."""
    expected = precision if own else LEVEL_FILE_PRECISION.get(req.quantize or "", "fp32")
    if int8_is_full_integer and req.quantize == "int8":
        expected = "int8-static"
    if precision != expected:
        scheme += f"; the file is {precision}, not the {expected} level {req.quantize or 'fp32'} should give"
    files = artifact_files(req.converted_path or "")
    return ConvertedSection(format=fmt, converter=converter, converter_version=_version(converter),
                            seconds=round(time.perf_counter() - t0, 3),
                            size_bytes=sum(os.path.getsize(p) for p in files), input_shape=tuple(shape),
                            quantize=req.quantize, precision=precision, expected_precision=expected, scheme=scheme,
                            calibration=calibration.description if calibration else None, census=census)


def _loaded_and_checked(req: WorkerRequest, res: WorkerReply, mem: MemoryPhases, kind: str) -> tuple[Any, Any, Any]:
    """torch, the eval-mode module and its example input, after one forward pass: a shape the
    model rejects is the user's error (``model_failed``), not the converter's."""
    torch = _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    with torch.inference_mode():
        timed_passes(lambda: module(x), "check", 1, res.model.described_input() if res.model else "")
    return torch, module, x


def _temporary_beside(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.tmp{os.getpid()}")
