"""The float twin of a quantized or fp16 ONNX graph, for nn-Meter's kernel detector.

Why apart from ``quantized``: reading an ONNX graph's quantization (QDQ pairs, QOperator ops,
integer ops, fp16 initializers) and rewriting it as float ops node by node is one algorithm over
the ONNX graph alone; ``quantized`` keeps the torch side and the precision metadata both share.
onnx and numpy are imported lazily, as there.
"""

from __future__ import annotations

from typing import Any, Optional

_QDQ = ("QuantizeLinear", "DequantizeLinear")
# QOperator ops (onnx domain and com.microsoft) and the float op each one computes.
_QOPS: dict[str, str] = {
    "QLinearConv": "Conv", "QLinearMatMul": "MatMul", "QGemm": "Gemm", "QLinearAdd": "Add", "QLinearMul": "Mul",
    "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearAveragePool": "AveragePool",
    "QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu", "QLinearConcat": "Concat",
    "QLinearSoftmax": "Softmax",
}
_INTEGER_OPS = ("ConvInteger", "MatMulInteger", "DynamicQuantizeLinear")
# Ops that run on int8 data as they find it (a runtime executes them in int8 on an int8 tensor).
_PASS_THROUGH = {"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Relu", "Clip", "Concat",
                 "Slice", "Split", "Pad", "Resize", "Identity", "GlobalMaxPool"}
# Elementwise ops between an int8 op and its Quantize (conv -> relu -> Q, x * hardsigmoid(x) -> Q
# for a quantized hardswish): they run in the int8 kernel, so they are int8 too.
_FUSABLE_TAIL = {"Relu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Mul", "Add", "LeakyRelu", "Tanh"}



def onnx_quantization(model: Any) -> Optional[str]:
    """'QDQ', 'QOperator', 'integer' (ConvInteger/MatMulInteger) or None: how a graph is quantized."""
    ops = {n.op_type for n in model.graph.node}
    if ops & set(_INTEGER_OPS):
        return "integer"
    if ops & set(_QOPS):
        return "QOperator"
    if ops & set(_QDQ):
        return "QDQ"
    return None


