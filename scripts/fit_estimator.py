#!/usr/bin/env python
"""Fit lodevem's offline latency estimator on published ARM latencies; write its parameters.

    python scripts/fit_estimator.py [--data benchmarks/data/arm-cpu-latency-dev.csv]
                                    [--onnx-cache .lodevem-build/fit-onnx] [--out lodevem/data/estimator_params.json]

What it does, in order (every step is recorded in the params file's ``provenance``):
1. Maps the CSV's benchmark graphs to lodevem's zoo models and exports those (with the worker's
   own ``export_module``, so the kernels are exactly what ``lodevem start`` sees). ncnn rows ran
   ncnn's own graphs: their MACs are corrected to the data README's figures (a per-model scale);
   TFLite + XNNPACK rows ran the standard graphs (``std:<model>``, no correction).
2. One joint bounded least-squares fit on log latency over *every* row (1/2/4 threads, fp32, fp16,
   int8, ncnn and tflite; ``lodevem.latency.estimator`` has the formula): shared cycles-per-unit
   ``theta`` for 6 work terms; per core a compute and a memory scale (reference Cortex-A53 = 1);
   per runtime a compute and a memory factor (ncnn = 1; XNNPACK has no Winograd, so TFLite charges
   3x3 MACs at the GEMM rate); per core Amdahl fractions of the compute and of the memory side,
   fitted where a board measured 1 and N threads (else the mean of those cores); per core an int8
   compute speedup and one int8 bytes speedup; per fp16 core the fp16 speedups of dense compute
   and of depthwise convs, bounded to [1, 2] (8 vs 4 NEON lanes), with fp16 bytes halved. The fp16-only cores (A55, A76) cannot separate fp32 speed
   from fp16 gain, so soft ties from Arm's per-clock figures (A55 = 1.38x A53, A76 = 2x A75) make
   the fp16 speedup identifiable. One log offset per board, zero mean per (core, runtime), so the
   boards of one core (which differ up to 1.8x, data README) pull the shared costs equally.
3. Cores absent from a fit get parameters from documented per-clock ratios (``DERIVATIONS``),
   int8 factors from cores of the same int8 ISA group (dot-product or not).
4. Leave-one-device-out: every device held out in turn, refit, all its rows predicted; the MAPE of
   each cell kind (core x threads x precision x runtime) is the uncertainty printed with a cell of
   that kind, and a one-shot calibration simulation gives ``oneshot_mape_pct``.
   ``benchmarks/latency_accuracy.py`` prints the same figures beside a FLOPs-proportional baseline.
Needs numpy and scipy (scipy comes with scikit-learn, a lodevem dependency); runtime code does not.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import hashlib
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / "benchmarks" / "data" / "arm-cpu-latency-dev.csv"  # a copy of the published rows, sources in its README
DEFAULT_CACHE = REPO / ".lodevem-build" / "fit-onnx"
DEFAULT_OUT = REPO / "lodevem" / "data" / "estimator_params.json"

REFERENCE_CORE = "Cortex-A53"
NNMETER_CORE, NNMETER_CLOCK = "Cortex-A76", 2.42  # nn-Meter's cortexA76cpu_tflite21: Pixel 4 big core
FP16_CORES = ("Cortex-A55", "Cortex-A75", "Cortex-A76")  # ARMv8.2: ncnn computes fp16 there

ARM_A55_A75 = ("Arm launch figures for Cortex-A75/A55 (May 2017), as reported by Android Authority "
               "'A closer look at ARM's new Cortex-A75 and Cortex-A55 CPUs' (2017-05-31)")
ARM_A76 = ("Arm Cortex-A76 disclosure (May 2018), as reported by Android Authority 'Cortex-A76 deep dive': "
           "two 128-bit NEON pipes with twice the SIMD bandwidth of Arm's prior cores")
ANANDTECH_A73 = ("AnandTech 'HiSilicon Kirin 960 performance and power' (2017): Cortex-A73 ~11% ahead of "
                 "Cortex-A72 in SPECint2000 at similar clocks, no FP/NEON uplift claimed")

A55_VS_A53 = f"{ARM_A55_A75}: Cortex-A55 +38% FP/NEON performance vs Cortex-A53"

# Per-clock speed of a core with no rows in a fit, from documented ratios to cores that have some.
# Each entry: list of (source core, speed ratio target/source); several routes are averaged
# geometrically. Used for Cortex-A75 always, and for any core a LODO fold leaves without data.
DERIVATIONS: dict[str, tuple[tuple[str, float, str], ...]] = {
    "Cortex-A75": (
        ("Cortex-A73", 1.33, f"{ARM_A55_A75}: Cortex-A75 +33% FP/NEON vs Cortex-A73 at the same clock"),
        ("Cortex-A76", 0.5, f"{ARM_A76}: Cortex-A76 = 2x Cortex-A75 SIMD throughput"),
    ),
    "Cortex-A73": (("Cortex-A72", 1.0, ANANDTECH_A73),),
    "Cortex-A72": (("Cortex-A73", 1.0, ANANDTECH_A73),),
    "Cortex-A76": (("Cortex-A75", 2.0, f"{ARM_A76}"),),
    "Cortex-A55": (("Cortex-A53", 1.38, A55_VS_A53),),
    "Cortex-A53": (("Cortex-A55", 1 / 1.38, A55_VS_A53),),
}
ALL_CORES = ("Cortex-A7", "Cortex-A53", "Cortex-A55", "Cortex-A72", "Cortex-A73", "Cortex-A75", "Cortex-A76")


@dataclass(frozen=True)
class BenchModel:
    """How one CSV model name maps to a zoo model, and the ncnn graph's MACs per the data README."""

    zoo: str
    input_hw: int
    ncnn_mmacs: Optional[float]
    note: str


MODEL_MAP: dict[str, BenchModel] = {
    "squeezenet": BenchModel("squeezenet1_1", 227, 418.5, "SqueezeNet 1.1 at 227x227; ncnn's conv10 has pad=1"),
    "mobilenet": BenchModel("mobilenet_v1", 224, 568.7, "MobileNet V1 1.0"),
    "mobilenet_v2": BenchModel("mobilenet_v2", 224, 313.6, "ncnn adds an expand conv in the first block"),
    "mobilenet_v3": BenchModel("mobilenet_v3_large", 224, 245.6, "ncnn's is a MobileNetV3-Large variant"),
    "shufflenet_v2": BenchModel("shufflenet_v2_x1_0", 224, 144.9, "same MACs"),
    "mnasnet": BenchModel("mnasnet1_0", 224, 314.4, "same MACs as torchvision mnasnet1_0"),
    "efficientnet_b0": BenchModel("efficientnet_b0", 224, 385.8, "EfficientNet-B0"),
    "resnet18": BenchModel("resnet18", 224, 1826.9, "ncnn has a 1x1 projection in the first stage"),
    "resnet50": BenchModel("resnet50", 224, 3858.0, "ncnn's is the Caffe v1 layout (torchvision v1.5: 4089 M)"),
}


