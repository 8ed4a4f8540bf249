#!/usr/bin/env python
"""Fit armsim's per-core cost model on the dev rows from stored instruction profiles; write its params.

    python scripts/fit_armsim.py [--profiles lodevem/data/armsim_dev_profiles.json]
                                 [--data benchmarks/data/arm-cpu-latency-dev.csv] [--out lodevem/data/armsim_params.json]

Offline and reproducible: the profiles (counts per instruction class of one steady-state
inference, made once by armsim's profiler on the dev graphs: ``scripts/armsim_dev_graphs.py`` and
``scripts/profile_armsim_dev.py``) are data; this script needs numpy and scipy only.

1. Each dev row is matched to the profile of its graph, runtime, ISA (by core: Cortex-A7 armv7,
   A53/A72/A73 armv8.0, A55/A75/A76 armv8.2) and precision path; among the profiled versions of the
   runtime it takes the newest released before the row was published (``BOARD_DATES``: git blame of
   ncnn's benchmark/README.md), so a 2022 row is costed with the instructions of an ncnn of its
   era where one was profiled, not with today's. Rows with no profile are reported and left out.
2. Per core: cycles-per-instruction of three groups (``costmodel.GROUPS``), bounded below by the
   core's issue width and load/store pipes (``CORE_SPECS``, cited) and above by ``CPI_MAX``, and an
   Amdahl parallel fraction; one cycles factor per (runtime version, kernel family) where a core has
   rows costed with two versions or runtimes (``costmodel.KERNEL_FAMILY``). No board offsets (they
   would trade against those factors; ``BOARD_OFFSETS``). A weak tie (``GROUP_TIE_SIGMA``) pulls the
   three CPIs of a core towards their mean: the groups are collinear across CNNs, and without it
   one group would soak up the others. Least squares on log latency.
3. A core with no rows in a fit gets CPIs from documented per-clock ratios to cores that have
   some (``fit_estimator.DERIVATIONS``: speed ratio r -> CPI / r).
4. Leave-one-device-out: every device held out, refit, its rows predicted; MAPE per kind is the
   uncertainty the cost model states. Per kind, the predictor with the lower LODO MAPE (armsim or
   the estimator v2, whose LODO comes from ``fit_estimator``) is recorded as the default.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import fit_estimator as fe  # noqa: E402  (rows, graph keys, LODO summaries: one definition)
from lodevem.latency.armsim.costmodel import COST_MODEL_VERSION, GROUPS, KERNEL_FAMILY, CostModel, group_counts  # noqa: E402
from lodevem.latency.armsim.isa import isa_for_core, uarch_for_core  # noqa: E402  (the predictor's own table)

DEFAULT_PROFILES = REPO / "lodevem" / "data" / "armsim_dev_profiles.json"
DEFAULT_OUT = REPO / "lodevem" / "data" / "armsim_params.json"
CPI_MAX = 20.0
GROUP_TIE_SIGMA = 0.5
OFFSET_SIGMA = 0.02  # the zero-mean condition on a core's board offsets, as a stiff soft constraint
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
BOARD_DATES: dict[str, tuple[str, str]] = {
    "Kirin 970": ("2020-06-12", "27b7b0d9 update kirin970 benchmark"),
    "Snapdragon 410": ("2022-01-03", "7b222a19 update benchmark (#3465)"),
    "Banana Pi M2 Zero": ("2022-01-17", "71f377e9 update benchmark from Q-engineering"),
    "RK3588": ("2022-05-19", "617d23f6 Add RK3588 benchmark (#3808)"),
    "Rock3A": ("2022-01-03", "7b222a19 update benchmark (#3465)"),
    "Rockchip RK3399": ("2022-01-03", "7b222a19 update benchmark (#3465)"),
    "OrangePi4 LTS": ("2023-05-04", "62da373d Added RK3399,RK3588s (op4lts,op5) (#4687)"),
    "NanoPi R2S": ("2021-08-11", "b0f82906 Update RK3328 CPU benchmark (#3164)"),
    "AX620A": ("2022-05-21", "c2fb93b6 Add the benchmark of AX620A (#3813)"),
    "QRB2210": ("2025-12-15", "d0afafe7 Update README with Arduino UNO Q benchmark results (#6454)"),
    "Google Pixel": ("2020-01-01", "google/XNNPACK README end2end_bench table (2020)"),
    "Raspberry Pi": ("2020-01-01", "google/XNNPACK README end2end_bench table (2020)"),
}
# Release date of each profiled runtime version (the wheel's version is its date for ncnn).
RUNTIME_DATES_SOURCE = "ncnn versions are their release dates (1.0.YYYYMMDD); ai-edge-litert 2.3.0: PyPI release 2026-10"


def board_date(device: str) -> Optional[str]:
    """When a dev board's rows were published; None for a board of another file (taken as recent)."""
    for key, (date, _) in BOARD_DATES.items():
        if key in device:
            return date
    return None


