"""ONNX graph -> nn-Meter's fused kernels, with the work figures a cost model needs.

Why nn-Meter's own pipeline: both latency paths (nn-Meter's regressors and lodevem's offline
estimator) must see the *same* kernels, or a model would be cut into different pieces depending on
which path ran and the two numbers could not be compared kernel by kernel. So this module runs
nn-Meter's ``OnnxConverter`` -> ``KernelDetector`` (fusion templates + fusion rules) and its
``get_predict_features`` exactly as ``nnMeterPredictor.predict`` does, and adds per kernel what
nn-Meter does not keep: MACs, parameters, fp32 bytes moved and a coarse category.

The detector runs offline without any predictor ``.pkl``; it only needs a fusion-rules file. When
a predictor folder is in use its own ``fusion_rules.json`` is passed in; otherwise the bundled
``data/nnmeter_fusion_rules_tflite_cpu.json`` is used: the ``obey`` flags of nn-Meter's TFLite-CPU
rule file (microsoft/nn-Meter, ``kerneldetection/rulelib/rules/rule_tflite_cpu.json`` at commit
4ca17507a12e6ebb27925425a3deccc42d2cbed2, MIT licence), with the measured latencies that file
also carries dropped because the detector never reads them. With it, mobilenet_v2 gives 64 kernels
and resnet18 31, the counts nn-Meter reports for its CPU predictor.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import InputError
from ..store import bytes_digest
from ..wire.precision import ARITHMETIC, FILE_PRECISIONS

__all__ = [
    "CATEGORIES",
    "DEFAULT_RULES",
    "Kernel",
    "KernelGraph",
    "extract_kernels",
]

DEFAULT_RULES: Path = Path(__file__).resolve().parent.parent / "data" / "nnmeter_fusion_rules_tflite_cpu.json"

# Coarse kernel classes the estimator gives their own efficiency: dense, 1x1 and depthwise
# convolutions reach very different MACs per cycle on the same core (see the data README).
CATEGORIES: tuple[str, ...] = (
    "dense_conv",
    "pointwise_conv",
    "depthwise_conv",
    "fc",
    "elementwise",
    "pool",
    "other",
)

FP32_BYTES = 4
_FLOAT_TYPES = {1, 10, 11, 16}  # onnx TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16
_POOL_OPS = {"maxpool", "avgpool", "gap", "global-avgpool", "global-pool", "pool"}
_ELEMENTWISE_OPS = {
    "add", "mul", "sub", "div", "relu", "bn", "hswish", "hardsigmoid", "hardswish", "sigmoid", "tanh",
    "leakyrelu", "prelu", "elu", "selu", "softplus", "exp", "sqrt", "pow", "neg", "abs", "erf", "clip",
}
_MATMUL_TYPES = {"Gemm", "MatMul"}
_COMPUTE_TYPES = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
PRECISION_KEY = "lodevem.precision"  # written by lodevem.worker.export.quantized (JSON, see there)
# nn-Meter logs one warning per shapeless node and one for the onnx version; not our user's concern.
_QUIET_LOGGERS = ("nn-Meter",)
# Initializers larger than this are emptied before shape inference: only their dims matter to the
# converter, and serialising ~100 MB of weights made resnet50's detection take 2 s instead of 0.2 s.
_STRIP_ABOVE = 1024


@dataclass(frozen=True)
class Kernel:
    """One fused kernel as nn-Meter sees it, plus the work the estimator charges for it.

    ``op`` is nn-Meter's fused type (``conv-relu``, ``dwconv``, ``add-relu``...), ``nnmeter_type``
    the predictor it maps to (``conv-bn-relu``, ``dwconv-bn-relu``, ``addrelu``, ``fc``...), and
    ``features`` the vector nn-Meter's regressor for that type takes (``None`` when nn-Meter has no
    feature extractor for the op: such kernels get no nn-Meter prediction at all). ``precision``
    (fp32, fp16 or int8) is the arithmetic the kernel runs in: that of its compute node in the
    file's ``lodevem.precision`` metadata (the worker writes it for quantized and fp16 models).
    """

    index: int
    name: str
    op: str
    nnmeter_type: str
    features: Optional[tuple[float, ...]]
    category: str
    macs: int
    params: int
    input_elems: int
    output_elems: int
    input_hw: int
    cin: int
    cout: int
    kernel_size: int
    stride: int
    precision: str = "fp32"

    @property
    def bytes_moved(self) -> int:
        """fp32 bytes a kernel must at least touch: input + output activations + weights."""
        return FP32_BYTES * (self.input_elems + self.output_elems + self.params)


@dataclass(frozen=True)
class KernelGraph:
    """All kernels of one ONNX model, in nn-Meter's (topological, deterministic) order.

    ``sha256`` digests the graph *structure* (the model with its large weight tensors emptied):
    kernels do not depend on weight values, and hashing 100 MB of weights per model cost more
    than the whole prediction.
    """

    source: str
    sha256: str
    rules: str
    kernels: tuple[Kernel, ...]
    precision: str = "fp32"
    quantization: Optional[str] = None

    @property
    def macs(self) -> int:
        return sum(k.macs for k in self.kernels)

    @property
    def params(self) -> int:
        return sum(k.params for k in self.kernels)

    @property
    def bytes_moved(self) -> int:
        return sum(k.bytes_moved for k in self.kernels)


def _prod(values: Sequence[int]) -> int:
    return math.prod(int(v) for v in values) if values else 0


def _import_nn_meter() -> Any:
    """Import nn-Meter's pieces quietly (its pkg_resources deprecation warning is noise here)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from nn_meter.ir_converter.utils import onnx_model_to_graph
            from nn_meter.kernel_detector import KernelDetector
            from nn_meter.predictor.prediction.extract_feature import get_predict_features
            from nn_meter.predictor.prediction.predict_by_kernel import merge_conv_kernels
            from nn_meter.predictor.prediction.utils import get_kernel_name
    except OSError as exc:  # importing nn_meter creates ~/.nn_meter/config
        raise InputError(f"{exc.filename or '~/.nn_meter'}: nn-Meter cannot create its config folder there "
                         f"({exc.strerror or exc}); set HOME to a writable folder") from None
    return onnx_model_to_graph, KernelDetector, get_predict_features, merge_conv_kernels, get_kernel_name