# Standard (torchvision-equal) graphs, as in the TFLite + XNNPACK rows: no ncnn MAC correction.
STD_MODEL_MAP: dict[str, BenchModel] = {
    "mobilenet": BenchModel("mobilenet_v1", 224, None, "MobileNet V1 1.0, standard graph"),
    "mobilenet_v2": BenchModel("mobilenet_v2", 224, None, "standard graph (torchvision MACs)"),
    "mobilenet_v3_large": BenchModel("mobilenet_v3_large", 224, None, "standard MobileNetV3-Large"),
    "mobilenet_v3_small": BenchModel("mobilenet_v3_small", 224, None, "standard MobileNetV3-Small"),
    "squeezenet": BenchModel("squeezenet1_1", 224, None, "SqueezeNet 1.1, standard graph"),
    "shufflenet_v2": BenchModel("shufflenet_v2_x1_0", 224, None, "standard graph"),
    "mnasnet": BenchModel("mnasnet1_0", 224, None, "standard graph"),
    "efficientnet_b0": BenchModel("efficientnet_b0", 224, None, "standard graph"),
    "resnet18": BenchModel("resnet18", 224, None, "torchvision layout"),
    "resnet50": BenchModel("resnet50", 224, None, "torchvision v1.5 layout"),
}
# Cores grouped by the int8 arithmetic they have (Arm TRMs): ARMv8.2 dot-product (SDOT/UDOT) cores,
# ARMv8.0 cores (widening multiply-accumulate only), ARMv7 (32-bit NEON). A core a fold leaves
# without int8 rows takes the geometric mean of its group's fitted int8 compute factors.
INT8_GROUPS: dict[str, str] = {
    "Cortex-A55": "armv8.2-dotprod", "Cortex-A75": "armv8.2-dotprod", "Cortex-A76": "armv8.2-dotprod",
    "Cortex-A53": "armv8.0", "Cortex-A72": "armv8.0", "Cortex-A73": "armv8.0", "Cortex-A7": "armv7",
}
INT8_GROUPS_SOURCE = ("Arm Cortex-A55/A75/A76 TRMs: ARMv8.2-A with the dot-product (SDOT/UDOT) instructions; "
                      "Cortex-A53/A72/A73: ARMv8.0-A; Cortex-A7: ARMv7-A NEON")
FP16_SOURCE = ("ARMv8.2-A half-precision arithmetic (FEAT_FP16): Cortex-A55/A75/A76 implement it, Cortex-A7/A53/A72/A73 "
               "do not (Arm core TRMs; ncnn issue #1203). A 128-bit NEON op holds 8 fp16 lanes vs 4 fp32 lanes (compute "
               "gains at most 2x, fitted) and fp16 tensors are half the bytes (bytes / 2); the per-kernel overhead is unchanged")
FP16_MEMORY = 2.0  # fp16 tensors are half the bytes
FP16_MAX = 2.0  # 8 fp16 lanes vs 4 fp32 lanes per 128-bit NEON op: the most fp16 arithmetic can gain
# Soft ties between fp32 per-clock compute speeds from Arm's figures: they identify the fp16
# compute speedup (the fp16-only cores, A55 and A76, cannot tell fp32 speed from fp16 gain alone).
# (core, source core, speed ratio core/source per clock, citation). Weight: a tie counts like a
# log residual of sigma TIE_SIGMA.
FP32_TIES: tuple[tuple[str, str, float, str], ...] = (
    ("Cortex-A55", "Cortex-A53", 1.38, A55_VS_A53),
    ("Cortex-A76", "Cortex-A75", 2.0, f"{ARM_A76}: Cortex-A76 = 2x Cortex-A75 SIMD throughput"),
)
TIE_SIGMA = 0.1
# int8 tensors are a quarter of fp32 ones: the bytes side gains at most 4x; requantisation passes
# between layers can cost as much again, so the fitted divisor is bounded to [1/4, 4].
INT8_BYTES_MAX = 4.0
XNNPACK_NO_WINOGRAD = ("XNNPACK has no Winograd convolution: dense 3x3 stride-1 convs run as indirect GEMM "
                       "(google/XNNPACK src/operators/convolution-nhwc.c), so TFLite charges their MACs at the GEMM rate")
TERM_MAPS: dict[str, dict[str, str]] = {"ncnn": {}, "tflite": {"conv3x3s1_macs": "gemm_conv_macs", "winograd_io": ""}}
REFERENCE_RUNTIME = "ncnn"
DEPTHWISE_SCALE = False


@dataclass(frozen=True)
class Row:
    device: str
    core: str
    clock_ghz: float
    threads: int
    model: str
    precision: str
    avg_ms: float
    runtime: str = "ncnn"
    source: str = ""
    soc: str = ""  # the SoC the board is built on (the dev CSV's ``soc`` column); "" = unknown

    @property
    def fold(self) -> str:
        """The group a leave-one-out fold holds out together: the row's SoC, else its device.
        Boards that share a SoC (RK3399 and OrangePi4 LTS; both RK3588 clusters) are one phone
        the fit has seen, so holding out one of them alone gives an optimistic error."""
        return self.soc or self.device

    @property
    def base_model(self) -> str:
        return self.model.removesuffix("_int8")

    @property
    def graph_key(self) -> str:
        """Which benchmark graph the row ran: ncnn's own ``.param`` graphs, else standard ones."""
        return self.base_model if self.runtime == "ncnn" else "std:" + self.base_model

    @property
    def board(self) -> tuple[str, str]:
        return (self.device, self.core)

    @property
    def kind(self) -> tuple[str, str, str, str]:
        """(core, "1" | "multi", precision, runtime): the cell kind an uncertainty is stated for."""
        return (self.core, "1" if self.threads == 1 else "multi", self.precision, self.runtime)


@dataclass(frozen=True)
class LoadedRows:
    rows: list[Row]
    skipped: list[str]  # one reason per skipped line


def other_runtime(r: dict[str, str]) -> Optional[str]:
    """Why a row measured a runtime lodevem does not predict (None: it is one lodevem predicts).
    ``tflite`` means TFLite with XNNPACK; a row whose ``xnnpack`` column says ``no`` ran TFLite's
    own kernels (the dev CSV keeps them beside their XNNPACK twins, data README)."""
    if (r.get("xnnpack") or "").strip() == "no":
        return "TFLite without XNNPACK (its own kernels): not the runtime lodevem predicts"
    return None