def runtime_date(version: str) -> str:
    """'ncnn 1.0.20250503' -> '2025-05-03'; other runtimes: their PyPI release month."""
    tail = version.rsplit(".", 1)[-1]
    if version.startswith("ncnn") and len(tail) == 8 and tail.isdigit():
        return f"{tail[:4]}-{tail[4:6]}-{tail[6:]}"
    return "2026-10-01"


# The view a core's rows fall back to when its own was not profiled (the ISA's default core).
DEFAULT_VIEWS = {"armv7": "cortex-a7", "armv8.0": "cortex-a53", "armv8.2": "cortex-a55"}


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
                              {str(k): int(v) for k, v in p["counts"].items()}, int(p["total_instructions"])))
    return out


def match_profile(row: fe.Row, profiles: Sequence[DevProfile]) -> Optional[DevProfile]:
    """The profile a row is costed with: same graph, runtime, ISA and precision path, counted
    under the row's core view (the MIDR the runtime picks kernels by), else under the ISA's
    default view (``DEFAULT_VIEWS``); of the profiled runtime versions the newest released on or
    before the row's publication date, else the oldest profiled (the row predates them all)."""
    isa = isa_for_core(row.core)
    same = [p for p in profiles if (p.graph_key, p.runtime, p.isa, p.precision)
            == (row.graph_key, row.runtime, isa, precision_path(row))]
    own = [p for p in same if p.uarch == uarch_for_core(row.core)]
    cands = own or [p for p in same if p.uarch == DEFAULT_VIEWS.get(isa or "")]
    if not cands:
        return None
    when = board_date(row.device) or "9999"
    dated = sorted(cands, key=lambda p: runtime_date(p.runtime_version))
    before = [p for p in dated if runtime_date(p.runtime_version) <= when]
    return before[-1] if before else dated[0]


# ---------------------------------------------------------------------------------------------
# Fit
# ---------------------------------------------------------------------------------------------

