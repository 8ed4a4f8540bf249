"""Quantized and fp16 models for nn-Meter: the precision metadata, the torch side of the float twin.

The twin is what nn-Meter's kernel detector can read, with the precision of each of its nodes
beside it: this module owns that metadata (``lodevem.precision``), the torch side (loading
quantized modules, their float twin before export) and ``finish_twin``, which puts the two
together on an export; the rewrite of an ONNX graph itself is ``onnx_twin``'s, an algorithm
over the graph alone (torch, onnx and numpy imported lazily).

Why a twin: nn-Meter's converter and detector know float ONNX only (QuantizeLinear and
QLinearConv nodes make it fail with ``KeyError: 'type'``), and the legacy exporter refuses
``quantized::linear_dynamic``. Kernels do not depend on weight values, so the twin computes with
dequantized weights and keeps the quantized graph's structure; what the quantization changes is
recorded beside it, per ONNX node, in the metadata entry ``lodevem.precision`` (JSON:
``precision`` fp32|fp16|int8-dynamic|int8-static|mixed, ``quantization`` {scheme, backend} or
null, ``default`` the precision of nodes not listed, ``nodes`` {node name: precision}), which the
host's kernel extraction reads to give each kernel its precision.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator, Optional

from ...wire.protocol import WorkerError, progress
from .onnx_twin import fp16_twin, is_fp16_onnx, onnx_float_twin, onnx_quantization

PRECISION_KEY = "lodevem.precision"
FX_PICKLE_HINT = ("torch itself cannot reload a pickled quantized FX GraphModule or a torch.save'd quantized "
                  "conv module; save it with torch.jit.save(torch.jit.trace(model, example_input), path) or "
                  "torch.jit.save(torch.jit.script(model), path)")
def precision_metadata(precision: str, quantization: Optional[dict[str, str]], default: str,
                       nodes: dict[str, str]) -> str:
    return json.dumps({"precision": precision, "quantization": quantization, "default": default,
                       "nodes": {k: v for k, v in nodes.items() if v != default}}, sort_keys=True)


def read_precision(model: Any) -> Optional[dict[str, Any]]:
    value = next((p.value for p in model.metadata_props if p.key == PRECISION_KEY), None)
    return json.loads(value) if value else None


# -- torch: loading and the float twin of eager quantized modules --------------------------------

@contextlib.contextmanager
def quantized_conv_unpickling() -> Iterator[None]:
    """Let torch.load rebuild quantized conv modules (eager static, FX GraphModules).

    torch 2.13's quantized ``_ConvNd.__setstate__`` restores the packed weights without first
    running ``nn.Module.__init__``, so an unpickled ``ConvReLU2d`` has no ``_modules`` and the
    first ``named_modules()`` (inside GraphModule's own unpickling) fails: torch cannot reload
    its own file. Only this worker process (in the sandbox) is patched, only while unpickling.
    """
    try:
        from torch.ao.nn.quantized.modules.conv import _ConvNd
    except Exception:  # another torch layout: nothing to repair
        yield
        return
    import torch

    original = _ConvNd.__dict__.get("__setstate__")
    if original is None:
        yield
        return

    def setstate(self: Any, state: Any) -> None:
        if "_modules" not in self.__dict__:
            torch.nn.Module.__init__(self)
        original(self, state)

    _ConvNd.__setstate__ = setstate  # type: ignore[method-assign]  # undone below
    try:
        yield
    finally:
        _ConvNd.__setstate__ = original  # type: ignore[method-assign]


def torch_quantization(module: Any) -> Optional[dict[str, str]]:
    """{scheme, backend} of a torch module holding quantized layers, else None."""
    import torch

    kinds = set()
    for _, sub in module.named_modules():
        if type(sub).__name__.endswith("PackedParams"):  # the weight holder inside static and dynamic layers
            continue
        where = type(sub).__module__
        if isinstance(sub, torch.jit.ScriptModule):  # the class the script was compiled from
            where = str(sub._c._type().qualified_name()) if hasattr(sub, "_c") else ""
            if where.endswith("PackedParams"):
                continue
        if ".quantized.dynamic" in where:
            kinds.add("dynamic")
        elif ".quantized" in where:
            kinds.add("static")
    if not kinds:
        return None
    scheme = "static" if kinds == {"static"} else "dynamic" if kinds == {"dynamic"} else "static+dynamic"
    graph_mode = isinstance(module, torch.fx.GraphModule) or "GraphModule" in getattr(module, "original_name", "")
    api = "torch.ao FX" if graph_mode else "torch.ao eager"
    fmt = "TorchScript" if isinstance(module, torch.jit.ScriptModule) else api
    return {"scheme": scheme, "backend": f"{fmt} ({torch.backends.quantized.engine} engine)"}


def torch_side_precision(found: dict[str, Any]) -> Optional[str]:
    """The file precision the torch side knows before the export (``_twin_inputs``' record): a
    quantized module's scheme, an fp16 module's; None when only the ONNX twin can tell (fp32, or a
    QDQ export). The reply carries it even when the export then fails (a quantize_dynamic
    TorchScript has no ONNX form), so the host never derives levels from an int8 file."""
    quantization = found.get("quantization") or {}
    scheme = quantization.get("scheme")
    if scheme == "dynamic":
        return "int8-dynamic"
    if scheme == "static":
        return "int8-static"
    if scheme:
        return "mixed"
    return "fp16" if found.get("default") == "fp16" else None


def float_twin_module(module: Any) -> tuple[Any, dict[str, str]]:
    """Dynamic int8 Linear layers swapped for float Linear with the dequantized weights (the
    legacy exporter has no symbolic for ``quantized::linear_dynamic``); returns (twin, {qualified
    module name: "int8"}). Static layers export as QDQ and are handled by :func:`onnx_float_twin`.
    The swap is in place: the caller exports the twin and discards it."""
    import torch
    from torch.ao.nn.quantized import dynamic as qdyn

    precision: dict[str, str] = {}
    for name, sub in list(module.named_modules()):
        if isinstance(sub, qdyn.Linear):
            weight, bias = sub._weight_bias()
            twin = torch.nn.Linear(sub.in_features, sub.out_features, bias=bias is not None)
            with torch.no_grad():
                twin.weight.copy_(weight.dequantize())
                if bias is not None:
                    twin.bias.copy_(bias)
            _replace(module, name, twin)
            precision[name] = "int8"
        elif type(sub).__module__.startswith("torch.ao.nn.quantized.dynamic"):
            raise WorkerError("export_failed", f"dynamic int8 {type(sub).__name__} layer {name!r} has no float twin "
                                               f"here (only Linear); lodevem can predict dynamic int8 Linear layers")
    return module, precision


def script_float_twin(module: Any) -> tuple[Any, dict[str, str]]:
    """A quantize_dynamic model saved with TorchScript (the PyTorch Mobile way) as its float twin:
    the script frozen, each ``quantized::linear_dynamic`` call replaced by ``aten::linear`` on its
    dequantized weights (the legacy exporter has no ONNX form for the quantized op, and a script's
    layers cannot be swapped like a module's); returns (twin, {ONNX op type: "int8"}): the twin's
    Gemm/MatMul kernels are the int8 layers, priced as the int8-dynamic level. A script that also
    holds float Linear/MatMul calls is refused (its int8 kernels could not be told apart)."""
    import torch

    frozen = torch.jit.freeze(module.eval())
    graph = frozen.graph
    floats = [n for kind in ("aten::linear", "aten::matmul", "aten::addmm", "aten::mm")
              for n in graph.findAllNodes(kind)]
    quantized = list(graph.findAllNodes("quantized::linear_dynamic"))
    if floats or not quantized:
        raise WorkerError("export_failed", "a dynamically quantized TorchScript with float Linear/MatMul layers too "
                                           "has no float twin here (only all-int8 Linear layers)")
    for node in quantized:
        weight, bias = torch.ops.quantized.linear_unpack(node.inputsAt(1).node().output().toIValue())
        with graph.insert_point_guard(node):
            twin = graph.create("aten::linear", [node.inputsAt(0), graph.insertConstant(weight.dequantize().detach()),
                                                 graph.insertConstant(bias.detach() if bias is not None else None)], 1)
            graph.insertNode(twin)
            twin.output().setType(node.output().type())
        node.output().replaceAllUsesWith(twin.output())
        node.destroy()
    torch._C._jit_pass_dce(graph)
    progress(f"TorchScript with {len(quantized)} dynamic int8 Linear layer(s): exporting its float twin")
    return frozen, {"Gemm": "int8", "MatMul": "int8"}


def _replace(root: Any, name: str, new: Any) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, leaf, new)


def node_module(node_name: str) -> str:
    """Qualified module name behind a legacy-exporter node name: '/features/features.0/conv/Conv'
    -> 'features.0.conv' (a component starting with the previous prefix + '.' is already qualified)."""
    qualified = ""
    for part in node_name.strip("/").split("/")[:-1]:
        qualified = part if not qualified or part.startswith(qualified + ".") else f"{qualified}.{part}"
    return qualified


def nodes_of_modules(model: Any, modules: dict[str, str]) -> dict[str, str]:
    """{onnx node name: precision} for the nodes exported inside the given modules."""
    out = {}
    for node in model.graph.node:
        owner = node_module(node.name)
        while owner and owner not in modules:
            owner = owner.rpartition(".")[0]
        if owner:
            out[node.name] = modules[owner]
    return out


# -- ONNX: the float twin of QDQ / QOperator / fp16 graphs ----------------------------------------

def finish_twin(model: Any, simplify: Any, default: str = "fp32", nodes: Optional[dict[str, str]] = None,
                quantization: Optional[dict[str, str]] = None) -> tuple[Any, dict[str, Any]]:
    """The nn-Meter-ready float twin of an (already simplified) export or .onnx file, with its
    ``lodevem.precision`` metadata set; returns (model, {precision, quantization}) for the reply.

    ``default``/``nodes``/``quantization`` are what the torch side knew (a half() model, dynamic
    Linear layers swapped before export); ``simplify`` is ``nn_meter_friendly``, run again on a
    rewritten graph so shapes are inferred and BN folded as for any export.
    """
    nodes = dict(nodes or {})
    scheme = onnx_quantization(model)
    if scheme == "integer":
        raise WorkerError("export_failed", "dynamically quantized ONNX (DynamicQuantizeLinear, ConvInteger, "
                                           "MatMulInteger) has no float twin here; quantize with "
                                           "onnxruntime.quantization.quantize_static (QDQ or QOperator) instead")
    if scheme is not None:
        model, found = onnx_float_twin(model)
        model = simplify(model)
        nodes.update(found)
        quantization = quantization or {"scheme": "static", "backend": f"onnxruntime {scheme}"}
    elif is_fp16_onnx(model):
        model = simplify(fp16_twin(model))
        default = "fp16"
    names = {n.name for n in model.graph.node}
    nodes = {k: v for k, v in nodes.items() if k in names}  # nodes the simplifier folded away are gone
    overall = _overall(model, default, nodes, quantization)
    for prop in [p for p in model.metadata_props if p.key == PRECISION_KEY]:
        model.metadata_props.remove(prop)
    model.metadata_props.add(key=PRECISION_KEY, value=precision_metadata(overall, quantization, default, nodes))
    return model, {"precision": overall, "quantization": quantization}


def _overall(model: Any, default: str, nodes: dict[str, str], quantization: Optional[dict[str, str]]) -> str:
    """fp32 | fp16 | int8-dynamic | int8-static | mixed, from the compute nodes' precisions."""
    compute = [nodes.get(n.name, default) for n in model.graph.node
               if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")]
    kinds = set(compute) or {default}
    if kinds == {"int8"} and quantization and quantization.get("scheme") == "static":
        return "int8-static"
    if "int8" in kinds and quantization and quantization.get("scheme") == "dynamic":
        return "int8-dynamic"
    return kinds.pop() if len(kinds) == 1 else "mixed"
