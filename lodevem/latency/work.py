"""A kernel's work in the estimator's terms: MACs by class, bytes, one per kernel, DRAM time at peak.

Why apart from the cost model (``latency.estimator``): the work of a kernel is a fact of the graph
and, for its DRAM part, of the SoC it runs on (``latency.memory``); the fit script, the nn-Meter
transfer and the estimator's kind all build the same vectors here, and the estimator stays a
short formula over them.

Order of a vector: ``TERMS`` (MMACs of each compute class, MB moved, 1 per kernel) then
``DRAM_TERM`` (ms the kernel's DRAM traffic takes at the SoC's peak bandwidth: 0 without a SoC).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from .kernels import Kernel
from .memory import KernelBytes, MemorySystem, dram_ms_at_peak

__all__ = ["COMPUTE_TERMS", "DRAM_TERM", "MEMORY_TERMS", "TERMS", "cost_class", "graph_works", "kernel_bytes",
           "sum_work", "work_vector"]

# MAC terms (scaled by a core's compute scale) then memory-side terms (scaled by its memory scale).
COMPUTE_TERMS: tuple[str, ...] = ("conv3x3s1_macs", "gemm_conv_macs", "depthwise_macs", "fc_macs", "winograd_io")
MEMORY_TERMS: tuple[str, ...] = ("bytes", "kernels")
TERMS: tuple[str, ...] = COMPUTE_TERMS + MEMORY_TERMS
DRAM_TERM = "dram_ms_at_peak"  # the last element of every work vector (not a cycles term)
# Work units: MACs and bytes in millions so the fitted cycles-per-unit stay readable.
_MEGA = 1e6
_FP32 = 4


def cost_class(kernel: Kernel) -> Optional[str]:
    """The MAC term a kernel's multiply-accumulates are charged to (None: no MAC work).

    3x3 stride-1 dense convolutions get their own term because optimised runtimes run them with
    Winograd, several times fewer multiplies than MACs; that split explains most of the
    ResNet-vs-MobileNet gap in the data. 1x1 convolutions are a GEMM, and other dense ones
    (strided, 5x5, 7x7) run as im2col + GEMM, so they share one term: the data (a few stem convs)
    could not tell them apart, and a separate term fitted to zero would make them free.
    """
    if kernel.category == "dense_conv":
        return "conv3x3s1_macs" if kernel.kernel_size == 3 and kernel.stride == 1 else "gemm_conv_macs"
    return {
        "pointwise_conv": "gemm_conv_macs",
        "depthwise_conv": "depthwise_macs",
        "fc": "fc_macs",
    }.get(kernel.category)


def kernel_bytes(kernel: Kernel) -> KernelBytes:
    """A kernel's fp32 activation and weight bytes (what the memory model splits)."""
    return KernelBytes(float(_FP32 * (kernel.input_elems + kernel.output_elems)), float(_FP32 * kernel.params))


def work_vector(kernel: Kernel, mac_scale: float = 1.0, dram_ms: float = 0.0) -> tuple[float, ...]:
    """Work of one kernel in the order of ``TERMS`` (MMACs..., MB, 1) then its DRAM ms at peak.

    ``mac_scale`` lets the fit correct a zoo graph's MACs to the benchmarked graph's (ncnn's
    mobilenet_v2 has an extra conv, ...); predictions always use 1. ``dram_ms``: from
    ``graph_works`` (it depends on the whole graph's weights and on the SoC).
    """
    work = dict.fromkeys(TERMS, 0.0)
    term = cost_class(kernel)
    if term is not None:
        work[term] = kernel.macs * mac_scale / _MEGA
    if term == "conv3x3s1_macs":
        # Winograd's input / output tile transforms cost per activation, not per MAC: what makes
        # 3x3 convs with few channels (SqueezeNet's expands) slower per MAC than ResNet's.
        work["winograd_io"] = (kernel.input_elems + kernel.output_elems) / _MEGA
    work["bytes"] = kernel.bytes_moved / _MEGA
    work["kernels"] = 1.0
    return tuple(work[t] for t in TERMS) + (dram_ms,)


def graph_works(kernels: Sequence[Kernel], memory: Optional[MemorySystem], mac_scale: float = 1.0
                ) -> list[tuple[float, ...]]:
    """Every kernel's work vector on a SoC's memory system (None: no DRAM term, the cache-only
    cost of before issue 44, used where no device is known)."""
    drams = dram_ms_at_peak([kernel_bytes(k) for k in kernels], memory) if memory is not None else [0.0] * len(kernels)
    return [work_vector(k, mac_scale, d) for k, d in zip(kernels, drams)]


def sum_work(kernels: Iterable[Kernel], mac_scale: float = 1.0, memory: Optional[MemorySystem] = None
             ) -> tuple[float, ...]:
    """Model-level work: the per-kernel vectors summed (the cost model is linear in work)."""
    vectors = graph_works(list(kernels), memory, mac_scale)
    total = [0.0] * (len(TERMS) + 1)
    for vector in vectors:
        for i, w in enumerate(vector):
            total[i] += w
    return tuple(total)
