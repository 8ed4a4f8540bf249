"""Offline latency estimator: a kernel-level cost model calibrated on published ARM latencies.

Why a cost model and not a FLOPs ratio: on one Cortex-A53 the same runtime reaches ~3.3 MACs per
cycle on ResNet-18 but ~1 on EfficientNet-B0 (data README), because dense 3x3, 1x1 and depthwise
convolutions and memory-bound element-wise kernels run at very different efficiencies. So each
kernel (from :mod:`lodevem.latency.kernels`) is charged, in millions of cycles on the reference core
(Cortex-A53), ``theta . work`` with the work split into terms:

    compute: MACs of 3x3 stride-1 dense convs (Winograd-able) | of 1x1 and other dense convs
             (GEMM, im2col+GEMM) | of depthwise convs | of fully connected layers
    memory:  fp32 bytes moved (activations in + out, weights) | 1 per kernel (fixed overhead)

and on another core at ``f`` GHz

    ms = (compute_scale[core] * theta_c . work_c + memory_scale[core] * theta_m . work_m) / f

``theta`` is shared by all cores; each core has a compute and a memory scale, so the ratio
between two cores differs from kernel to kernel (a depthwise conv is memory-bound, a 3x3 conv
is not). Terms are summed, not maxed: the model stays smooth, strictly monotone in clock and in
work, and linear in ``theta`` for the fit. Multi-threading divides by an Amdahl speedup with a
per-core parallel fraction. Every number comes from ``data/estimator_params.json``, written by
``scripts/fit_estimator.py``; this module holds no latencies and no fitted constants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from ..errors import EstimatorError, InputError
from .kernels import Kernel

__all__ = [
    "COMPUTE_TERMS",
    "DEFAULT_PARAMS",
    "MEMORY_TERMS",
    "TERMS",
    "CoreParams",
    "Estimator",
    "EstimatorError",
    "cost_class",
    "sum_work",
    "work_vector",
]

DEFAULT_PARAMS: Path = Path(__file__).resolve().parent.parent / "data" / "estimator_params.json"

# MAC terms (scaled by a core's compute scale) then memory-side terms (scaled by its memory scale).
COMPUTE_TERMS: tuple[str, ...] = ("conv3x3s1_macs", "gemm_conv_macs", "depthwise_macs", "fc_macs")
MEMORY_TERMS: tuple[str, ...] = ("bytes", "kernels")
TERMS: tuple[str, ...] = COMPUTE_TERMS + MEMORY_TERMS
# Work units: MACs and bytes in millions so the fitted cycles-per-unit stay readable.
_MEGA = 1e6


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


def work_vector(kernel: Kernel, mac_scale: float = 1.0) -> tuple[float, ...]:
    """Work of one kernel in the order of ``TERMS`` (MMACs..., MB, 1).

    ``mac_scale`` lets the fit correct a zoo graph's MACs to the benchmarked graph's (ncnn's
    mobilenet_v2 has an extra conv, ...); predictions always use 1.
    """
    work = dict.fromkeys(TERMS, 0.0)
    term = cost_class(kernel)
    if term is not None:
        work[term] = kernel.macs * mac_scale / _MEGA
    work["bytes"] = kernel.bytes_moved / _MEGA
    work["kernels"] = 1.0
    return tuple(work[t] for t in TERMS)


def sum_work(kernels: Iterable[Kernel], mac_scale: float = 1.0) -> tuple[float, ...]:
    """Model-level work: the per-kernel vectors summed (the cost model is linear in work)."""
    total = [0.0] * len(TERMS)
    for kernel in kernels:
        for i, w in enumerate(work_vector(kernel, mac_scale)):
            total[i] += w
    return tuple(total)


@dataclass(frozen=True)
class CoreParams:
    """Fitted or derived parameters of one core type, with where they came from."""

    core: str
    compute_scale: float
    memory_scale: float
    parallel_fraction: float
    int8_speedup: float
    source: str
    derived: bool
    fp32_from_fp16: bool


class Estimator:
    """The fitted cost model. Create once per run (``Estimator.load()``); it is immutable."""

    def __init__(self, params: dict[str, Any], path: Optional[Path] = None) -> None:
        self.path = path
        try:
            self.version: str = str(params["version"])
            self.reference_core: str = str(params["reference_core"])
            self.reference_clock_ghz: float = float(params["reference_clock_ghz"])
            self.theta: tuple[float, ...] = tuple(float(params["terms"][t]["cycles_per_unit"]) for t in TERMS)
            self.cores: dict[str, CoreParams] = {
                name: CoreParams(
                    core=name,
                    compute_scale=float(c["compute_scale"]),
                    memory_scale=float(c["memory_scale"]),
                    parallel_fraction=float(c["parallel_fraction"]),
                    int8_speedup=float(c["int8_speedup"]),
                    source=str(c["source"]),
                    derived=bool(c["derived"]),
                    fp32_from_fp16=bool(c["fp32_from_fp16"]),
                )
                for name, c in params["cores"].items()
            }
            self.fp16_factor: float = float(params["fp16_speedup"]["value"])
            self.fp16_cores: frozenset[str] = frozenset(params["fp16_speedup"]["cores"])
            unc = params["uncertainty"]
            self.lodo_mape_pct: float = float(unc["lodo_mape_pct"])
            self.spread_note: str = str(unc["same_core_spread"])
        except (KeyError, TypeError, ValueError) as exc:
            where = path or "estimator parameters"
            raise EstimatorError(f"{where}: malformed estimator parameters ({type(exc).__name__}: {exc})") from None
        if any(t < 0 for t in self.theta) or any(
            c.compute_scale <= 0 or c.memory_scale <= 0 or not 0 <= c.parallel_fraction <= 1 for c in self.cores.values()
        ):
            raise EstimatorError(f"{path or 'estimator parameters'}: negative or out-of-range parameters")
        self.params = params

    @classmethod
    def load(cls, path: Optional[Path] = None) -> "Estimator":
        """Read ``data/estimator_params.json`` (or ``path``)."""
        path = Path(path) if path is not None else DEFAULT_PARAMS
        try:
            params = json.loads(path.read_text())
        except OSError as exc:
            raise EstimatorError(f"{path}: cannot read estimator parameters ({exc.strerror}); reinstall lodevem") from None
        except json.JSONDecodeError as exc:
            raise EstimatorError(f"{path}: estimator parameters are not valid JSON ({exc})") from None
        return cls(params, path)

    @cached_property
    def label(self) -> str:
        return f"estimator:{self.version}"

    def core(self, core: str) -> CoreParams:
        """Parameters of ``core``; a clear ``InputError`` for a core the fit never covered."""
        try:
            return self.cores[core]
        except KeyError:
            raise InputError(
                f"the latency estimator has no parameters for core '{core}'; known cores: {', '.join(self.cores)}"
            ) from None

    @staticmethod
    def _check_clock(clock_ghz: float) -> None:
        if not clock_ghz > 0:
            raise InputError(f"clock must be a positive number of GHz, got {clock_ghz!r}")

    def work_ms(self, work: Sequence[float], core: str, clock_ghz: float) -> float:
        """1-thread fp32 milliseconds for a work vector (one kernel's or a model's sum)."""
        params = self.core(core)
        self._check_clock(clock_ghz)
        n_compute = len(COMPUTE_TERMS)
        compute = sum(t * w for t, w in zip(self.theta[:n_compute], work[:n_compute]))
        memory = sum(t * w for t, w in zip(self.theta[n_compute:], work[n_compute:]))
        cycles = params.compute_scale * compute + params.memory_scale * memory  # in millions of cycles
        return cycles / clock_ghz  # Mcycles / GHz = ms

    def thread_speedup(self, core: str, threads: int, cluster_cores: Optional[int] = None) -> float:
        """Amdahl speedup of ``threads`` threads, capped by the cluster's core count."""
        if threads < 1:
            raise InputError(f"threads must be >= 1, got {threads}")
        n = min(threads, cluster_cores) if cluster_cores else threads
        q = self.core(core).parallel_fraction
        return 1.0 / ((1.0 - q) + q / n)

    def transfer_ratio(
        self, work: Sequence[float], core: str, clock_ghz: float, ref_core: str, ref_clock_ghz: float
    ) -> float:
        """time(work on core@clock) / time(work on ref_core@ref_clock), for one kernel's
        ``work_vector``: carries nn-Meter's A76 figure to another core kernel by kernel, so both
        latency paths share the estimator's shape."""
        return self.work_ms(work, core, clock_ghz) / self.work_ms(work, ref_core, ref_clock_ghz)

    def int8_speedup(self, core: str) -> float:
        """fp32 latency / int8 latency on ``core`` (fitted from paired ncnn rows; for int8 variants)."""
        return self.core(core).int8_speedup

    def fp16_speedup(self, core: str) -> float:
        """fp32 latency / fp16 latency on ``core``: the fitted ncnn factor on ARMv8.2 cores (FP16
        arithmetic), 1 elsewhere (no fp16 arithmetic: the runtime computes in fp32)."""
        self.core(core)
        return self.fp16_factor if core in self.fp16_cores else 1.0

    def uncertainty(self, core: str) -> str:
        """One-line statement of how far a number may be off, for the report."""
        params = self.core(core)
        text = f"±{self.lodo_mape_pct:.0f}% (LODO MAPE)"
        if params.derived:
            text += f"; {core} not measured: derived from Arm's published per-clock figures"
        elif params.fp32_from_fp16:
            text += f"; {core} fp32 speed inferred from fp16 measurements"
        return text
