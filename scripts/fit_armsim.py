#!/usr/bin/env python
"""Fit armsim's per-core cost model on the dev rows from stored instruction profiles; write its params.

    python scripts/fit_armsim.py [--profiles lodevem/data/armsim_dev_profiles.json]
                                 [--data benchmarks/data/arm-cpu-latency-dev.csv] [--out lodevem/data/armsim_params.json]

Offline and reproducible: the profiles (counts per instruction class of one steady-state
inference, made once by armsim's profiler on the dev graphs: ``scripts/armsim_dev_graphs.py`` and
``scripts/profile_armsim_dev.py``) are data; this script needs numpy and scipy only.

1. Each dev row is matched to the profile of its graph, runtime, ISA (by core: Cortex-A7 armv7,
   A53/A72/A73 armv8.0, A55/A75/A76 armv8.2) and precision path. Per BOARD (``board_code``): of the
   profiled versions of the runtime the newest released before the board's rows were published
   (``BOARD_DATES``: git blame of ncnn's benchmark/README.md, matched by the device name's start),
   and one core view: the core's own, else another view of its ISA and pipeline family
   (``PIPELINE``: never in-order-tuned counts for an out-of-order core). Rows with no profile are
   reported and left out.
2. Per core: cycles-per-instruction of three groups (``costmodel.GROUPS``), bounded below by the
   core's issue width (``CORE_SPECS``, cited) and above by ``CPI_MAX``, tied weakly to each other
   (``GROUP_TIE_SIGMA``: the groups are collinear across CNNs) and to the core's pipeline family
   (``SHRINK_SIGMA``: cores with few boards shrink toward their in-order / out-of-order group); an
   Amdahl q per core with 1- and N-thread rows of one board, with a prior (``Q_PRIOR``); one int8
   cycles factor per ISA group (``precision_factors``); one code factor per (newer runtime version,
   precision) where a core has rows costed with two versions or runtimes (``version_factors``).
   Least squares on log latency, no board offsets (they would trade against the code factors).
3. A core with no rows in a fit takes the geometric mean of its pipeline family's fitted cores (no
   documented throughput ratios: they are speeds of whole programs, not CPIs).
4. Leave-one-SoC-out: every SoC held out (its boards and clusters together), refit, its rows
   predicted; MAPE per kind is the uncertainty the cost model states (armsim is opt-in: the
   default predictor is chosen by ``lodevem.latency.selection``, never here).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import fit_estimator as fe  # noqa: E402  (rows, graph keys, LODO summaries: one definition)

from lodevem.latency.armsim.costmodel import COST_MODEL_VERSION, GROUPS, CostModel, group_counts  # noqa: E402
from lodevem.latency.armsim.isa import isa_for_core, uarch_for_core  # noqa: E402  (the predictor's own table)

DEFAULT_PROFILES = REPO / "lodevem" / "data" / "armsim_dev_profiles.json"
DEFAULT_OUT = REPO / "lodevem" / "data" / "armsim_params.json"
CPI_MAX = 20.0
GROUP_TIE_SIGMA = 0.5
# Board offsets off: a board whose rows are all of one runtime version would trade its offset against
# that version's code factor. (Soft ties of CPIs to the documented per-clock ratios were tried too:
# LODO got worse, 1-thread fp32 42 % at sigma 0.3 against 39 % without, so the fit has none.)
BOARD_OFFSETS = False

# Per core: issue width, load/store pipes, and the source of both (the ISA is isa_for_core's).
CORE_SPECS: dict[str, tuple[int, int, str]] = {
    "Cortex-A7": (2, 1, "Arm Cortex-A7 MPCore TRM (DDI 0464): in-order, partial dual-issue; one load/store pipeline"),
    "Cortex-A53": (2, 1, "Arm Cortex-A53 MPCore TRM (DDI 0500): in-order, dual-issue; one load/store pipeline"),
    "Cortex-A55": (2, 2, "Arm Cortex-A55 Software Optimization Guide: in-order, dual-issue; one load and one store pipeline"),
    "Cortex-A72": (3, 2, "Arm Cortex-A72 Software Optimization Guide (UAN 0016A): 3-wide decode, out of order; one load and one store pipeline"),
    "Cortex-A73": (2, 2, "Arm Cortex-A73 TRM / Software Optimization Guide: 2-wide decode, out of order; two load/store pipelines"),
    "Cortex-A75": (3, 2, "Arm Cortex-A75 Software Optimization Guide: 3-wide decode, out of order; two load/store pipelines"),
    "Cortex-A76": (4, 2, "Arm Cortex-A76 Software Optimization Guide: 4-wide decode, out of order; two load/store (AGU) pipelines"),
}

# When the rows of each board were published: git blame of Tencent/ncnn benchmark/README.md at
# a4d2ea1d (the commit the dev CSV cites), per block; XNNPACK rows: its README of 2020.
BLAME_SOURCE = "git blame of Tencent/ncnn benchmark/README.md @a4d2ea1d, the commit that last wrote the block's figures"
# Keys are the START of the dev CSV's device names (a board is dated by the one key its name starts
# with: matching anywhere in the name dated "OrangePi4 LTS, Rockchip RK3399" by the RK3399 block).
BOARD_DATES: dict[str, tuple[str, str]] = {
    "Kirin 970": ("2020-06-12", "27b7b0d9 update kirin970 benchmark"),
    "Qualcomm MSM8916 Snapdragon 410": ("2022-01-03", "7b222a19 update benchmark (#3465)"),
    "Banana Pi M2 Zero": ("2022-01-17", "71f377e9 update benchmark from Q-engineering"),
    "Rockchip RK3588": ("2022-05-19", "617d23f6 Add RK3588 benchmark (#3808)"),
    "Rock3A": ("2022-01-03", "7b222a19 update benchmark (#3465)"),
    "Rockchip RK3399": ("2022-01-03", "7b222a19 update benchmark (#3465)"),
    "OrangePi4 LTS": ("2023-05-04", "62da373d Added RK3399,RK3588s (op4lts,op5) (#4687)"),
    "NanoPi R2S": ("2021-08-11", "b0f82906 Update RK3328 CPU benchmark (#3164)"),
    "AXERA AX620A": ("2022-05-21", "c2fb93b6 Add the benchmark of AX620A (#3813)"),
    "Arduino UNO Q - QRB2210": ("2025-12-15", "d0afafe7 Update README with Arduino UNO Q benchmark results (#6454)"),
    "Google Pixel": ("2020-01-01", "google/XNNPACK README end2end_bench table (2020)"),
    "Raspberry Pi": ("2020-01-01", "google/XNNPACK README end2end_bench table (2020)"),
}
# Release date of each profiled runtime version (the wheel's version is its date for ncnn).
RUNTIME_DATES_SOURCE = "ncnn versions are their release dates (1.0.YYYYMMDD); ai-edge-litert 2.3.0: PyPI release 2026-10"


def board_date(device: str) -> Optional[str]:
    """When a dev board's rows were published: the one ``BOARD_DATES`` key the device name starts
    with, else the dev CSV's own ``published`` column for the device (a date or a year); None
    when neither says (taken as recent)."""
    found = [date for key, (date, _) in BOARD_DATES.items() if device.startswith(key)]
    if len(found) > 1:
        raise ValueError(f"{device!r}: dated by {len(found)} BOARD_DATES keys")
    return found[0] if found else published_dates().get(device)


@functools.lru_cache(maxsize=1)
def published_dates(path: Path = fe.DEFAULT_DATA) -> dict[str, str]:
    """device -> the ``published`` column of the dev CSV, where it is a date or a year."""
    import csv

    with open(path, newline="") as fh:
        return {r["device"]: r["published"] for r in csv.DictReader(fh)
                if re.fullmatch(r"\d{4}(-\d{2}-\d{2})?", (r.get("published") or "").strip())}


def runtime_date(version: str) -> str:
    """'ncnn 1.0.20250503' -> '2025-05-03'; other runtimes: their PyPI release month."""
    tail = version.rsplit(".", 1)[-1]
    if version.startswith("ncnn") and len(tail) == 8 and tail.isdigit():
        return f"{tail[:4]}-{tail[4:6]}-{tail[6:]}"
    return "2026-10-01"


# Pipeline family of each core (Arm TRMs: Cortex-A7/A53/A55 in-order, A72/A73/A75/A76 out-of-order)
# and of each core view. A runtime's kernels tuned for an in-order core (ncnn's
# use_a53_a55_optimized_kernel, XNNPACK's A53 GEMMs) are picked by the MIDR, so an out-of-order
# core is never costed with counts made under an in-order view, nor the other way round.
PIPELINE: dict[str, str] = {"Cortex-A7": "in-order", "Cortex-A53": "in-order", "Cortex-A55": "in-order",
                            "Cortex-A72": "out-of-order", "Cortex-A73": "out-of-order",
                            "Cortex-A75": "out-of-order", "Cortex-A76": "out-of-order"}
PIPELINE_SOURCE = ("Arm Cortex-A7/A53/A55 TRMs: in-order pipelines; Cortex-A72/A73/A75/A76 TRMs and Software "
                   "Optimization Guides: out-of-order pipelines")
VIEW_CORE: dict[str, str] = {"cortex-a7": "Cortex-A7", "cortex-a53": "Cortex-A53", "cortex-a55": "Cortex-A55",
                             "cortex-a72": "Cortex-A72", "cortex-a73": "Cortex-A73", "cortex-a75": "Cortex-A75",
                             "cortex-a76": "Cortex-A76"}
# Thread scaling prior: the data README's 1-thread / 4-thread ratios (2-2.6 on A53/A55, ~2.6 on A73,
# 3.1-3.4 on A76) are Amdahl fractions of 0.67-0.93; a prior of 0.8 +- 0.15 keeps a core whose
# 1- and N-thread rows are few from pinning at 0 or 1.
Q_PRIOR, Q_SIGMA = 0.8, 0.15
Q_PRIOR_SOURCE = ("benchmarks/data/README.md: 1-thread / 4-thread latency ratios 2-2.6 on A53/A55, ~2.6 on A73, "
                  "3.1-3.4 on A76 (Amdahl q = (1 - 1/r) / (1 - 1/4): 0.67-0.93)")
# Cores with few rows shrink toward their pipeline family (a soft tie of each log CPI to the
# family's mean); a core with none takes the family's geometric mean: no documented throughput
# ratios (they are speeds of whole programs, not cycles per instruction, and the data contradict
# them: the A73 needs ~1.55x the A72's cycles, not 1x).
SHRINK_SIGMA = 0.5
# Precision factors: int8 kernels run another instruction mix at another IPC than the float kernels
# the CPIs are fitted on, so each int8 ISA group gets a cycles factor (ARMv7 NEON, ARMv8.0 widening
# multiply-accumulate, ARMv8.2 SDOT). fp16 on ARMv8.2 is ncnn's default (its A55/A76 rows are all
# fp16): fp16 is the reference precision there, factor 1 (not identifiable from fp32 rows).
INT8_GROUP = {"armv7": "armv7 NEON", "armv8.0": "armv8.0 (no dot product)", "armv8.2": "armv8.2 SDOT"}


def precision_path(row: fe.Row) -> str:
    """The path a dev row's runtime ran: its CSV precision (ncnn runs fp16 on ARMv8.2 by default)."""
    return row.precision


