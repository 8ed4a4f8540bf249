"""Offline latency estimator: a kernel-level cost model calibrated on published ARM latencies.

Why a cost model and not a FLOPs ratio: on one Cortex-A53 the same runtime reaches ~3.3 MACs per
cycle on ResNet-18 but ~1 on EfficientNet-B0 (data README), because dense 3x3, 1x1 and depthwise
convolutions and memory-bound element-wise kernels run at very different efficiencies. So each
kernel (from :mod:`lodevem.latency.kernels`) is charged, in millions of cycles on the reference core
(Cortex-A53) and the reference runtime (ncnn), ``theta . work`` with the work split into terms:

    compute: MACs of 3x3 stride-1 dense convs (Winograd-able) | of 1x1 and other dense convs
             (GEMM, im2col+GEMM) | of depthwise convs | of fully connected layers | activations
             in + out of the Winograd-able convs (tile transforms)
    memory:  fp32 bytes moved (activations in + out, weights) | 1 per kernel (fixed overhead)

and on another core at ``f`` GHz, for a named runtime ``rt``, executed arithmetic ``a`` and ``n`` threads

    C  = compute_scale[core] * compute_factor[rt] * theta_c . map_rt(work_c) / speedup_c[a, rt, core]
    M  = memory_scale[core]  * memory_factor[rt]  * (theta_b * bytes / speedup_m[a, rt] + theta_k * kernels)
    ms = (C * A(q_c[core], n) + M * A(q_m[core], n)) / f,   A(q, n) = (1 - q) + q / min(n, cluster)

* **What runs** (``latency.arithmetic``): a kernel is priced at the arithmetic its runtime executes
  on the core, not at what the file holds (LiteRT runs an fp16-weights file in fp32; ncnn runs an
  fp32 model in fp16 on ARMv8.2 cores), so a file and its level twin cost the same.
* **Per-clock order of the cores**, by construction: the fit bounds every core's scales (in every
  fold) to Arm's documented order: Cortex-A7 >= A53 >= A55 >= A75, A76 and A53 >= A72, A73 cycles
  for the same work; latency is cycles / clock.
* **Runtime**: XNNPACK has no Winograd, so its ``map_rt`` charges 3x3 stride-1 MACs at the GEMM
  rate; each runtime has its own compute and memory efficiency (ncnn = 1). **Threads**: Amdahl per
  core and work class, fractions in [0, 1], N capped by the cluster's cores.
* **fp16** (executed: ncnn on ARMv8.2 cores): one compute divisor for dense work and one for
  depthwise convs, shared by the FP16 cores, each in [1, 2] (8 fp16 lanes per NEON op instead of
  4); bytes / 2.
* **int8**, per runtime and int8 ISA group (ARMv7, ARMv8.0, ARMv8.2 with dot product): a compute
  divisor and a bytes divisor. XNNPACK's int8 is bounded to be faster than its fp32 and more so
  with the dot product; where the dev data have no XNNPACK int8 rows, a cited prior decides and
  the cell's note says so.

Terms are summed, not maxed: the model stays smooth, strictly monotone in clock and in work, and
linear in ``theta`` for the fit. Every number comes from ``data/estimator_params.json``, written
by ``scripts/fit_estimator.py``; this module holds no latencies and no fitted constants.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import EstimatorError, InputError
from ..wire.precision import INT8_ARITHMETIC
from ..wire.registry import DEFAULT_LATENCY_RUNTIME, canonical, latency_runtimes
from .arithmetic import EXECUTED, band_arithmetic, executed, int8_group
from .estimator_records import (
    CoreParams,
    Estimate,
    FitAccuracy,
    FitProvenance,
    Fp16Params,
    Int8Params,
    KernelEstimate,
    RuntimeParams,
    held_out_rows,
)
from .selection import CellKind, HeldOutError, held_out_error
from .statement import statement
from .work import COMPUTE_TERMS, DRAM_TERM, MEMORY_TERMS, TERMS, cost_class, graph_works, sum_work, work_vector

__all__ = [
    "COMPUTE_TERMS", "DEFAULT_PARAMS", "DEFAULT_RUNTIME", "DRAM_TERM", "canonical_runtime", "MEMORY_TERMS", "TERMS",
    "CoreParams", "Estimate", "FitAccuracy", "FitProvenance", "Estimator", "EstimatorError", "cost_class",
    "graph_works", "sum_work", "work_vector",
]

DEFAULT_PARAMS: Path = Path(__file__).resolve().parent.parent / "data" / "estimator_params.json"

DEFAULT_RUNTIME = DEFAULT_LATENCY_RUNTIME  # the runtimes it names are the registry's with a latency model


def canonical_runtime(name: str) -> str:
    """``tflite-xnnpack`` / ``litert`` -> ``tflite``; an ``InputError`` for a runtime with no model."""
    key = canonical(name)
    if key is None or key not in latency_runtimes():
        raise InputError(f"no latency model for runtime '{name}': the estimator knows "
                         f"{', '.join(latency_runtimes())} (published data exist only for those)")
    return key


def amdahl(q: float, threads: float) -> float:
    """Amdahl time factor ``(1 - q) + q / n`` (1 at one thread, smaller with more)."""
    return (1.0 - q) + q / threads


def _core_params(name: str, c: dict[str, Any]) -> CoreParams:
    return CoreParams(name, float(c["compute_scale"]), float(c["memory_scale"]), float(c["parallel_fraction_compute"]),
                      float(c["parallel_fraction_memory"]), str(c["source"]), bool(c["derived"]),
                      tuple(c["measured_runtimes"]))


def _runtime_params(name: str, r: dict[str, Any]) -> RuntimeParams:
    i8 = r["int8"]
    return RuntimeParams(name, float(r["compute_factor"]), float(r["memory_factor"]),
                         {str(k): str(v) for k, v in r.get("term_map", {}).items()}, tuple(r["measured_precisions"]),
                         str(r["source"]), Int8Params({str(g): float(v) for g, v in i8["compute_speedup"].items()},
                                                      float(i8["memory_speedup"]), str(i8["source"]),
                                                      bool(i8["measured"])))


class Estimator:
    """The fitted cost model. Create once per run (``Estimator.load()``); it is immutable."""

    def __init__(self, params: dict[str, Any], path: Optional[Path] = None) -> None:
        self.path = path
        try:
            self.version: str = str(params["version"])
            self.reference_core: str = str(params["reference_core"])
            self.theta: tuple[float, ...] = tuple(float(params["terms"][t]["cycles_per_unit"]) for t in TERMS)
            self.cores: dict[str, CoreParams] = {n: _core_params(n, c) for n, c in params["cores"].items()}
            self.runtimes: dict[str, RuntimeParams] = {n: _runtime_params(n, r) for n, r in params["runtimes"].items()}
            dram = params.get("dram") or {}  # a params file from before issue 44: no DRAM term
            self.dram_inverse_efficiency = float(dram.get("inverse_efficiency", 0.0))
            self.dram_parallel = float(dram.get("parallel_fraction", 0.0))
            fp16 = params["precision"]["fp16"]
            self.fp16 = Fp16Params(float(fp16["compute_speedup"]), float(fp16["depthwise_speedup"]),
                                   float(fp16["memory_speedup"]), str(fp16["source"]))
            unc = params.get("uncertainty", {})
            self.lodo_mape_pct: Optional[float] = (float(unc["lodo_mape_pct"]) if "lodo_mape_pct" in unc else None)
            # a file fitted with folds by board states optimistic errors: no figures from it
            self.held_out_rows = held_out_rows(unc) if unc.get("folds") == "soc" else ()
            self.spread_note: str = str(unc.get("same_core_spread", ""))
            self.accuracy = FitAccuracy.from_dict(unc)
            self.provenance = FitProvenance.from_dict(params.get("provenance"))
        except (KeyError, TypeError, ValueError) as exc:
            where = path or "estimator parameters"
            raise EstimatorError(f"{where}: malformed estimator parameters ({type(exc).__name__}: {exc})") from None
        bad_map = any(a not in COMPUTE_TERMS or b not in COMPUTE_TERMS + ("",)
                      for r in self.runtimes.values() for a, b in r.term_map.items())
        if bad_map or any(t < 0 for t in self.theta) or self.dram_inverse_efficiency < 0 or not (
                0 <= self.dram_parallel <= 1) or any(
            c.compute_scale <= 0 or c.memory_scale <= 0 or not 0 <= c.parallel_compute <= 1
            or not 0 <= c.parallel_memory <= 1 for c in self.cores.values()
        ) or any(r.compute_factor <= 0 or r.memory_factor <= 0 or r.int8.memory_speedup <= 0
                 or min(r.int8.compute_speedup.values(), default=0) <= 0 for r in self.runtimes.values()) or min(
                self.fp16.compute_speedup, self.fp16.depthwise_speedup, self.fp16.memory_speedup) <= 0:
            raise EstimatorError(f"{path or 'estimator parameters'}: negative or out-of-range parameters")
        self.params = params

    @classmethod
    def load(cls, path: Optional[Path] = None) -> "Estimator":
        """Read ``data/estimator_params.json`` (or ``path``)."""
        path = Path(path) if path is not None else DEFAULT_PARAMS
        try:
            params = json.loads(path.read_text())
        except OSError as exc:
            raise EstimatorError(f"{path}: cannot read estimator parameters ({exc.strerror}); "
                                 "reinstall lodevem") from None
        except json.JSONDecodeError as exc:
            raise EstimatorError(f"{path}: estimator parameters are not valid JSON ({exc})") from None
        return cls(params, path)

    @cached_property
    def label(self) -> str:
        return f"estimator:{self.version}"

    def source_label(self, runtime: str, core: str, clock_text: str) -> str:
        """``estimator:v3 tflite (Cortex-A53@2.0GHz)``: the version, the runtime, where."""
        return f"{self.label} {self.runtime(runtime).name} ({core}@{clock_text}GHz)"

    def core(self, core: str) -> CoreParams:
        """Parameters of ``core``; a clear ``InputError`` for a core the fit never covered."""
        try:
            return self.cores[core]
        except KeyError:
            raise InputError(
                f"the latency estimator has no parameters for core '{core}'; known cores: {', '.join(self.cores)}"
            ) from None

    def runtime(self, runtime: str) -> RuntimeParams:
        """Parameters of ``runtime`` (aliases accepted); ``InputError`` for one without data."""
        name = canonical_runtime(runtime)
        if name not in self.runtimes:
            raise InputError(f"the latency estimator has no parameters for runtime '{runtime}'; fitted runtimes: "
                             f"{', '.join(self.runtimes)}")
        return self.runtimes[name]

    @staticmethod
    def _check_clock(clock_ghz: float) -> None:
        if not clock_ghz > 0:
            raise InputError(f"clock must be a positive number of GHz, got {clock_ghz!r}")

    @staticmethod
    def _check_precision(precision: str) -> None:
        if precision not in EXECUTED:
            raise InputError(f"no latency model for precision '{precision}', expected one of {', '.join(EXECUTED)}")

    def executed(self, core: str, runtime: str, precision: str) -> str:
        """The arithmetic ``runtime`` computes a kernel holding ``precision`` in on ``core``."""
        self._check_precision(precision)
        return executed(self.runtime(runtime).name, core, precision)

    def _parts(self, work: Sequence[float], core: str, runtime: str, precision: str) -> tuple[float, float, float]:
        """(compute, memory) Mcycles and DRAM ms of ``work`` at one thread, for ``runtime`` and a
        kernel that holds ``precision`` (priced at what the runtime executes it in). The DRAM part
        is the SoC's: its ms at peak bandwidth (``work[DRAM_TERM]``) times the fitted inverse
        efficiency, bytes divided like the cache-side bytes for fp16 / int8 tensors."""
        params, rt = self.core(core), self.runtime(runtime)
        arithmetic = self.executed(core, runtime, precision)
        n_c = len(COMPUTE_TERMS)
        mapped = dict.fromkeys(COMPUTE_TERMS, 0.0)
        for term, w in zip(COMPUTE_TERMS, work[:n_c]):
            target = rt.term_map.get(term, term)
            if target:  # "" : the runtime does not do this work (no Winograd transforms in XNNPACK)
                mapped[target] += w
        theta = dict(zip(TERMS, self.theta))
        scale = params.compute_scale * rt.compute_factor
        depthwise = theta["depthwise_macs"] * mapped["depthwise_macs"] * scale
        compute = sum(theta[t] * mapped[t] for t in COMPUTE_TERMS) * scale - depthwise
        bytes_ = theta["bytes"] * work[n_c] * params.memory_scale * rt.memory_factor
        overhead = theta["kernels"] * work[n_c + 1] * params.memory_scale * rt.memory_factor
        dram = self.dram_inverse_efficiency * (work[len(TERMS)] if len(work) > len(TERMS) else 0.0)
        if arithmetic == "fp16":
            compute, depthwise = compute / self.fp16.compute_speedup, depthwise / self.fp16.depthwise_speedup
            bytes_, dram = bytes_ / self.fp16.memory_speedup, dram / self.fp16.memory_speedup
        elif arithmetic in INT8_ARITHMETIC:
            kappa = rt.int8.compute_speedup[int8_group(core)]
            compute, depthwise = compute / kappa, depthwise / kappa
            if arithmetic == "int8":  # dynamic range keeps float activations between operators
                bytes_, dram = bytes_ / rt.int8.memory_speedup, dram / rt.int8.memory_speedup
        return compute + depthwise, bytes_ + overhead, dram

    def latency_ms(self, work: Sequence[float], core: str, clock_ghz: float, runtime: str = DEFAULT_RUNTIME,
                   precision: str = "fp32", threads: int = 1, cluster_cores: Optional[int] = None) -> float:
        """Milliseconds for a work vector (one kernel's or a model's sum: the model is linear)."""
        self._check_clock(clock_ghz)
        n = self._threads(threads, cluster_cores)
        params = self.core(core)
        compute, memory, dram = self._parts(work, core, runtime, precision)
        cycles = compute * amdahl(params.parallel_compute, n) + memory * amdahl(params.parallel_memory, n)
        return cycles / clock_ghz + dram * amdahl(self.dram_parallel, n)  # Mcycles / GHz = ms

    def estimate(self, works: Sequence[Sequence[float]], arithmetic: Sequence[str], core: str, clock_ghz: float,
                 runtime: str = DEFAULT_RUNTIME, threads: int = 1, cluster_cores: Optional[int] = None,
                 noted: Sequence[str] = ()) -> Estimate:
        """Every kernel of a graph (``works``: their ``work_vector``s) holding its own ``arithmetic``,
        in one pass; the cell's kind is what the runtime executes (``arithmetic.band_arithmetic``).
        ``noted``: the arithmetic whose assumptions the notes state (``precision_note``)."""
        self._check_clock(clock_ghz)
        n = self._threads(threads, cluster_cores)
        params = self.core(core)
        a_c, a_m = amdahl(params.parallel_compute, n), amdahl(params.parallel_memory, n)
        a_d = amdahl(self.dram_parallel, n)
        kernels = []
        for work, precision in zip(works, arithmetic, strict=True):
            compute, memory, dram = self._parts(work, core, runtime, precision)
            kernels.append(KernelEstimate(self.executed(core, runtime, precision), compute * a_c / clock_ghz,
                                          memory * a_m / clock_ghz + dram * a_d, dram * a_d))
        cell = band_arithmetic(k.arithmetic for k in kernels)
        notes = tuple(note for note in (self.precision_note(core, p, runtime) for p in noted) if note)
        return Estimate(core, clock_ghz, self.runtime(runtime).name, threads, cell, tuple(kernels), notes,
                        self.uncertainty_figure(core, runtime, threads, cell),
                        self.uncertainty(core, runtime, threads, cell))

    def work_ms(self, work: Sequence[float], core: str, clock_ghz: float, runtime: str = DEFAULT_RUNTIME) -> float:
        return self.latency_ms(work, core, clock_ghz, runtime)  # 1 thread, fp32
    @staticmethod
    def _threads(threads: int, cluster_cores: Optional[int]) -> int:
        if threads < 1:
            raise InputError(f"threads must be >= 1, got {threads}")
        return min(threads, cluster_cores) if cluster_cores else threads

    def thread_speedup(self, core: str, threads: int, cluster_cores: Optional[int] = None,
                       work: Optional[Sequence[float]] = None, runtime: str = DEFAULT_RUNTIME) -> float:
        """1-thread / ``threads``-thread time, capped by the cluster's core count. Without ``work``:
        the compute side's Amdahl speedup; with it, that work's own (compute and memory mixed)."""
        n = self._threads(threads, cluster_cores)
        if work is None:
            return 1.0 / amdahl(self.core(core).parallel_compute, n)
        return self.latency_ms(work, core, 1.0, runtime) / self.latency_ms(work, core, 1.0, runtime, threads=n)

    def transfer_ratio(self, work: Sequence[float], core: str, clock_ghz: float, ref_core: str, ref_clock_ghz: float,
                       runtime: str = "tflite", threads: int = 1, cluster_cores: Optional[int] = None) -> float:
        """time(work on core@clock, ``threads``) / time(work on ref_core@ref_clock, 1 thread) for
        one kernel's ``work_vector`` on ``runtime``: carries nn-Meter's A76 figure (TFLite 2.1, one
        thread) to another core kernel by kernel with the TFLite model's shape."""
        return (self.latency_ms(work, core, clock_ghz, runtime, threads=threads, cluster_cores=cluster_cores)
                / self.latency_ms(work, ref_core, ref_clock_ghz, runtime))

    def precision_divisor(self, work: Sequence[float], core: str, precision: str, runtime: str = DEFAULT_RUNTIME,
                          threads: int = 1, cluster_cores: Optional[int] = None) -> float:
        """fp32 time / ``precision`` time of one kernel's work on ``core`` and ``runtime`` (the
        per-kernel divisor a compression level applies; 1 where the runtime executes it as fp32)."""
        fp32 = self.latency_ms(work, core, 1.0, runtime, "fp32", threads, cluster_cores)
        other = self.latency_ms(work, core, 1.0, runtime, precision, threads, cluster_cores)
        return fp32 / other if other > 0 else 1.0

    def int8_speedup(self, core: str, runtime: str = DEFAULT_RUNTIME) -> float:
        """fp32 / int8 time of the compute side on ``core`` under ``runtime`` (its ISA group's)."""
        return self.runtime(runtime).int8.compute_speedup[int8_group(self.core(core).core)]

    def fp16_speedup(self, core: str, runtime: str = DEFAULT_RUNTIME) -> float:
        """fp32 / fp16 time of the dense compute side on ``core`` under ``runtime``: the FP16 divisor
        where the runtime executes fp16 arithmetic there (ncnn on ARMv8.2), else 1."""
        self.core(core)
        return self.fp16.compute_speedup if self.executed(core, runtime, "fp16") == "fp16" else 1.0

    def precision_note(self, core: str, precision: str, runtime: str = DEFAULT_RUNTIME) -> Optional[str]:
        """What was assumed for ``precision`` on ``core`` / ``runtime`` where the data is silent."""
        rt = self.runtime(runtime)
        done = self.executed(self.core(core).core, runtime, precision)
        if precision == "fp16" and done == "fp32":
            if executed(rt.name, "Cortex-A55", "fp16") == "fp32":  # even where fp16 arithmetic exists
                return f"{rt.name} dequantizes fp16 weights to fp32 when it loads the file: fp32 speed"
            return f"{core} has no fp16 arithmetic (pre-ARMv8.2): fp32 speed"
        if done in INT8_ARITHMETIC and rt.int8.source.startswith("bounded prior"):
            return (f"{rt.name} int8 speed: a bounded prior from its int8 kernels, not fitted on measured "  # (cited
                    f"{rt.name} int8 rows (estimator parameters: runtimes.{rt.name}.int8.source)")  # there, not here)
        if done == "int8-dynamic":
            return (f"dynamic-range int8 under {rt.name}: int8 compute with float tensors for the kernels its "
                    "dynamic kernels cover (XNNPACK: Conv2D, Fully Connected), the others fp32")
        return None

    # -- held-out error ---------------------------------------------------------------------------

    def uncertainty_figure(self, core: str, runtime: str = DEFAULT_RUNTIME, threads: int = 1,
                           precision: str = "fp32") -> Optional[HeldOutError]:
        """The held-out (leave-one-SoC-out) error of this cell's kind (core x threads x executed
        arithmetic x runtime) over the fit's nested held-out rows, pooled over the core's family,
        then all cores, then all runtimes where a kind has too few rows (``selection``)."""
        self.core(core)
        cell = CellKind(core, threads, precision, self.runtime(runtime).name)
        cache = self.__dict__.setdefault("_figures", {})  # the band's nested coverage costs ms: once per kind
        if cell not in cache:
            cache[cell] = held_out_error(self.held_out_rows, cell)
        return cache[cell]

    def uncertainty(self, core: str, runtime: str = DEFAULT_RUNTIME, threads: int = 1, precision: str = "fp32") -> str:
        """One-line statement of how far a number may be off, for the report."""
        params, name = self.core(core), self.runtime(runtime).name
        fig = self.uncertainty_figure(core, runtime, threads, precision)
        what = CellKind(core, threads, precision, name).what
        text = statement(fig) if fig is not None else f"unknown: no held-out rows of {what} or any pooled kind"
        if params.derived:
            text += f"; {core} not measured: its speed comes from the fit's per-clock order and priors"
        elif name not in params.measured_runtimes:
            text += f"; no {name} rows on {core}: its speed comes from {'/'.join(params.measured_runtimes)} rows"
        return text

