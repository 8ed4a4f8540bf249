"""The sample inputs that calibrate a full-integer int8 conversion (its activation ranges).

Why a module of its own: both converters (litert-torch's PT2E quantizer, lodevem's ncnn int8 writer)
calibrate from the same inputs, so a tflite and an ncnn int8 file of one model are calibrated
alike. The inputs are the request's ``calibration_path`` (an ``.npz`` the host wrote: ``inputs``,
N x the model's input shape without its batch dimension, float32; read without pickles), else a
stated default: ``SYNTHETIC_CALIBRATION_INPUTS`` standard-normal inputs from ``CALIBRATION_SEED``
(the seed of the torch int8-static level, ``variants``). Synthetic scales are not a real data
set's, and the description every converted section carries says which it was.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from typing import Any

from ...wire.protocol import WorkerError, first_line
from ...wire.requests import ConvertRequest
from ..derive.variants import CALIBRATION_SEED

SYNTHETIC_CALIBRATION_INPUTS = 32
MAX_CALIBRATION_INPUTS = 1024
MAX_CALIBRATION_BYTES = 2 * 2**30


@dataclass
class Calibration:
    """Calibration batches, each the model's input shape (float32 numpy arrays), and one line
    saying where they came from (the converted section's ``calibration``)."""

    batches: list[Any]
    description: str
    synthetic: bool


def calibration_inputs(req: ConvertRequest, shape: list[int]) -> Calibration:
    """The request's calibration data cut into batches of ``shape``, or the synthetic default."""
    import numpy as np

    batch = shape[0] if shape else 1
    if not req.calibration_path:
        gen = np.random.default_rng(CALIBRATION_SEED)
        batches = [gen.standard_normal(shape, dtype=np.float32) for _ in range(SYNTHETIC_CALIBRATION_INPUTS)]
        return Calibration(batches, f"{SYNTHETIC_CALIBRATION_INPUTS} synthetic inputs (standard normal, seed "
                                    f"{CALIBRATION_SEED}): scales not from real data", True)
    path = req.calibration_path
    name = os.path.basename(path)
    try:
        if os.path.getsize(path) > MAX_CALIBRATION_BYTES:
            raise ValueError(f"over {MAX_CALIBRATION_BYTES // 2**30} GB")
        with np.load(path, allow_pickle=False) as data:
            if "inputs" not in data.files:
                raise ValueError(f"no array 'inputs' (it has: {', '.join(data.files[:5]) or 'none'})")
            inputs = data["inputs"]
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise WorkerError("bad_request", f"calibration data {name}: {first_line(exc)}; expected an .npz with "
                                         f"'inputs', float32, N x {shape[1:]}") from None
    if inputs.dtype != np.float32 or list(inputs.shape[1:]) != list(shape[1:]) or not 0 < len(inputs):
        raise WorkerError("bad_request", f"calibration data {name}: 'inputs' is {inputs.dtype} {list(inputs.shape)}; "
                                         f"expected float32 N x {shape[1:]} (the model's input without its batch)")
    if len(inputs) > MAX_CALIBRATION_INPUTS:
        inputs = inputs[:MAX_CALIBRATION_INPUTS]
    if not np.isfinite(inputs).all():
        raise WorkerError("bad_request", f"calibration data {name}: 'inputs' has NaN or infinite values")
    usable = len(inputs) // batch * batch
    if usable == 0:
        raise WorkerError("bad_request", f"calibration data {name}: {len(inputs)} inputs, fewer than one batch "
                                         f"of {batch}")
    batches = [np.ascontiguousarray(inputs[i:i + batch]) for i in range(0, usable, batch)]
    return Calibration(batches, f"{usable} inputs from {name}", False)
