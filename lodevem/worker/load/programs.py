"""TorchScript files and exported programs (``.pt2``) as modules the PyTorch 2 toolchain takes
(torch imported lazily).

Why: litert-torch converts through ``torch.export`` and PT2E quantizes exported graphs, but
neither takes a ScriptModule ("Exporting a ScriptModule is not supported"); torch-pruning and
torch.ao's quantization find layers by their ``nn.Module`` type, and an exported graph has none
(``aten.conv2d`` on weights held as attributes). So:

* ``exported_module``: a ScriptModule converted with torch's own TorchScript-to-export converter
  (``torch._export.converter.TS2EPConverter``) into an ExportedProgram's module, which
  litert-torch and PT2E take like any other; a ``.pt2``'s module (or any nn.Module) as it is.
* ``with_layers``: an exported module's ``conv2d`` / ``linear`` / ``batch_norm`` calls on its own
  weights replaced by ``nn.Conv2d`` / ``nn.Linear`` / ``nn.BatchNorm2d`` submodules holding them,
  and its activations and pools by their ``nn`` modules (``relu`` -> ``nn.ReLU``, ...), the same
  arithmetic (checked on the example input), as a plain GraphModule that pickles: the levels
  (fp16, int8, int8-static, pruned) are then derived as from a pickled module, and re-exported it
  is the graph the pickled module gives (quantizers match layers by their source module: a
  ``max_pool2d`` they do not recognise is quantized differently).
* ``pt2e_scheme``: whether a graph holds PT2E quantize / dequantize ops (a user's own
  PT2E-quantized ``.pt2``), static or dynamic, so litert-torch converts it with its own scales.
"""

from __future__ import annotations

from typing import Any, Optional

from ...wire.protocol import WorkerError, first_line, progress

TS2EP = "torch's TorchScript-to-export converter (TS2EPConverter)"


def exported_module(module: Any, example: Any, path: str) -> Any:
    """``module`` as an exported program's module when it is a ScriptModule (else as it is); a
    TorchScript graph the converter rejects is one line naming the file."""
    import torch

    if not isinstance(module, torch.jit.ScriptModule):
        return module
    from torch._export.converter import TS2EPConverter

    progress(f"converting TorchScript to an exported program ({TS2EP})")
    try:
        return TS2EPConverter(module, (example,)).convert().module()
    except Exception as exc:
        raise WorkerError("export_failed", f"{TS2EP} cannot convert {path}: {type(exc).__name__}: "
                                           f"{first_line(exc, 200)}") from None


def with_layers(module: Any, example: Any) -> Any:
    """An exported module (``exported_module``) whose conv / linear / batch-norm calls on its own
    weights are ``nn`` layers again, as a plain GraphModule; any other module as it is."""
    import torch

    if not isinstance(module, torch.fx.GraphModule):
        return module
    with torch.no_grad():
        before = module(example)
    graph = module.graph
    lifted = sum(_lift(module, node) for node in list(graph.nodes) if node.op == "call_function")
    for node in list(graph.nodes):  # the exported program's input guard and pytree wrapping
        if node.op == "call_module" and "guards" in str(node.target) and not node.users:
            graph.erase_node(node)
    output = next(n for n in graph.nodes if n.op == "output")
    if isinstance(output.args[0], (list, tuple)) and len(output.args[0]) == 1:
        output.args = (output.args[0][0],)
    graph._codegen = torch.fx.graph.CodeGen()
    graph._tracer_cls, graph._tracer_extras = None, {}
    graph.eliminate_dead_code()
    plain = torch.fx.GraphModule(module, graph)
    plain.delete_all_unused_submodules()
    with torch.no_grad():
        after = plain(example)
    while isinstance(before, (list, tuple)) and before:
        before = before[0]
    if not torch.allclose(after, before, rtol=1e-4, atol=1e-5):  # a guard against a wrong lift, never expected
        raise WorkerError("level_failed", "the exported graph's layers could not be rebuilt exactly (outputs differ)")
    progress(f"rebuilt {lifted} conv/linear/batch-norm layers of the exported graph as nn modules")
    return plain.eval()


