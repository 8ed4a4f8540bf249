"""Conversions to the on-device runtimes' formats: PyTorch to ``.tflite`` (litert-torch) and
PyTorch (or ONNX) to ncnn (pnnx).

Why in the worker: converting loads the user's file, which is code, so it runs in the sandbox
like every other load, under the work memory limit, in the converter image (``lodevem-convert``:
torch + litert-torch + pnnx, ~2 GB, kept out of the measurement images). The host caches the
result by the source's sha256, the input shape and the converter's version, and measures it in
the runtime's own lean image (``runtimes``).

A model the converter cannot handle is an ``export_failed`` error with the converter's one-line
reason: the host turns it into an ``error`` row for that runtime and the run goes on.
Outputs are written under a temporary name in the target's folder and renamed into place, so a
killed conversion never leaves a file the cache would take for a finished one; an ncnn model's
``.bin`` is renamed before its ``.param`` (the file that marks the conversion done).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from importlib import metadata
from typing import Any

from .actions import _describe_input, _import_torch, _load_torch
from .memory import MemoryPhases
from .protocol import DEFAULT_INPUT_SHAPE, WorkerError, WorkerRequest, WorkerResult, artifact_files, first_line, progress
from .timing import timed_passes

PNNX_TIMEOUT_S = 1800  # the host's --timeout kills the whole container sooner when it is shorter


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _converted_section(req: WorkerRequest, fmt: str, converter: str, shape: list[int], t0: float) -> dict[str, Any]:
    files = artifact_files(req.converted_path or "")
    return {"format": fmt, "converter": converter, "converter_version": _version(converter), "input_shape": shape,
            "size_bytes": sum(os.path.getsize(p) for p in files), "seconds": round(time.perf_counter() - t0, 3)}


def _loaded_and_checked(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> tuple[Any, Any, Any]:
    """torch, the eval-mode module and its example input, after one forward pass: a shape the
    model rejects is the user's error (``model_failed``), not the converter's."""
    torch = _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    with torch.inference_mode():
        timed_passes(lambda: module(x), "check", 1, _describe_input(res.model))
    return torch, module, x


def _pt2e_int8(module: Any, x: Any, shape: list[int]) -> tuple[Any, Any]:
    """Post-training static int8 with litert-torch's PT2E quantizer (symmetric, per-channel
    weights), calibrated like lodevem's int8-static level (``variants``: the same seeded random
    inputs), so the .tflite is that level as LiteRT runs it: XNNPACK's QS8 kernels.
    Returns (quantized graph module, the quant_config for ``litert_torch.convert``)."""
    import torch
    from litert_torch.quantize import pt2e_quantizer, quant_config
    from torchao.quantization.pt2e import quantize_pt2e

    from .variants import CALIBRATION_BATCHES, CALIBRATION_SEED

    quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))
    graph = torch.export.export(module, (x,)).module()
    prepared = quantize_pt2e.prepare_pt2e(graph, quantizer)
    gen = torch.Generator().manual_seed(CALIBRATION_SEED)
    with torch.no_grad():
        for _ in range(CALIBRATION_BATCHES):
            prepared(torch.randn(shape, generator=gen, dtype=torch.float32))
    return quantize_pt2e.convert_pt2e(prepared, fold_quantize=False), quant_config.QuantConfig(pt2e_quantizer=quantizer)


def action_export_tflite(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
    """``litert_torch.convert(module, (x,)).export(converted_path)``: a float32 ``.tflite``;
    ``quantize="int8-static"``: the float model quantized to static int8 first (``_pt2e_int8``)."""
    out = req.converted_path or ""
    if kind == "onnx":
        raise WorkerError("export_failed", "no ONNX to TFLite converter: litert-torch converts PyTorch modules "
                                           "(measure an .onnx with runtime onnxruntime or ncnn)")
    _, module, x = _loaded_and_checked(req, res, mem, kind)
    t0 = time.perf_counter()
    progress(f"converting to TFLite with litert-torch {_version('litert-torch')}")
    try:
        import litert_torch
    except ImportError as exc:
        raise WorkerError("export_failed", f"litert-torch is not installed in this sandbox's python ({first_line(exc)}): "
                                           "the Docker backend's converter image has it (`lodevem build-image "
                                           "--runtime tflite`)") from None
    tmp = _temporary_beside(out)
    try:
        if req.quantize == "int8-static":
            progress("quantizing to static int8 (PT2E, litert-torch's quantizer)")
            quantized, config = _pt2e_int8(module, x, list(res.model["input_shape"]))
            litert_torch.convert(quantized, (x,), quant_config=config).export(tmp)
        else:
            litert_torch.convert(module, (x,)).export(tmp)
        if not os.path.isfile(tmp) or os.path.getsize(tmp) == 0:
            raise RuntimeError("litert-torch wrote no file")
        os.replace(tmp, out)
    except Exception as exc:
        raise WorkerError("export_failed", f"litert-torch cannot convert {req.model_path}: {first_line(exc)}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    res.converted = _converted_section(req, "tflite", "litert-torch", res.model["input_shape"], t0)
    res.converted["quantize"] = req.quantize
    res.timings_s["export"] = res.converted["seconds"]
    progress(f"wrote {out} ({res.converted['size_bytes']} bytes, {res.converted['seconds']:.1f} s)")


def action_export_ncnn(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
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
        if kind == "onnx":  # the converter image has no onnx package: pnnx reads the file, the host gives the shape
            shape = list(req.input_shape or DEFAULT_INPUT_SHAPE)
            res.model = {"format": "onnx", "input_shape": shape, "input_dtype": "float32"}
            source = os.path.join(work, "model.onnx")  # pnnx writes its simplified copy beside its input:
            shutil.copyfile(req.model_path, source)    # the input folder is read-only in the sandbox
        else:
            torch, module, x = _loaded_and_checked(req, res, mem, kind)
            shape = list(res.model["input_shape"])
            source = os.path.join(work, "traced.pt")  # inside work, like an .onnx: pnnx may write beside it
            if res.model["format"] == "torchscript":
                shutil.copyfile(req.model_path, source)
            else:
                progress("tracing to TorchScript for pnnx")
                try:
                    with torch.no_grad():
                        torch.jit.trace(module, x, check_trace=False).save(source)
                except Exception as exc:
                    raise WorkerError("export_failed", f"pnnx needs a traceable model; torch.jit.trace failed on "
                                                       f"{req.model_path}: {first_line(exc)}") from None
        t0 = time.perf_counter()
        progress(f"converting to ncnn with pnnx {_version('pnnx')}")
        _run_pnnx(pnnx.EXEC_PATH, source, shape, work, req.model_path)
        produced = [os.path.join(work, "model.ncnn.param"), os.path.join(work, "model.ncnn.bin")]
        if not all(os.path.isfile(p) and os.path.getsize(p) > 0 for p in produced):
            raise WorkerError("export_failed", f"pnnx wrote no ncnn model for {req.model_path}")
        os.replace(produced[1], weights)
        os.replace(produced[0], param)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res.converted = _converted_section(req, "ncnn", "pnnx", shape, t0)
    res.timings_s["export"] = res.converted["seconds"]
    progress(f"wrote {param} and {weights} ({res.converted['size_bytes']} bytes, {res.converted['seconds']:.1f} s)")


def _run_pnnx(exe: str, source: str, shape: list[int], work: str, model_path: str) -> None:
    """The pnnx binary with every output named inside ``work``; its last error line on failure,
    naming ``model_path`` (the user's file) rather than the work copy."""
    names = {"pnnxparam": "model.pnnx.param", "pnnxbin": "model.pnnx.bin", "pnnxpy": "model_pnnx.py",
             "pnnxonnx": "model.pnnx.onnx", "ncnnparam": "model.ncnn.param", "ncnnbin": "model.ncnn.bin",
             "ncnnpy": "model_ncnn.py"}
    cmd = [exe, source, f"inputshape=[{','.join(map(str, shape))}]", "device=cpu", "fp16=0"]
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


def _temporary_beside(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.tmp{os.getpid()}")
