"""The actions on a PyTorch or ONNX file: inspect, export-onnx, derive, the loading and timing every
runtime's measurement shares, and ``run``, which dispatches a request to one of them (a measurement
to its runtime's container half, ``worker.guest``)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from typing import Any, Callable, Optional

from ...wire.file_sections import ModelSection, SparsitySection, quantization_text
from ...wire.protocol import DEFAULT_INPUT_SHAPE, WorkerError, progress
from ...wire.registry import COMPARISON_RUNTIME
from ...wire.replies import DeriveReply, ExportOnnxReply, MeasureReply, WorkerReply, as_reply
from ...wire.requests import DeriveRequest, ExportOnnxRequest, InspectRequest, MeasureRequest, WorkerRequest
from ...wire.sections import RuntimeSection
from ..derive.sparsity import remove_zero_channels, sparsity_report
from ..derive.variants import _derive, write_variant
from ..export.onnx_export import (
    _atomic_onnx_save,
    _metadata,
    export_module,
    load_onnx,
    nn_meter_friendly,
    onnx_model_info,
    onnx_section,
)
from ..export.quantized import (
    finish_twin,
    float_twin_module,
    read_precision,
    script_float_twin,
    torch_quantization,
    torch_side_precision,
)
from ..guest import Late, guest
from ..load.formats import (
    _format_of,
    file_sha256,
    load_options,
    load_torch_model,
    make_torch_input,
    sniff_format,
    torch_model_info,
)
from ..load.programs import pt2e_float_twin, pt2e_scheme
from ..load.shapes import SOURCE_DEFAULT, SOURCE_RECORDED, SOURCE_REQUEST, DefaultShapeCheck, recorded_input_shape
from ..memory import MemoryPhases, _released
from ..timing import first_output_shape, latency_stats, timed_passes


def _import_torch(req: WorkerRequest, res: WorkerReply, mem: MemoryPhases) -> Any:
    import torch

    torch.set_num_threads(req.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only settable once, before any parallel work
        pass
    mem.mark("after_import")
    res.runtime = RuntimeSection.here(COMPARISON_RUNTIME, torch.__version__)
    progress(f"imported torch {torch.__version__}")
    return torch


def _file_info(path: str, fmt: Optional[str]) -> ModelSection:
    """The file as bytes: what every action reports before it reads the model."""
    return ModelSection(format=fmt, sha256=file_sha256(path), file_bytes=os.path.getsize(path))


def _load_torch(req: WorkerRequest, res: WorkerReply, mem: MemoryPhases, kind: str) -> tuple[Any, Any]:
    """Load the model and fill ``res.model``; returns (eval-mode module, example input)."""
    module, fmt, hint = load_torch_model(req.model_path, kind, load_options(req))
    hint = hint or recorded_input_shape(module)
    shape = req.input_shape or hint or list(DEFAULT_INPUT_SHAPE)
    model = res.model = _file_info(req.model_path, fmt).filled_from(torch_model_info(module, shape)).with_(
        input_shape_source=SOURCE_REQUEST if req.input_shape else SOURCE_RECORDED if hint else SOURCE_DEFAULT)
    mem.mark("after_load")
    progress(f"loaded {fmt}, {model.params} params, input {shape} {model.input_dtype}")
    return module, make_torch_input(shape, model.input_dtype)


def _measure(req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, call: Callable[[], Any]) -> None:
    assert res.model is not None  # the load fills it
    shape, describe = res.model.shape, res.model.described_input()
    if req.warmup:
        timed_passes(call, "warmup", req.warmup, describe)
    mem.mark("after_warmup")
    samples = timed_passes(call, "run", req.runs, describe)
    res.latency = latency_stats(samples, shape[0] if shape else 1, req)


def action_inspect(req: InspectRequest, res: WorkerReply, mem: MemoryPhases, kind: str) -> None:
    if kind == "onnx":
        info = onnx_model_info(load_onnx(req.model_path, user_file=True), req.input_shape)
        res.model = _file_info(req.model_path, "onnx").filled_from(info)
        return
    _import_torch(req, res, mem)
    _load_torch(req, res, mem, kind)


def action_derive(req: DeriveRequest, res: DeriveReply, mem: MemoryPhases, kind: str) -> None:
    """Write the variant to ``derive_out`` (whole-module torch.save, or TorchScript), atomically."""
    if kind == "onnx":
        raise WorkerError("level_failed", f"{req.model_path} is an ONNX model: levels are derived from PyTorch models")
    out = os.path.abspath(req.derive_out or "")
    if os.path.exists(out) and os.path.samefile(out, req.model_path):
        raise WorkerError("bad_request", f"derive_out {out} is the input file: lodevem never overwrites it")
    _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    module, x = _derive(req, res, kind, module, x, keep_original=False)
    if req.data_path is not None and req.finetune_epochs:  # --finetune-data: pruning + fine-tune
        from ..derive.finetune import finetune
        from ..derive.variants import NOTE_PRUNED

        note, details = finetune(module, req.data_path, req.finetune_epochs)
        assert res.variant is not None  # _derive fills it
        res.variant = replace(res.variant, notes=tuple(note if n == NOTE_PRUNED else n for n in res.variant.notes),
                              details={**res.variant.details, **details})
    _released(mem)
    progress(f"writing the {req.level} variant to {out}")
    derived = res.derived = write_variant(module, x, out)
    assert res.variant is not None
    res.variant = replace(res.variant, serialized_bytes=derived.size_bytes, serialized_format=derived.format)
    progress(f"wrote {derived.format} {out} ({derived.size_bytes} bytes)")


def action_export(req: ExportOnnxRequest, res: ExportOnnxReply, mem: MemoryPhases, kind: str) -> None:
    """Export (or validate an .onnx) to onnx_path; an existing onnx_path is a cache hit: no torch."""
    if req.onnx_path is None and kind != "onnx":
        raise WorkerError("bad_request", "export-onnx needs onnx_path (where to write the .onnx)")
    out = req.onnx_path or req.model_path
    if req.onnx_path and os.path.exists(req.onnx_path):
        cached = load_onnx(req.onnx_path)
        res.model = _filled_from_onnx(_file_info(req.model_path, _format_of(kind)), cached)
        res.onnx = onnx_section(cached, out, _metadata(cached).get("lodevem.exporter", "as-is"), cached=True)
        return
    t0 = time.perf_counter()
    if kind == "onnx":
        _export_onnx_file(req, res, out)
    else:
        t0 = _export_torch(req, res, mem, kind, out)
    nodes = res.onnx.nodes if res.onnx is not None else 0
    progress(f"exported {nodes} nodes to {out} ({time.perf_counter() - t0:.2f} s)")


# What an export records of its source model in the .onnx, so a cache hit reports it without torch
_RECORDED_IN_THE_EXPORT = ("format", "params", "param_bytes", "dtype", "input_shape", "input_dtype", "class_name",
                           "sparsity", "output_shape")


def _export_channels_removed(module: Any, x: Any, path: str, sparsity: SparsitySection) -> SparsitySection:
    """The graph with the all-zero output channels physically removed (after the dense export:
    removal edits the module in place); returns ``sparsity`` with what was done, or why it could
    not be."""
    import torch

    progress("removing all-zero output channels for the channels-removed graph")
    pruned, note = remove_zero_channels(module, x)
    if pruned is None:
        progress(f"no channels-removed graph: {note}")
        return replace(sparsity, channels_removed=note)
    with torch.inference_mode():
        pruned(x)
    export_module(pruned, x, path, metadata={"lodevem.graph_of": "the model with its all-zero channels removed"})
    progress(f"exported the channels-removed graph ({note})")
    return replace(sparsity, channels_removed=note)


def _twin_inputs(module: Any, x: Any, model: ModelSection) -> tuple[Any, Any, dict[str, Any]]:
    """What to export for a quantized or fp16 module (in place: the module is discarded after the
    export): dynamic int8 Linear layers as float Linear, a half() model as float; with what the
    swap knew about precision. Static int8 layers export as QDQ and are rewritten on the ONNX side."""
    import torch

    quantization = torch_quantization(module)
    modules: dict[str, str] = {}
    if quantization and quantization["scheme"] == "dynamic" and isinstance(module, torch.jit.ScriptModule):
        module, op_types = script_float_twin(module)
        return module, x, {"default": "fp32", "modules": {}, "op_types": op_types, "quantization": quantization}
    if quantization and "dynamic" in quantization["scheme"] and not isinstance(module, torch.jit.ScriptModule):
        module, modules = float_twin_module(module)
    if model.dtype == "float16" or model.input_dtype == "float16":
        progress("fp16 model: exporting its float twin, kernels predicted at fp16 speed")
        return module.float(), x.float(), {"default": "fp16", "modules": modules, "quantization": quantization}
    return module, x, {"default": "fp32", "modules": modules, "quantization": quantization}


def _frozen_mode(module: Any) -> Any:
    """Wrap an ExportedProgram's module for the legacy exporter, whose ``train(False)`` call the
    exported module refuses ("Calling train() is not supported yet"); it runs as captured anyway."""
    import torch

    class FrozenMode(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner
            self.training = False

        def forward(self, x: Any) -> Any:
            return self.inner(x)

        def train(self, mode: bool = True) -> "FrozenMode":
            return self

    return FrozenMode(module)


def run(req: WorkerRequest, res: WorkerReply, mem: MemoryPhases) -> Late:
    """Dispatch; returns the step to run once memory was recorded (or None)."""
    kind = sniff_format(req.model_path)
    if isinstance(req, InspectRequest):
        action_inspect(req, res, mem, kind)
    elif isinstance(req, ExportOnnxRequest):
        action_export(req, as_reply(res, ExportOnnxReply), mem, kind)
    elif isinstance(req, DeriveRequest):
        action_derive(req, as_reply(res, DeriveReply), mem, kind)
    elif isinstance(req, MeasureRequest):
        return guest(req.runtime).measure(req, as_reply(res, MeasureReply), mem, kind)
    else:
        raise WorkerError("internal", f"action {req.action} has no handler here")
    return None


def _export_onnx_file(req: ExportOnnxRequest, res: ExportOnnxReply, out: str) -> None:
    """An ``.onnx`` asked for: read it, and write its nn-Meter-ready copy (its float twin when it
    is quantized or fp16) to ``out`` unless it is the user's file itself."""
    model = load_onnx(req.model_path, user_file=True)
    res.model = _file_info(req.model_path, "onnx").filled_from(onnx_model_info(model, req.input_shape))
    if out != req.model_path:  # normalise the copy for nn-Meter; the user's file stays untouched
        model = nn_meter_friendly(model, res.model.shape)
        if req.twin:  # quantized / fp16: its float twin
            model, found = finish_twin(model, nn_meter_friendly)
            res.model = res.model.with_(precision=found["precision"],
                                        quantization=quantization_text(found["quantization"]))
        _atomic_onnx_save(model, out)
    res.onnx = onnx_section(model, out, "as-is", cached=False)


