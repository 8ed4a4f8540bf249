"""Conversions to the on-device runtimes' formats: PyTorch to ``.tflite`` (litert-torch) and
PyTorch (or ONNX) to ncnn (pnnx).

Why in the worker: converting loads the user's file, which is code, so it runs in the sandbox
like every other load, under the work memory limit, in the converter image (``lodevem-convert``:
torch + litert-torch + pnnx, ~2 GB, kept out of the measurement images). The host caches the
result by the source's sha256, the input shape and the converter's version, and measures it in
the runtime's own lean image (``runtimes``).

A model the converter cannot handle is an ``export_failed`` error with the converter's one-line
reason: the host turns it into an ``error`` row for that runtime and the run goes on.

A compression level (``req.quantize``) is made here, by the runtime's own toolchain from the
float model, not by converting a PyTorch-quantized module (which the converters cannot read):

* tflite: fp16 and int8 (dynamic range) with ai-edge-quantizer's recipes through litert-torch's
  ``quant_config`` (``quant_recipes.full_fp16_recipe`` / ``full_dynamic_recipe``), int8-static
  with litert-torch's PT2E quantizer (``_pt2e_int8``), calibrated;
* ncnn: fp16 with pnnx's ``fp16=1`` (fp16 weight storage); int8 and int8-static with lodevem's
  own ncnn int8 writer (``ncnn_int8``: per-channel int8 weights, input scales by max calibration
  of the float model run with the ``ncnn`` wheel). ncnn has no dynamic-range int8, so its int8
  is the full-integer model too, and its scheme says so.

The reply's ``converted`` section says what the file IS, read back from its bytes
(``artifact_info``): its precision, a one-line scheme, and what calibrated it.
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
from typing import Any, Optional

from .actions import _import_torch, _load_torch
from .artifact_info import ArtifactUnreadable, describe, ncnn_census, tflite_census
from .calibration import Calibration, calibration_inputs
from .file_sections import ModelSection
from .memory import MemoryPhases
from ..runtimes.ncnn.int8 import NCNN_INT8_HOW, NCNN_NO_DYNAMIC, ncnn_int8
from .precision import INT8_LEVELS, LEVEL_FILE_PRECISION
from .programs import exported_module, pt2e_scheme, pt2e_unfolded, with_layers
from .protocol import (
    DEFAULT_INPUT_SHAPE,
    WorkerError,
    WorkerResult,
    artifact_files,
    first_line,
    progress,
)
from .requests import ConvertRequest, WorkerRequest
from .sections import ConvertedSection
from .timing import timed_passes

PNNX_TIMEOUT_S = 1800  # the host's --timeout kills the whole container sooner when it is shorter
NO_ONNX_TO_TFLITE = ("an .onnx cannot be made into a .tflite here: litert-torch converts PyTorch programs only, and "
                     "ONNX-to-TFLite converters go through TensorFlow, which lodevem does not ship (measure an "
                     ".onnx under onnxruntime or ncnn)")


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _converted_section(req: ConvertRequest, fmt: str, converter: str, shape: list[int], t0: float, *,
                       precision: str, scheme: str, calibration: Optional[Calibration], census: dict[str, Any],
                       own: bool = False) -> ConvertedSection:
    """What was written, with the file facts read back from its bytes; says so when the file is not
    the precision the level should give (a model with no op the quantizer handles stays float).
    ``own``: a user's quantized file converted as it is, whose precision is its own."""
    expected = precision if own else LEVEL_FILE_PRECISION.get(req.quantize or "", "fp32")
    if fmt == "ncnn" and req.quantize == "int8":  # ncnn's int8 is full-integer (ncnn_int8)
        expected = "int8-static"
    if precision != expected:
        scheme += f"; the file is {precision}, not the {expected} level {req.quantize or 'fp32'} should give"
    files = artifact_files(req.converted_path or "")
    return ConvertedSection(format=fmt, converter=converter, converter_version=_version(converter),
                            seconds=round(time.perf_counter() - t0, 3),
                            size_bytes=sum(os.path.getsize(p) for p in files), input_shape=tuple(shape),
                            quantize=req.quantize, precision=precision, expected_precision=expected, scheme=scheme,
                            calibration=calibration.description if calibration else None, census=census)