# ---------------------------------------------------------------------------------------------
# Stored profiles
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DevProfile:
    """One stored profile of a dev graph (the fields of armsim's InstructionProfile the fit needs)."""

    graph_key: str
    runtime: str
    runtime_version: str
    isa: str
    uarch: str
    precision: str
    threads: int
    counts: dict[str, int]
    total_instructions: int
    block_cycles: dict[str, float] = field(default_factory=dict)  # llvm-mca model -> cycles (armsim v2)
    graph_source: str = "lodevem zoo"  # what made the graph: lodevem's conversion, or ncnn's benchmark graph

    @property
    def blocks(self) -> Any:
        """The block cycles as the cost model reads them (``InstructionProfile.blocks``), so a stored
        dev profile is priced by the block model, as the product prices its own profiles."""
        from lodevem.wire.profile_section import BlockCycles

        if not self.block_cycles:
            return None
        return BlockCycles(0, self.total_instructions, "", {m: (c, c) for m, c in self.block_cycles.items()})

    @property
    def ncnn_benchmark(self) -> bool:
        """A profile of ncnn's own benchmark graph: what an ncnn dev row ran."""
        return self.graph_source.startswith("Tencent/ncnn benchmark")

    @property
    def groups(self) -> dict[str, float]:
        return group_counts(self.counts)


