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

and on another core at ``f`` GHz, for a named runtime ``rt``, precision ``p`` and ``n`` threads

    C  = compute_scale[core] * compute_factor[rt] * theta_c . map_rt(work_c) / speedup_c[p, core]
    M  = memory_scale[core]  * memory_factor[rt]  * theta_m . work_m        / speedup_m[p]
    ms = (C * A(q_c[core], n) + M * A(q_m[core], n)) / f,   A(q, n) = (1 - q) + q / min(n, cluster)

* **Runtime** (v2): ncnn and TFLite + XNNPACK differ in two ways the fit can see. XNNPACK has no
  Winograd convolution, so its ``map_rt`` charges 3x3 stride-1 MACs at the GEMM rate; and each
  runtime has its own compute and memory efficiency (ncnn = 1).
* **Threads**: Amdahl per core and per work class: compute parallelises almost fully, memory
  traffic and per-kernel overhead share the cluster's bandwidth and sync, so they scale less.
  That is why ResNets scale better than depthwise-heavy nets (data README).
* **fp16** on ARMv8.2 cores (FP16 arithmetic): fp16 tensors are half the bytes (bytes / 2); the
  compute side gains a fitted per-core factor for dense work and one for depthwise convs, each at
  most 2 (8 fp16 lanes per 128-bit NEON op instead of 4 fp32). The fixed per-kernel overhead does
  not change. Cores without FP16 arithmetic run fp16 models in fp32.
* **int8**: per core a fitted compute divisor (dot-product cores differ from older ones) and one
  fitted divisor for the bytes (int8 tensors are a quarter of fp32 ones, plus requantisation).

Terms are summed, not maxed: the model stays smooth, strictly monotone in clock and in work, and
linear in ``theta`` for the fit. Every number comes from ``data/estimator_params.json``, written
by ``scripts/fit_estimator.py``; this module holds no latencies and no fitted constants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..errors import EstimatorError, InputError
from ..safe_io import fields
from ..worker.precision import ARITHMETIC
from ..worker.registry import DEFAULT_LATENCY_RUNTIME, canonical, latency_runtimes
from .kernels import Kernel

__all__ = [
    "COMPUTE_TERMS",
    "DEFAULT_PARAMS",
    "DEFAULT_RUNTIME",
    "canonical_runtime",
    "MEMORY_TERMS",
    "TERMS",
    "CoreParams",
    "FitAccuracy",
    "FitProvenance",
    "Estimator",
    "EstimatorError",
    "cost_class",
    "sum_work",
    "work_vector",
]

DEFAULT_PARAMS: Path = Path(__file__).resolve().parent.parent / "data" / "estimator_params.json"

# MAC terms (scaled by a core's compute scale) then memory-side terms (scaled by its memory scale).
COMPUTE_TERMS: tuple[str, ...] = ("conv3x3s1_macs", "gemm_conv_macs", "depthwise_macs", "fc_macs", "winograd_io")
MEMORY_TERMS: tuple[str, ...] = ("bytes", "kernels")
TERMS: tuple[str, ...] = COMPUTE_TERMS + MEMORY_TERMS
# The runtimes it can name are the registry's with a latency model (``worker.registry``); the
# arithmetic it has factors for is the precision vocabulary's (``worker.precision.ARITHMETIC``).
DEFAULT_RUNTIME = DEFAULT_LATENCY_RUNTIME
# Fewest LODO rows of a cell kind whose MAPE is stated as that kind's uncertainty (4 rows of one
# board would state that board's luck, not the estimator's error).
MIN_KIND_ROWS = 8
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
    if term == "conv3x3s1_macs":
        # Winograd's input / output tile transforms cost per activation, not per MAC: what makes
        # 3x3 convs with few channels (SqueezeNet's expands) slower per MAC than ResNet's.
        work["winograd_io"] = (kernel.input_elems + kernel.output_elems) / _MEGA
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


@dataclass(frozen=True)
class CoreParams:
    """Fitted or derived parameters of one core type, with where they came from.

    ``parallel_compute`` / ``parallel_memory``: Amdahl parallel fractions of the compute and the
    memory side. ``int8_compute_speedup``: fp32 / int8 time of the compute side (ncnn rows).
    ``fp16_arithmetic``: ARMv8.2 FP16 (A55, A75, A76); elsewhere an fp16 model runs in fp32.
    ``measured_runtimes``: the runtimes with rows of this core in the fit (empty: ``derived``).
    """

    core: str
    compute_scale: float
    memory_scale: float
    depthwise_scale: float
    parallel_compute: float
    parallel_memory: float
    int8_compute_speedup: float
    fp16_arithmetic: bool
    fp16_compute_speedup: float
    fp16_depthwise_speedup: float
    source: str
    derived: bool
    measured_runtimes: tuple[str, ...]
    int8_source: str = ""