@dataclass
class ArmFit:
    cpi: dict[str, dict[str, float]]  # core -> group -> cycles per instruction
    q: dict[str, float]
    source: dict[str, str]
    derived: set[str] = field(default_factory=set)
    rows_per_core: dict[str, int] = field(default_factory=dict)
    rms_log: float = 0.0
    version_factors: dict[tuple[str, str], float] = field(default_factory=dict)  # (version, family) -> cycles x

    def cycles(self, core: str, prof: DevProfile) -> float:
        n = prof.groups
        factor = self.version_factors.get((prof.runtime_version, KERNEL_FAMILY.get(prof.uarch, "")), 1.0)
        return factor * sum(n[g] * self.cpi[core][g] for g in GROUPS)

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
    from scipy.optimize import least_squares

    obs = [(r, p) for r in rows if (p := match_profile(r, profiles)) is not None]
    cores = sorted({r.core for r, _ in obs})
    groups_of = list(GROUPS)
    ng = len(groups_of)
    mt = {r.core for r, _ in obs if r.threads > 1}
    board_groups: dict[tuple[str, str], set[str]] = {}
    for r, _ in obs:
        board_groups.setdefault((r.core, r.runtime), set()).add(r.device)
    # (no board offsets by default: a board whose rows are all of one runtime version would trade its
    # offset against that version's code factor, the contrast the factor is fitted from)
    boards = sorted({(c, rt, d) for (c, rt), ds in board_groups.items() if len(ds) > 1 for d in ds}) if BOARD_OFFSETS else []
    b_index = {b: i for i, b in enumerate(boards)}
    n_cpi = len(cores) * ng
    x0, lo, hi = [], [], []
    for c in cores:
        mins = cpi_min(c)
        for g in groups_of:
            x0.append(math.log(max(1.0, mins[g] * 1.5)))
            lo.append(math.log(mins[g]))
            hi.append(math.log(CPI_MAX))
    qcores = [c for c in cores if c in mt]
    x0 += [0.8] * len(qcores)
    lo += [0.0] * len(qcores)
    hi += [1.0] * len(qcores)
    x0 += [0.0] * len(boards)
    lo += [-1.0] * len(boards)
    hi += [1.0] * len(boards)
    # Code factors: the IPC of one runtime version's kernels relative to the reference code (the
    # oldest profiled ncnn), per kernel family; identifiable where one core has rows costed with two
    # versions or runtimes (ncnn 2022 vs 2025 on the A53; ncnn vs LiteRT on the A72 and A73).
    ncnn_versions = sorted({p.runtime_version for _, p in obs if p.runtime == "ncnn"}, key=runtime_date)
    reference = ncnn_versions[0] if ncnn_versions else ""
    per_core_versions: dict[str, set[str]] = {}
    for r, p in obs:
        per_core_versions.setdefault(r.core, set()).add(p.runtime_version)
    vkeys = sorted({(p.runtime_version, KERNEL_FAMILY.get(p.uarch, "")) for r, p in obs
                    if p.runtime_version != reference and len(per_core_versions[r.core]) > 1})
    v_index = {k: i for i, k in enumerate(vkeys)}
    n_base = len(x0)
    x0 += [0.0] * len(vkeys)
    lo += [-1.5] * len(vkeys)
    hi += [1.5] * len(vkeys)
    v_of = [v_index.get((p.runtime_version, KERNEL_FAMILY.get(p.uarch, ""))) for _, p in obs]
    ci = {c: i for i, c in enumerate(cores)}
    qi = {c: n_cpi + i for i, c in enumerate(qcores)}
    N = np.array([[p.groups[g] for g in groups_of] for _, p in obs])
    core_idx = np.array([ci[r.core] for r, _ in obs])
    thr = np.array([r.threads for r, _ in obs], float)
    clk = np.array([r.clock_ghz for r, _ in obs])
    y = np.log([r.avg_ms for r, _ in obs])
    q_of = [qi.get(r.core) for r, _ in obs]
    b_of = [b_index.get((r.core, r.runtime, r.device)) for r, _ in obs]
    off_groups = [[b_index[b] for b in boards if b[:2] == key] for key in sorted({b[:2] for b in boards})]

    def resid(x: np.ndarray) -> np.ndarray:
        cpi = np.exp(x[:n_cpi]).reshape(len(cores), ng)
        cyc = (N * cpi[core_idx]).sum(axis=1)
        q = np.array([x[i] if i is not None else 0.0 for i in q_of])
        amd = np.where(thr > 1, (1 - q) + q / thr, 1.0)
        off = np.array([x[n_cpi + len(qcores) + i] if i is not None else 0.0 for i in b_of])
        ver = np.array([x[n_base + i] if i is not None else 0.0 for i in v_of])
        res = np.log(cyc * amd / (clk * 1e6)) - y + off + ver
        logc = x[:n_cpi].reshape(len(cores), ng)
        ties = ((logc - logc.mean(axis=1, keepdims=True)) / GROUP_TIE_SIGMA).ravel()
        cent = [x[[n_cpi + len(qcores) + i for i in grp]].sum() / OFFSET_SIGMA for grp in off_groups]
        return np.concatenate([res, ties, np.array(cent)])

    sol = least_squares(resid, np.array(x0), bounds=(np.array(lo), np.array(hi)), method="trf")
    x = sol.x
    n_res = len(obs)
    rms = float(np.sqrt(np.mean(resid(x)[:n_res] ** 2)))
    cpi = {c: {g: float(math.exp(x[ci[c] * ng + j])) for j, g in enumerate(groups_of)} for c in cores}
    q = {c: float(x[qi[c]]) for c in qcores}
    mean_q = statistics.mean(q.values()) if q else 0.8
    for c in cores:
        q.setdefault(c, mean_q)
    per_core = {c: sum(r.core == c for r, _ in obs) for c in cores}
    source = {c: f"fit: {per_core[c]} dev rows" for c in cores}
    vf = {k: float(math.exp(x[n_base + i])) for k, i in v_index.items()}
    result = ArmFit(cpi, q, source, set(), per_core, rms, vf)
    _derive_missing(result)
    return result


