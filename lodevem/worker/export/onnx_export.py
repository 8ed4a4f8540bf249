"""ONNX: export for nn-Meter (legacy exporter, dynamo fallback), the nn-Meter-friendly cleanup
(onnxsim, Constant nodes to initializers), reading .onnx files and the ``onnx`` result section.
torch, onnx, onnxsim and numpy are imported lazily."""

from __future__ import annotations

import json
import os
import re
import warnings
from typing import Any, Optional, Sequence

from ...wire.file_sections import ModelSection, OnnxSection, quantization_text
from ...wire.protocol import DEFAULT_INPUT_SHAPE, WorkerError, first_line, progress
from ..load.formats import HOW_TO_SAVE

# Opset 13: nn-Meter's converter knows its op set; opset >= 14 emits HardSwish, which nn-Meter
# has no alias for, while at 13 the exporter writes HardSigmoid+Mul (detected as kernels).
ONNX_OPSET = 13


def export_module(module: Any, example: Any, out_path: str, model_info: Optional[ModelSection] = None,
                  metadata: Optional[dict[str, str]] = None, precision: Optional[dict[str, Any]] = None,
                  twin: bool = True) -> tuple[OnnxSection, ModelSection]:
    """Export to ONNX for nn-Meter and write atomically; returns the ``onnx`` result section and
    what the export found of the model (its precision and quantization, for a twin).

    Legacy (TorchScript-based) exporter first: fast, no onnxscript needed, and nn-Meter handles
    its output once simplified; the dynamo exporter only when onnxscript exists and legacy fails.
    ``precision`` (``finish_twin``'s default/modules/quantization from the torch side) makes the
    file the float twin of a quantized or fp16 model; the section then says its precision.
    ``twin=False`` writes the export as torch made it (what onnxruntime measures).
    """
    import onnx

    from .quantized import finish_twin, nodes_of_modules

    tmp = f"{out_path}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    exporter = "legacy"
    try:
        try:
            _torch_export(module, example, tmp, dynamo=False)
        except Exception as legacy_exc:
            exporter = "dynamo"
            if not _dynamo_fallback(module, example, tmp):
                raise WorkerError("export_failed", _export_message(legacy_exc)) from None
        model = nn_meter_friendly(onnx.load(tmp))
        given = precision or {}
        found: dict[str, Any] = {"precision": None, "quantization": None}
        if twin:
            nodes = nodes_of_modules(model, given.get("modules") or {})
            kinds = given.get("op_types") or {}  # a frozen script's twin: its int8 kernels by op type
            nodes.update({n.name: kinds[n.op_type] for n in model.graph.node if n.op_type in kinds})
            model, found = finish_twin(model, nn_meter_friendly, given.get("default", "fp32"), nodes,
                                       given.get("quantization"))
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    # Recorded in the file so a cache hit can report them without importing torch or unpickling.
    model.metadata_props.add(key="lodevem.exporter", value=exporter)
    if model_info:
        model.metadata_props.add(key="lodevem.model", value=json.dumps(model_info.to_dict()))
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    _atomic_onnx_save(model, out_path)
    return (onnx_section(model, out_path, exporter, cached=False),
            ModelSection(precision=found["precision"], quantization=quantization_text(found["quantization"])))


def _dynamo_fallback(module: Any, example: Any, path: str) -> bool:
    """Try the dynamo exporter, only when onnxscript is installed (it needs it)."""
    try:
        import onnxscript  # noqa: F401

        _torch_export(module, example, path, dynamo=True)
        return True
    except Exception:
        return False


def _torch_export(module: Any, example: Any, path: str, dynamo: bool) -> None:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation/tracer chatter would drown the progress lines
        torch.onnx.export(module, (example,), path, dynamo=dynamo, opset_version=ONNX_OPSET,
                          input_names=["input"], output_names=["output"], do_constant_folding=True)


def _export_message(exc: BaseException) -> str:
    """Name the unsupported operator when torch's message says which one it is."""
    found = re.search(r"operator '([^']+)'", str(exc))
    if found and found.group(1).startswith("quantized::") and "dynamic" in found.group(1):
        return (f"cannot export to ONNX: dynamic int8 operator '{found.group(1)}' has no ONNX form and a "
                f"TorchScript file's layers cannot be swapped for float ones; save the eager model with "
                f"torch.save(quantize_dynamic(model, ...), path) instead")
    if found:
        return (f"cannot export to ONNX: operator '{found.group(1)}' is not supported by the ONNX exporter at opset "
                f"{ONNX_OPSET}; replace it with supported ops or supply an .onnx file")
    return f"cannot export to ONNX ({type(exc).__name__}): {first_line(exc)}"