def _load_model(path: Path) -> tuple[Any, dict[str, tuple[int, ...]], dict[str, int]]:
    """Load the ONNX model; return it with big initializers emptied, plus their dims and types."""
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure means the same thing to the user
        raise InputError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    dims: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, int] = {}
    for init in model.graph.initializer:
        dims[init.name] = tuple(int(d) for d in init.dims)
        dtypes[init.name] = int(init.data_type)
        if _prod(init.dims) > _STRIP_ABOVE:
            for field in ("raw_data", "float_data", "double_data", "int32_data", "int64_data"):
                init.ClearField(field)
    for i, node in enumerate(model.graph.node):
        if not node.name:  # the converter keys nodes by name; give unnamed ones a stable one
            node.name = f"lodevem_node_{i}"
    return model, dims, dtypes


def _expand(name: str, graph: dict[str, Any]) -> list[str]:
    """Primitive (converter) node names behind a detector node, through nested fused blocks."""
    if name in graph:
        return [name]
    out: list[str] = []
    for part in name.split(";"):
        if part in graph:
            out.append(part)
    return out


def _category(op: str, kernel_size: int) -> str:
    head = op.split("-")[0].lower()
    if head == "dwconv":
        return "depthwise_conv"
    if head == "conv":
        return "pointwise_conv" if kernel_size == 1 else "dense_conv"
    if head == "fc":
        return "fc"
    if head in _POOL_OPS or op in _POOL_OPS:
        return "pool"
    if head in _ELEMENTWISE_OPS:
        return "elementwise"
    return "other"