def load_rows(path: Path, strict: bool = True) -> list[Row] | LoadedRows:
    """Rows of a CSV with the dev data's columns. ``strict``: any unusable line is an error (the
    dev data); else unusable lines are skipped with a reason (a file to score). Rows of a runtime
    lodevem does not predict (``other_runtime``) are left out in both modes."""
    from lodevem.errors import InputError
    from lodevem.latency.estimator import canonical_runtime

    rows, skipped = [], []
    with open(path, newline="") as f:
        for n, r in enumerate(csv.DictReader(f), start=2):
            if other_runtime(r):
                skipped.append(f"line {n}: {other_runtime(r)}")
                continue
            try:
                precision = (r.get("precision") or "fp32").strip()
                if precision not in ("fp32", "fp16", "int8"):
                    raise ValueError(f"precision '{precision}' (expected fp32, fp16 or int8)")
                row = Row(r["device"], r["core"], float(r["clock_ghz"]), int(r["threads"]), r["model"], precision,
                          float(r["avg_ms"]), canonical_runtime(r.get("runtime") or "ncnn"), r.get("source", ""),
                          (r.get("soc") or "").strip())
                if strict and not row.soc:
                    raise ValueError("no 'soc' (the dev data names every row's SoC: folds are grouped by it)")
                if not (row.clock_ghz > 0 and row.avg_ms > 0 and row.threads >= 1):
                    raise ValueError("clock, avg_ms and threads must be positive")
            except (KeyError, TypeError, ValueError, InputError) as exc:
                if strict:
                    raise ValueError(f"{path}:{n}: {exc}") from None
                skipped.append(f"line {n}: {exc}")
                continue
            rows.append(row)
    return rows if strict else LoadedRows(rows, skipped)


def excluded_rows(path: Path) -> int:
    """How many rows of ``path`` measured a runtime lodevem does not predict."""
    with open(path, newline="") as f:
        return sum(other_runtime(r) is not None for r in csv.DictReader(f))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Work vectors of the benchmarked models
# ---------------------------------------------------------------------------------------------

def graph_maps() -> dict[str, BenchModel]:
    """Graph key -> zoo model: ncnn's graphs by CSV name, standard graphs as ``std:<name>``."""
    out = dict(MODEL_MAP)
    out.update({f"std:{k}": v for k, v in STD_MODEL_MAP.items()})
    return out


def export_zoo(cache: Path, reexport: bool = False, keys: Optional[Sequence[str]] = None) -> dict[str, Path]:
    """ONNX file per graph key (default: every key), exported like the worker does (imports torch
    only when needed)."""
    cache.mkdir(parents=True, exist_ok=True)
    maps = graph_maps()
    paths: dict[str, Path] = {}
    for key in keys if keys is not None else maps:
        if key not in maps:
            continue
        bench = maps[key]
        path = cache / f"{bench.zoo}_{bench.input_hw}.onnx"
        if reexport or not path.exists():
            import torch

            from lodevem import zoo
            from lodevem.worker import export_module

            export_module(zoo.build(bench.zoo), torch.zeros(1, 3, bench.input_hw, bench.input_hw), str(path))
        paths[key] = path
    return paths


@dataclass(frozen=True)
class ModelWork:
    name: str
    work: np.ndarray  # per lodevem.latency.estimator.TERMS, ncnn-corrected MACs
    zoo_mmacs: float
    mac_scale: float


def model_work(onnx_paths: dict[str, Path]) -> dict[str, ModelWork]:
    from lodevem.latency.estimator import sum_work
    from lodevem.latency.kernels import extract_kernels

    maps = graph_maps()
    out: dict[str, ModelWork] = {}
    graphs: dict[Path, Any] = {}
    for name, path in onnx_paths.items():
        graph = graphs.setdefault(path, extract_kernels(path))
        zoo_mmacs = graph.macs / 1e6
        ncnn = maps[name].ncnn_mmacs
        scale = ncnn / zoo_mmacs if ncnn else 1.0
        out[name] = ModelWork(name, np.array(sum_work(graph.kernels, scale)), zoo_mmacs, scale)
    return out


# ---------------------------------------------------------------------------------------------
# Fit
# ---------------------------------------------------------------------------------------------

def amdahl(q: float, n: int) -> float:
    """Amdahl speedup (1 / time factor) of ``n`` threads at parallel fraction ``q``."""
    return 1.0 / ((1.0 - q) + q / n)


