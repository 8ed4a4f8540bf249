#!/usr/bin/env python
"""Fit lodevem's offline latency estimator on published ARM latencies; write its parameters.

    python scripts/fit_estimator.py [--data benchmarks/data/arm-cpu-latency-dev.csv]
                                    [--onnx-cache .lodevem-build/fit-onnx] [--out lodevem/data/estimator_params.json]

What it does, in order (every step is recorded in the params file):
1. Maps the CSV's benchmark graphs to lodevem's zoo models and exports those (with the worker's
   own ``export_module``, so the kernels are exactly what ``lodevem start`` sees). ncnn rows ran
   ncnn's own graphs: their MACs are corrected to the data README's figures (a per-model scale);
   TFLite + XNNPACK rows ran the standard graphs (``std:<model>``, no correction).
2. One joint bounded least-squares fit on log latency over *every* row (``estimator_model.fit``:
   the formula is ``lodevem.latency.estimator``'s, each row priced at the arithmetic its runtime
   executes, ``lodevem.latency.arithmetic``), with the hardware's order built in: per-clock order
   of the cores, Amdahl fractions in [0, 1], fp16 and int8 divisors bounded, each bound citing its
   source (``estimator_model``'s module doc). One log offset per board, zero mean per (core,
   runtime), so the boards of one core (which differ up to 1.8x, data README) pull equally.
3. **Nested leave-one-SoC-out**: every SoC held out in turn; on the other SoCs the prior width
   ``sigma`` is chosen among ``--sigma-grid`` by SoC-grouped inner folds (``--inner-folds``, 5:
   the other SoCs dealt into 5 groups, ``inner_groups``; ``choose_sigma``), the model refitted
   with it and every row of the held-out SoC predicted. Those rows (``uncertainty.held_out_rows``)
   are the held-out (leave-one-SoC-out) error every cell states, per kind of cell
   (``lodevem.latency.selection``), and the default predictor's pick; a one-shot calibration
   simulation gives ``oneshot_mape_pct``. The shipped fit uses the sigma the same inner folds
   choose on all SoCs. Every fit starts from one fixed point (no warm starts between folds).
   Time: about 600 fits of ~0.5 s, ~5-10 minutes on one core of a 2-core machine (it prints its
   wall time and records it); BLAS is held to one thread, since its threads only contend on a
   shared machine (measured: 2.4x slower with OpenBLAS's default threads on 2 busy cores).
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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

# BLAS on one thread, set before numpy and scipy load their OpenBLAS copies (each its own; a
# threadpool limit set later misses the one scipy loads lazily): on a shared 2-core machine its
# threads only spin against each other and the other users (module doc).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from estimator_model import (  # noqa: E402  (the one definition of what is fitted)
    ALL_CORES,
    PRIORS,
    REFERENCE_CORE,
    REFERENCE_RUNTIME,
    SIGMA_GRID,
    Fit,
)
from estimator_model import fit as fit_model  # noqa: E402

DEFAULT_DATA = REPO / "benchmarks" / "data" / "arm-cpu-latency-dev.csv"  # a copy of the published rows, sources in its README
DEFAULT_CACHE = REPO / ".lodevem-build" / "fit-onnx"
DEFAULT_OUT = REPO / "lodevem" / "data" / "estimator_params.json"

GRID: list[float] = list(SIGMA_GRID)  # the widths nested folds choose among (--sigma-grid narrows it)
# Inner folds of the nested fit: the outer fold's SoCs dealt into this many groups (``inner_groups``).
# 5, not an inner leave-one-SoC-out: the latter is SoCs x widths x (SoCs - 1) fits (about 2,800 at
# 27 SoCs, growing with the square of the SoCs); 5 groups is about 550 fits, minutes on 2 cores.
INNER_FOLDS = 5
NNMETER_CORE, NNMETER_CLOCK = "Cortex-A76", 2.42  # nn-Meter's cortexA76cpu_tflite21: Pixel 4 big core


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
        """(core, "1" | "multi", executed arithmetic, runtime): the cell kind an error is stated for."""
        from lodevem.latency.arithmetic import band_arithmetic, executed

        return (self.core, "1" if self.threads == 1 else "multi",
                band_arithmetic([executed(self.runtime, self.core, self.precision)]), self.runtime)


@dataclass(frozen=True)
class LoadedRows:
    rows: list[Row]
    skipped: list[str]  # one reason per skipped line


def other_runtime(r: dict[str, str]) -> Optional[str]:
    """Why a row measured a runtime lodevem does not predict (None: it is one lodevem predicts).
    ``tflite`` means TFLite with XNNPACK; a row whose ``xnnpack`` column says ``no`` ran TFLite's
    own kernels (the dev CSV keeps them beside their XNNPACK twins, data README)."""
    xnnpack = (r.get("xnnpack") or "").strip()
    if xnnpack == "no":
        return "TFLite without XNNPACK (its own kernels): not the runtime lodevem predicts"
    if xnnpack == "unknown" and (r.get("precision") or "fp32").strip() in ("fp32", "fp16") and \
            (r.get("runtime") or "").strip() == "tflite":
        # a float row whose delegate the source does not state: its kernel mix says TFLite's own
        # kernels as often as XNNPACK (data README, "fourth pass"), so it is kept for reading, not fitted
        return "TFLite float with the delegate not stated (XNNPACK or its own kernels): not fitted"
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
                if precision == "int8" and (r.get("quant") or "").strip() == "int8-dynamic":
                    precision = "int8-dynamic"  # dynamic range (weights int8, float activations)
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
    """Graph key -> zoo model: ncnn's graphs by CSV name, standard graphs as ``std:<name>``; a row
    naming a zoo model itself (newer rows do) is that zoo graph, uncorrected, under either runtime."""
    from lodevem import zoo

    out = dict(MODEL_MAP)
    out.update({f"std:{k}": v for k, v in STD_MODEL_MAP.items()})
    for name in zoo.names():
        if name != "tiny_cnn":
            zoo_model = BenchModel(name, 224, None, "the zoo model of that name")
            out.setdefault(name, zoo_model)
            out.setdefault(f"std:{name}", zoo_model)
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
    work: np.ndarray  # per lodevem.latency.estimator.TERMS (+ DRAM 0), ncnn-corrected MACs
    zoo_mmacs: float
    mac_scale: float
    kernel_bytes: tuple[Any, ...] = ()  # lodevem.latency.memory.KernelBytes per kernel

    def on(self, soc: Optional[str], core: str) -> np.ndarray:
        """The work on ``soc``'s memory system for ``core``: its DRAM ms at peak filled in."""
        from lodevem.latency.estimator import TERMS
        from lodevem.latency.memory import dram_ms_at_peak, resolve

        key = (soc, core)
        cache = self.__dict__.setdefault("_on", {})
        if key not in cache:
            out = np.zeros(len(TERMS) + 1)
            out[:len(TERMS)] = np.asarray(self.work, dtype=float)[:len(TERMS)]
            out[len(TERMS)] = sum(dram_ms_at_peak(list(self.kernel_bytes), resolve(soc, core)))
            cache[key] = out
        return cache[key]