def load_profiles(path: Path = DEFAULT_PROFILES) -> list[DevProfile]:
    data = json.loads(Path(path).read_text())
    out = []
    for p in data["profiles"]:
        if p.get("threads", 1) != 1:
            continue
        out.append(DevProfile(str(p["graph_key"]), str(p["runtime"]), str(p["runtime_version"]), str(p["isa"]),
                              str(p["uarch"]), str(p["precision"]), int(p.get("threads", 1)),
                              {str(k): int(v) for k, v in p["counts"].items()}, int(p["total_instructions"]),
                              {str(m): float(v["all"]) for m, v in (p.get("block_cycles") or {}).items()},
                              str(p.get("graph_source", "lodevem zoo"))))
    return out


def view_candidates(core: str) -> list[str]:
    """The views a core's rows may be costed under, best first: its own, then the other views of
    its ISA and pipeline family (never a view of the other family)."""
    own, isa = uarch_for_core(core), isa_for_core(core)
    same = [v for v, c in VIEW_CORE.items() if v != own and isa_for_core(c) == isa
            and PIPELINE[c] == PIPELINE.get(core)]
    return [v for v in [own, *same] if v]


def board_code(row: fe.Row, profiles: Sequence[DevProfile]) -> Optional[tuple[str, str]]:
    """(runtime version, view) every row of the row's board is costed with: of the profiled
    versions of its runtime and ISA, the newest released on or before the board's publication
    date (else the oldest: the board predates them all); then the first of ``view_candidates``
    that version was profiled under. One choice per board, so a board never mixes views."""
    isa = isa_for_core(row.core)
    views = view_candidates(row.core)
    mine = [p for p in profiles if p.runtime == row.runtime and p.isa == isa and p.uarch in views]
    if not mine:
        return None
    when = board_date(row.device) or "9999"
    versions = sorted({p.runtime_version for p in mine}, key=runtime_date)
    before = [v for v in versions if runtime_date(v) <= when]
    version = before[-1] if before else versions[0]
    view = next(v for v in views if any(p.uarch == v and p.runtime_version == version for p in mine))
    return version, view