@dataclass
class Fit:
    """Result of one fit: what the estimator needs plus bookkeeping for the params file."""

    theta: np.ndarray
    scales: dict[str, tuple[float, float]]  # core -> (compute_scale, memory_scale)
    runtime_factors: dict[str, tuple[float, float]]  # runtime -> (compute, memory); ncnn = (1, 1)
    q: dict[str, tuple[float, float]]  # core -> (compute, memory) parallel fractions
    kappa: dict[str, float]  # core -> int8 compute speedup
    dw: dict[str, float]  # core -> depthwise efficiency relative to its compute scale (1: shared)
    mu8: float  # int8 bytes speedup
    phi: dict[str, tuple[float, float]]  # FP16 core -> fp16 speedup of (dense compute, depthwise)
    ties: list[str]
    rows_per_core: dict[str, int]
    runtimes_per_core: dict[str, tuple[str, ...]]
    precisions_per_runtime: dict[str, tuple[str, ...]]
    derived: dict[str, str] = field(default_factory=dict)
    q_source: dict[str, str] = field(default_factory=dict)
    kappa_source: dict[str, str] = field(default_factory=dict)
    rms_log: float = 0.0
    int8_rows: int = 0

    def estimator_params(self) -> dict[str, Any]:
        """The predictive part of the params file (what ``Estimator`` reads)."""
        from lodevem.latency.estimator import TERMS

        return {
            "version": "v2",
            "reference_core": REFERENCE_CORE,
            "reference_runtime": REFERENCE_RUNTIME,
            "terms": {t: {"cycles_per_unit": float(v)} for t, v in zip(TERMS, self.theta)},
            "cores": {c: {
                "compute_scale": self.scales[c][0], "memory_scale": self.scales[c][1],
                "depthwise_scale": self.dw.get(c, 1.0),
                "parallel_fraction_compute": self.q[c][0], "parallel_fraction_memory": self.q[c][1],
                "int8_compute_speedup": self.kappa[c], "fp16_arithmetic": c in FP16_CORES,
                "source": self.derived.get(c, f"fit: {self.rows_per_core.get(c, 0)} rows"),
                "derived": c not in self.rows_per_core,
                "measured_runtimes": list(self.runtimes_per_core.get(c, ())),
                "int8_source": self.kappa_source.get(c, ""),
            } for c in ALL_CORES},
            "runtimes": {rt: {"compute_factor": f[0], "memory_factor": f[1], "term_map": TERM_MAPS[rt],
                              "measured_precisions": list(self.precisions_per_runtime.get(rt, ())),
                              "source": ("reference runtime" if rt == REFERENCE_RUNTIME else
                                         f"fit: {XNNPACK_NO_WINOGRAD}" if rt == "tflite" else "fit")}
                         for rt, f in self.runtime_factors.items()},
            "precision": {"fp16": {"compute_speedup": statistics.mean(v[0] for v in self.phi.values()),
                                   "memory_speedup": FP16_MEMORY,
                                   "per_core_compute_speedup": {c: v[0] for c, v in self.phi.items()},
                                   "per_core_depthwise_speedup": {c: v[1] for c, v in self.phi.items()},
                                   "cores": list(FP16_CORES), "source": FP16_SOURCE,
                                   "compute_speedup_source": (
                                       f"fit, bounded to [1, {FP16_MAX:g}] (lane count); identified by soft fp32 ties "
                                       f"(sigma {TIE_SIGMA:g} in log): " + "; ".join(
                                           f"{c} = {src} x {ratio:g} ({cite})" for c, src, ratio, cite in FP32_TIES
                                           if any(t.startswith(c + " ") for t in self.ties)))},
                          "int8": {"memory_speedup": self.mu8,
                                   "source": (f"fit: {self.int8_rows} int8 rows (ncnn), one factor for all cores, "
                                              f"bounded to [1/{INT8_BYTES_MAX:g}, {INT8_BYTES_MAX:g}] (int8 tensors "
                                              "are 1/4 of fp32; requantisation passes cost extra)")}},
        }

    @cached_property
    def estimator(self) -> Any:
        from lodevem.latency.estimator import Estimator

        return Estimator(self.estimator_params())

    def predict_row(self, r: Row, works: dict[str, ModelWork]) -> float:
        return self.estimator.latency_ms(works[r.graph_key].work, r.core, r.clock_ghz, r.runtime, r.precision, r.threads)

    def predict(self, work: np.ndarray, core: str, clock: float, threads: int = 1, precision: str = "fp32",
                runtime: str = REFERENCE_RUNTIME) -> float:
        return self.estimator.latency_ms(work, core, clock, runtime, precision, threads)


def _derive(core: str, scales: dict[str, tuple[float, float]]) -> Optional[tuple[tuple[float, float], str]]:
    routes = [(src, ratio, cite) for src, ratio, cite in DERIVATIONS.get(core, ()) if src in scales]
    if not routes:
        return None
    log_s = sum(math.log(scales[src][0] / ratio) for src, ratio, _ in routes) / len(routes)
    log_m = sum(math.log(scales[src][1] / ratio) for src, ratio, _ in routes) / len(routes)
    text = "derived: " + ("geometric mean of " if len(routes) > 1 else "") + "; ".join(
        f"{src} x {ratio:g} per clock ({cite})" for src, ratio, cite in routes)
    return (math.exp(log_s), math.exp(log_m)), text