def model_work(onnx_paths: dict[str, Path]) -> dict[str, ModelWork]:
    from lodevem.latency.estimator import sum_work
    from lodevem.latency.kernels import extract_kernels
    from lodevem.latency.work import kernel_bytes

    maps = graph_maps()
    out: dict[str, ModelWork] = {}
    graphs: dict[Path, Any] = {}
    for name, path in onnx_paths.items():
        graph = graphs.setdefault(path, extract_kernels(path))
        zoo_mmacs = graph.macs / 1e6
        ncnn = maps[name].ncnn_mmacs
        scale = ncnn / zoo_mmacs if ncnn else 1.0
        out[name] = ModelWork(name, np.array(sum_work(graph.kernels, scale)), zoo_mmacs, scale,
                              tuple(kernel_bytes(k) for k in graph.kernels))
    return out


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
        w = works[r.graph_key].on(r.soc or None, r.core)
        one = result.predict(w, r.core, r.clock_ghz, 1, "fp32", r.runtime)
        ms = r.avg_ms * one / result.predict_row(r, works)
        macs = float(w[:n_c].sum())  # MMACs
        logs.setdefault(r.core, []).append(math.log(macs / (ms * r.clock_ghz)))  # MACs per cycle
    consts = {c: math.exp(statistics.mean(v)) for c, v in logs.items()}
    for core in ALL_CORES:  # a core without rows: the fit's per-clock ratio to the cores with some
        if core not in consts and consts:
            consts[core] = math.exp(statistics.mean(
                math.log(k * result.scales[c][0] / result.scales[core][0]) for c, k in consts.items()
                if c in result.scales))
    return consts


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


