#!/usr/bin/env python
"""Fit lodevem's offline latency estimator on published ARM latencies; write its parameters.

    python scripts/fit_estimator.py [--data ../shared/data/arm-cpu-latency-dev.csv]
                                    [--onnx-cache .lodevem-build/fit-onnx] [--out lodevem/data/estimator_params.json]

What it does, in order (every step is recorded in the params file's ``provenance``):
1. Maps the CSV's ncnn benchmark graphs to lodevem's zoo models, exports those (with the worker's
   own ``export_module``, so the kernels are exactly what ``lodevem start`` sees) and corrects
   their MACs to the ncnn graphs' where the data README gives them (a per-model scale).
2. Thread model: per core, the Amdahl parallel fraction from rows measured at 1 and N threads on
   the same board (median over pairs); cores without pairs get the median of all pairs. That
   per-core fraction is what the runtime uses. To bring the fit's multi-thread rows to 1 thread,
   the fit uses the fraction of the same (core, model) where other boards measured the pair
   (median), else the per-core one: thread scaling depends on the network (ResNets scale better
   than depthwise-heavy nets, data README), and a per-core average mis-converts those rows.
3. Cost model (``lodevem.latency.estimator``): shared cycles-per-unit ``theta`` for 6 work terms plus, per
   core, a compute and a memory scale (reference core Cortex-A53 = 1), fitted by bounded least
   squares on log latency over all non-int8 rows (1- and multi-thread, via step 2; multi-thread
   rows weigh 0.5), with one log offset per board that averages to zero per core, so the boards
   of one core (which differ up to 1.8x, data README) pull the shared costs equally.
   Precision: ncnn runs fp16 on ARMv8.2 cores (A55, A76 here), so those rows enter the fit
   divided by an fp16 speedup ``phi``; ``phi`` is identified by tying Cortex-A55's fp32 speed to
   Cortex-A53's through Arm's published figure (+38% FP/NEON per clock). Cortex-A76's fp32
   parameters then come from its fp16 rows / phi.
4. Cores absent from the data (Cortex-A75) get parameters from documented per-clock ratios.
5. int8 rows are excluded from the fp32 fit; the fp32/int8 latency ratio per core (median over
   paired rows, fp16 rows converted with phi) is stored for a later int8 feature.
6. Leave-one-device-out: refit without each board that has 1-thread fp32 rows, predict them; the
   MAPE is the estimator's stated uncertainty. ``benchmarks/latency_accuracy.py`` prints it beside
   a FLOPs-proportional baseline.
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
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "arm-cpu-latency-dev.csv"
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

# Cortex-A55 fp32 speed = Cortex-A53's x 1.38: this tie is what makes the fp16 factor identifiable.
FP16_TIE = ("Cortex-A55", "Cortex-A53", 1.38, f"{ARM_A55_A75}: Cortex-A55 +38% FP/NEON performance vs Cortex-A53")

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
    "Cortex-A55": (("Cortex-A53", 1.38, FP16_TIE[3]),),
    "Cortex-A53": (("Cortex-A55", 1 / 1.38, FP16_TIE[3]),),
}
MT_WEIGHT = 0.5
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


@dataclass(frozen=True)
class Row:
    device: str
    core: str
    clock_ghz: float
    threads: int
    model: str
    precision: str
    avg_ms: float
    source: str = ""

    @property
    def base_model(self) -> str:
        return self.model.removesuffix("_int8")


def load_rows(path: Path) -> list[Row]:
    with open(path, newline="") as f:
        return [
            Row(r["device"], r["core"], float(r["clock_ghz"]), int(r["threads"]), r["model"], r["precision"],
                float(r["avg_ms"]), r.get("source", ""))
            for r in csv.DictReader(f)
        ]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Work vectors of the benchmarked models
# ---------------------------------------------------------------------------------------------

def export_zoo(cache: Path, reexport: bool = False) -> dict[str, Path]:
    """ONNX file per CSV model, exported like the worker does (imports torch only when needed)."""
    cache.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, bench in MODEL_MAP.items():
        path = cache / f"{bench.zoo}_{bench.input_hw}.onnx"
        if reexport or not path.exists():
            import torch

            from lodevem import zoo
            from lodevem.worker import export_module

            export_module(zoo.build(bench.zoo), torch.zeros(1, 3, bench.input_hw, bench.input_hw), str(path))
        paths[name] = path
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

    out: dict[str, ModelWork] = {}
    for name, path in onnx_paths.items():
        graph = extract_kernels(path)
        zoo_mmacs = graph.macs / 1e6
        ncnn = MODEL_MAP[name].ncnn_mmacs
        scale = ncnn / zoo_mmacs if ncnn else 1.0
        out[name] = ModelWork(name, np.array(sum_work(graph.kernels, scale)), zoo_mmacs, scale)
    return out


# ---------------------------------------------------------------------------------------------
# Fit
# ---------------------------------------------------------------------------------------------

def amdahl(q: float, n: int) -> float:
    return 1.0 / ((1.0 - q) + q / n)


def _pair_fractions(rows: Sequence[Row]) -> list[tuple[str, str, float]]:
    """(core, model, Amdahl fraction) of every same-board 1-thread vs N-thread pair (non-int8)."""
    one = {(r.device, r.core, r.model): r.avg_ms for r in rows if r.threads == 1 and r.precision != "int8"}
    out = []
    for r in rows:
        key = (r.device, r.core, r.model)
        if r.threads > 1 and r.precision != "int8" and key in one:
            speedup = one[key] / r.avg_ms
            q = (1 - 1 / speedup) / (1 - 1 / r.threads)
            out.append((r.core, r.model, min(max(q, 0.0), 1.0)))
    return out


def parallel_fractions(rows: Sequence[Row]) -> tuple[dict[str, float], dict[str, int], float]:
    """Per-core median Amdahl fraction from same-board 1-thread vs N-thread pairs (non-int8)."""
    per_core: dict[str, list[float]] = {}
    for core, _, q in _pair_fractions(rows):
        per_core.setdefault(core, []).append(q)
    all_q = [q for qs in per_core.values() for q in qs]
    overall = statistics.median(all_q) if all_q else 0.0
    return ({c: statistics.median(qs) for c, qs in per_core.items()}, {c: len(qs) for c, qs in per_core.items()},
            overall)


def model_parallel_fractions(rows: Sequence[Row]) -> dict[tuple[str, str], float]:
    """Per (core, model) median Amdahl fraction over the boards that measured the pair; used only
    to bring multi-thread fit rows to 1 thread (the runtime keeps the per-core fraction)."""
    per: dict[tuple[str, str], list[float]] = {}
    for core, model, q in _pair_fractions(rows):
        per.setdefault((core, model), []).append(q)
    return {k: statistics.median(v) for k, v in per.items()}


@dataclass
class Fit:
    """Result of one fit: what the estimator needs plus bookkeeping for the params file."""

    theta: np.ndarray
    scales: dict[str, tuple[float, float]]  # core -> (compute_scale, memory_scale)
    phi: float
    q: dict[str, float]
    q_pairs: dict[str, int]
    q_overall: float
    rows_per_core: dict[str, int]
    fp16_only: frozenset[str] = frozenset()
    derived: dict[str, str] = field(default_factory=dict)
    rms_log: float = 0.0
    q_model: dict[tuple[str, str], float] = field(default_factory=dict)

    def fit_q(self, core: str, model: str) -> float:
        """Parallel fraction used to convert a multi-thread row of ``model`` on ``core`` (fit only)."""
        return self.q_model.get((core, model), self.q.get(core, self.q_overall))

    def predict(self, work: np.ndarray, core: str, clock: float, threads: int = 1, fp16: bool = False) -> float:
        from lodevem.latency.estimator import COMPUTE_TERMS

        s, m = self.scales[core]
        n = len(COMPUTE_TERMS)
        cycles = s * float(work[:n] @ self.theta[:n]) + m * float(work[n:] @ self.theta[n:])
        ms = cycles / clock / amdahl(self.q.get(core, self.q_overall), threads)
        return ms / self.phi if fp16 else ms


def _derive(core: str, scales: dict[str, tuple[float, float]]) -> Optional[tuple[tuple[float, float], str]]:
    routes = [(src, ratio, cite) for src, ratio, cite in DERIVATIONS.get(core, ()) if src in scales]
    if not routes:
        return None
    log_s = sum(math.log(scales[src][0] / ratio) for src, ratio, _ in routes) / len(routes)
    log_m = sum(math.log(scales[src][1] / ratio) for src, ratio, _ in routes) / len(routes)
    text = "derived: " + ("geometric mean of " if len(routes) > 1 else "") + "; ".join(
        f"{src} x {ratio:g} per clock ({cite})" for src, ratio, cite in routes)
    return (math.exp(log_s), math.exp(log_m)), text


def fit(rows: Sequence[Row], works: dict[str, ModelWork], single_scale: bool = False,
        board_offsets: bool = True, mt_weight: float = MT_WEIGHT, per_model_threads: bool = True) -> Fit:
    """Bounded least squares on log latency; see the module docstring for the model.

    ``board_offsets``: one log offset per (board, core), averaging to zero per core, so a board
    with many rows (or a fast runtime version) does not pull the shared ``theta``; predictions for
    a new phone use the typical board (offset 0). ``mt_weight``: multi-thread rows carry the
    Amdahl model's error on top, so they count half. ``single_scale``: one scale per core
    instead of separate compute and memory scales (kept for comparison in the benchmark).
    ``per_model_threads``: convert multi-thread rows with the (core, model) parallel fraction
    measured on other boards where there is one (see the module docstring, step 2).
    """
    from scipy.optimize import least_squares

    from lodevem.latency.estimator import COMPUTE_TERMS, TERMS

    q, q_pairs, q_overall = parallel_fractions(rows)
    q_model = model_parallel_fractions(rows) if per_model_threads else {}
    obs = [r for r in rows if r.precision != "int8" and r.base_model in works]
    cores_with_rows = sorted({r.core for r in obs})
    fp32_cores = {r.core for r in obs if r.precision == "fp32"}
    tie_core, tie_src, tie_ratio, _ = FP16_TIE
    tied = tie_core in cores_with_rows and tie_core not in fp32_cores and tie_src in fp32_cores
    if REFERENCE_CORE not in cores_with_rows:
        raise ValueError(f"no {REFERENCE_CORE} rows: the reference core is needed")
    free = [c for c in cores_with_rows if c != REFERENCE_CORE and not (tied and c == tie_core)]
    if any(r.precision == "fp16" for r in obs) and not tied:
        raise ValueError("fp16 rows but no tie to identify the fp16 factor")

    n_t, n_c = len(TERMS), len(COMPUTE_TERMS)
    per_scale = 1 if single_scale else 2
    W = np.array([works[r.base_model].work for r in obs])
    y = np.log([r.avg_ms for r in obs])
    clock = np.array([r.clock_ghz for r in obs])
    thr = np.array([amdahl(q_model.get((r.core, r.base_model), q.get(r.core, q_overall)), r.threads) for r in obs])
    fp16 = np.array([r.precision == "fp16" for r in obs], dtype=float)
    core_idx = {c: i for i, c in enumerate(free)}
    boards = sorted({(r.device, r.core) for r in obs}) if board_offsets else []
    board_idx = {b: i for i, b in enumerate(boards)}
    row_board = np.array([board_idx.get((r.device, r.core), -1) for r in obs])
    weight = np.array([1.0 if r.threads == 1 else mt_weight for r in obs])
    n_scale = per_scale * len(free)

    def unpack(x: np.ndarray) -> tuple[np.ndarray, dict[str, tuple[float, float]], float]:
        theta = x[:n_t]
        scales = {REFERENCE_CORE: (1.0, 1.0)}
        for c, i in core_idx.items():
            ls = x[n_t + per_scale * i]
            lm = x[n_t + per_scale * i + per_scale - 1]
            scales[c] = (math.exp(ls), math.exp(lm))
        if tied:
            s, m = scales[tie_src]
            scales[tie_core] = (s / tie_ratio, m / tie_ratio)
        return theta, scales, math.exp(x[n_t + n_scale])

    def residuals(x: np.ndarray) -> np.ndarray:
        theta, scales, phi = unpack(x)
        s = np.array([scales[r.core][0] for r in obs])
        m = np.array([scales[r.core][1] for r in obs])
        cycles = s * (W[:, :n_c] @ theta[:n_c]) + m * (W[:, n_c:] @ theta[n_c:])
        pred = np.log(np.maximum(cycles, 1e-12)) - np.log(clock) - np.log(thr) - fp16 * math.log(phi)
        if boards:
            offsets = x[n_t + n_scale + 1:]
            pred = pred + np.where(row_board >= 0, offsets[row_board], 0.0)
            # Board offsets average to zero per core: the core scale is the typical board.
            center = [10.0 * offsets[[board_idx[b] for b in boards if b[1] == c]].mean() for c in cores_with_rows]
            return np.concatenate([weight * (pred - y), center])
        return weight * (pred - y)

    x0 = np.concatenate([np.full(n_c, 0.5), [0.5, 0.05], np.zeros(n_scale), [0.0], np.zeros(len(boards))])
    lower = np.concatenate([np.zeros(n_t), np.full(n_scale + 1 + len(boards), -np.inf)])
    upper = np.full(len(x0), np.inf)
    sol = least_squares(residuals, x0, bounds=(lower, upper), method="trf", x_scale="jac", max_nfev=20000)
    theta, scales, phi = unpack(sol.x)
    theta = np.where(theta < 1e-9, 0.0, theta)  # a bound-active term is exactly zero, not 1e-14
    result = Fit(theta=theta, scales=scales, phi=phi if tied else 1.0, q=dict(q), q_pairs=q_pairs,
                 q_overall=q_overall, rows_per_core={c: sum(r.core == c for r in obs) for c in cores_with_rows},
                 fp16_only=frozenset(c for c in cores_with_rows if c not in fp32_cores),
                 rms_log=float(np.sqrt(np.mean(sol.fun[:len(obs)] ** 2))), q_model=q_model)
    if tied:
        result.derived[tie_core] = (f"tied: fp32 speed = {tie_src} x {tie_ratio:g} per clock ({FP16_TIE[3]}); "
                                    f"its {result.rows_per_core[tie_core]} fp16 rows fit the fp16 factor")
    _fill_missing(result)
    return result


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
            sources = [s for s, _, _ in DERIVATIONS[core] if s in result.q]
            if core not in result.q:
                result.q[core] = statistics.mean(result.q[s] for s in sources) if sources else result.q_overall
            pending.remove(core)
            progress = True
        if not progress:
            raise ValueError(f"no data and no documented derivation for {', '.join(pending)}")


def int8_speedups(rows: Sequence[Row], result: Fit) -> tuple[dict[str, float], dict[str, int]]:
    """fp32 / int8 latency per core, from same board+threads pairs; fp16 partners x phi."""
    base = {(r.device, r.core, r.threads, r.model): r for r in rows if r.precision != "int8"}
    per_core: dict[str, list[float]] = {}
    for r in rows:
        partner = base.get((r.device, r.core, r.threads, r.base_model)) if r.precision == "int8" else None
        if partner is None:
            continue
        fp32_ms = partner.avg_ms * (result.phi if partner.precision == "fp16" else 1.0)
        per_core.setdefault(r.core, []).append(fp32_ms / r.avg_ms)
    speed = {c: statistics.median(v) for c, v in per_core.items()}
    for core in ALL_CORES:
        if core not in speed:
            sources = [s for s, _, _ in DERIVATIONS.get(core, ()) if s in speed]
            speed[core] = math.exp(statistics.mean(math.log(speed[s]) for s in sources)) if sources else 1.0
    return speed, {c: len(v) for c, v in per_core.items()}


# ---------------------------------------------------------------------------------------------
# Leave-one-device-out
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scored:
    device: str
    core: str
    model: str
    actual_ms: float
    estimator_ms: float
    baseline_ms: float
    core_seen: bool


def baseline_constants(rows: Sequence[Row], works: dict[str, ModelWork], result: Fit) -> dict[str, float]:
    """FLOPs-proportional baseline: one MACs-per-cycle constant per core (geometric mean over the
    core's rows brought to 1-thread fp32 with the same fold's thread and fp16 factors)."""
    from lodevem.latency.estimator import COMPUTE_TERMS

    n_c = len(COMPUTE_TERMS)
    logs: dict[str, list[float]] = {}
    for r in rows:
        if r.precision == "int8" or r.base_model not in works:
            continue
        ms = r.avg_ms * amdahl(result.fit_q(r.core, r.base_model), r.threads)
        ms *= result.phi if r.precision == "fp16" else 1.0
        macs = float(works[r.base_model].work[:n_c].sum())  # MMACs
        logs.setdefault(r.core, []).append(math.log(macs / (ms * r.clock_ghz)))  # MACs per cycle
    consts = {c: math.exp(statistics.mean(v)) for c, v in logs.items()}
    scales = {c: (1 / k, 1 / k) for c, k in consts.items()}  # reuse the documented derivations
    for core in ALL_CORES:
        if core not in scales:
            got = _derive(core, scales)
            if got:
                scales[core] = got[0]
    return {c: 1 / s for c, (s, _) in scales.items()}


def scored_devices(rows: Sequence[Row]) -> list[str]:
    return sorted({r.device for r in rows if r.threads == 1 and r.precision == "fp32"})


def lodo(rows: Sequence[Row], works: dict[str, ModelWork], **fit_options: Any) -> list[Scored]:
    from lodevem.latency.estimator import COMPUTE_TERMS

    n_c = len(COMPUTE_TERMS)
    out: list[Scored] = []
    for device in scored_devices(rows):
        train = [r for r in rows if r.device != device]
        result = fit(train, works, **fit_options)
        consts = baseline_constants(train, works, result)
        seen = {r.core for r in train if r.precision != "int8"}
        for r in rows:
            if r.device == device and r.threads == 1 and r.precision == "fp32" and r.model in works:
                w = works[r.model].work
                out.append(Scored(device, r.core, r.model, r.avg_ms, result.predict(w, r.core, r.clock_ghz),
                                  float(w[:n_c].sum()) / (consts[r.core] * r.clock_ghz), r.core in seen))
    return out


def summarize(errors: Sequence[float]) -> dict[str, float]:
    a = np.abs(np.asarray(errors))
    return {"mape_pct": round(float(a.mean() * 100), 1), "within_10_pct": round(float((a <= 0.10).mean() * 100), 1),
            "within_25_pct": round(float((a <= 0.25).mean() * 100), 1), "rows": int(a.size)}


def lodo_summary(scored: Sequence[Scored]) -> dict[str, Any]:
    est = [s.estimator_ms / s.actual_ms - 1 for s in scored]
    base = [s.baseline_ms / s.actual_ms - 1 for s in scored]
    seen = [s.estimator_ms / s.actual_ms - 1 for s in scored if s.core_seen]
    unseen = [s.estimator_ms / s.actual_ms - 1 for s in scored if not s.core_seen]
    per_device = {}
    for device in sorted({s.device for s in scored}):
        errs = [s.estimator_ms / s.actual_ms - 1 for s in scored if s.device == device]
        cores = sorted({s.core for s in scored if s.device == device})
        per_device[device] = {"cores": cores, **summarize(errs),
                              "bias_pct": round(float(np.mean(errs) * 100), 1)}
    return {"estimator": summarize(est), "baseline": summarize(base),
            "estimator_core_seen_in_fold": summarize(seen) if seen else None,
            "estimator_core_unseen_in_fold": summarize(unseen) if unseen else None,
            "per_device": per_device}


# ---------------------------------------------------------------------------------------------
# Params file
# ---------------------------------------------------------------------------------------------

def build_params(rows: list[Row], works: dict[str, ModelWork], result: Fit, summary: dict[str, Any],
                 data_path: Path, fit_date: str) -> dict[str, Any]:
    from lodevem.latency.estimator import TERMS

    int8, int8_pairs = int8_speedups(rows, result)
    units = {"conv3x3s1_macs": "MAC of dense 3x3 stride-1 convs",
             "gemm_conv_macs": "MAC of 1x1 and other dense convs (GEMM / im2col+GEMM)",
             "depthwise_macs": "MAC of depthwise convs",
             "fc_macs": "MAC of fully connected layers", "bytes": "fp32 byte moved (in+out activations+weights)",
             "kernels": "kernel (fixed per-kernel overhead)"}
    cores = {}
    for core in ALL_CORES:
        s, m = result.scales[core]
        if core in result.derived:
            source = result.derived[core]
        else:
            source = f"fit: {result.rows_per_core[core]} non-int8 rows"
            if core in result.fp16_only:
                source += f" (all fp16: fp32 = fp16 latency x {result.phi:.3f})"
        theta = dict(zip(TERMS, result.theta))
        cores[core] = {
            "compute_scale": round(s, 6), "memory_scale": round(m, 6),
            "parallel_fraction": round(result.q[core], 4),
            "parallel_fraction_source": (f"median of {result.q_pairs[core]} same-board 1- vs N-thread pairs"
                                         if core in result.q_pairs else "no pairs: mean of the derivation's sources"
                                         if core in DERIVATIONS and core in result.derived
                                         else f"no pairs: median of all {sum(result.q_pairs.values())} pairs"),
            "int8_speedup": round(int8[core], 4),
            "int8_speedup_source": (f"median fp32/int8 latency over {int8_pairs[core]} paired rows"
                                    if core in int8_pairs else "no int8 rows: geometric mean of the derivation's sources"),
            "effective_macs_per_cycle": {t: round(1 / (s * theta[t]), 3) if theta[t] > 0 else None
                                         for t in TERMS if t.endswith("_macs")},
            "source": source,
            "derived": core not in result.rows_per_core,
            "fp32_from_fp16": core in result.fp16_only,
        }
    excluded = {"int8": sum(r.precision == "int8" for r in rows)}
    used = [r for r in rows if r.precision != "int8"]
    return {
        "version": "v1",
        "reference_core": REFERENCE_CORE,
        "reference_clock_ghz": 1.0,
        "nnmeter_reference": {"core": NNMETER_CORE, "clock_ghz": NNMETER_CLOCK,
                              "why": "nn-Meter's cortexA76cpu_tflite21 models a Pixel 4 Cortex-A76 big core at 2.42 GHz"},
        "formula": ("ms = (compute_scale[core] * sum_j theta_j * mac_work_j + memory_scale[core] * "
                    "(theta_bytes * MB + theta_kernels * n_kernels)) / clock_GHz; MACs in millions; "
                    "threads: ms / (1 / ((1 - p) + p / min(threads, cluster cores)))"),
        "terms_note": ("effective MACs per cycle count a convolution's direct MACs, so Winograd 3x3 convs can "
                       "exceed the core's fp32 FMA peak; a term fitted to 0 (fc_macs) is charged through "
                       "'bytes' only: fc layers are weight-streaming, memory-bound GEMVs"),
        "terms": {t: {"cycles_per_unit": round(float(v), 6), "unit": f"per million x {units[t]}" if t != "kernels"
                      else "Mcycles per kernel"} for t, v in zip(TERMS, result.theta)},
        "cores": cores,
        "fp16_speedup": {
            "value": round(result.phi, 4),
            "use": ("ncnn fp16 rows (A55, A76) enter the fp32 fit divided by this factor; predictions are fp32; "
                    "an fp16 model variant on one of 'cores' is predicted at fp32 / value"),
            "identified_by": FP16_TIE[3],
            "cores": list(FP16_CORES),
            "cores_source": ("ARMv8.2-A half-precision arithmetic: Cortex-A55/A75/A76 implement it, "
                             "Cortex-A7/A53/A72/A73 (ARMv7-A/ARMv8.0-A) do not (Arm core TRMs; ncnn issue #1203)"),
        },
        "uncertainty": {
            "lodo_mape_pct": summary["estimator"]["mape_pct"],
            "lodo_within_10_pct": summary["estimator"]["within_10_pct"],
            "lodo_within_25_pct": summary["estimator"]["within_25_pct"],
            "lodo_rows": summary["estimator"]["rows"],
            "baseline_lodo_mape_pct": summary["baseline"]["mape_pct"],
            "lodo": summary,
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
                "loss": "least squares on log latency (scipy.optimize.least_squares, trf), theta >= 0",
                "scales_per_core": "compute and memory",
                "board_offsets": "one log offset per (board, core), zero mean per core; predictions use 0",
                "multi_thread_row_weight": MT_WEIGHT,
                "multi_thread_conversion": ("a multi-thread row enters the fit divided by the Amdahl speedup of the "
                                            "(core, model) parallel fraction measured on the fit's 1- vs N-thread "
                                            "pairs (median over boards), else of the core's; the runtime uses the "
                                            "core's (cores[*].parallel_fraction)"),
                "fit_parallel_fraction_per_core_model": {
                    core: {model: round(q, 4) for (c, model), q in sorted(result.q_model.items()) if c == core}
                    for core in sorted({c for c, _ in result.q_model})},
                "reference_core": REFERENCE_CORE,
            },
            "rows_total": len(rows),
            "rows_used": len(used),
            "rows_used_by_precision": {p: sum(r.precision == p for r in used) for p in ("fp32", "fp16")},
            "rows_used_by_threads": {str(t): sum(r.threads == t for r in used) for t in sorted({r.threads for r in used})},
            "rows_excluded": excluded,
            "precision_handling": ("fp16 rows kept with a fitted fp16 speedup (see fp16_speedup); int8 rows excluded "
                                   "from the fp32 fit and used only for int8_speedup"),
            "model_map": {name: {"zoo": b.zoo, "input": [1, 3, b.input_hw, b.input_hw], "ncnn_mmacs": b.ncnn_mmacs,
                                 "zoo_mmacs": round(works[name].zoo_mmacs, 1),
                                 "mac_scale": round(works[name].mac_scale, 4), "note": b.note}
                          for name, b in MODEL_MAP.items()},
            "mac_correction": "each conv/fc MAC term of a model is scaled by ncnn_mmacs / zoo_mmacs (data README figures)",
        },
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--onnx-cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--reexport", action="store_true", help="re-export the zoo models even if cached")
    parser.add_argument("--date", default=_dt.date.today().isoformat(), help="fit date to record (ISO)")
    args = parser.parse_args(argv)

    rows = load_rows(args.data)
    works = model_work(export_zoo(args.onnx_cache, args.reexport))
    result = fit(rows, works)
    summary = lodo_summary(lodo(rows, works))
    params = build_params(rows, works, result, summary, args.data, args.date)
    args.out.write_text(json.dumps(params, indent=1, ensure_ascii=False) + "\n")
    est, base = summary["estimator"], summary["baseline"]
    print(f"wrote {args.out}: fp16 factor {result.phi:.3f}, fit rms(log) {result.rms_log:.3f}; LODO MAPE "
          f"estimator {est['mape_pct']}% vs baseline {base['mape_pct']}% over {est['rows']} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