def fit(rows: Sequence[Row], works: dict[str, ModelWork], board_offsets: bool = True,
        depthwise_scale: bool = DEPTHWISE_SCALE) -> Fit:
    """Bounded least squares on log latency over every row (all threads, precisions, runtimes).

    Parameters: ``theta`` (>= 0); per core but the reference a compute and a memory scale; per
    runtime but ncnn a compute and a memory factor; per core with multi-thread rows the compute and
    memory parallel fractions (in [0, 1]); per core with int8 rows an int8 compute speedup, and one
    int8 bytes speedup. fp16 is not fitted: it follows the FP16 arithmetic (module constants).
    ``board_offsets``: one log offset per (board, core), averaging to zero per (core, runtime), so a
    board with many rows (or a fast runtime version) does not pull the shared costs; predictions use 0.
    """
    from scipy.optimize import least_squares

    from lodevem.latency.estimator import COMPUTE_TERMS, TERMS

    obs = [r for r in rows if r.graph_key in works]
    cores = sorted({r.core for r in obs})
    if REFERENCE_CORE not in cores:
        raise ValueError(f"no {REFERENCE_CORE} rows: the reference core is needed")
    runtimes = sorted({r.runtime for r in obs})
    if REFERENCE_RUNTIME not in runtimes:
        raise ValueError(f"no {REFERENCE_RUNTIME} rows: the reference runtime is needed")
    free = [c for c in cores if c != REFERENCE_CORE]
    free_rt = [rt for rt in runtimes if rt != REFERENCE_RUNTIME]
    # Parallel fractions are identifiable only where a board measured 1 and N threads (same
    # runtime): elsewhere N-thread rows alone cannot tell a slow core from poor scaling. Cores with
    # N-thread rows but no such pair take the mean fractions of the paired cores.
    one_thread = {(r.board, r.runtime) for r in obs if r.threads == 1}
    mt_cores = sorted({r.core for r in obs if r.threads > 1 and (r.board, r.runtime) in one_thread})
    if not mt_cores:
        raise ValueError("no board measured both 1 and N threads: thread scaling cannot be fitted")
    i8_cores = sorted({r.core for r in obs if r.precision == "int8"})
    # Offsets only where a (core, runtime) has several boards: a lone board defines its group, and
    # offsets centred per core alone would trade against the runtime factor (a null direction).
    groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for r in obs:
        groups.setdefault((r.core, r.runtime), set()).add(r.board)
    boards = sorted(b for g in groups.values() if len(g) > 1 for b in g) if board_offsets else []
    offset_groups = [sorted(g) for _, g in sorted(groups.items()) if len(g) > 1] if board_offsets else []

    n_t, n_c = len(TERMS), len(COMPUTE_TERMS)
    DW = COMPUTE_TERMS.index("depthwise_macs")
    # Work per row, compute terms moved by the runtime's term map.
    Wc = np.zeros((len(obs), n_c))
    for i, r in enumerate(obs):
        w = works[r.graph_key].work
        for j, term in enumerate(COMPUTE_TERMS):
            target = TERM_MAPS[r.runtime].get(term, term)
            if target:
                Wc[i, COMPUTE_TERMS.index(target)] += w[j]
    Wb = np.array([works[r.graph_key].work[n_c] for r in obs])
    Wk = np.array([works[r.graph_key].work[n_c + 1] for r in obs])
    y = np.log([r.avg_ms for r in obs])
    clock = np.array([r.clock_ghz for r in obs])
    nthr = np.array([float(r.threads) for r in obs])
    fp16 = np.array([r.precision == "fp16" and r.core in FP16_CORES for r in obs])
    int8 = np.array([r.precision == "int8" for r in obs])
    core_of = [r.core for r in obs]

    layout: dict[str, slice] = {}
    pos = 0
    dw_cores = free if depthwise_scale else []
    ties = [(c, src, ratio) for c, src, ratio, _ in FP32_TIES if c in cores and src in cores]
    has_fp16 = bool(fp16.any())
    # Per-core fp16 speedup where a tie pins that core's fp32 speed; other fp16 cores take the mean.
    phi_cores = sorted({r.core for r in obs if r.precision == "fp16" and r.core in FP16_CORES}
                       & {c for c, _, _ in ties})
    if has_fp16 and not phi_cores:
        raise ValueError("fp16 rows but no fp32 tie between cores: the fp16 speedup cannot be identified")
    phi_idx = np.array([phi_cores.index(c) if c in phi_cores else -1 for c in core_of])
    for name, size in (("theta", n_t), ("scales", 2 * len(free)), ("dw", len(dw_cores)), ("phi", 2 * len(phi_cores)), ("rt", 2 * len(free_rt)),
                       ("q", 2 * len(mt_cores)), ("kappa", len(i8_cores)), ("mu8", 1 if i8_cores else 0),
                       ("offsets", len(boards))):
        layout[name] = slice(pos, pos + size)
        pos += size
    board_idx = {b: i for i, b in enumerate(boards)}
    row_board = np.array([board_idx.get(r.board, -1) for r in obs])
    s_idx = np.array([free.index(c) if c in free else -1 for c in core_of])
    rt_idx = np.array([free_rt.index(r.runtime) if r.runtime in free_rt else -1 for r in obs])
    q_idx = np.array([mt_cores.index(c) if c in mt_cores else -1 for c in core_of])
    k_idx = np.array([i8_cores.index(c) if c in i8_cores else -1 for c in core_of])

    def split(x: np.ndarray) -> dict[str, np.ndarray]:
        return {k: x[v] for k, v in layout.items()}

    def residuals(x: np.ndarray) -> np.ndarray:
        p = split(x)
        theta = p["theta"]
        sc = np.exp(p["scales"]).reshape(-1, 2) if free else np.ones((0, 2))
        s = np.where(s_idx >= 0, sc[s_idx, 0] if free else 1.0, 1.0)
        m = np.where(s_idx >= 0, sc[s_idx, 1] if free else 1.0, 1.0)
        rtf = np.exp(p["rt"]).reshape(-1, 2) if free_rt else np.ones((0, 2))
        rc = np.where(rt_idx >= 0, rtf[rt_idx, 0] if free_rt else 1.0, 1.0)
        rm = np.where(rt_idx >= 0, rtf[rt_idx, 1] if free_rt else 1.0, 1.0)
        dwf = np.exp(p["dw"]) if dw_cores else np.ones(0)
        d = np.where(s_idx >= 0, dwf[s_idx] if dw_cores else 1.0, 1.0)
        C = s * rc * (Wc @ theta[:n_c] + (d - 1.0) * Wc[:, DW] * theta[DW])
        B = m * rm * theta[n_c] * Wb
        K = m * rm * theta[n_c + 1] * Wk
        if has_fp16:  # fp16 speedups per core: dense compute (column 0) and depthwise (column 1)
            phis = np.exp(p["phi"]).reshape(-1, 2)
            mean = phis.mean(axis=0)
            ph_d = np.where(phi_idx >= 0, phis[np.maximum(phi_idx, 0), 0], mean[0])
            ph_w = np.where(phi_idx >= 0, phis[np.maximum(phi_idx, 0), 1], mean[1])
            C_dw = s * rc * Wc[:, DW] * theta[DW]
            C = np.where(fp16, (C - C_dw) / ph_d + C_dw / ph_w, C)
        B = np.where(fp16, B / FP16_MEMORY, B)
        if i8_cores:
            kap = np.exp(p["kappa"])
            mu = math.exp(p["mu8"][0])
            C = np.where(int8, C / np.where(k_idx >= 0, kap[k_idx], 1.0), C)
            B = np.where(int8, B / mu, B)
        qq = p["q"].reshape(-1, 2)
        mean_q = qq.mean(axis=0)
        qc = np.where(q_idx >= 0, qq[q_idx, 0], mean_q[0])
        qm = np.where(q_idx >= 0, qq[q_idx, 1], mean_q[1])
        cycles = C * ((1 - qc) + qc / nthr) + (B + K) * ((1 - qm) + qm / nthr)
        pred = np.log(np.maximum(cycles, 1e-12)) - np.log(clock)
        if boards:
            off = p["offsets"]
            pred = pred + np.where(row_board >= 0, off[np.maximum(row_board, 0)], 0.0)
            center = [10.0 * off[[board_idx[b] for b in g]].mean() for g in offset_groups]
        else:
            center = []
        log_s = {REFERENCE_CORE: 0.0, **{c: p["scales"][2 * i] for i, c in enumerate(free)}}
        tie_res = [(log_s[c] - (log_s[src] - math.log(ratio))) / TIE_SIGMA for c, src, ratio in ties] if has_fp16 else []
        return np.concatenate([pred - y, center, tie_res])

    x0 = np.concatenate([np.full(n_c, 0.5), [0.5, 0.05], np.zeros(2 * len(free) + len(dw_cores)),
                         np.full(2 * len(phi_cores), 0.3), np.zeros(2 * len(free_rt)),
                         np.tile([0.85, 0.6], len(mt_cores)), np.full(len(i8_cores), 0.5),
                         [0.5] if i8_cores else [], np.zeros(len(boards))])
    lower = np.full(len(x0), -np.inf)
    upper = np.full(len(x0), np.inf)
    lower[layout["theta"]] = 0.0
    lower[layout["q"]], upper[layout["q"]] = 0.0, 1.0
    lower[layout["phi"]], upper[layout["phi"]] = 0.0, math.log(FP16_MAX)
    lower[layout["mu8"]], upper[layout["mu8"]] = -math.log(INT8_BYTES_MAX), math.log(INT8_BYTES_MAX)
    sol = least_squares(residuals, x0, bounds=(lower, upper), method="trf", x_scale="jac", max_nfev=20000)
    p = split(sol.x)
    theta = np.where(p["theta"] < 1e-9, 0.0, p["theta"])  # a bound-active term is exactly zero
    sc = np.exp(p["scales"]).reshape(-1, 2)
    scales = {REFERENCE_CORE: (1.0, 1.0), **{c: (float(sc[i, 0]), float(sc[i, 1])) for i, c in enumerate(free)}}
    dws = {c: float(math.exp(v)) for c, v in zip(dw_cores, p["dw"])}
    phis = np.exp(p["phi"]).reshape(-1, 2)
    phi = {c: (float(phis[i, 0]), float(phis[i, 1])) for i, c in enumerate(phi_cores)}
    mean_phi = tuple(float(v) for v in phis.mean(axis=0)) if phi_cores else (1.0, 1.0)
    for c in FP16_CORES:
        phi.setdefault(c, mean_phi)
    rtf = np.exp(p["rt"]).reshape(-1, 2)
    rt_factors = {REFERENCE_RUNTIME: (1.0, 1.0),
                  **{rt: (float(rtf[i, 0]), float(rtf[i, 1])) for i, rt in enumerate(free_rt)}}
    qq = p["q"].reshape(-1, 2)
    q = {c: (float(qq[i, 0]), float(qq[i, 1])) for i, c in enumerate(mt_cores)}
    kappa = {c: float(math.exp(v)) for c, v in zip(i8_cores, p["kappa"])}
    mu8 = float(math.exp(p["mu8"][0])) if i8_cores else 1.0
    counts = {c: sum(r.core == c for r in obs) for c in cores}
    result = Fit(
        theta=theta, scales=scales, runtime_factors=rt_factors, q=q, kappa=kappa, dw=dws, mu8=mu8, phi=phi,
        ties=[f"{c} = {src} x {ratio:g} per clock" for c, src, ratio in ties] if has_fp16 else [],
        rows_per_core=counts,
        runtimes_per_core={c: tuple(sorted({r.runtime for r in obs if r.core == c})) for c in cores},
        precisions_per_runtime={rt: tuple(pr for pr in ("fp32", "fp16", "int8")
                                          if any(r.runtime == rt and r.precision == pr for r in obs))
                                for rt in runtimes},
        q_source={c: (f"fit: {sum(r.core == c and r.threads > 1 for r in obs)} multi-thread rows, boards with "
                      f"1- and N-thread pairs") for c in mt_cores},
        kappa_source={c: f"fit: {sum(r.core == c and r.precision == 'int8' for r in obs)} int8 rows (ncnn)"
                      for c in i8_cores},
        rms_log=float(np.sqrt(np.mean(sol.fun[:len(obs)] ** 2))), int8_rows=int(int8.sum()))
    for rt in RUNTIMES_KNOWN:
        if rt not in result.runtime_factors:
            raise ValueError(f"no {rt} rows: the runtime cannot be fitted")
    _fill_missing(result)
    return result