def _node_work(node: dict[str, Any], onnx_node: Any, dims: dict[str, tuple[int, ...]]) -> int:
    """MACs of one primitive node: convolutions and matrix products only."""
    attr = node.get("attr", {})
    op_type = attr.get("type")
    outs = attr.get("output_shape") or []
    ins = attr.get("input_shape") or []
    if not outs or onnx_node is None:
        return 0
    if op_type in ("Conv", "ConvTranspose") and len(onnx_node.input) > 1:
        base = _prod(outs[0]) if op_type == "Conv" else _prod(ins[0]) if ins else 0
        weight = dims.get(onnx_node.input[1])
        if weight is not None and len(weight) >= 3:
            return base * _prod(weight[1:])
        # Weight computed at run time (e.g. dequantized): MACs from the attributes instead.
        conv_attr = attr.get("attr", {})
        groups = max(int(conv_attr.get("group", 1)), 1)
        window = _prod(conv_attr.get("kernel_shape", [1]))
        if op_type == "Conv":  # each output element: (cin / groups) x window MACs
            return base * (int(ins[0][-1]) // groups) * window if ins and ins[0] else 0
        return base * (int(outs[0][-1]) // groups) * window  # transposed: per input element
    if op_type in _MATMUL_TYPES and ins and ins[0]:
        return _prod(outs[0]) * int(ins[0][-1])
    return 0


def _node_params(onnx_node: Any, dims: dict[str, tuple[int, ...]], dtypes: dict[str, int]) -> int:
    if onnx_node is None:
        return 0
    return sum(_prod(dims[i]) for i in onnx_node.input if i in dims and dtypes.get(i) in _FLOAT_TYPES)


def extract_kernels(onnx_path: Path | str, rules_path: Path | str | None = None) -> KernelGraph:
    """Run nn-Meter's converter and kernel detector on an ONNX file (offline, no predictor data).

    ``rules_path`` is a ``fusion_rules.json``: a predictor folder's own when nn-Meter predicts,
    else the bundled TFLite-CPU rules. Raises ``InputError`` for an unreadable or shapeless model.
    """
    path = Path(onnx_path)
    rules = Path(rules_path) if rules_path is not None else DEFAULT_RULES
    if not rules.is_file():
        raise InputError(f"{rules}: fusion rules file not found")
    to_graph, KernelDetector, get_predict_features, merge_conv_kernels, get_kernel_name = _import_nn_meter()
    model, dims, dtypes = _load_model(path)
    onnx_nodes = {n.name: n for n in model.graph.node}
    node_precision = _node_precisions(model, path)

    levels = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        graph = to_graph(model)
        detector = KernelDetector(str(rules))
        detector.load_graph(graph)
        raw_kernels = detector.get_kernels()
    except Exception as exc:  # noqa: BLE001 - nn-Meter fails with KeyError/IndexError on odd graphs
        raise InputError(
            f"{path}: nn-Meter's kernel detector cannot read this graph ({type(exc).__name__}: {exc}); "
            "export it with lodevem's worker (legacy exporter, opset 13, onnxsim)"
        ) from None
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)

    kernels = [
        _build_kernel(i, raw, detector, graph, onnx_nodes, dims, dtypes,
                      get_predict_features, merge_conv_kernels, get_kernel_name, node_precision)
        for i, raw in enumerate(raw_kernels)
    ]
    if not kernels:
        raise InputError(f"{path}: nn-Meter found no kernels in this graph (no shaped operators)")
    return KernelGraph(source=str(path), sha256=bytes_digest(model.SerializeToString()), rules=str(rules),
                       kernels=tuple(kernels),
                       precision=node_precision.overall, quantization=node_precision.quantization)


@dataclass(frozen=True)
class _NodePrecisions:
    """The ``lodevem.precision`` metadata, checked: a precision per ONNX node (``default`` for
    nodes not listed), the model's overall precision and its quantization ("scheme, backend")."""

    default: str
    nodes: dict[str, str]
    overall: str
    quantization: Optional[str]

    def of(self, primitives: Sequence[str], onnx_nodes: dict[str, Any]) -> str:
        """A kernel's precision: its compute node's, else its first listed node's, else the default."""
        compute = [p for p in primitives if p in onnx_nodes and onnx_nodes[p].op_type in _COMPUTE_TYPES]
        for name in compute + list(primitives):
            if name in self.nodes:
                return self.nodes[name]
        return self.default


def _node_precisions(model: Any, path: Path) -> _NodePrecisions:
    from ..safe_io.records import parse_json

    raw = next((p.value for p in model.metadata_props if p.key == PRECISION_KEY), None)
    if raw is None:
        return _NodePrecisions("fp32", {}, "fp32", None)
    try:
        data = parse_json(raw, str(path))  # bounded: the sandbox (the model's code) wrote it
        nodes = {str(k): str(v) for k, v in (data.get("nodes") or {}).items()}
        default, overall = str(data.get("default", "fp32")), str(data.get("precision", "fp32"))
        quant = data.get("quantization")
        quantization = f"{quant['scheme']}, {quant['backend']}" if quant else None
    except (ValueError, TypeError, KeyError, AttributeError, InputError):
        raise InputError(f"{path}: unreadable {PRECISION_KEY} metadata; delete the file to export it again") from None
    if default not in ARITHMETIC or overall not in FILE_PRECISIONS or set(nodes.values()) - set(ARITHMETIC):
        raise InputError(f"{path}: {PRECISION_KEY} metadata names an unknown precision; expected "
                         f"{', '.join(ARITHMETIC)}")
    return _NodePrecisions(default, nodes, overall, quantization)


def _build_kernel(
    index: int,
    raw: dict[str, Any],
    detector: Any,
    graph: dict[str, Any],
    onnx_nodes: dict[str, Any],
    dims: dict[str, tuple[int, ...]],
    dtypes: dict[str, int],
    get_predict_features: Any,
    merge_conv_kernels: Any,
    get_kernel_name: Any,
    node_precision: "_NodePrecisions",
) -> Kernel:
    op = str(raw["op"])
    bb_index = int(str(raw["name"]).rsplit("#", 1)[1])
    primitives = [p for node in detector.bbs[bb_index] for p in _expand_detector_node(node, detector, graph)]
    prim_set = set(primitives)
    macs = sum(_node_work(graph[p], onnx_nodes.get(p), dims) for p in primitives)
    params = sum(_node_params(onnx_nodes.get(p), dims, dtypes) for p in primitives)
    sinks = [p for p in primitives if not any(o in prim_set for o in graph[p].get("outbounds", []))]
    output_elems = sum(_prod(s) for p in sinks for s in (graph[p]["attr"].get("output_shape") or [])[:1])
    input_elems = sum(_prod(s) for s in raw.get("input_tensors", []) if s)

    feats = get_predict_features([raw])
    features = tuple(float(v) for v in next(iter(feats[0].values()))) if feats else None
    ks_attr = raw.get("ks") or [1, 1]
    stride_attr = raw.get("strides") or [1, 1]
    kernel_size = int(ks_attr[-1])
    return Kernel(
        index=index,
        name=str(raw["name"]),
        op=op,
        nnmeter_type=str(get_kernel_name(merge_conv_kernels(op))),
        features=features,
        category=_category(op, kernel_size),
        macs=int(macs),
        params=int(params),
        input_elems=int(input_elems),
        output_elems=int(output_elems),
        input_hw=int(raw.get("inputh", 1) or 1),
        cin=int(raw.get("cin", 0) or 0),
        cout=int(raw.get("cout", 0) or 0),
        kernel_size=kernel_size,
        stride=int(stride_attr[-1]),
        precision=node_precision.of(primitives, onnx_nodes),
    )


def _expand_detector_node(node: str, detector: Any, graph: dict[str, Any]) -> list[str]:
    """A detector node is either a converter node or a fused multi-op block (se, hswish...)."""
    attr = detector.model_graph.get_node_attr(node) or {}
    members = attr.get("attr", {}).get("primitive_nodes")
    if not members:
        return _expand(node, graph)
    out: list[str] = []
    for member in members:
        out.extend(_expand(member, graph))
    return out