def _loaded_and_checked(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> tuple[Any, Any, Any]:
    """torch, the eval-mode module and its example input, after one forward pass: a shape the
    model rejects is the user's error (``model_failed``), not the converter's."""
    torch = _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    with torch.inference_mode():
        timed_passes(lambda: module(x), "check", 1, res.model.described_input() if res.model else "")
    return torch, module, x


def _pt2e_int8(module: Any, x: Any, calibration: Calibration) -> tuple[Any, Any]:
    """Post-training static int8 with litert-torch's PT2E quantizer (symmetric, per-channel
    weights, per-tensor activations), calibrated on ``calibration``'s batches, so the .tflite is
    full-integer as LiteRT runs it: XNNPACK's QS8 kernels.
    Returns (quantized graph module, the quant_config for ``litert_torch.convert``)."""
    import torch
    from litert_torch.quantize import pt2e_quantizer, quant_config
    from torchao.quantization.pt2e import quantize_pt2e

    quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))
    graph = torch.export.export(module, (x,)).module()
    prepared = quantize_pt2e.prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for batch in calibration.batches:
            prepared(torch.from_numpy(batch))
    return quantize_pt2e.convert_pt2e(prepared, fold_quantize=False), quant_config.QuantConfig(pt2e_quantizer=quantizer)


def _tflite_quant_config(level: Optional[str], module: Any, x: Any, calibration: Optional[Calibration]
                         ) -> tuple[Any, Any, str]:
    """(module to convert, quant_config or None, the scheme's method words) for a level; a user's
    own PT2E-quantized program (no level asked) keeps its own scales: litert-torch is only told
    it is PT2E-quantized, statically or dynamically."""
    scheme = pt2e_scheme(module)
    if level is None and scheme is not None:
        from litert_torch.quantize import pt2e_quantizer, quant_config

        quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
            pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True, is_dynamic=scheme == "dynamic"))
        progress(f"the file is PT2E-quantized ({scheme}): converting it with its own scales")
        return module, quant_config.QuantConfig(pt2e_quantizer=quantizer), f"the file's own PT2E {scheme} int8 scales"
    if level == "int8-static":
        assert calibration is not None
        progress(f"quantizing to full-integer int8 (PT2E, litert-torch's quantizer, {calibration.description})")
        quantized, config = _pt2e_int8(module, x, calibration)
        return quantized, config, f"PT2E, litert-torch's quantizer, calibrated on {calibration.description}"
    if level is not None:  # fp16 or int8 (dynamic range)
        from litert_torch.generative.quantize import quant_recipes

        recipe = quant_recipes.full_fp16_recipe() if level == "fp16" else quant_recipes.full_dynamic_recipe()
        how = f"ai-edge-quantizer {_version('ai-edge-quantizer')} via litert-torch"
        progress(f"quantizing to {'float16 weights' if level == 'fp16' else 'dynamic-range int8'} ({how})")
        return module, recipe, how
    return module, None, "litert-torch"


def _tflite_scheme(level: Optional[str], census: Any, how: str, own: bool = False) -> str:
    weights = census.to_dict()["weights_by_dtype"]
    counted = f"weight tensors: {describe(weights)}"
    if own:
        return f"{census.precision()}, as the file was quantized ({how} kept by litert-torch); {counted}"
    if level == "int8-static":
        return (f"int8 per-channel symmetric weights, int8 activations ({how}); {counted}, "
                f"{census.per_channel} per-channel")
    if level == "int8":
        return (f"int8 per-channel symmetric weights, float32 activations quantized on the fly (dynamic range; "
                f"{how}); {counted}")
    if level == "fp16":
        return f"float16 weights, dequantized to float32 when loaded, float32 activations ({how}); {counted}"
    return f"float32 weights and activations; {counted}"


