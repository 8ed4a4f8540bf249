"""PyTorch (or ONNX) to ncnn with pnnx, in the converter image: ncnn's converter half.

fp16 is pnnx's ``fp16=1`` (fp16 weight storage); int8 and int8-static are lodevem's own ncnn int8
writer (``.int8``: per-channel int8 weights, input scales by max calibration of the float model run
with the ``ncnn`` wheel). ncnn has no dynamic-range int8, so its int8 is the full-integer model
too, and its scheme says so. An ncnn model's ``.bin`` is renamed into place before its ``.param``
(the file that marks the conversion done).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Optional

from ...wire.file_sections import ModelSection
from ...wire.precision import INT8_LEVELS
from ...wire.protocol import DEFAULT_INPUT_SHAPE, WorkerError, artifact_files, first_line, progress
from ...wire.replies import ConvertReply
from ...wire.requests import ConvertRequest
from ...worker.export.artifact_info import ArtifactUnreadable, describe, ncnn_census
from ...worker.export.calibration import calibration_inputs
from ...worker.export.convert import _converted_section, _loaded_and_checked, _version
from ...worker.load.programs import pt2e_scheme, with_layers
from ...worker.memory import MemoryPhases
from .int8 import NCNN_INT8_HOW, NCNN_NO_DYNAMIC, ncnn_int8

PNNX_TIMEOUT_S = 1800  # the host's --timeout kills the whole container sooner when it is shorter



def action_export_ncnn(req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str) -> None:
    """pnnx's converter binary on a TorchScript file (a pickled module or an ExportedProgram is
    traced first; a TorchScript file or an ``.onnx`` is given to pnnx as it is, copied into the
    work folder because pnnx writes beside its input), fp32 weights. The host passes the input
    shape for an ``.onnx`` (the ONNX export found it), so this image needs no onnx package."""
    param = req.converted_path or ""
    weights = artifact_files(param)[1]
    try:
        import pnnx  # imports torch too: the converter image has it
    except ImportError as exc:
        raise WorkerError("export_failed", f"pnnx is not installed in this sandbox's python ({first_line(exc)}): "
                                           "the Docker backend's converter image has it (`lodevem build-image "
                                           "--runtime ncnn`)") from None
    work = tempfile.mkdtemp(prefix=".pnnx-", dir=os.path.dirname(os.path.abspath(param)))
    try:
        source, shape = _pnnx_source(req, res, mem, kind, work)
        # read before converting: bad calibration data is the request's error, found at once
        calibration = calibration_inputs(req, shape) if req.quantize in INT8_LEVELS else None
        t0 = time.perf_counter()
        fp16 = req.quantize == "fp16"
        progress(f"converting to ncnn with pnnx {_version('pnnx')}{' (fp16 weight storage)' if fp16 else ''}")
        _run_pnnx(pnnx.EXEC_PATH, source, shape, work, req.model_path, fp16=fp16)
        produced = [os.path.join(work, "model.ncnn.param"), os.path.join(work, "model.ncnn.bin")]
        if not all(os.path.isfile(p) and os.path.getsize(p) > 0 for p in produced):
            raise WorkerError("export_failed", f"pnnx wrote no ncnn model for {req.model_path}")
        how = "pnnx, fp16=1" if fp16 else "pnnx"
        if calibration is not None:
            produced = ncnn_int8(produced, work, calibration, shape, req.model_path)
            how = f"{NCNN_INT8_HOW}, calibrated on {calibration.description}"
        try:
            census = ncnn_census(*produced)
        except ArtifactUnreadable as exc:
            raise WorkerError("export_failed",
                              f"the ncnn model made from {req.model_path} is unreadable: {exc}") from None
        os.replace(produced[1], weights)
        os.replace(produced[0], param)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res.converted = _converted_section(req, "ncnn", "pnnx", shape, t0, precision=census.precision(),
                                       scheme=_ncnn_scheme(req.quantize, census, how), calibration=calibration,
                                       census=census.to_dict(), int8_is_full_integer=True)
    progress(f"wrote {param} and {weights} ({res.converted.size_bytes} bytes, {res.converted.precision}, "
             f"{res.converted.seconds:.1f} s)")



def _pnnx_source(req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str,
                 work: str) -> tuple[str, list[int]]:
    """(the file pnnx converts, inside ``work``, and the input shape): an ``.onnx`` or a TorchScript
    file copied as it is (pnnx writes beside its input, and the input folder is read-only in the
    sandbox), any other PyTorch file loaded, checked and traced to TorchScript."""
    if kind == "onnx":  # the converter image has no onnx package: pnnx reads the file, the host gives the shape
        shape = list(req.input_shape or DEFAULT_INPUT_SHAPE)
        res.model = ModelSection(format="onnx", input_shape=tuple(shape), input_dtype="float32")
        source = os.path.join(work, "model.onnx")  # pnnx writes its simplified copy beside its input:
        shutil.copyfile(req.model_path, source)    # the input folder is read-only in the sandbox
    else:
        torch, module, x = _loaded_and_checked(req, res, mem, kind)
        model = res.model
        assert model is not None  # the load fills it
        shape = model.shape
        source = os.path.join(work, "traced.pt")  # inside work, like an .onnx: pnnx may write beside it
        if model.format == "torchscript":
            shutil.copyfile(req.model_path, source)
        else:
            if pt2e_scheme(module) is not None:
                raise WorkerError("export_failed", f"pnnx cannot convert {req.model_path}: it is a PT2E-quantized "
                                                   "program, whose quantize/dequantize ops pnnx has no form for "
                                                   "(give the float program: lodevem's ncnn int8 writer quantizes "
                                                   "it, --levels int8-static)")
            if model.format == "exported_program":  # its layers, as a pickled module's (programs)
                module = with_layers(module, x)
            progress("tracing to TorchScript for pnnx")
            try:
                with torch.no_grad():
                    torch.jit.trace(module, x, check_trace=False).save(source)
            except Exception as exc:
                raise WorkerError("export_failed", f"pnnx needs a traceable model; torch.jit.trace failed on "
                                                   f"{req.model_path}: {first_line(exc)}") from None
    return source, shape


def _ncnn_scheme(level: Optional[str], census: Any, how: str) -> str:
    stored = f"weight blobs: {describe(census.storage_blobs)}"
    if not census.complete:
        stored += f" (walk stopped at a {census.stopped_at} layer)" if census.stopped_at else " (walk incomplete)"
    if level in INT8_LEVELS:
        prefix = f"{NCNN_NO_DYNAMIC}: " if level == "int8" else ""
        rest = ", the others' weights fp16" if census.int8_layers < census.weighted_layers else ""
        return (f"{prefix}int8 per-channel weights, int8 activations with static scales in "
                f"{census.int8_layers} of {census.weighted_layers} conv/fc layers{rest} ({how}); {stored}")
    if level == "fp16":
        return f"float16 weight storage; ncnn computes in fp16 where the CPU has it, else fp32 ({how}); {stored}"
    return f"float32 weights ({how}); {stored}"



def _run_pnnx(exe: str, source: str, shape: list[int], work: str, model_path: str, fp16: bool = False) -> None:
    """The pnnx binary with every output named inside ``work``; its last error line on failure,
    naming ``model_path`` (the user's file) rather than the work copy. ``fp16``: pnnx's fp16=1,
    the ncnn weights stored as float16."""
    names = {"pnnxparam": "model.pnnx.param", "pnnxbin": "model.pnnx.bin", "pnnxpy": "model_pnnx.py",
             "pnnxonnx": "model.pnnx.onnx", "ncnnparam": "model.ncnn.param", "ncnnbin": "model.ncnn.bin",
             "ncnnpy": "model_ncnn.py"}
    cmd = [exe, source, f"inputshape=[{','.join(map(str, shape))}]", "device=cpu", f"fp16={1 if fp16 else 0}"]
    cmd += [f"{key}={os.path.join(work, name)}" for key, name in names.items()]
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, errors="replace", timeout=PNNX_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise WorkerError("export_failed", f"pnnx did not finish within {PNNX_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower() or "fail" in ln.lower() or "not support" in ln.lower()]
        reason = (errors or lines or [f"exit code {proc.returncode}"])[-1]
        raise WorkerError("export_failed", f"pnnx cannot convert {model_path}: {first_line(reason)}")