def match_profile(row: fe.Row, profiles: Sequence[DevProfile]) -> Optional[DevProfile]:
    """The profile a row is costed with: its graph, runtime, ISA and precision path, counted by
    its board's runtime version under its board's view (``board_code``); for an ncnn row, ncnn's
    own benchmark graph where it was profiled (the graph the row ran), else lodevem's conversion
    of the closest zoo model; None: not profiled."""
    code = board_code(row, profiles)
    if code is None:
        return None
    version, view = code
    found = [p for p in profiles if (p.graph_key, p.runtime, p.isa, p.precision, p.runtime_version, p.uarch) == (
        row.graph_key, row.runtime, isa_for_core(row.core), precision_path(row), version, view)]
    # ncnn's own benchmark graph (what the row ran) before lodevem's conversion of the closest zoo model
    found.sort(key=lambda p: not p.ncnn_benchmark)
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------
# Fit
# ---------------------------------------------------------------------------------------------

def precision_key(prof: DevProfile) -> Optional[tuple[str, str]]:
    """(precision, ISA) of a profile's precision factor; None: the reference (fp32, fp16)."""
    return ("int8", prof.isa) if prof.precision == "int8" else None


@dataclass
class ArmFit:
    cpi: dict[str, dict[str, float]]  # core -> group -> cycles per instruction
    q: dict[str, float]
    source: dict[str, str]
    derived: set[str] = field(default_factory=set)
    rows_per_core: dict[str, int] = field(default_factory=dict)
    rms_log: float = 0.0
    version_factors: dict[tuple[str, str], float] = field(default_factory=dict)  # (version, precision) -> x
    precision_factors: dict[tuple[str, str], float] = field(default_factory=dict)  # (precision, isa) -> x
    q_source: dict[str, str] = field(default_factory=dict)

    def factor(self, prof: DevProfile) -> float:
        pk = precision_key(prof)
        return (self.version_factors.get((prof.runtime_version, prof.precision), 1.0)
                * (self.precision_factors.get(pk, 1.0) if pk else 1.0))

    def cycles(self, core: str, prof: DevProfile) -> float:
        n = prof.groups
        return self.factor(prof) * sum(n[g] * self.cpi[core][g] for g in GROUPS)

    def predict(self, row: fe.Row, prof: DevProfile) -> float:
        q = self.q[row.core]
        return self.cycles(row.core, prof) * ((1 - q) + q / row.threads) / (row.clock_ghz * 1e6)


def cpi_min(core: str) -> dict[str, float]:
    """Marginal cycles of one instruction of each group: at least one issue slot (1 / width). A
    load paired with an FMA in the same cycle costs only its slot, so the load/store pipes bound
    the total (cycles >= memory instructions / pipes, checked by the tests), not the marginal cost."""
    width, _, _ = CORE_SPECS[core]
    return {g: 1 / width for g in GROUPS}