RUNTIMES_KNOWN = ("ncnn", "tflite")


def _fill_missing(result: Fit) -> None:
    """Give every core in ALL_CORES parameters: fitted, else derived from documented ratios."""
    pending = [c for c in ALL_CORES if c not in result.scales]
    while pending:
        progress = False
        for core in list(pending):
            got = _derive(core, result.scales)
            if got is None:
                continue
            result.scales[core], result.derived[core] = got
            pending.remove(core)
            progress = True
        if not progress:
            raise ValueError(f"no data and no documented derivation for {', '.join(pending)}")
    fitted_q = dict(result.q)
    for core in ALL_CORES:
        if core not in result.q:
            pool = sorted(fitted_q)
            result.q[core] = (statistics.mean(fitted_q[s][0] for s in pool), statistics.mean(fitted_q[s][1] for s in pool))
            result.q_source[core] = (f"no board with 1- and N-thread rows: mean of the paired cores "
                                     f"({', '.join(pool)})")
    fitted_k = dict(result.kappa)
    for core in ALL_CORES:
        if core not in result.kappa:
            group = [c for c in fitted_k if INT8_GROUPS.get(c) == INT8_GROUPS.get(core)]
            pool = group or sorted(fitted_k)
            result.kappa[core] = math.exp(statistics.mean(math.log(fitted_k[c]) for c in pool)) if pool else 1.0
            result.kappa_source[core] = (f"no int8 rows: geometric mean of {', '.join(pool)} "
                                         f"({'same int8 ISA group, ' + INT8_GROUPS_SOURCE if group else 'all cores'})")


# ---------------------------------------------------------------------------------------------
# Leave-one-device-out, scoring
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scored:
    row: Row
    estimator_ms: float
    baseline_ms: Optional[float]  # FLOPs baseline, 1-thread fp32 rows only
    core_seen: bool

    @property
    def error(self) -> float:
        return self.estimator_ms / self.row.avg_ms - 1

    @property
    def baseline_error(self) -> Optional[float]:
        return None if self.baseline_ms is None else self.baseline_ms / self.row.avg_ms - 1


def baseline_constants(rows: Sequence[Row], works: dict[str, ModelWork], result: Fit) -> dict[str, float]:
    """FLOPs-proportional baseline: one MACs-per-cycle constant per core (geometric mean over the
    core's rows brought to 1-thread fp32 with the same fold's own thread / precision factors)."""
    from lodevem.latency.estimator import COMPUTE_TERMS

    n_c = len(COMPUTE_TERMS)
    logs: dict[str, list[float]] = {}
    for r in rows:
        if r.graph_key not in works:
            continue
        w = works[r.graph_key].work
        one = result.predict(w, r.core, r.clock_ghz, 1, "fp32", r.runtime)
        ms = r.avg_ms * one / result.predict_row(r, works)
        macs = float(w[:n_c].sum())  # MMACs
        logs.setdefault(r.core, []).append(math.log(macs / (ms * r.clock_ghz)))  # MACs per cycle
    scales = {c: (1 / math.exp(statistics.mean(v)),) * 2 for c, v in logs.items()}
    for core in ALL_CORES:
        if core not in scales:
            got = _derive(core, scales)
            if got:
                scales[core] = got[0]
    return {c: 1 / s for c, (s, _) in scales.items()}


def score(result: Fit, consts: dict[str, float], rows: Sequence[Row], works: dict[str, ModelWork],
          seen: set[str]) -> list[Scored]:
    from lodevem.latency.estimator import COMPUTE_TERMS

    n_c = len(COMPUTE_TERMS)
    out = []
    for r in rows:
        if r.graph_key not in works:
            continue
        w = works[r.graph_key].work
        base = (float(w[:n_c].sum()) / (consts[r.core] * r.clock_ghz)
                if r.threads == 1 and r.precision == "fp32" and r.core in consts else None)
        out.append(Scored(r, result.predict_row(r, works), base, r.core in seen))
    return out


