"""Where a predicted latency goes: per node type, in the shape of LiteRT's op profiling summary.

Why this shape: LiteRT's ``benchmark_model --enable_op_profiling=true`` prints a "Summary by node
type" (node type, count, avg ms, %, cumulative %) for a model measured on a phone; a user who
later measures one compares like with like. No offline tool gives that for the A53/A55/A7, so
every predicted cell can state it from the kernels its predictor priced (``KernelLatency``).

Node types are LiteRT's builtin operator names where a kernel is one (``CONV_2D``,
``DEPTHWISE_CONV_2D``, ``FULLY_CONNECTED``, pooling, ``ADD``...), else nn-Meter's fused type in
capitals. Each row also says how much of its time the SoC's DRAM took (``dram_ms``), where the
estimator priced it. Kernel times are scaled so the rows add up to the cell's latency (a
calibrated cell's factor applies to every kernel alike).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from .records import KernelLatency

__all__ = ["LAYER_COLUMNS", "NodeTypeRow", "layers_csv_text", "node_type", "summarize_layers"]

_BY_CATEGORY = {"dense_conv": "CONV_2D", "pointwise_conv": "CONV_2D", "depthwise_conv": "DEPTHWISE_CONV_2D",
                "fc": "FULLY_CONNECTED"}
_BY_OP = {"maxpool": "MAX_POOL_2D", "avgpool": "AVERAGE_POOL_2D", "gap": "MEAN", "global-avgpool": "MEAN",
          "add": "ADD", "mul": "MUL", "relu": "RELU", "relu6": "RELU6", "hswish": "HARD_SWISH",
          "sigmoid": "LOGISTIC", "concat": "CONCATENATION", "reshape": "RESHAPE", "split": "SPLIT",
          "channelshuffle": "TRANSPOSE", "se": "SE_BLOCK (MEAN+CONV_2D+MUL)", "bn": "MUL+ADD (batch norm)"}
LAYER_COLUMNS = ("model", "profile_id", "runtime", "threads", "node_type", "count", "ms", "pct", "cum_pct", "dram_ms")


@dataclass(frozen=True)
class NodeTypeRow:
    """One node type's share of a prediction: kernels, ms, % of the total, cumulative %."""

    node_type: str
    count: int
    ms: float
    pct: float
    cum_pct: float
    dram_ms: Optional[float]


def node_type(kernel: KernelLatency) -> str:
    """LiteRT's operator name for a kernel's category / fused op (else the fused op in capitals)."""
    if kernel.category in _BY_CATEGORY:
        return _BY_CATEGORY[kernel.category]
    op = kernel.nnmeter_type.lower()
    head = op.split("-")[0]
    return _BY_OP.get(op) or _BY_OP.get(head) or op.upper().replace("-", "_")


def summarize_layers(kernels: Iterable[KernelLatency], total_ms: Optional[float] = None) -> tuple[NodeTypeRow, ...]:
    """The "summary by node type" of one cell, largest first (ties by name); ``total_ms``: the
    cell's latency the rows are scaled to (None: the kernels' own sum). Kernels without a time
    (nn-Meter has no regressor for them) count but add no ms."""
    kernels = list(kernels)
    own = sum(k.ms for k in kernels if k.ms is not None)
    scale = (total_ms / own) if total_ms and own > 0 else 1.0
    groups: dict[str, list[KernelLatency]] = {}
    for k in kernels:
        groups.setdefault(node_type(k), []).append(k)
    sums = {name: sum(k.ms for k in ks if k.ms is not None) * scale for name, ks in groups.items()}
    whole = sum(sums.values())
    rows, cumulative = [], 0.0
    for name in sorted(groups, key=lambda n: (-sums[n], n)):
        pct = 100.0 * sums[name] / whole if whole > 0 else 0.0
        cumulative += pct
        drams = [k.dram_ms for k in groups[name] if k.dram_ms is not None]
        rows.append(NodeTypeRow(name, len(groups[name]), sums[name], pct, min(cumulative, 100.0),
                                sum(drams) * scale if drams else None))
    return tuple(rows)


def layers_csv_text(cells: Sequence[tuple[str, str, str, int, Sequence[NodeTypeRow]]]) -> str:
    """``layers.csv``: one line per (model, profile, runtime, threads, node type)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(LAYER_COLUMNS)
    for model, profile, runtime, threads, rows in cells:
        for r in rows:
            writer.writerow([_cell(model), _cell(profile), runtime, threads, r.node_type, r.count, f"{r.ms:.4f}",
                             f"{r.pct:.2f}", f"{r.cum_pct:.2f}", "" if r.dram_ms is None else f"{r.dram_ms:.4f}"])
    return out.getvalue()


def _cell(text: str) -> str:
    """A spreadsheet never runs a cell that starts like a formula (CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