def fit(rows: Sequence[fe.Row], profiles: Sequence[DevProfile]) -> ArmFit:
    """Bounded least squares on log latency. Parameters: per core three log CPIs (tied weakly to
    each other and to the core's pipeline family), per core with 1- and N-thread rows of one board
    an Amdahl q (prior ``Q_PRIOR``), per int8 ISA group a cycles factor, per newer runtime version
    and precision a code factor where a core has rows of two versions (or runtimes)."""
    from scipy.optimize import least_squares

    obs = [(r, p) for r in rows if (p := match_profile(r, profiles)) is not None]
    cores = sorted({r.core for r, _ in obs})
    groups_of = list(GROUPS)
    ng = len(groups_of)
    one_thread = {(r.device, r.core, r.runtime) for r, _ in obs if r.threads == 1}
    qcores = sorted({r.core for r, _ in obs if r.threads > 1 and (r.device, r.core, r.runtime) in one_thread})
    n_cpi = len(cores) * ng
    x0, lo, hi = [], [], []
    for c in cores:
        mins = cpi_min(c)
        for g in groups_of:
            x0.append(math.log(max(1.0, mins[g] * 1.5)))
            lo.append(math.log(mins[g]))
            hi.append(math.log(CPI_MAX))
    x0 += [Q_PRIOR] * len(qcores)
    lo += [0.0] * len(qcores)
    hi += [1.0] * len(qcores)
    # code factors: (version, precision) of versions other than the reference (the oldest profiled
    # ncnn), identifiable where one core has rows costed with two versions or runtimes
    ncnn_versions = sorted({p.runtime_version for _, p in obs if p.runtime == "ncnn"}, key=runtime_date)
    reference = ncnn_versions[0] if ncnn_versions else ""
    per_core_versions: dict[str, set[str]] = {}
    for r, p in obs:
        per_core_versions.setdefault(r.core, set()).add(p.runtime_version)
    vkeys = sorted({(p.runtime_version, p.precision) for r, p in obs
                    if p.runtime_version != reference and len(per_core_versions[r.core]) > 1})
    pkeys = sorted({k for _, p in obs if (k := precision_key(p)) is not None})
    n_base = len(x0)
    x0 += [0.0] * (len(vkeys) + len(pkeys))
    lo += [-1.5] * (len(vkeys) + len(pkeys))
    hi += [1.5] * (len(vkeys) + len(pkeys))
    v_index = {k: n_base + i for i, k in enumerate(vkeys)}
    p_index = {k: n_base + len(vkeys) + i for i, k in enumerate(pkeys)}
    v_of = [v_index.get((p.runtime_version, p.precision)) for _, p in obs]
    pk_of = [p_index.get(precision_key(p)) if precision_key(p) else None for _, p in obs]
    ci = {c: i for i, c in enumerate(cores)}
    qi = {c: n_cpi + i for i, c in enumerate(qcores)}
    N = np.array([[p.groups[g] for g in groups_of] for _, p in obs])
    core_idx = np.array([ci[r.core] for r, _ in obs])
    thr = np.array([r.threads for r, _ in obs], float)
    clk = np.array([r.clock_ghz for r, _ in obs])
    y = np.log([r.avg_ms for r, _ in obs])
    q_of = [qi.get(r.core) for r, _ in obs]
    families = sorted({PIPELINE[c] for c in cores})
    fam_members = [[ci[c] for c in cores if PIPELINE[c] == f] for f in families]

    def resid(x: np.ndarray) -> np.ndarray:
        cpi = np.exp(x[:n_cpi]).reshape(len(cores), ng)
        cyc = (N * cpi[core_idx]).sum(axis=1)
        q = np.array([x[i] if i is not None else Q_PRIOR for i in q_of])
        amd = np.where(thr > 1, (1 - q) + q / thr, 1.0)
        ver = np.array([x[i] if i is not None else 0.0 for i in v_of])
        prec = np.array([x[i] if i is not None else 0.0 for i in pk_of])
        res = np.log(cyc * amd / (clk * 1e6)) - y + ver + prec
        logc = x[:n_cpi].reshape(len(cores), ng)
        ties = ((logc - logc.mean(axis=1, keepdims=True)) / GROUP_TIE_SIGMA).ravel()
        shrink = [((logc[m] - logc[m].mean(axis=0)) / SHRINK_SIGMA).ravel() for m in fam_members if len(m) > 1]
        prior = [(x[qi[c]] - Q_PRIOR) / Q_SIGMA for c in qcores]
        return np.concatenate([res, ties, *shrink, np.array(prior)])

    sol = least_squares(resid, np.array(x0), bounds=(np.array(lo), np.array(hi)), method="trf")
    x = sol.x
    n_res = len(obs)
    rms = float(np.sqrt(np.mean(resid(x)[:n_res] ** 2)))
    cpi = {c: {g: float(math.exp(x[ci[c] * ng + j])) for j, g in enumerate(groups_of)} for c in cores}
    q = {c: float(x[qi[c]]) for c in qcores}
    q_source = {c: f"fit: {sum(r.core == c and r.threads > 1 for r, _ in obs)} multi-thread rows, prior "
                   f"{Q_PRIOR:g} +- {Q_SIGMA:g}" for c in qcores}
    for c in cores:
        if c not in q:
            same = [q[o] for o in qcores if PIPELINE[o] == PIPELINE[c]]
            q[c] = statistics.mean(same) if same else Q_PRIOR
            q_source[c] = (f"no board with 1- and N-thread rows: mean of the fitted {PIPELINE[c]} cores" if same
                           else f"no board with 1- and N-thread rows: the prior {Q_PRIOR:g}")
    per_core = {c: sum(r.core == c for r, _ in obs) for c in cores}
    source = {c: f"fit: {per_core[c]} dev rows" for c in cores}
    vf = {k: float(math.exp(x[i])) for k, i in v_index.items()}
    pf = {k: float(math.exp(x[i])) for k, i in p_index.items()}
    result = ArmFit(cpi, q, source, set(), per_core, rms, vf, pf, q_source)
    _derive_missing(result)
    return result