def lodo(rows: Sequence[Row], works: dict[str, ModelWork], **fit_options: Any) -> list[Scored]:
    """Every SoC held out in turn (all its boards and clusters together, ``Row.fold``): fit on
    the others, score every row of the held-out SoC. Folds by board name would train on a board
    of the same SoC and state an optimistic error (data README)."""
    out: list[Scored] = []
    for group in sorted({r.fold for r in rows}):
        train = [r for r in rows if r.fold != group]
        result = fit(train, works, **fit_options)
        consts = baseline_constants(train, works, result)
        out += score(result, consts, [r for r in rows if r.fold == group], works, {r.core for r in train})
    return out


def summarize(errors: Sequence[float]) -> Optional[dict[str, float]]:
    if not len(errors):
        return None
    a = np.abs(np.asarray(errors))
    return {"mape_pct": round(float(a.mean() * 100), 1), "within_10_pct": round(float((a <= 0.10).mean() * 100), 1),
            "within_25_pct": round(float((a <= 0.25).mean() * 100), 1),
            "bias_pct": round(float(np.mean(errors) * 100), 1), "rows": int(a.size)}


# Categories the benchmark reports and the SCORE line carries.
CATEGORIES: dict[str, str] = {
    "1t_fp32": "1-thread fp32 rows",
    "threads": "multi-thread rows (fp32 and fp16)",
    "fp16": "fp16 rows (1 and N threads)",
    "int8": "int8 rows (1 and N threads)",
}


def category_of(r: Row) -> list[str]:
    cats = []
    if r.threads == 1 and r.precision == "fp32":
        cats.append("1t_fp32")
    if r.threads > 1 and r.precision != "int8":
        cats.append("threads")
    if r.precision in ("fp16", "int8"):
        cats.append(r.precision)
    return cats


def oneshot_errors(scored: Sequence[Scored]) -> list[float]:
    """One-shot calibration simulation: on each board and kind (core, threads, precision, runtime),
    each model in turn is "the one measured": its measured/predicted ratio scales the estimator's
    predictions of the others; errors of those scaled predictions."""
    groups: dict[tuple, list[Scored]] = {}
    for s in scored:
        groups.setdefault((s.row.device, s.row.core, s.row.threads, s.row.precision, s.row.runtime), []).append(s)
    errors = []
    for group in groups.values():
        for measured in group:
            k = measured.row.avg_ms / measured.estimator_ms
            errors += [o.estimator_ms * k / o.row.avg_ms - 1 for o in group if o is not measured]
    return errors


def score_summary(scored: Sequence[Scored]) -> dict[str, Any]:
    """Figures per category, per runtime, per core, per kind and per board, plus the one-shot."""
    by_cat = {c: summarize([s.error for s in scored if c in category_of(s.row)]) for c in CATEGORIES}
    base = summarize([s.baseline_error for s in scored if s.baseline_error is not None and "1t_fp32" in category_of(s.row)])
    kinds: dict[tuple, list[float]] = {}
    for s in scored:
        core, thr, prec, rt = s.row.kind
        for key in ((core, thr, prec, rt), (None, thr, prec, rt), (None, thr, prec, None)):
            kinds.setdefault(key, []).append(s.error)
    per_kind = [{"core": k[0], "threads": k[1], "precision": k[2], "runtime": k[3],
                 "mape_pct": summarize(v)["mape_pct"], "rows": len(v)}
                for k, v in sorted(kinds.items(), key=lambda kv: tuple(x or "" for x in kv[0]))]
    return {
        "categories": by_cat,
        "baseline_1t_fp32": base,
        "all": summarize([s.error for s in scored]),
        "per_runtime": {rt: summarize([s.error for s in scored if s.row.runtime == rt])
                        for rt in sorted({s.row.runtime for s in scored})},
        "per_core": {c: summarize([s.error for s in scored if s.row.core == c]) for c in sorted({s.row.core for s in scored})},
        "per_board": {f"{d} [{c}, {rt}]": summarize([s.error for s in scored if (s.row.device, s.row.core, s.row.runtime) == (d, c, rt)])
                      for d, c, rt in sorted({(s.row.device, s.row.core, s.row.runtime) for s in scored})},
        "unseen_core_1t_fp32": summarize([s.error for s in scored if not s.core_seen and "1t_fp32" in category_of(s.row)]),
        "per_kind": per_kind,
        "oneshot": summarize(oneshot_errors(scored)),
    }


def score_line(summary: dict[str, Any]) -> str:
    """``SCORE est_1t_fp32=... baseline_1t_fp32=... threads=... fp16=... int8=... oneshot=... rows=N``."""
    def fmt(s: Optional[dict[str, float]]) -> str:
        return "na" if not s else f"{s['mape_pct']:.1f}"

    cats = summary["categories"]
    rows = summary["all"]["rows"] if summary["all"] else 0
    return (f"SCORE est_1t_fp32={fmt(cats['1t_fp32'])} baseline_1t_fp32={fmt(summary['baseline_1t_fp32'])} "
            f"threads={fmt(cats['threads'])} fp16={fmt(cats['fp16'])} int8={fmt(cats['int8'])} "
            f"oneshot={fmt(summary['oneshot'])} rows={rows}")


def lodo_line(predictor: str, summary: dict[str, Any]) -> str:
    """``LODO folds=soc predictor=<name> 1t_fp32=<mape> threads=<mape> fp16=<mape> int8=<mape>``: one
    predictor's leave-one-SoC-out MAPE per category (percent, ``na`` where no rows)."""
    cats = summary["categories"]
    return (f"LODO folds=soc predictor={predictor} "
            + " ".join(f"{c}={'na' if not cats.get(c) else format(cats[c]['mape_pct'], '.1f')}" for c in CATEGORIES))


# ---------------------------------------------------------------------------------------------
# Params file
# ---------------------------------------------------------------------------------------------

def _r(x: float, n: int = 6) -> float:
    return round(float(x), n)