@dataclass(frozen=True)
class RuntimeParams:
    """One runtime's efficiency relative to ncnn and the MAC terms it charges elsewhere."""

    name: str
    compute_factor: float
    memory_factor: float
    term_map: dict[str, str]
    measured_precisions: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class UncertaintyFigure:
    """A LODO MAPE for one kind of cell (core x threads x precision x runtime) or a pooled fallback."""

    core: Optional[str]
    threads: str  # "1" or "multi"
    precision: str
    runtime: Optional[str]
    mape_pct: float
    rows: int


@dataclass(frozen=True)
class FitAccuracy:
    """The fit's published error figures (``uncertainty`` in the parameters file), typed: the
    leave-one-device-out MAPE and hit rates, the FLOPs baseline's MAPE, and the one-shot
    calibration MAPE a calibrated prediction states. None: the file has no such figure."""

    lodo_mape_pct: Optional[float] = None
    lodo_within_10_pct: Optional[float] = None
    lodo_within_25_pct: Optional[float] = None
    lodo_rows: Optional[int] = None
    baseline_lodo_mape_pct: Optional[float] = None
    oneshot_mape_pct: Optional[float] = None
    same_core_spread: str = ""

    @classmethod
    def from_dict(cls, data: Any) -> "FitAccuracy":
        if not isinstance(data, dict):
            return cls()
        return cls(fields.number(data.get("lodo_mape_pct")), fields.number(data.get("lodo_within_10_pct")),
                   fields.number(data.get("lodo_within_25_pct")), fields.integer(data.get("lodo_rows")),
                   fields.number(data.get("baseline_lodo_mape_pct")), fields.number(data.get("oneshot_mape_pct")),
                   str(data.get("same_core_spread") or ""))


@dataclass(frozen=True)
class FitProvenance:
    """Where the fit came from (``provenance`` in the parameters file), typed: when, from which
    data (its sources and sha256), how many rows, and ``model_map`` (benchmark names -> zoo
    models and inputs, what ``calibrate --from-log`` pairs a benchncnn log with)."""

    fit_date: Optional[str] = None
    data_sources: tuple[str, ...] = ()
    data_sha256: Optional[str] = None
    rows_used: Optional[int] = None
    model_map: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> "FitProvenance":
        if not isinstance(data, dict):
            return cls()
        sources = data.get("data_sources")
        model_map = data.get("model_map")
        return cls(str(data["fit_date"]) if data.get("fit_date") else None,
                   tuple(str(s) for s in sources) if isinstance(sources, list) else (),
                   str(data["data_sha256"]) if data.get("data_sha256") else None, fields.integer(data.get("rows_used")),
                   dict(model_map) if isinstance(model_map, dict) else {})


@dataclass(frozen=True)
class KernelEstimate:
    """One kernel's time at its own arithmetic, split into its compute- and memory-bound parts
    (threads and clock applied to each part, as ``latency_ms`` does)."""

    arithmetic: str
    compute_ms: float
    memory_ms: float

    @property
    def ms(self) -> float:
        return self.compute_ms + self.memory_ms


@dataclass(frozen=True)
class Estimate:
    """The cost model's whole answer for one graph on one core, clock, runtime and thread count.

    Why one record: the predictor, the nn-Meter transfer and the calibration step all need the
    same per-kernel figures; computing them once (one ``_parts`` per kernel) keeps them equal by
    construction. ``arithmetic``: what the cell is stated in (its uncertainty kind); ``notes``:
    what was assumed where the data is silent; ``figure``: the LODO error figure of the kind
    (None: no rows of that kind or any pooled one) and ``uncertainty`` its one-line statement.
    """

    core: str
    clock_ghz: float
    runtime: str
    threads: int
    arithmetic: str
    kernels: tuple[KernelEstimate, ...]
    notes: tuple[str, ...]
    figure: Optional[UncertaintyFigure]
    uncertainty: str

    @property
    def ms(self) -> float:
        return sum(k.ms for k in self.kernels)

    @property
    def compute_ms(self) -> float:
        return sum(k.compute_ms for k in self.kernels)

    @property
    def memory_ms(self) -> float:
        return sum(k.memory_ms for k in self.kernels)