def _derive_missing(result: ArmFit) -> None:
    """Cores without rows: the geometric mean of the fitted cores of their pipeline family (CPIs
    clamped to the core's own bounds), q their mean; no documented throughput ratios."""
    fitted = dict(result.cpi)
    for core in CORE_SPECS:
        if core in result.cpi:
            continue
        family = [c for c in fitted if PIPELINE[c] == PIPELINE[core]]
        if not family:
            continue
        mins = cpi_min(core)
        result.cpi[core] = {g: min(CPI_MAX, max(mins[g], math.exp(statistics.mean(
            math.log(fitted[c][g]) for c in family)))) for g in GROUPS}
        result.q[core] = statistics.mean(result.q[c] for c in family)
        result.q_source[core] = f"no rows: mean of the fitted {PIPELINE[core]} cores"
        result.derived.add(core)
        result.source[core] = (f"derived: geometric mean of the fitted {PIPELINE[core]} cores ({', '.join(family)}; "
                               f"{PIPELINE_SOURCE})")


# ---------------------------------------------------------------------------------------------
# LODO and params
# ---------------------------------------------------------------------------------------------

def unmatched(rows: Sequence[fe.Row], profiles: Sequence[DevProfile]) -> list[fe.Row]:
    return [r for r in rows if match_profile(r, profiles) is None]


def score(result: ArmFit, rows: Sequence[fe.Row], profiles: Sequence[DevProfile], seen: set[str]) -> list[fe.Scored]:
    out = []
    for r in rows:
        p = match_profile(r, profiles)
        if p is None or r.core not in result.cpi:
            continue
        out.append(fe.Scored(r, result.predict(r, p), None, r.core in seen))
    return out


def fit_and_score(train: Sequence[fe.Row], test: Sequence[fe.Row], profiles: Sequence[DevProfile],
                  models: Optional[dict[str, str]]) -> list[fe.Scored]:
    """Fit on ``train``, predict ``test`` as the predictor would: a row whose profile has block
    cycles by the block cost model (armsim v2, ``fit_armsim_blocks``; ``models``: its llvm-mca
    model per pipeline family, None: no block model), the others by the class CPIs (v1.1)."""
    import fit_armsim_blocks as fab

    result = fit(train, profiles)
    pairs = fab.matched(train, profiles) if models else []
    v2 = fab.fit(pairs, models) if pairs and models else None
    seen = {r.core for r in train}
    out: list[fe.Scored] = []
    for r in test:
        p = match_profile(r, profiles)
        ms = v2.predict(r, p) if (v2 is not None and p is not None and p.block_cycles) else None
        if ms is not None:
            out.append(fe.Scored(r, ms, None, r.core in seen))
        else:
            out += score(result, [r], profiles, seen)
    return out