def _lift(module: Any, node: Any) -> bool:
    """Replace one call on the module's own weights, or one activation or pool, by an ``nn``
    layer (``x + y`` by ``operator.add``, as eager code writes it); False: left as it is."""
    import operator

    import torch
    from torch import nn

    aten = torch.ops.aten
    args = list(node.args) + [None] * 9
    if node.kwargs:
        return False
    if node.target in (aten.add.Tensor, aten.mul.Tensor) and len(node.args) == 2:
        node.target = operator.add if node.target == aten.add.Tensor else operator.mul
        return True
    simple = _simple_layer(node.target, args)
    if simple is not None:
        _replace(module, node, simple, node)
        return True
    weight, bias = _const(module, args[1]), _const(module, args[2])
    if weight is False or bias is False or not torch.is_tensor(weight):
        return False
    layer: Any
    if node.target in (aten.convolution.default, aten.conv2d.default) and weight.dim() == 4:
        if node.target == aten.convolution.default:
            stride, padding, dilation, transposed, _, groups = args[3:9]
            if transposed:
                return False
        else:
            stride, padding, dilation, groups = (args[3] or 1, 0 if args[4] is None else args[4], args[5] or 1,
                                                 args[6] or 1)
        if isinstance(padding, str):
            return False
        kernel = (int(weight.shape[2]), int(weight.shape[3]))
        layer = nn.Conv2d(weight.shape[1] * groups, weight.shape[0], kernel, stride=stride,
                          padding=padding, dilation=dilation, groups=groups, bias=bias is not None)
    elif node.target == aten.linear.default and weight.dim() == 2:
        layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    elif node.target in (aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default):
        return _lift_batch_norm(module, node, args, weight, bias)
    else:
        return False
    layer.weight = nn.Parameter(weight.detach().clone())
    if bias is not None:
        layer.bias = nn.Parameter(bias.detach().clone())
    _replace(module, node, layer, node)
    return True


def _simple_layer(target: Any, args: list[Any]) -> Any:
    """The ``nn`` module computing a weightless activation or pool call, or None."""
    import torch
    from torch import nn

    aten = torch.ops.aten
    if target in (aten.relu.default, aten.relu_.default):
        return nn.ReLU()
    if target == aten.max_pool2d.default:
        kernel = args[1]
        return nn.MaxPool2d(kernel, args[2] or kernel, 0 if args[3] is None else args[3], args[4] or 1, bool(args[5]))
    if target == aten.adaptive_avg_pool2d.default:
        return nn.AdaptiveAvgPool2d(args[1])
    if target == aten.hardtanh.default:
        low, high = (-1.0 if args[1] is None else args[1]), (1.0 if args[2] is None else args[2])
        return nn.ReLU6() if (low, high) == (0, 6) else nn.Hardtanh(low, high)
    if target == aten.flatten.using_ints:
        return nn.Flatten(0 if args[1] is None else args[1], -1 if args[2] is None else args[2])
    return {aten.hardswish.default: nn.Hardswish, aten.hardsigmoid.default: nn.Hardsigmoid,
            aten.sigmoid.default: nn.Sigmoid}.get(target, lambda: None)()


def _lift_batch_norm(module: Any, node: Any, args: list[Any], weight: Any, bias: Any) -> bool:
    import torch
    from torch import nn

    mean, var = _const(module, args[3]), _const(module, args[4])
    if not (torch.is_tensor(mean) and torch.is_tensor(var) and torch.is_tensor(bias)):
        return False
    legit = node.target == torch.ops.aten._native_batch_norm_legit_no_training.default
    if not legit and args[5]:  # batch_norm(..., training=True, ...)
        return False
    momentum, eps = (args[5], args[6]) if legit else (args[6], args[7])
    layer = nn.BatchNorm2d(weight.shape[0], eps=float(eps), momentum=float(momentum or 0.1))
    layer.weight, layer.bias = nn.Parameter(weight.detach().clone()), nn.Parameter(bias.detach().clone())
    layer.register_buffer("running_mean", mean.detach().clone())
    layer.register_buffer("running_var", var.detach().clone())
    layer.eval()
    if not legit:
        _replace(module, node, layer, node)
        return True
    outputs = list(node.users)  # getitem(node, 0) is the normalised tensor; the others must be unused
    import operator

    if not all(u.op == "call_function" and u.target is operator.getitem for u in outputs) or any(
            u.args[1] != 0 and u.users for u in outputs):
        return False
    for user in [u for u in outputs if u.args[1] == 0]:
        _replace(module, user, layer, node)
    return True


def _replace(module: Any, node: Any, layer: Any, call: Any) -> None:
    """``node``'s uses now use ``layer`` applied to ``call``'s input (the layer becomes a submodule)."""
    name = f"lodevem_layer{sum(1 for n, _ in module.named_children() if n.startswith('lodevem_layer'))}"
    module.add_submodule(name, layer)
    with module.graph.inserting_before(node):
        new = module.graph.call_module(name, (call.args[0],))
    node.replace_all_uses_with(new)
    module.graph.erase_node(node)
    if call is not node and not call.users:
        module.graph.erase_node(call)