def _program(module: Any, x: Any, path: str) -> Any:
    """What litert-torch converts: a TorchScript file's exported program (TS2EP), its layers rebuilt
    as for a pickled module (``programs.with_layers``: the same graph, so the same PT2E
    quantization); a user's PT2E-quantized program as it is. A TorchScript of torch.ao's int8
    modules is one line saying why it cannot be converted."""
    import torch

    program = exported_module(module, x, path)
    if pt2e_scheme(program) is not None:
        return pt2e_unfolded(program)
    packed = [name for name, value in vars(program).items() if isinstance(value, torch.ScriptObject)]
    packed += [name for sub_name, sub in program.named_modules() for name, value in vars(sub).items()
               if isinstance(value, torch.ScriptObject)]
    if packed:
        raise WorkerError("export_failed", f"litert-torch cannot convert {path}: it is a TorchScript of torch.ao's "
                                           f"int8 layers (FX or eager quantization), whose packed weights "
                                           f"({len(packed)}) stay script objects in its exported program; for an int8 "
                                           f".tflite quantize with PT2E (prepare_pt2e, convert_pt2e) and save the "
                                           f"exported program (torch.export.save)")
    return with_layers(program, x)


def action_export_tflite(req: ConvertRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
    """``litert_torch.convert(module, (x,)).export(converted_path)``: a float32 ``.tflite``;
    ``quantize="int8-static"``: the float model quantized to static int8 first (``_pt2e_int8``)."""
    out = req.converted_path or ""
    if kind == "onnx":
        raise WorkerError("export_failed", NO_ONNX_TO_TFLITE)
    _, module, x = _loaded_and_checked(req, res, mem, kind)
    module = _program(module, x, req.model_path)
    t0 = time.perf_counter()
    progress(f"converting to TFLite with litert-torch {_version('litert-torch')}")
    try:
        import litert_torch
    except ImportError as exc:
        raise WorkerError("export_failed", "litert-torch is not installed in this sandbox's python "
                                           f"({first_line(exc)}): "
                                           "the Docker backend's converter image has it (`lodevem build-image "
                                           "--runtime tflite`)") from None
    shape = res.model.shape if res.model else list(DEFAULT_INPUT_SHAPE)
    calibration = calibration_inputs(req, shape) if req.quantize == "int8-static" else None
    tmp = _temporary_beside(out)
    try:
        try:
            source, config, how = _tflite_quant_config(req.quantize, module, x, calibration)
            converted = litert_torch.convert(source, (x,), quant_config=config) if config else \
                litert_torch.convert(source, (x,))
            converted.export(tmp)
            if not os.path.isfile(tmp) or os.path.getsize(tmp) == 0:
                raise RuntimeError("litert-torch wrote no file")
        except Exception as exc:
            level = f" to {req.quantize}" if req.quantize else ""
            raise WorkerError("export_failed",
                              f"litert-torch cannot convert {req.model_path}{level}: {first_line(exc)}") from None
        try:
            census = tflite_census(tmp)
        except ArtifactUnreadable as exc:
            raise WorkerError("export_failed", f"litert-torch wrote an unreadable .tflite: {exc}") from None
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    own = req.quantize is None and pt2e_scheme(source) is not None
    res.converted = _converted_section(req, "tflite", "litert-torch", shape, t0, precision=census.precision(),
                                       scheme=_tflite_scheme(req.quantize, census, how, own),
                                       calibration=calibration, census=census.to_dict(), own=own)
    res.timings_s["export"] = res.converted.seconds
    progress(f"wrote {out} ({res.converted.size_bytes} bytes, {res.converted.precision}, "
             f"{res.converted.seconds:.1f} s)")


def action_export_ncnn(req: ConvertRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
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
                                       census=census.to_dict())
    res.timings_s["export"] = res.converted.seconds
    progress(f"wrote {param} and {weights} ({res.converted.size_bytes} bytes, {res.converted.precision}, "
             f"{res.converted.seconds:.1f} s)")


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


def _temporary_beside(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.tmp{os.getpid()}")