def lodo(rows: Sequence[fe.Row], profiles: Sequence[DevProfile], blocks: bool = True) -> list[fe.Scored]:
    """Every SoC held out in turn (``fe.Row.fold``: a SoC's boards and clusters together), refit,
    its rows predicted as the predictor would (``fit_and_score``: block model where the profile
    has block cycles, class CPIs elsewhere; ``blocks`` False: class CPIs only)."""
    import fit_armsim_blocks as fab

    models = fab.core_models() if blocks else None
    out: list[fe.Scored] = []
    for group in sorted({r.fold for r in rows}):
        out += fit_and_score([r for r in rows if r.fold != group], [r for r in rows if r.fold == group],
                             profiles, models)
    return out


def score_line(summary: dict[str, Any]) -> str:
    """``SCORE predictor=armsim armsim_1t_fp32=... threads=... fp16=... int8=... oneshot=... rows=N``."""
    def fmt(s: Optional[dict[str, float]]) -> str:
        return "na" if not s else f"{s['mape_pct']:.1f}"

    cats = summary["categories"]
    rows = summary["all"]["rows"] if summary["all"] else 0
    return (f"SCORE predictor=armsim armsim_1t_fp32={fmt(cats['1t_fp32'])} threads={fmt(cats['threads'])} "
            f"fp16={fmt(cats['fp16'])} int8={fmt(cats['int8'])} oneshot={fmt(summary['oneshot'])} rows={rows}")