def fit(rows: Sequence[Row], works: dict[str, ModelWork], sigma: Optional[float] = None, **options: Any) -> Fit:
    """The estimator fitted on ``rows`` (``estimator_model.fit``); ``sigma`` None: the prior width
    the shipped params chose (``fit_options.sigma``), else the grid's middle."""
    return fit_model(rows, works, shipped_sigma() if sigma is None else sigma, **options)


def shipped_sigma() -> float:
    try:
        return float(json.loads(DEFAULT_OUT.read_text())["provenance"]["fit_options"]["sigma"])
    except (OSError, KeyError, TypeError, ValueError):
        return SIGMA_GRID[len(SIGMA_GRID) // 2]


def _folds(rows: Sequence[Row]) -> list[str]:
    return sorted({r.fold for r in rows})


def inner_groups(rows: Sequence[Row], k: int) -> list[list[str]]:
    """The SoCs of ``rows`` dealt into ``min(k, SoCs)`` groups, the inner folds of a nested fold.

    SoCs are sorted by the cores they have rows of (then by name) and dealt round-robin, so SoCs of
    one core family land in different groups: every inner fit keeps rows of each core family the
    training SoCs have (a group of only A7 SoCs would leave its fits to place the A7 by priors
    alone). Deterministic: the same rows give the same groups on every machine. ``k`` at least the
    number of SoCs is an inner leave-one-SoC-out."""
    cores: dict[str, set[str]] = {}
    for r in rows:
        cores.setdefault(r.fold, set()).add(r.core)
    order = sorted(cores, key=lambda soc: (tuple(sorted(ALL_CORES.index(c) if c in ALL_CORES else len(ALL_CORES)
                                                         for c in cores[soc])), soc))
    n = max(1, min(k, len(order)))
    return [sorted(order[i::n]) for i in range(n)]


def choose_sigma(rows: Sequence[Row], works: dict[str, ModelWork], inner_folds: Optional[int] = None
                 ) -> tuple[float, dict[float, float]]:
    """The prior width with the lowest SoC-grouped cross-validated MAPE over ``rows`` (each row of
    each inner group predicted by a fit on the other groups, ``inner_groups``), and each width's
    MAPE. Every fit starts from the same fixed point (no warm start carried between folds), so a
    choice depends on its rows only, never on the order or on a fit that saw another fold."""
    groups = inner_groups(rows, INNER_FOLDS if inner_folds is None else inner_folds)
    mapes: dict[float, float] = {}
    for sigma in GRID:
        errors = []
        for group in groups:
            held = set(group)
            result = fit_model([r for r in rows if r.fold not in held], works, sigma)
            errors += [abs(result.predict_row(r, works) / r.avg_ms - 1) for r in rows
                       if r.fold in held and r.graph_key in works]
        mapes[sigma] = round(100 * float(np.mean(errors)), 2)
    return min(mapes, key=lambda k: (mapes[k], k)), mapes


@dataclass(frozen=True)
class FoldChoice:
    """What the inner folds chose for one held-out SoC (never looking at it)."""

    soc: str
    sigma: float
    inner_mape_pct: dict[float, float]


def lodo(rows: Sequence[Row], works: dict[str, ModelWork], nested: bool = True, sigma: Optional[float] = None,
         choices: Optional[list[FoldChoice]] = None, progress: bool = False,
         inner_folds: Optional[int] = None) -> list[Scored]:
    """Every SoC held out in turn (all its boards and clusters together, ``Row.fold``): fit on the
    others and score every row of the held-out SoC. ``nested``: the prior width is chosen by SoC-
    grouped inner folds on the others (``choose_sigma``, ``inner_folds`` groups, default
    ``INNER_FOLDS``), so no choice sees the SoC it is scored on; else ``sigma`` (None: the shipped
    one). ``choices``: filled with each fold's choice. Every fit starts cold (the same fixed start):
    no fold's start carries a fit that saw its held-out SoC.
    Folds by board name would train on a board of the same SoC (data README)."""
    import time

    out: list[Scored] = []
    folds, start = _folds(rows), time.monotonic()
    for i, group in enumerate(folds, start=1):
        train = [r for r in rows if r.fold != group]
        if nested:
            chosen, inner = choose_sigma(train, works, inner_folds)
            if choices is not None:
                choices.append(FoldChoice(group, chosen, inner))
            if progress:
                print(f"  fold {i}/{len(folds)} {group}: sigma {chosen:g} (inner MAPE {inner}; "
                      f"{time.monotonic() - start:.0f} s)", file=sys.stderr)
        else:
            chosen = shipped_sigma() if sigma is None else sigma
        result = fit_model(train, works, chosen)
        consts = baseline_constants(train, works, result)
        out += score(result, consts, [r for r in rows if r.fold == group], works, {r.core for r in train})
    return out


def held_out_rows(scored: Sequence[Scored]) -> list[Any]:
    """The nested fold's rows as ``lodevem.latency.selection`` reads them (arithmetic = executed)."""
    from lodevem.latency.arithmetic import band_arithmetic, executed
    from lodevem.latency.selection import HeldOutRow

    return [HeldOutRow(s.row.device, s.row.fold, s.row.core, s.row.threads,
                       band_arithmetic([executed(s.row.runtime, s.row.core, s.row.precision)]), s.row.runtime,
                       s.row.model, round(s.error, 5)) for s in scored]


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
    int8 = r.precision in ("int8", "int8-dynamic")
    if r.threads == 1 and r.precision == "fp32":
        cats.append("1t_fp32")
    if r.threads > 1 and not int8:
        cats.append("threads")
    if r.precision == "fp16" or int8:
        cats.append("int8" if int8 else "fp16")
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


def build_params(rows: list[Row], works: dict[str, ModelWork], result: Fit, scored: Sequence[Scored],
                 choices: Sequence[FoldChoice], final_inner: dict[float, float], data_path: Path,
                 fit_date: str) -> dict[str, Any]:
    from lodevem.latency.estimator import TERMS

    summary = score_summary(scored)
    units = {"conv3x3s1_macs": "MAC of dense 3x3 stride-1 convs",
             "gemm_conv_macs": "MAC of 1x1 and other dense convs (GEMM / im2col+GEMM)",
             "depthwise_macs": "MAC of depthwise convs",
             "fc_macs": "MAC of fully connected layers",
             "winograd_io": "activation (in + out) of dense 3x3 stride-1 convs: Winograd tile transforms",
             "bytes": "fp32 byte moved (in+out activations+weights)",
             "kernels": "kernel (fixed per-kernel overhead)"}
    params = result.estimator_params()
    theta = dict(zip(TERMS, result.theta))
    for t, entry in params["terms"].items():
        entry["cycles_per_unit"] = _r(entry["cycles_per_unit"])
        entry["unit"] = f"per million x {units[t]}" if t != "kernels" else "Mcycles per kernel"
    for core, c in params["cores"].items():
        for k in ("compute_scale", "memory_scale"):
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
        rt["int8"]["compute_speedup"] = {g: _r(v) for g, v in rt["int8"]["compute_speedup"].items()}
        rt["int8"]["memory_speedup"] = _r(rt["int8"]["memory_speedup"])
    fp16 = params["precision"]["fp16"]
    fp16["compute_speedup"], fp16["depthwise_speedup"] = _r(fp16["compute_speedup"]), _r(fp16["depthwise_speedup"])
    cats = summary["categories"]
    held = held_out_rows(scored)
    params.update({
        "nnmeter_reference": {"core": NNMETER_CORE, "clock_ghz": NNMETER_CLOCK, "runtime": "tflite",
                              "why": ("nn-Meter's cortexA76cpu_tflite21 models TFLite 2.1 on a Pixel 4 Cortex-A76 big "
                                      "core at 2.42 GHz; its figures are carried to other cores with the tflite ratio")},
        "formula": ("C = compute_scale[core] * compute_factor[rt] * theta_c . map_rt(mac_work) / speedup_c[a, rt]; "
                    "M = memory_scale[core] * memory_factor[rt] * (theta_bytes * MB / speedup_m[a, rt] + "
                    "theta_kernels * n_kernels); D = dram.inverse_efficiency * DRAM_MB[soc] / peak_GBs[soc] / speedup_m[a, rt]; "
                    "ms = (C * A(q_c, n) + M * A(q_m, n)) / clock_GHz + D * A(dram.parallel_fraction, n), "
                    "A(q, n) = (1 - q) + q / min(threads, cluster cores); a = the arithmetic the runtime executes "
                    "(lodevem.latency.arithmetic); MACs and bytes in millions"),
        "terms_note": ("effective MACs per cycle count a convolution's direct MACs, so Winograd 3x3 convs (ncnn) can "
                       "exceed the core's fp32 FMA peak; a term fitted to 0 is charged through 'bytes' only"),
        "uncertainty": {
            "method": ("nested leave-one-SoC-out: every SoC of the dev data held out in turn (all its boards and "
                       "clusters together: RK3399 = OrangePi4 LTS, both RK3588 clusters); on the other SoCs the prior "
                       f"width is chosen among {list(GRID)} by {INNER_FOLDS} SoC-grouped inner folds (the other SoCs "
                       "sorted by their cores and dealt round-robin into the groups, so each core family's SoCs "
                       "spread over them; each group predicted by a fit on the rest), the estimator refitted with "
                       "the chosen width, every row of the held-out SoC predicted; every fit starts from one fixed "
                       "point, so no fit of a fold starts from one that saw its held-out SoC"),
            "folds": "soc",
            "nested": True,
            "inner_folds": {"k": INNER_FOLDS, "grouped_by": "soc", "sigma_grid": list(GRID),
                            "why_not_leave_one_out": (
                                "an inner leave-one-SoC-out is SoCs x widths x (SoCs - 1) fits (~2,800 at 27 SoCs, "
                                "growing with the square of the SoCs); grouped folds keep the rule (chosen without "
                                "the held-out SoC, folds by SoC) in minutes")},
            "lodo_mape_pct": cats["1t_fp32"]["mape_pct"],
            "lodo_rows": cats["1t_fp32"]["rows"],
            "baseline_lodo_mape_pct": summary["baseline_1t_fp32"]["mape_pct"],
            "categories": cats,
            "oneshot_mape_pct": summary["oneshot"]["mape_pct"],
            "oneshot_rows": summary["oneshot"]["rows"],
            "oneshot_method": ("on each held-out board and kind, each model in turn is measured: its measured / "
                               "predicted ratio scales the held-out predictions of the other models of that kind"),
            "per_kind": summary["per_kind"],
            "per_kind_note": ("MAPE per cell kind (core x threads x executed arithmetic x runtime); core null = pooled "
                              "over cores, runtime null = pooled over runtimes; lodevem states the figure "
                              "lodevem.latency.selection computes from held_out_rows (pooled over the core's family "
                              "first)"),
            "per_board": summary["per_board"],
            "same_core_spread": ("boards with the same core differ up to 1.6-1.8x in MACs per cycle (runtime "
                                 "versions, real vs nominal clocks; data README): a single board can be that far off"),
            "fit_rms_log_error": round(result.rms_log, 4),
            "held_out_columns": ["device", "soc", "core", "threads", "arithmetic", "runtime", "model", "error"],
            "held_out_rows": [[h.device, h.soc, h.core, h.threads, h.arithmetic, h.runtime, h.model, h.error]
                              for h in held],
            "fold_choices": [{"soc": c.soc, "sigma": c.sigma,
                              "inner_mape_pct": {str(k): v for k, v in c.inner_mape_pct.items()}} for c in choices],
        },
        "provenance": {
            "fit_date": fit_date,
            "script": "scripts/fit_estimator.py",
            "data_file": os.path.relpath(data_path, REPO),
            "data_sha256": sha256(data_path),
            "data_sources": sorted({r.source for r in rows}),
            "fit_options": {
                "loss": ("least squares on log latency (scipy.optimize.least_squares, trf) with the bounds of "
                         "scripts/estimator_model.py (per-clock core order, q in [0, 1], fp16 in [1, 2], int8 bounds)"),
                "rows": "every row: 1- and multi-thread, fp32 / fp16 / int8, ncnn and tflite, fitted jointly",
                "board_offsets": ("one log offset per (board, core) where a (core, runtime) has several boards, zero mean "
                                  "per (core, runtime); predictions use 0"),
                "reference_core": REFERENCE_CORE, "reference_runtime": REFERENCE_RUNTIME,
                "sigma": result.sigma, "sigma_grid": list(GRID),
                "sigma_choice": (f"the width of the documented per-clock priors with the lowest {INNER_FOLDS}-fold "
                                 "SoC-grouped MAPE on all SoCs "
                                 f"({ {str(k): v for k, v in final_inner.items()} }); each held-out fold chose its "
                                 "own on the other SoCs only (uncertainty.fold_choices)"),
                "priors": [{"core": a, "other": b, "speed_ratio_per_clock": ratio, "source": cite}
                           for a, b, ratio, cite in PRIORS],
            },
            "rows_total": len(rows),
            "rows_used": sum(r.graph_key in works for r in rows),
            "rows_by_runtime": {rt: sum(r.runtime == rt for r in rows) for rt in sorted({r.runtime for r in rows})},
            "rows_by_precision": {p: sum(r.precision == p for r in rows) for p in ("fp32", "fp16", "int8")},
            "rows_excluded": {"no graph": sum(r.graph_key not in works for r in rows),
                              "tflite not fitted (XNNPACK off, or its delegate not stated)": excluded_rows(data_path)},
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
    global INNER_FOLDS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--onnx-cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--reexport", action="store_true", help="re-export the zoo models even if cached")
    parser.add_argument("--date", default=_dt.date.today().isoformat(), help="fit date to record (ISO)")
    parser.add_argument("--sigma", type=float, default=None,
                        help="a fixed prior width, folds NOT nested (a draft for development: the params say so)")
    parser.add_argument("--sigma-grid", default=None,
                        help="comma-separated prior widths the nested folds choose among (default: the full grid); "
                             "the params record the grid used")
    parser.add_argument("--inner-folds", type=int, default=INNER_FOLDS,
                        help=f"SoC-grouped inner folds that choose the prior width (default {INNER_FOLDS}; at least "
                             "the number of SoCs: an inner leave-one-SoC-out, hours); the params record it")
    args = parser.parse_args(argv)
    if args.sigma_grid:
        try:
            GRID[:] = [float(v) for v in args.sigma_grid.split(",")]
        except ValueError:
            parser.error(f"--sigma-grid: expected comma-separated numbers, got '{args.sigma_grid}'")
    if args.inner_folds < 2:
        parser.error(f"--inner-folds: expected an integer >= 2, got {args.inner_folds}")
    INNER_FOLDS = args.inner_folds  # what build_params records

    import scipy.optimize  # noqa: F401  (loaded before the limit below, so it reaches scipy's BLAS too)
    from threadpoolctl import threadpool_limits  # a scikit-learn dependency

    started, cpu_started = time.monotonic(), time.process_time()
    with threadpool_limits(limits=1):  # BLAS threads only contend on a shared machine (module doc)
        rows = load_rows(args.data)
        works = dev_works(rows, args.onnx_cache, args.reexport)
        choices: list[FoldChoice] = []
        if args.sigma is None:
            scored = lodo(rows, works, nested=True, choices=choices, progress=True, inner_folds=args.inner_folds)
            sigma, inner = choose_sigma(rows, works, args.inner_folds)
        else:
            scored, sigma, inner = lodo(rows, works, nested=False, sigma=args.sigma), args.sigma, {}
        result = fit_model(rows, works, sigma)
        params = build_params(rows, works, result, scored, choices, inner, args.data, args.date)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu_started
    params["provenance"]["fit_time"] = {
        "wall_s": round(wall), "cpu_s": round(cpu), "machine_cpus": os.cpu_count(),
        "note": ("this run's wall and CPU time (the ONNX export cache warm, BLAS on one thread); wall time grows "
                 "with whatever else the machine runs, CPU time does not")}
    params["uncertainty"]["nested"] = args.sigma is None
    if args.sigma is not None:  # the params say how their folds were made (latency_accuracy.py prints it)
        params["uncertainty"]["method"] = (
            "leave-one-SoC-out, NOT nested: every SoC of the dev data held out in turn (all its boards and clusters "
            f"together), the estimator refitted without it with the prior width fixed at {args.sigma:g} (--sigma)")
        params["uncertainty"]["nested_note"] = (
            f"prior width fixed at {args.sigma:g} (--sigma; v3's nested fit of 2026-12-04 chose 0.03 in 23 of 26 "
            "folds), not re-chosen per fold: a nested rerun (27 SoCs x the width grid x 26 inner fits) is hours on a "
            "2-core machine; run scripts/fit_estimator.py without --sigma for it")
    args.out.write_text(json.dumps(params, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}: sigma {sigma:g}, fit rms(log) {result.rms_log:.3f}; {'nested ' if args.sigma is None else ''}LODO "
          f"{score_line(score_summary(scored))}; wall time {wall / 60:.1f} min, CPU {cpu / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