def build_params(rows: list[Row], works: dict[str, ModelWork], result: Fit, summary: dict[str, Any],
                 data_path: Path, fit_date: str) -> dict[str, Any]:
    from lodevem.latency.estimator import TERMS

    units = {"conv3x3s1_macs": "MAC of dense 3x3 stride-1 convs",
             "gemm_conv_macs": "MAC of 1x1 and other dense convs (GEMM / im2col+GEMM)",
             "depthwise_macs": "MAC of depthwise convs",
             "fc_macs": "MAC of fully connected layers",
             "winograd_io": "activation (in + out) of dense 3x3 stride-1 convs: Winograd tile transforms", "bytes": "fp32 byte moved (in+out activations+weights)",
             "kernels": "kernel (fixed per-kernel overhead)"}
    params = result.estimator_params()
    theta = dict(zip(TERMS, result.theta))
    for t, entry in params["terms"].items():
        entry["cycles_per_unit"] = _r(entry["cycles_per_unit"])
        entry["unit"] = f"per million x {units[t]}" if t != "kernels" else "Mcycles per kernel"
    for core, c in params["cores"].items():
        for k in ("compute_scale", "memory_scale", "int8_compute_speedup"):
            c[k] = _r(c[k])
        for k in ("parallel_fraction_compute", "parallel_fraction_memory"):
            c[k] = _r(c[k], 4)
        c["parallel_fraction_source"] = result.q_source[core]
        s = result.scales[core][0]
        c["effective_macs_per_cycle_ncnn"] = {t: round(1 / (s * theta[t]), 3) if theta[t] > 0 else None
                                              for t in TERMS if t.endswith("_macs")}
        if core == "Cortex-A75":
            c["note"] = ("the only A75 rows are a Pixel 3a's Kryo 360 Gold, Qualcomm's semi-custom Cortex-A75 "
                         "derivative, treated as that core (data README)")
        if core == "Cortex-A73":
            c["note"] = "Pixel 2 rows: Kryo 280 Gold, a Cortex-A73 derivative, treated as that core (data README)"
    for rt in params["runtimes"].values():
        rt["compute_factor"], rt["memory_factor"] = _r(rt["compute_factor"]), _r(rt["memory_factor"])
    params["precision"]["int8"]["memory_speedup"] = _r(params["precision"]["int8"]["memory_speedup"])
    cats = summary["categories"]
    params.update({
        "nnmeter_reference": {"core": NNMETER_CORE, "clock_ghz": NNMETER_CLOCK, "runtime": "tflite",
                              "why": ("nn-Meter's cortexA76cpu_tflite21 models TFLite 2.1 on a Pixel 4 Cortex-A76 big "
                                      "core at 2.42 GHz; its figures are carried to other cores with the tflite ratio")},
        "formula": ("C = compute_scale[core] * compute_factor[rt] * theta_c . map_rt(mac_work) / speedup_c[precision]; "
                    "M = memory_scale[core] * memory_factor[rt] * (theta_bytes * MB / speedup_m[precision] + "
                    "theta_kernels * n_kernels); ms = (C * A(q_c, n) + M * A(q_m, n)) / clock_GHz, "
                    "A(q, n) = (1 - q) + q / min(threads, cluster cores); MACs and bytes in millions"),
        "terms_note": ("effective MACs per cycle count a convolution's direct MACs, so Winograd 3x3 convs (ncnn) can "
                       "exceed the core's fp32 FMA peak; a term fitted to 0 is charged through 'bytes' only"),
        "uncertainty": {
            "method": ("leave-one-SoC-out: every SoC of the dev data held out in turn (all its boards and clusters "
                       "together: RK3399 = OrangePi4 LTS, both RK3588 clusters), the estimator refitted on the "
                       "others, every row of the held-out SoC predicted"),
            "folds": "soc",
            "lodo_mape_pct": cats["1t_fp32"]["mape_pct"],
            "lodo_rows": cats["1t_fp32"]["rows"],
            "baseline_lodo_mape_pct": summary["baseline_1t_fp32"]["mape_pct"],
            "categories": cats,
            "oneshot_mape_pct": summary["oneshot"]["mape_pct"],
            "oneshot_rows": summary["oneshot"]["rows"],
            "oneshot_method": ("on each held-out board and kind, each model in turn is measured: its measured / "
                               "predicted ratio scales the LODO predictions of the other models of that kind"),
            "per_kind": summary["per_kind"],
            "per_kind_note": ("MAPE per cell kind (core x threads x precision x runtime); core null = pooled over "
                              "cores, runtime null = pooled over runtimes (the fallback where a kind has no rows)"),
            "per_board": summary["per_board"],
            "same_core_spread": ("boards with the same core differ up to 1.6-1.8x in MACs per cycle (runtime "
                                 "versions, real vs nominal clocks; data README): a single board can be that far off"),
            "fit_rms_log_error": round(result.rms_log, 4),
        },
        "provenance": {
            "fit_date": fit_date,
            "script": "scripts/fit_estimator.py",
            "data_file": os.path.relpath(data_path, REPO),
            "data_sha256": sha256(data_path),
            "data_sources": sorted({r.source for r in rows}),
            "fit_options": {
                "loss": "least squares on log latency (scipy.optimize.least_squares, trf), theta >= 0, q in [0, 1]",
                "rows": "every row: 1- and multi-thread, fp32 / fp16 / int8, ncnn and tflite, fitted jointly",
                "board_offsets": ("one log offset per (board, core) where a (core, runtime) has several boards, zero mean "
                                  "per (core, runtime); predictions use 0"),
                "reference_core": REFERENCE_CORE, "reference_runtime": REFERENCE_RUNTIME,
            },
            "rows_total": len(rows),
            "rows_used": sum(r.graph_key in works for r in rows),
            "rows_by_runtime": {rt: sum(r.runtime == rt for r in rows) for rt in sorted({r.runtime for r in rows})},
            "rows_by_precision": {p: sum(r.precision == p for r in rows) for p in ("fp32", "fp16", "int8")},
            "rows_excluded": {"no graph": sum(r.graph_key not in works for r in rows),
                              "tflite without XNNPACK": excluded_rows(data_path)},
            "model_map": {key: {"zoo": b.zoo, "input": [1, 3, b.input_hw, b.input_hw], "ncnn_mmacs": b.ncnn_mmacs,
                                "zoo_mmacs": round(works[key].zoo_mmacs, 1),
                                "mac_scale": round(works[key].mac_scale, 4), "note": b.note}
                          for key, b in graph_maps().items() if key in works},
            "mac_correction": ("ncnn rows: each conv/fc MAC term of a model is scaled by ncnn_mmacs / zoo_mmacs (data "
                               "README figures); tflite rows ('std:' graphs) are the standard graphs"),
        },
    })
    return params


def dev_works(rows: Sequence[Row], cache: Path, reexport: bool = False) -> dict[str, ModelWork]:
    return model_work(export_zoo(cache, reexport, sorted({r.graph_key for r in rows})))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--onnx-cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--reexport", action="store_true", help="re-export the zoo models even if cached")
    parser.add_argument("--date", default=_dt.date.today().isoformat(), help="fit date to record (ISO)")
    args = parser.parse_args(argv)

    rows = load_rows(args.data)
    works = dev_works(rows, args.onnx_cache, args.reexport)
    result = fit(rows, works)
    summary = score_summary(lodo(rows, works))
    params = build_params(rows, works, result, summary, args.data, args.date)
    args.out.write_text(json.dumps(params, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}: fit rms(log) {result.rms_log:.3f}; LODO {score_line(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