def _derive_missing(result: ArmFit) -> None:
    """Cores without rows: CPIs = source core's / documented per-clock speed ratio (geometric mean
    over routes), clamped to the core's own physical bounds; q = mean of fitted cores."""
    mean_q = statistics.mean(result.q.values())
    for core in CORE_SPECS:
        if core in result.cpi:
            continue
        routes = [(src, ratio, cite) for src, ratio, cite in fe.DERIVATIONS.get(core, ()) if src in result.cpi]
        if not routes:
            continue
        mins = cpi_min(core)
        result.cpi[core] = {g: min(CPI_MAX, max(mins[g], math.exp(statistics.mean(
            math.log(result.cpi[src][g] / ratio) for src, ratio, _ in routes)))) for g in GROUPS}
        result.q[core] = mean_q
        result.derived.add(core)
        result.source[core] = "derived: " + "; ".join(f"{src} x {ratio:g} per clock ({cite})" for src, ratio, cite in routes)


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


def lodo(rows: Sequence[fe.Row], profiles: Sequence[DevProfile]) -> list[fe.Scored]:
    """Every SoC held out in turn (``fe.Row.fold``: a SoC's boards and clusters together)."""
    out: list[fe.Scored] = []
    for group in sorted({r.fold for r in rows}):
        train = [r for r in rows if r.fold != group]
        result = fit(train, profiles)
        out += score(result, [r for r in rows if r.fold == group], profiles, {r.core for r in train})
    return out


def score_line(summary: dict[str, Any]) -> str:
    """``SCORE predictor=armsim armsim_1t_fp32=... threads=... fp16=... int8=... oneshot=... rows=N``."""
    def fmt(s: Optional[dict[str, float]]) -> str:
        return "na" if not s else f"{s['mape_pct']:.1f}"

    cats = summary["categories"]
    rows = summary["all"]["rows"] if summary["all"] else 0
    return (f"SCORE predictor=armsim armsim_1t_fp32={fmt(cats['1t_fp32'])} threads={fmt(cats['threads'])} "
            f"fp16={fmt(cats['fp16'])} int8={fmt(cats['int8'])} oneshot={fmt(summary['oneshot'])} rows={rows}")


def default_predictors(armsim_kinds: Sequence[Mapping[str, Any]], estimator_kinds: Sequence[Mapping[str, Any]]
                       ) -> list[dict[str, Any]]:
    """Per kind (core x threads x precision x runtime, and the pooled kinds): the predictor with
    the lower LODO MAPE, with both figures; a kind only one of them covers goes to that one."""
    def key(k: Mapping[str, Any]) -> tuple:
        return (k.get("core"), k["threads"], k["precision"], k.get("runtime"))

    est = {key(k): k for k in estimator_kinds}
    arm = {key(k): k for k in armsim_kinds}
    out = []
    for kk in sorted(set(est) | set(arm), key=lambda t: tuple(x or "" for x in t)):
        a, e = arm.get(kk), est.get(kk)
        if a and e:
            winner = "armsim" if a["mape_pct"] <= e["mape_pct"] else "estimator"
        else:
            winner = "armsim" if a else "estimator"
        out.append({"core": kk[0], "threads": kk[1], "precision": kk[2], "runtime": kk[3], "default": winner,
                    "armsim_mape_pct": a["mape_pct"] if a else None, "armsim_rows": a["rows"] if a else 0,
                    "estimator_mape_pct": e["mape_pct"] if e else None, "estimator_rows": e["rows"] if e else 0})
    return out