def build_params(rows: Sequence[fe.Row], profiles: Sequence[DevProfile], result: ArmFit, summary: dict[str, Any],
                 profiles_path: Path, data_path: Path, fit_date: str) -> dict[str, Any]:
    newest: dict[tuple[str, str], str] = {}  # (runtime, isa) -> newest profiled version (the image's)
    for p in profiles:
        key = (p.runtime, p.isa)
        if key not in newest or runtime_date(p.runtime_version) > runtime_date(newest[key]):
            newest[key] = p.runtime_version
    latest = {rt: sorted({v for (r, _), v in newest.items() if r == rt}) for rt in sorted({r for r, _ in newest})}
    cores = {}
    for c in sorted(result.cpi):
        width, ls, src = CORE_SPECS[c]
        cores[c] = {"isa": isa_for_core(c), "cpi": {g: round(v, 4) for g, v in result.cpi[c].items()},
                    "cpi_min": {g: round(v, 4) for g, v in cpi_min(c).items()},
                    "issue_width": width, "load_store_pipes": ls, "bounds_source": src,
                    "parallel_fraction": round(result.q[c], 4), "derived": c in result.derived,
                    "parallel_fraction_source": result.q_source.get(c, ""), "pipeline": PIPELINE[c],
                    "source": result.source[c], "rows": result.rows_per_core.get(c, 0)}
    boards = {}
    for r in rows:
        code = board_code(r, profiles)
        boards[f"{r.device} [{r.core}, {r.runtime}]"] = (
            {"runtime_version": code[0], "view": code[1]} if code else None)
    cats = summary["categories"]
    skipped = unmatched(rows, profiles)
    return {
        "version": COST_MODEL_VERSION,
        "formula": ("cycles = sum_g N_g * cpi[core][g] over groups " + ", ".join(f"{g} ({'+'.join(v)})" for g, v in GROUPS.items())
                    + "; cycles x= version_factor[runtime version, precision] x precision_factor[int8, isa]"
                    + "; ms = cycles * ((1 - q) + q / threads) / (clock_GHz * 1e6)"),
        "runtime_versions": latest,
        "runtime_versions_note": ("a latency stands for the newest profiled version of its runtime (what the armsim "
                                  "image runs); older versions were profiled only to cost the dev rows of their era"),
        "bounds": {"cpi_max": CPI_MAX, "cpi_min_rule": ("every group >= 1 / issue width (no core retires more than its "
                                                        "width per cycle); the load/store pipes bound the total: "
                                                        "cycles >= memory instructions / pipes")},
        "cores": cores,
        "version_factors": [{"runtime_version": v, "precision": pr, "factor": round(x, 4),
                             "source": ("fit: rows of one core costed with two runtime versions or runtimes "
                                        f"(cycles of {v} {pr} code = factor x its counts x the core's CPIs; reference: "
                                        "the oldest profiled ncnn)")}
                            for (v, pr), x in sorted(result.version_factors.items())],
        "precision_factors": [{"precision": pr, "isa": isa, "group": INT8_GROUP.get(isa, isa), "factor": round(x, 4),
                               "source": (f"fit: {pr} rows against the float rows of the same boards ({pr} kernels run "
                                          "another instruction mix at another IPC than the float kernels the CPIs "
                                          "are fitted on)")}
                              for (pr, isa), x in sorted(result.precision_factors.items())],
        "costed_code": sorted({(p.runtime_version, p.precision) for r in rows
                               if (p := match_profile(r, profiles)) is not None}),
        "version_factors_note": ("a newer runtime's kernels can run at another IPC on the same core (ncnn 1.0.20250503 "
                                 "executes ~2x the instructions of 1.0.20221128 under the A53 view): one factor per "
                                 "(runtime version, precision), fitted where a core has rows of both versions "
                                 "(the QRB2210 rows, 2025); 1 where the dev data has no such pair. fp16 on ARMv8.2 "
                                 "is the reference precision there (ncnn's default: its A55/A76 rows are all fp16)"),
        "views": {"rule": ("a board's rows are costed with one runtime version and one core view: its own view, "
                           "else another view of its ISA and pipeline family; never a view of the other family"),
                  "pipeline_source": PIPELINE_SOURCE, "boards": boards},
        "thread_prior": {"q": Q_PRIOR, "sigma": Q_SIGMA, "source": Q_PRIOR_SOURCE},
        "shrinkage": {"sigma": SHRINK_SIGMA, "rule": ("each log CPI tied to the mean of its pipeline family's "
                                                      "fitted cores; a core without rows takes the family's "
                                                      "geometric mean (no documented throughput ratios)")},
        "uncertainty": {
            "method": ("leave-one-SoC-out on the dev rows: every SoC held out (its boards and clusters together), "
                       "the cost model refitted on the others, every row of the held-out SoC predicted from its "
                       "stored profile"),
            "folds": "soc",
            "categories": cats,
            "oneshot": summary["oneshot"],
            "per_kind": summary["per_kind"],
            "per_kind_note": ("MAPE per cell kind (core x threads x precision x runtime); core null = pooled over cores, "
                              "runtime null = pooled over runtimes; a kind needs >= 8 rows to be stated"),
            "band": "latency_low_ms = ms * (1 - MAPE), latency_high_ms = ms * (1 + MAPE) of the cell's kind",
            "per_board": summary["per_board"],
            "fit_rms_log_error": round(result.rms_log, 4),
        },
        "provenance": {
            "fit_date": fit_date,
            "script": "scripts/fit_armsim.py",
            "data_file": os.path.relpath(data_path, REPO),
            "data_sha256": fe.sha256(data_path),
            "profiles_file": os.path.relpath(profiles_path, REPO),
            "profiles_sha256": fe.sha256(profiles_path),
            "rows_total": len(rows),
            "rows_used": len(rows) - len(skipped),
            "rows_without_profile": sorted({f"{r.device[:40]} {r.core} {r.runtime} {r.model}" for r in skipped}),
            "board_dates": {k: {"date": d, "commit": c} for k, (d, c) in BOARD_DATES.items()},
            "board_dates_source": BLAME_SOURCE,
            "runtime_dates_source": RUNTIME_DATES_SOURCE,
            "fit_options": {"loss": "least squares on log latency (scipy least_squares, trf, bounded)",
                            "group_tie_sigma": GROUP_TIE_SIGMA,
                            "board_offsets": ("one log offset per board where a (core, runtime) has several, zero mean"
                                              if BOARD_OFFSETS else "none (they would absorb the code factors)")},
        },
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    parser.add_argument("--data", type=Path, default=fe.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--onnx-cache", type=Path, default=fe.DEFAULT_CACHE)
    parser.add_argument("--date", default=_dt.date.today().isoformat(), help="fit date to record (ISO)")
    args = parser.parse_args(argv)

    rows = fe.load_rows(args.data)
    profiles = load_profiles(args.profiles)
    result = fit(rows, profiles)
    summary = fe.score_summary(lodo(rows, profiles))
    params = build_params(rows, profiles, result, summary, args.profiles, args.data, args.date)
    import fit_armsim_blocks as fab

    block = fab.block_params(rows, profiles)
    if block is not None:
        params["block_model"] = block
    CostModel(params)  # refuse to write what the runtime side would refuse to read
    args.out.write_text(json.dumps(params, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}: fit rms(log) {result.rms_log:.3f}; LODO {score_line(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