def _export_torch(req: ExportOnnxRequest, res: ExportOnnxReply, mem: MemoryPhases, kind: str, out: str) -> float:
    """A PyTorch file: load it, check its input shape with one pass, and export it (its float twin
    for a quantized model); returns when the export began (after the load)."""
    torch = _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    section = res.model
    assert section is not None  # the load fills it
    t0 = time.perf_counter()
    check = DefaultShapeCheck(module, section.shape) if section.input_shape_source == SOURCE_DEFAULT else None
    outputs: list[Any] = []
    try:
        with torch.inference_mode():  # a shape the model rejects is the user's error, not the exporter's
            timed_passes(lambda: outputs.append(module(x)), "check", 1, section.described_input())
    except WorkerError as exc:
        warning = check.warning() if check is not None else None
        raise (WorkerError(exc.kind, f"{exc.message}; {warning}") if warning else exc) from None
    finally:
        if check is not None:
            check.close()
    section = section.with_(input_shape_warning=check.warning() if check is not None else None,
                            output_shape=first_output_shape(outputs[0]) if outputs else None)
    progress("exporting to ONNX")
    pt2e = pt2e_scheme(module) if req.twin else None
    if pt2e is not None:  # a user's PT2E-quantized program: its float twin, predicted at int8
        module = pt2e_float_twin(module)
    if section.format == "exported_program":
        module = _frozen_mode(module)
    sparsity = sparsity_report(module)
    section = res.model = section.with_(sparsity=sparsity)
    dense = module
    module, x, precision = _twin_inputs(module, x, section) if req.twin else (module, x, None)
    if pt2e is not None and precision is not None:
        precision.update(default="int8", quantization={"scheme": pt2e, "backend": "PT2E (exported program)"})
    if precision is not None:  # the file is what it is, even when it has no ONNX form (the host's levels)
        res.model = section.with_(precision=torch_side_precision(precision),
                                  quantization=quantization_text(precision.get("quantization")))
    recorded = ModelSection(**{k: getattr(section, k) for k in _RECORDED_IN_THE_EXPORT})
    res.onnx, twin = export_module(module, x, out, recorded, precision=precision, twin=req.twin)
    res.model = section.with_(precision=twin.precision, quantization=twin.quantization)
    if req.channels_removed_path and sparsity and sparsity.zero_channels and module is dense:
        res.model = res.model.with_(sparsity=_export_channels_removed(module, x, req.channels_removed_path,
                                                                      sparsity))
    return t0


def _filled_from_onnx(model: ModelSection, onnx_model: Any) -> ModelSection:
    """``model`` with its unknown fields from an .onnx: the source model's info that export_module
    recorded in its metadata, else (an .onnx model itself) its initializers and graph input."""
    recorded = next((p.value for p in onnx_model.metadata_props if p.key == "lodevem.model"), None)
    info = ModelSection.parse(json.loads(recorded)) if recorded else onnx_model_info(onnx_model, model.input_shape)
    precision = read_precision(onnx_model) or {}
    return model.filled_from(info).filled_from(ModelSection(
        precision=precision.get("precision"), quantization=quantization_text(precision.get("quantization"))))