class Estimator:
    """The fitted cost model. Create once per run (``Estimator.load()``); it is immutable."""

    def __init__(self, params: dict[str, Any], path: Optional[Path] = None) -> None:
        self.path = path
        try:
            self.version: str = str(params["version"])
            self.reference_core: str = str(params["reference_core"])
            self.theta: tuple[float, ...] = tuple(float(params["terms"][t]["cycles_per_unit"]) for t in TERMS)
            self.cores: dict[str, CoreParams] = {
                name: CoreParams(
                    core=name,
                    compute_scale=float(c["compute_scale"]),
                    memory_scale=float(c["memory_scale"]),
                    depthwise_scale=float(c.get("depthwise_scale", 1.0)),
                    parallel_compute=float(c["parallel_fraction_compute"]),
                    parallel_memory=float(c["parallel_fraction_memory"]),
                    int8_compute_speedup=float(c["int8_compute_speedup"]),
                    fp16_arithmetic=bool(c["fp16_arithmetic"]),
                    fp16_compute_speedup=float(params["precision"]["fp16"].get("per_core_compute_speedup", {}).get(
                        name, params["precision"]["fp16"]["compute_speedup"])),
                    fp16_depthwise_speedup=float(params["precision"]["fp16"].get("per_core_depthwise_speedup", {}).get(
                        name, params["precision"]["fp16"]["compute_speedup"])),
                    source=str(c["source"]),
                    derived=bool(c["derived"]),
                    measured_runtimes=tuple(c["measured_runtimes"]),
                    int8_source=str(c.get("int8_source", "")),
                )
                for name, c in params["cores"].items()
            }
            self.runtimes: dict[str, RuntimeParams] = {
                name: RuntimeParams(
                    name=name,
                    compute_factor=float(r["compute_factor"]),
                    memory_factor=float(r["memory_factor"]),
                    term_map={str(k): str(v) for k, v in r.get("term_map", {}).items()},
                    measured_precisions=tuple(r["measured_precisions"]),
                    source=str(r["source"]),
                )
                for name, r in params["runtimes"].items()
            }
            prec = params["precision"]
            self.fp16_compute: float = float(prec["fp16"]["compute_speedup"])
            self.fp16_memory: float = float(prec["fp16"]["memory_speedup"])
            self.int8_memory: float = float(prec["int8"]["memory_speedup"])
            unc = params.get("uncertainty", {})
            self.lodo_mape_pct: Optional[float] = (float(unc["lodo_mape_pct"]) if "lodo_mape_pct" in unc else None)
            self.kinds: tuple[UncertaintyFigure, ...] = tuple(
                UncertaintyFigure(k.get("core"), str(k["threads"]), str(k["precision"]), k.get("runtime"),
                                  float(k["mape_pct"]), int(k["rows"]))
                for k in unc.get("per_kind", ()))
            self.spread_note: str = str(unc.get("same_core_spread", ""))
            self.accuracy = FitAccuracy.from_dict(unc)
            self.provenance = FitProvenance.from_dict(params.get("provenance"))
        except (KeyError, TypeError, ValueError) as exc:
            where = path or "estimator parameters"
            raise EstimatorError(f"{where}: malformed estimator parameters ({type(exc).__name__}: {exc})") from None
        bad_map = any(a not in COMPUTE_TERMS or b not in COMPUTE_TERMS + ("",)
                      for r in self.runtimes.values() for a, b in r.term_map.items())
        if bad_map or any(t < 0 for t in self.theta) or any(
            c.compute_scale <= 0 or c.memory_scale <= 0 or c.depthwise_scale <= 0 or c.int8_compute_speedup <= 0
            or not 0 <= c.parallel_compute <= 1 or not 0 <= c.parallel_memory <= 1 for c in self.cores.values()
        ) or any(r.compute_factor <= 0 or r.memory_factor <= 0 for r in self.runtimes.values()) or min(
                self.fp16_compute, self.fp16_memory, self.int8_memory) <= 0:
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
        """``estimator:v2 tflite (Cortex-A53@2.0GHz)``: the version, the runtime, where."""
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
        """Parameters of ``runtime`` (aliases accepted); a clear ``InputError`` for one without data."""
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
        if precision not in ARITHMETIC:
            raise InputError(f"no latency model for precision '{precision}', expected one of {', '.join(ARITHMETIC)}")

    def _parts(self, work: Sequence[float], core: str, runtime: str, precision: str) -> tuple[float, float]:
        """(compute, memory) Mcycles of ``work`` at one thread, for ``runtime`` and ``precision``."""
        params, rt = self.core(core), self.runtime(runtime)
        self._check_precision(precision)
        n_c = len(COMPUTE_TERMS)
        mapped = dict.fromkeys(COMPUTE_TERMS, 0.0)
        for term, w in zip(COMPUTE_TERMS, work[:n_c]):
            target = rt.term_map.get(term, term)
            if target:  # "" : the runtime does not do this work (no Winograd transforms in XNNPACK)
                mapped[target] += w
        theta = dict(zip(TERMS, self.theta))
        mapped["depthwise_macs"] *= params.depthwise_scale
        scale = params.compute_scale * rt.compute_factor
        depthwise = theta["depthwise_macs"] * mapped["depthwise_macs"] * scale
        compute = sum(theta[t] * mapped[t] for t in COMPUTE_TERMS) * scale - depthwise
        bytes_ = theta["bytes"] * work[n_c] * params.memory_scale * rt.memory_factor
        overhead = theta["kernels"] * work[n_c + 1] * params.memory_scale * rt.memory_factor
        if precision == "fp16" and params.fp16_arithmetic:
            compute, depthwise = compute / params.fp16_compute_speedup, depthwise / params.fp16_depthwise_speedup
            bytes_ = bytes_ / self.fp16_memory
        elif precision == "int8":
            compute, depthwise = compute / params.int8_compute_speedup, depthwise / params.int8_compute_speedup
            bytes_ = bytes_ / self.int8_memory
        return compute + depthwise, bytes_ + overhead

    def latency_ms(self, work: Sequence[float], core: str, clock_ghz: float, runtime: str = DEFAULT_RUNTIME,
                   precision: str = "fp32", threads: int = 1, cluster_cores: Optional[int] = None) -> float:
        """Milliseconds for a work vector (one kernel's or a model's sum: the model is linear)."""
        self._check_clock(clock_ghz)
        n = self._threads(threads, cluster_cores)
        params = self.core(core)
        compute, memory = self._parts(work, core, runtime, precision)
        cycles = compute * amdahl(params.parallel_compute, n) + memory * amdahl(params.parallel_memory, n)
        return cycles / clock_ghz  # Mcycles / GHz = ms

    def estimate(self, works: Sequence[Sequence[float]], arithmetic: Sequence[str], core: str, clock_ghz: float,
                 runtime: str = DEFAULT_RUNTIME, threads: int = 1, cluster_cores: Optional[int] = None,
                 cell_arithmetic: str = "fp32", noted: Sequence[str] = ()) -> Estimate:
        """Every kernel of a graph (``works``: their ``work_vector``s) at its own ``arithmetic``,
        in one pass. ``cell_arithmetic``: the kind whose error figure the cell carries;
        ``noted``: the arithmetic whose assumptions the notes state (``precision_note``)."""
        self._check_clock(clock_ghz)
        n = self._threads(threads, cluster_cores)
        params = self.core(core)
        a_c, a_m = amdahl(params.parallel_compute, n), amdahl(params.parallel_memory, n)
        kernels = []
        for work, precision in zip(works, arithmetic, strict=True):
            compute, memory = self._parts(work, core, runtime, precision)
            kernels.append(KernelEstimate(precision, compute * a_c / clock_ghz, memory * a_m / clock_ghz))
        notes = tuple(note for note in (self.precision_note(core, p, runtime) for p in noted) if note)
        return Estimate(core, clock_ghz, self.runtime(runtime).name, threads, cell_arithmetic, tuple(kernels), notes,
                        self.uncertainty_figure(core, runtime, threads, cell_arithmetic),
                        self.uncertainty(core, runtime, threads, cell_arithmetic))

    def work_ms(self, work: Sequence[float], core: str, clock_ghz: float, runtime: str = DEFAULT_RUNTIME) -> float:
        """1-thread fp32 milliseconds for a work vector on ``runtime``."""
        return self.latency_ms(work, core, clock_ghz, runtime)

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
        per-kernel divisor a compression level applies; 1 for fp32)."""
        fp32 = self.latency_ms(work, core, 1.0, runtime, "fp32", threads, cluster_cores)
        other = self.latency_ms(work, core, 1.0, runtime, precision, threads, cluster_cores)
        return fp32 / other if other > 0 else 1.0

    def int8_speedup(self, core: str, runtime: str = DEFAULT_RUNTIME) -> float:
        """fp32 / int8 time of the compute side on ``core`` (fitted on ncnn int8 rows; the bytes
        side has its own divisor, see ``precision_divisor``). ``precision_note`` says when
        ``runtime`` has no int8 rows of its own."""
        self.runtime(runtime)
        return self.core(core).int8_compute_speedup

    def fp16_speedup(self, core: str, runtime: str = DEFAULT_RUNTIME) -> float:
        """fp32 / fp16 time of the compute side on ``core``: fitted per core, at most 2 (8 fp16
        lanes per NEON op instead of 4 fp32), on ARMv8.2 cores with FP16 arithmetic; 1 elsewhere
        (fp16 runs in fp32)."""
        self.runtime(runtime)
        params = self.core(core)
        return params.fp16_compute_speedup if params.fp16_arithmetic else 1.0

    def precision_note(self, core: str, precision: str, runtime: str = DEFAULT_RUNTIME) -> Optional[str]:
        """What was assumed for ``precision`` on ``core`` / ``runtime`` where the data is silent."""
        self._check_precision(precision)
        rt, params = self.runtime(runtime), self.core(core)
        notes = []
        if precision == "fp16" and not params.fp16_arithmetic:
            notes.append(f"{core} has no fp16 arithmetic (pre-ARMv8.2): fp32 speed assumed")
        elif precision != "fp32" and precision not in rt.measured_precisions:
            measured = [r.name for r in self.runtimes.values() if precision in r.measured_precisions]
            notes.append(f"no {rt.name} {precision} rows: the {precision} factors fitted on "
                         f"{'/'.join(measured) or 'no runtime'} applied to the {rt.name} fp32 estimate")
            if precision == "int8" and rt.name == "tflite" and params.fp16_arithmetic:
                # ARMv8.2 cores also have SDOT, which XNNPACK's QS8 kernels use and ncnn's older
                # int8 kernels (the rows the factor came from) did not: the estimator cannot see it.
                notes.append(f"XNNPACK's int8 kernels use dot-product instructions on the {core}: "
                             "--predictor armsim counts them (docs/armsim.md)")
        return "; ".join(notes) or None

    # -- uncertainty ----------------------------------------------------------------------------

    def uncertainty_figure(self, core: str, runtime: str = DEFAULT_RUNTIME, threads: int = 1,
                           precision: str = "fp32") -> Optional[UncertaintyFigure]:
        """The LODO figure of this cell's own kind (core x threads x precision x runtime); where
        the dev data has no rows of that kind, the closest pooled kind (same threads, precision and
        runtime over all cores, then same threads and precision over all runtimes). A kind with
        fewer than ``MIN_KIND_ROWS`` rows is too few to state an error from and falls back too."""
        self.core(core)
        name = self.runtime(runtime).name
        kind = "1" if threads == 1 else "multi"
        for want in ((core, name), (None, name), (None, None)):
            for fig in self.kinds:
                if ((fig.core, fig.runtime) == want and fig.threads == kind and fig.precision == precision
                        and fig.rows >= MIN_KIND_ROWS):
                    return fig
        return None

    def uncertainty(self, core: str, runtime: str = DEFAULT_RUNTIME, threads: int = 1, precision: str = "fp32") -> str:
        """One-line statement of how far a number may be off, for the report."""
        params, name = self.core(core), self.runtime(runtime).name
        fig = self.uncertainty_figure(core, runtime, threads, precision)
        what = f"{'1-thread' if threads == 1 else 'multi-thread'} {precision} {name}"
        if fig is None:
            text = f"unknown: no LODO rows of {what} or any pooled kind"
        elif fig.core is not None:
            text = f"±{fig.mape_pct:.0f}% (LODO MAPE, {fig.rows} {what} rows on {core})"
        else:
            pooled = "all cores" if fig.runtime is not None else "all cores and runtimes"
            pooled_what = what if fig.runtime is not None else what.removesuffix(" " + name)
            text = (f"±{fig.mape_pct:.0f}% (LODO MAPE of {fig.rows} {pooled_what} rows, {pooled}: "
                    f"fewer than {MIN_KIND_ROWS} of this kind on {core})")
        if params.derived:
            text += f"; {core} not measured: derived from published per-clock figures"
        elif name not in params.measured_runtimes:
            text += f"; no {name} rows on {core}: its speed comes from {'/'.join(params.measured_runtimes)} rows"
        return text
