"""PyTorch to ``.tflite`` with litert-torch, in the converter image: LiteRT's converter half.

A compression level is made here by the runtime's own toolchain from the float model: fp16 and
int8 (dynamic range) with ai-edge-quantizer's recipes through litert-torch's ``quant_config``
(``quant_recipes.full_fp16_recipe`` / ``full_dynamic_recipe``), int8-static with litert-torch's
PT2E quantizer (``_pt2e_int8``), calibrated. What the conversions share (the reply's section, the
load and check, the temporary name) is ``worker.export.convert``'s.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from ...wire.protocol import DEFAULT_INPUT_SHAPE, WorkerError, first_line, progress
from ...wire.replies import ConvertReply
from ...wire.requests import ConvertRequest
from ...worker.export.artifact_info import ArtifactUnreadable, describe, tflite_census
from ...worker.export.calibration import Calibration, calibration_inputs
from ...worker.export.convert import _converted_section, _loaded_and_checked, _temporary_beside, _version
from ...worker.load.programs import exported_module, pt2e_scheme, pt2e_unfolded, with_layers
from ...worker.memory import MemoryPhases

NO_ONNX_TO_TFLITE = ("an .onnx cannot be made into a .tflite here: litert-torch converts PyTorch programs only, and "
                     "ONNX-to-TFLite converters go through TensorFlow, which lodevem does not ship (measure an "
                     ".onnx under onnxruntime or ncnn)")



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



def action_export_tflite(req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str) -> None:
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
    progress(f"wrote {out} ({res.converted.size_bytes} bytes, {res.converted.precision}, "
             f"{res.converted.seconds:.1f} s)")