def build_params(rows: Sequence[fe.Row], profiles: Sequence[DevProfile], result: ArmFit, summary: dict[str, Any],
                 profiles_path: Path, data_path: Path, fit_date: str,
                 estimator_kinds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
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
                    "source": result.source[c], "rows": result.rows_per_core.get(c, 0)}
    cats = summary["categories"]
    skipped = unmatched(rows, profiles)
    return {
        "version": COST_MODEL_VERSION,
        "formula": ("cycles = sum_g N_g * cpi[core][g] over groups " + ", ".join(f"{g} ({'+'.join(v)})" for g, v in GROUPS.items())
                    + "; ms = cycles * ((1 - q) + q / threads) / (clock_GHz * 1e6)"),
        "runtime_versions": latest,
        "runtime_versions_note": ("a latency stands for the newest profiled version of its runtime (what the armsim "
                                  "image runs); older versions were profiled only to cost the dev rows of their era"),
        "bounds": {"cpi_max": CPI_MAX, "cpi_min_rule": ("every group >= 1 / issue width (no core retires more than its "
                                                        "width per cycle); the load/store pipes bound the total: "
                                                        "cycles >= memory instructions / pipes")},
        "cores": cores,
        "version_factors": [{"runtime_version": v, "family": f, "factor": round(x, 4),
                             "source": ("fit: rows of one core costed with two runtime versions or runtimes "
                                        f"(cycles of {v} code = factor x its counts x the core's CPIs; reference: "
                                        "the oldest profiled ncnn)")}
                            for (v, f), x in sorted(result.version_factors.items())],
        "costed_code": sorted({(p.runtime_version, KERNEL_FAMILY.get(p.uarch, "")) for r in rows
                               if (p := match_profile(r, profiles)) is not None}),
        "version_factors_note": ("a newer runtime's kernels can run at another IPC on the same core (ncnn 1.0.20250503 "
                                 "executes ~2x the instructions of 1.0.20221128 under the A53 view): one factor per "
                                 "(runtime version, kernel family), fitted where a core has rows of both versions "
                                 "(the QRB2210 rows, 2025); 1 where the dev data has no such pair"),
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
        "default_predictor": {
            "rule": "per kind, the predictor with the lower LODO MAPE on the dev rows (ties: armsim)",
            "kinds": default_predictors(summary["per_kind"], estimator_kinds),
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


def estimator_kinds(rows: Sequence[fe.Row], onnx_cache: Path) -> list[dict[str, Any]]:
    """The estimator v2's LODO figures per kind: from its shipped params when they were fitted on
    this data (no torch needed), else by running its LODO (exports the zoo graphs)."""
    shipped = json.loads(fe.DEFAULT_OUT.read_text())
    if shipped.get("provenance", {}).get("data_sha256") == fe.sha256(fe.DEFAULT_DATA):
        return list(shipped["uncertainty"]["per_kind"])
    works = fe.dev_works(rows, onnx_cache)
    return fe.score_summary(fe.lodo(rows, works))["per_kind"]


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
    params = build_params(rows, profiles, result, summary, args.profiles, args.data, args.date,
                          estimator_kinds(rows, args.onnx_cache))
    CostModel(params)  # refuse to write what the runtime side would refuse to read
    args.out.write_text(json.dumps(params, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}: fit rms(log) {result.rms_log:.3f}; LODO {score_line(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