def is_fp16_onnx(model: Any) -> bool:
    from onnx import TensorProto

    floats = [i.data_type for i in model.graph.initializer if i.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    return bool(floats) and floats.count(TensorProto.FLOAT16) * 2 > len(floats)


def fp16_twin(model: Any) -> Any:
    """fp32 copy of an fp16 graph: initializers, inputs/outputs, Constant values and Casts to fp16."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    for init in model.graph.initializer:
        if init.data_type == TensorProto.FLOAT16:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    for value in list(model.graph.input) + list(model.graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    del model.graph.value_info[:]
    for node in model.graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT16:
                attr.i = TensorProto.FLOAT
            if attr.type == attr.TENSOR and attr.t.data_type == TensorProto.FLOAT16:
                value = numpy_helper.to_array(attr.t).astype(np.float32)
                attr.t.CopyFrom(numpy_helper.from_array(value, attr.t.name))
    return model


def onnx_float_twin(model: Any) -> tuple[Any, dict[str, str]]:
    """Rewrite a QDQ or QOperator graph as float, in place: DequantizeLinear of constants folded
    into float initializers, activation Quantize/Dequantize pairs dropped, QLinear* ops replaced
    by their float op with dequantized weights. Returns (model, {node name: "int8"}) for the nodes
    that compute on int8 data (QOperator nodes, QDQ nodes fed by DequantizeLinear whose result is
    quantized again, and pass-through ops on int8 tensors). Constant nodes must already be
    initializers (``nn_meter_friendly``)."""
    graph = model.graph
    for i, node in enumerate(graph.node):
        if not node.name:
            node.name = f"lodevem_node_{i}"
    twin = _TwinRewrite(graph)
    keep = [kept for node in graph.node if (kept := twin.rewrite(node)) is not None]
    _keep_output_names(graph, keep, twin.resolve)
    _replace_nodes_and_initializers(model, keep, twin.new_inits)
    return model, twin.precision


class _TwinRewrite:
    """The state of one float-twin rewrite: the graph's constants, which tensor stands for which
    float tensor, which tensors and results are int8, and the initializers it adds."""

    def __init__(self, graph: Any) -> None:
        from onnx import numpy_helper

        self.consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        self.alias: dict[str, str] = {}  # tensor -> the float tensor it stands for
        self.int8_tensors: set[str] = set()
        self.int8_results: set[str] = set()  # float outputs of nodes computing in int8 (before their Q)
        self.dq_outputs: set[str] = set()
        self.new_inits: dict[str, Any] = {}
        self.precision: dict[str, str] = {}
        self.consumers: dict[str, list[Any]] = {}
        for node in graph.node:
            for t in node.input:
                self.consumers.setdefault(t, []).append(node)
        self.q_inputs = {n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}

    def resolve(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def dequant(self, value: str, scale: str, zero: Optional[str], axis: int = 1) -> Any:
        import numpy as np

        x = self.consts[value].astype(np.float32)
        s = self.consts[scale].astype(np.float32)
        z = self.consts[zero].astype(np.float32) if zero and zero in self.consts else np.zeros_like(s)
        if s.ndim == 1 and s.size > 1:  # per-axis
            shape = [1] * x.ndim
            shape[axis % max(x.ndim, 1)] = s.size
            s, z = s.reshape(shape), z.reshape(shape)
        return ((x - z) * s).astype(np.float32)

    def const(self, name: str, array: Any) -> str:
        self.new_inits[name] = array
        self.consts[name] = array
        return name

    def quantized_after(self, tensor: str, depth: int = 0) -> bool:
        """The tensor is quantized again, directly or after fusable elementwise ops only."""
        if tensor in self.q_inputs:
            return True
        users = self.consumers.get(tensor, [])
        return depth < 4 and bool(users) and all(
            u.op_type in _FUSABLE_TAIL and self.quantized_after(u.output[0], depth + 1) for u in users)

    def rewrite(self, node: Any) -> Any:
        """The node as it stays in the float graph (None: dropped, its output an alias or a constant)."""
        op = node.op_type
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if op == "DequantizeLinear":
            if node.input[0] in self.consts:
                self.const(node.output[0], self.dequant(node.input[0], node.input[1], _opt(node, 2), axis))
            else:
                self.alias[node.output[0]] = node.input[0]
                self.dq_outputs.add(node.output[0])
            return None
        if op == "QuantizeLinear":
            self.alias[node.output[0]] = node.input[0]
            self.int8_tensors.add(node.output[0])
            return None
        if op in _QOPS:
            self.precision[node.name] = "int8"
            self.int8_tensors.add(node.output[0])
            return _float_op(node, _QOPS[op], self.resolve, self.dequant, self.const, self.consts)
        inputs = [self.resolve(t) if t else t for t in node.input]
        activations = [t for t in node.input if t and t not in self.consts]
        on_int8 = any(t in self.int8_tensors for t in activations)
        from_dq = any(t in self.dq_outputs for t in activations)
        fused_tail = op in _FUSABLE_TAIL and any(t in self.int8_results for t in activations)
        if on_int8 or ((from_dq or fused_tail) and self.quantized_after(node.output[0])):
            self.precision[node.name] = "int8"
            self.int8_results.update(node.output)
            if op in _PASS_THROUGH and on_int8:
                self.int8_tensors.update(node.output)
        del node.input[:]
        node.input.extend(inputs)
        return node


def _keep_output_names(graph: Any, keep: list[Any], resolve: Any) -> None:
    """Graph outputs that were aliased (output = DequantizeLinear(...)) keep their names."""
    renames = {resolve(o.name): o.name for o in graph.output if resolve(o.name) != o.name}
    for node in keep:
        for i, t in enumerate(node.output):
            if t in renames:
                node.output[i] = renames[t]
        for i, t in enumerate(node.input):
            if t in renames:
                node.input[i] = renames[t]


def _replace_nodes_and_initializers(model: Any, keep: list[Any], new_inits: dict[str, Any]) -> None:
    """The graph's nodes become ``keep``; unused initializers go, the folded constants come in, and
    the opsets are those the float graph uses (the default domain at 13 or later)."""
    from onnx import numpy_helper

    graph = model.graph
    del graph.node[:]
    graph.node.extend(keep)
    used = {t for n in keep for t in n.input} | {o.name for o in graph.output}
    inits = [i for i in graph.initializer if i.name in used and i.name not in new_inits]
    inits += [numpy_helper.from_array(v, k) for k, v in new_inits.items() if k in used]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    del graph.value_info[:]
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < 13:
            opset.version = 13
    kept_domains = {n.domain for n in keep}
    ops = [o for o in model.opset_import if o.domain in ("", "ai.onnx") or o.domain in kept_domains]
    del model.opset_import[:]
    model.opset_import.extend(ops)


def _opt(node: Any, i: int) -> Optional[str]:
    return node.input[i] if len(node.input) > i and node.input[i] else None


def _float_op(node: Any, float_op: str, resolve: Any, dequant: Any, const: Any, consts: dict[str, Any]) -> Any:
    """The float node for one QOperator node (same name and output, dequantized weights)."""
    from onnx import helper

    op, ins = node.op_type, list(node.input)
    attrs = [a for a in node.attribute if a.name not in ("channels_last",)]

    def operand(value: str, scale: str, zero: Optional[str], axis: int) -> str:
        """A constant operand dequantized to a float initializer; an activation: its float tensor."""
        if value in consts:
            return const(f"{value}_lodevem_float", dequant(value, scale, zero, axis))
        return resolve(value)

    if op == "QLinearConv":
        inputs = [operand(ins[0], ins[1], ins[2], 1), operand(ins[3], ins[4], ins[5], 0)]
        if len(ins) > 8 and ins[8]:  # int32 bias with scale x_scale * w_scale
            bias = (consts[ins[8]].astype("float32") * consts[ins[1]].astype("float32")
                    * consts[ins[4]].astype("float32"))
            inputs.append(const(f"{ins[8]}_lodevem_float", bias.reshape(-1)))
    elif op == "QGemm":  # per-output-channel weight scales: axis 0 of B when transB, else axis 1
        transb = next((a.i for a in node.attribute if a.name == "transB"), 0)
        inputs = [operand(ins[0], ins[1], ins[2], 1), operand(ins[3], ins[4], ins[5], 0 if transb else 1)]
        if len(ins) > 6 and ins[6]:
            bias = (consts[ins[6]].astype("float32") * consts[ins[1]].astype("float32")
                    * consts[ins[4]].astype("float32"))
            inputs.append(const(f"{ins[6]}_lodevem_float", bias.reshape(-1)))
    elif op == "QLinearMatMul":
        inputs = [operand(ins[0], ins[1], ins[2], 1), operand(ins[3], ins[4], ins[5], -1)]
    elif op in ("QLinearAdd", "QLinearMul"):
        inputs = [operand(ins[0], ins[1], ins[2], 1), operand(ins[3], ins[4], ins[5], 1)]
    elif op == "QLinearConcat":  # Y_scale, Y_zp, then (X, scale, zp) triples
        inputs = [operand(ins[i], ins[i + 1], ins[i + 2], 1) for i in range(2, len(ins), 3)]
    else:  # unary: X, X_scale, X_zp, (alpha...) Y_scale, Y_zp
        inputs = [operand(ins[0], ins[1], ins[2], 1)]
    if op == "QGemm":
        attrs = [a for a in attrs if a.name in ("alpha", "transA", "transB")]
    return helper.make_node(float_op, inputs, list(node.output)[:1], name=node.name,
                            **{a.name: helper.get_attribute_value(a) for a in attrs})
