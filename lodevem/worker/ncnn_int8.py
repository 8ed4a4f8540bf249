"""ncnn's own int8 path: ``ncnn2table`` (a calibration table from sample inputs) then
``ncnn2int8`` (the table applied to a float ncnn model).

Why these tools: they are what ncnn documents for int8 models, and what an app developer
runs; the ``ncnn`` wheel does not ship them, so the converter image compiles them from ncnn's
source (``Dockerfile.convert`` puts them in ``TOOLS_DIR``). ncnn's int8 is
full-integer: each int8 Convolution / ConvolutionDepthWise / InnerProduct quantizes its input
with the table's static scale (``int8_scale_term``); ncnn has no dynamic-range mode (a table
without activation scales leaves the convolutions float), so lodevem's ``int8`` level under
ncnn is this same full-integer model, and its scheme starts with ``NCNN_NO_DYNAMIC``.
``ncnn2int8`` stores the weights of layers it leaves float as fp16.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from .calibration import Calibration
from .protocol import WorkerError, first_line, progress

NCNN_NO_DYNAMIC = "ncnn has no dynamic-range int8: full-integer int8 (ncnn2table + ncnn2int8)"
TOOLS_DIR = "/opt/ncnn-tools"  # where Dockerfile.convert installs them
TOOL_TIMEOUT_S = 1800  # the host's --timeout kills the whole container sooner when it is shorter
_ERROR_WORDS = ("fail", "error", "expect", "mismatch", "illegal", "unexpected", "not support", "need")


def tool(name: str) -> str:
    """The path of an ncnn tool in this sandbox, or ``export_failed`` naming how to get it."""
    path = os.path.join(TOOLS_DIR, name)
    if not os.access(path, os.X_OK):
        raise WorkerError("export_failed", f"{name} is not in this sandbox (no {path}): ncnn int8 needs the "
                                           f"converter image with ncnn's tools (`lodevem build-image --runtime ncnn "
                                           f"--force` rebuilds an older one)")
    return path


def ncnn_int8(produced: list[str], work: str, calibration: Calibration, shape: list[int],
              model_path: str) -> list[str]:
    """Quantize the float ncnn model ``produced`` ([.param, .bin] in ``work``) to int8 with
    ``calibration``'s inputs; returns the int8 model's [.param, .bin] (in ``work`` too)."""
    import numpy as np

    table_tool, int8_tool = tool("ncnn2table"), tool("ncnn2int8")
    samples = os.path.join(work, "calibration")
    os.makedirs(samples, exist_ok=True)
    listing = []
    for b, batch in enumerate(calibration.batches):
        for i, sample in enumerate(batch):  # ncnn's input blob is one sample: c x h x w
            path = os.path.join(samples, f"{b:05d}-{i:03d}.npy")
            np.save(path, np.ascontiguousarray(sample, dtype=np.float32))
            listing.append(path)
    list_file = os.path.join(work, "calibration.txt")
    with open(list_file, "w") as fh:
        fh.write("\n".join(listing) + "\n")
    table = os.path.join(work, "model.table")
    dims = list(reversed(shape[1:]))  # ncnn2table's shape= is [w,h,c]
    progress(f"calibrating ncnn int8 scales (ncnn2table, KL, {calibration.description})")
    _run([table_tool, *produced, list_file, table, f"shape=[{','.join(map(str, dims))}]", "type=1", "thread=1",
          "method=kl"], "ncnn2table", model_path, work)
    if not os.path.isfile(table) or os.path.getsize(table) == 0:
        raise WorkerError("export_failed", f"ncnn2table wrote no calibration table for {model_path}")
    out = [os.path.join(work, "model.int8.param"), os.path.join(work, "model.int8.bin")]
    progress("writing the int8 ncnn model (ncnn2int8)")
    _run([int8_tool, *produced, *out, table], "ncnn2int8", model_path, work)
    if not all(os.path.isfile(p) and os.path.getsize(p) > 0 for p in out):
        raise WorkerError("export_failed", f"ncnn2int8 wrote no int8 model for {model_path}")
    return out


def _run(cmd: list[str], name: str, model_path: str, work: str) -> Any:
    """Run one tool; on failure its most telling output line, naming the user's file."""
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, errors="replace", timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise WorkerError("export_failed", f"{name} did not finish within {TOOL_TIMEOUT_S} s on {model_path}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        telling = [ln for ln in lines if any(w in ln.lower() for w in _ERROR_WORDS)]
        reason = (telling or lines or [f"exit code {proc.returncode}"])[-1]
        if proc.returncode < 0:
            reason = f"killed by signal {-proc.returncode} ({reason})"
        raise WorkerError("export_failed", f"{name} cannot quantize {model_path}: {first_line(reason)}")
    return proc