def nn_meter_friendly(model: Any, input_shape: Optional[list[int]] = None) -> Any:
    """Simplify (onnxsim removes Identity nodes and folds BN) and move Constant nodes into initializers.

    nn-Meter's converter gives attribute-less nodes to Constant and Identity (they have no shaped
    input), and its ``convert_nodes`` then fails with ``KeyError: 'type'``. onnxsim also fixes
    dynamic input dims to ``input_shape`` so shape inference yields the static shapes it needs.
    """
    try:
        import onnxsim

        overwrite = {_graph_inputs(model)[0].name: input_shape} if input_shape else None
        simplified, ok = onnxsim.simplify(model, overwrite_input_shapes=overwrite)
        if ok:
            model = simplified
    except Exception as exc:  # unsimplified graphs still work once constants are moved
        progress(f"onnxsim failed, keeping the unsimplified graph: {first_line(exc)}")
    _constants_to_initializers(model.graph)
    return model


def _constants_to_initializers(graph: Any) -> None:
    import numpy as np
    from onnx import helper, numpy_helper

    keep = []
    for node in graph.node:
        if node.op_type != "Constant" or len(node.attribute) != 1 or node.attribute[0].name == "sparse_value":
            keep.append(node)
            continue
        attr = node.attribute[0]
        value = helper.get_attribute_value(attr)
        if attr.name == "value":
            array = numpy_helper.to_array(value)
        else:
            dtype = np.float32 if attr.name.startswith("value_float") else np.int64 if "int" in attr.name else None
            array = np.array(value, dtype=dtype)
        graph.initializer.append(numpy_helper.from_array(array, node.output[0]))
    del graph.node[:]
    graph.node.extend(keep)


def _graph_inputs(model: Any) -> list[Any]:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def onnx_section(model: Any, path: str, exporter: str, cached: bool) -> OnnxSection:
    """``level``/``graph_of`` say which graph the file holds (recorded at export with a level)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    meta = _metadata(model)
    return OnnxSection(os.path.abspath(path), exporter, opset, len(model.graph.node), cached, meta.get("lodevem.level"),
                       meta.get("lodevem.graph_of", "the model as given"))


def _metadata(model: Any) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def load_onnx(path: str, user_file: bool = False) -> Any:
    """An ONNX model; ``user_file``: the user's own ``.onnx``, whose tensors must all be inside it
    (the sandbox mounts the one file: external data, wherever it points, is not there to read,
    and a location outside the model's folder is refused as such, never followed)."""
    import onnx

    try:
        if user_file:
            _refuse_external_data(path, onnx.load(path, load_external_data=False))
        model = onnx.load(path)
    except WorkerError:
        raise
    except Exception as exc:
        raise WorkerError("corrupt", f"{path} is not a readable ONNX model ({first_line(exc, 200)}); "
                                     f"re-export it or {HOW_TO_SAVE}") from None
    if not model.graph.node or not _graph_inputs(model):
        raise WorkerError("not_a_model", f"{path} parses as ONNX but has no graph nodes or inputs")
    return model


def _refuse_external_data(path: str, model: Any) -> None:
    from onnx import TensorProto

    for tensor in model.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        where = next((e.value for e in tensor.external_data if e.key == "location"), "")
        outside = os.path.isabs(where) or ".." in where.replace("\\", "/").split("/")
        raise WorkerError("unsupported_format", f"{path}: tensor {tensor.name!r} is stored outside the file, in "
                                                f"{where!r}" + (" (outside the model's folder: refused, never read)"
                                                                if outside else "")
                          + "; save the model with its tensors inside: onnx.save(model, path, "
                            "save_as_external_data=False) (models under 2 GB)")


def onnx_model_info(model: Any, input_shape: Optional[Sequence[int]]) -> ModelSection:
    """params/param_bytes from initializers (what onnxruntime holds), shape/dtype from graph input."""
    from onnx import helper

    params, by_dtype = 0, dict[str, int]()
    for init in model.graph.initializer:
        n = 1
        for d in init.dims:
            n *= d
        dtype = helper.tensor_dtype_to_np_dtype(init.data_type)
        params += n
        by_dtype[dtype.name] = by_dtype.get(dtype.name, 0) + n * dtype.itemsize
    first = _graph_inputs(model)[0].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in first.shape.dim]
    out = model.graph.output[0].type.tensor_type if model.graph.output else None
    out_dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in out.shape.dim] if out is not None and out.HasField("shape") else []
    return ModelSection(params=params, param_bytes=sum(by_dtype.values()),
                        output_shape=tuple(out_dims) if out_dims and out_dims[-1] else None,
                        dtype=max(by_dtype, key=by_dtype.__getitem__) if by_dtype else None,
                        input_shape=tuple(input_shape or resolve_static(dims)),
                        input_dtype=helper.tensor_dtype_to_np_dtype(first.elem_type).name)


def resolve_static(dims: list[Optional[int]]) -> list[int]:
    """Static graph dims as-is; dynamic ones from the default NCHW shape (or 1 for other ranks)."""
    default = DEFAULT_INPUT_SHAPE if len(dims) == len(DEFAULT_INPUT_SHAPE) else [1] * len(dims)
    return [d if d else default[i] for i, d in enumerate(dims)]


def _atomic_onnx_save(model: Any, path: str) -> None:
    import onnx

    tmp = f"{path}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save(model, tmp)
    os.replace(tmp, path)