def _const(module: Any, arg: Any) -> Any:
    """The tensor a ``get_attr`` argument names, None for no argument, False for anything else
    (an activation, a computed weight: not a layer's own weight)."""
    import torch

    if arg is None:
        return None
    if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
        value = module
        for part in str(arg.target).split("."):
            value = getattr(value, part, None)
        return value if torch.is_tensor(value) else False
    return False


def pt2e_scheme(module: Any) -> Optional[str]:
    """``static`` / ``dynamic`` when the graph is PT2E-quantized (quantize and dequantize ops of
    ``torch.ops.quantized_decomposed``; dynamic ones choose their scales at run time), else None."""
    import torch

    if not isinstance(module, torch.fx.GraphModule):
        return None
    ops = {str(n.target) for n in module.graph.nodes if n.op == "call_function"}
    quantized = [op for op in ops if op.startswith("quantized_decomposed.")]
    if not quantized:
        return None
    return "dynamic" if any("choose_qparams" in op for op in quantized) else "static"


# -- a user's own PT2E-quantized program ------------------------------------------------------------

def _is_dequantize(node: Any) -> bool:
    return node.op == "call_function" and str(node.target).startswith("quantized_decomposed.dequantize_per_")


def _is_quantize(node: Any) -> bool:
    return node.op == "call_function" and str(node.target).startswith("quantized_decomposed.quantize_per_")


def _value(module: Any, arg: Any) -> Any:
    """A dequantize argument's value: a get_attr's tensor, a constant as it is; None: computed."""
    import torch

    if isinstance(arg, torch.fx.Node):
        found = _const(module, arg)
        return found if torch.is_tensor(found) else None
    return arg


def _constant(module: Any, before: Any, value: Any) -> Any:
    """A new get_attr node (before ``before``) holding ``value``."""
    name = f"lodevem_constant{sum(1 for n in module.graph.nodes if n.op == 'get_attr')}"
    module.register_buffer(name, value)
    with module.graph.inserting_before(before):
        return module.graph.get_attr(name)


def pt2e_unfolded(module: Any) -> Any:
    """A PT2E program whose weights were folded into integer constants (``convert_pt2e``'s default)
    as litert-torch reads PT2E: each float weight, then its quantize and dequantize with the file's
    own scales (the same integers come back: quantizing the dequantized weight is exact)."""
    import torch

    changed = 0
    for node in [n for n in module.graph.nodes if _is_dequantize(n)]:
        stored = _value(module, node.args[0])
        if not torch.is_tensor(stored) or stored.is_floating_point():
            continue
        values = [_value(module, a) for a in node.args]
        if any(v is None for v in values[1:]):
            continue
        weight = _constant(module, node, node.target(*values).detach())
        quantize = getattr(torch.ops.quantized_decomposed, str(node.target).split(".")[1].replace("dequantize",
                                                                                              "quantize"))
        with module.graph.inserting_before(node):
            quantized = module.graph.call_function(getattr(quantize, str(node.target).split(".")[-1]),
                                                   (weight, *node.args[1:]))
        node.args = (quantized, *node.args[1:])
        changed += 1
    if changed:
        module.graph.eliminate_dead_code()
        module.recompile()
        progress(f"{changed} folded int8 weight(s) unfolded for litert-torch (their own scales)")
    return module


def pt2e_float_twin(module: Any) -> Any:
    """The float graph of a PT2E program (for the ONNX export the latency is predicted from, which
    has no quantize ops): dequantized weights as float constants, activation quantize / dequantize
    pairs dropped. The file's precision is recorded beside the export, not in these values."""
    import torch

    for node in [n for n in module.graph.nodes if _is_dequantize(n)]:
        source = node.args[0]
        if isinstance(source, torch.fx.Node) and _is_quantize(source):
            node.replace_all_uses_with(source.args[0])
            continue
        values = [_value(module, a) for a in node.args]
        if any(v is None for v in values):
            raise WorkerError("export_failed", f"a PT2E dequantize ({node.name}) of a computed tensor has no float "
                                               "twin here")
        node.replace_all_uses_with(_constant(module, node, node.target(*values).detach().float()))
    module.graph.eliminate_dead_code()
    module.recompile()
    return module
