#!/usr/bin/env python
"""armsim v2 (block cost model): fit and score on the dev rows from the stored block cycles.

    python scripts/fit_armsim_blocks.py [--profiles lodevem/data/armsim_dev_profiles.json] [--acceptance]

Each stored dev profile made with ``scripts/profile_armsim_dev.py --blocks`` carries the cycles
of one inference under several llvm-mca CPU models (``block_cycles``: every translation block the
runtime executed, priced by its bytes, times its count). The cost model:

    ms = cycles_m(profile) * k[core] * p[precision, isa] * t[runtime] * A(q[core], threads) / (clock_GHz * 1e6)

* ``m``: the block-pricing model of the core, chosen by what the core is, never by fold error
  (``armsim_blocks.CORE_MODELS``): the in-order A53 and A55 by lodevem's in-order model on LLVM
  19's figures for that very core (``armsim_inorder``), the out-of-order cores by llvm-mca's
  out-of-order model of the core (or of its documented derivative: the A76's Neoverse N1);
* ``k``: one constant per core, tied to its family's mean (``SHRINK_SIGMA``), so a core with few
  boards shrinks toward its group and a core with none takes the group's mean;
* ``p``: one factor per (reduced precision, ISA group): int8 per ISA group and fp16 arithmetic
  (ARMv8.2: ncnn's default float path there) against fp32; the blocks price the instructions
  each path executes, the factor what the pipeline model misses about them (SDOT, fp16 FMA
  throughput), one per ISA group rather than per core so a held-out core keeps it;
* ``t``: one factor for tflite (XNNPACK) against ncnn per pipeline family (each family has its
  own pricing model, so what one misses about XNNPACK's code says nothing of the other), with the
  precision factors' prior;
* ``q``: Amdahl per core with 1- and N-thread rows of one board, prior ``fit_armsim.Q_PRIOR``.
No runtime-version factor: the blocks carry the code's own IPC (the question the acceptance test
asks: the QRB2210's 2025 ncnn predicted from the 2022 A53 boards).

Rows are matched to profiles exactly as armsim v1.1 (``fit_armsim.match_profile``: per board one
runtime version of its era and one core view of its pipeline family); only profiles with block
cycles count. Prints the SoC-fold figures per category and, with ``--acceptance``, issue 31's
acceptance figures.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import fit_armsim as fa  # noqa: E402
import fit_estimator as fe  # noqa: E402

from lodevem.worker.armsim.armsim_blocks import CORE_MODELS  # noqa: E402  (the model that prices each core)

SHRINK_SIGMA = 0.3
REDUCED = ("int8", "fp16")  # precisions with a factor per ISA group (fp32 is the reference)
# Precision and runtime factors are what a core's pricing model misses about a code path (fp16
# arithmetic, SDOT, the int8 widening kernels, XNNPACK's against ncnn's): nothing says in advance
# how much, so they are fitted freely (a wide prior only keeps the fit well posed); the one prior
# that carries knowledge is that cores of one group share a constant (SHRINK_SIGMA). Issue 31's
# tight prior (0.3) was dropped with the per-core in-order models: it made the A55's constant
# absorb what the model misses about ARMv8.2's fp16 and SDOT code (every A55 float row runs ncnn's
# fp16 path) and carried it to the A55's fp32 code, the 1.65x per-clock slowdown of issue 35.
PRECISION_SIGMA = 10.0
# LLVM 19 prices every out-of-order Cortex core with its Cortex-A57 model (3-wide: -mcpu=cortex-a72,
# a73, a75, a76 give the same cycles), though their decode widths are 2 (A73) to 4 (A76) (Arm's
# guides, fit_armsim.CORE_SPECS). So a core's constant is tied to its family's mean at its own
# width: log k = family mean + slope x log(width), one slope fitted for both families (prior 0 +-
# WIDTH_SIGMA), instead of carrying one core's width to another.
WIDTH_COVARIATE = True
WIDTH_SIGMA = 1.0
FAMILIES = ("in-order", "out-of-order")


def shrink_group(core: str) -> str:
    """The cores whose constants share a mean: same pipeline family AND the same source of figures
    (the A7's come from its GCC description, not LLVM, so its cycles are on another scale)."""
    return "armv7 in-order" if core == "Cortex-A7" else fa.PIPELINE[core]


GROUPS = ("in-order", "armv7 in-order", "out-of-order")


def matched(rows: Sequence[fe.Row], profiles: Sequence[fa.DevProfile]) -> list[tuple[fe.Row, fa.DevProfile]]:
    """(row, profile) pairs: the v1.1 match (its board's runtime version and view, chosen among
    ALL stored profiles, so a 2025 board is never costed with 2022 code) where that very profile
    has block cycles; other rows are left out."""
    return [(r, p) for r in rows if (p := fa.match_profile(r, profiles)) is not None and p.block_cycles]


@dataclass
class BlockFit:
    models: dict[str, str]  # core -> block-pricing model
    k: dict[str, float]  # core -> cycles scale
    q: dict[str, float]
    p: dict[tuple[str, str], float]  # (precision, isa) -> factor: int8 per ISA group, fp16 arithmetic
    t: dict[tuple[str, str], float]  # (runtime, pipeline family) -> factor (ncnn 1)
    rms_log: float
    width_slope: float = 0.0  # d log k / d log decode width, shared by both families
    precision_sigma: float = PRECISION_SIGMA

    def predict(self, r: fe.Row, prof: fa.DevProfile) -> Optional[float]:
        if r.core not in self.k:
            return None
        cyc = prof.block_cycles.get(self.models.get(r.core, ""))
        if cyc is None:
            return None
        q = self.q.get(r.core, fa.Q_PRIOR)
        f = self.k[r.core] * self.p.get((prof.precision, prof.isa), 1.0)
        f *= self.t.get((r.runtime, fa.PIPELINE[r.core]), 1.0)
        return cyc * f * ((1 - q) + q / r.threads) / (r.clock_ghz * 1e6)


def fit(pairs: Sequence[tuple[fe.Row, fa.DevProfile]], models: dict[str, str],
        precision_sigma: float = PRECISION_SIGMA) -> BlockFit:
    from scipy.optimize import least_squares

    pairs = [(r, p) for r, p in pairs if models.get(r.core) in p.block_cycles]
    cores = sorted({r.core for r, _ in pairs})
    one = {(r.device, r.core, r.runtime) for r, _ in pairs if r.threads == 1}
    qcores = sorted({r.core for r, _ in pairs if r.threads > 1 and (r.device, r.core, r.runtime) in one})
    isas = sorted({(p.precision, p.isa) for _, p in pairs if p.precision in REDUCED})
    rts = sorted({(r.runtime, fa.PIPELINE[r.core]) for r, _ in pairs if r.runtime != "ncnn"})
    nk, nq, np_, nt = len(cores), len(qcores), len(isas), len(rts)
    ci = {c: i for i, c in enumerate(cores)}
    y = np.log([r.avg_ms for r, _ in pairs])
    base = np.log([p.block_cycles[models[r.core]] / (r.clock_ghz * 1e6) for r, p in pairs])
    kc = np.array([ci[r.core] for r, _ in pairs])
    thr = np.array([r.threads for r, _ in pairs], float)
    qof = [qcores.index(r.core) if r.core in qcores else -1 for r, _ in pairs]
    pof = [isas.index((p.precision, p.isa)) if p.precision in REDUCED else -1 for _, p in pairs]
    tof = [rts.index((r.runtime, fa.PIPELINE[r.core])) if r.runtime != "ncnn" else -1 for r, _ in pairs]
    fam_idx = [[ci[c] for c in cores if shrink_group(c) == g] for g in GROUPS]
    lw = np.array([math.log(fa.CORE_SPECS[c][0]) for c in cores])  # decode width, cited per core
    nb = 1 if WIDTH_COVARIATE else 0

    def resid(x: np.ndarray) -> np.ndarray:
        lk, q, lp, lt = x[:nk], x[nk:nk + nq], x[nk + nq:nk + nq + np_], x[nk + nq + np_:nk + nq + np_ + nt]
        b = x[-1] if nb else 0.0
        a = lk - b * lw  # a core's constant net of its width: what the family shares
        qq = np.array([q[i] if i >= 0 else fa.Q_PRIOR for i in qof])
        amd = np.where(thr > 1, (1 - qq) + qq / thr, 1.0)
        pred = base + lk[kc] + np.log(amd) + np.array([lp[i] if i >= 0 else 0.0 for i in pof]) \
            + np.array([lt[i] if i >= 0 else 0.0 for i in tof])
        shrink = [(a[m] - a[m].mean()) / SHRINK_SIGMA for m in fam_idx if len(m) > 1]
        return np.concatenate([pred - y, *shrink, (q - fa.Q_PRIOR) / fa.Q_SIGMA, lp / precision_sigma,
                               lt / precision_sigma, [b / WIDTH_SIGMA] if nb else []])

    x0 = np.concatenate([np.zeros(nk), np.full(nq, fa.Q_PRIOR), np.zeros(np_ + nt + nb)])
    lo = np.concatenate([np.full(nk, -5.0), np.zeros(nq), np.full(np_ + nt, -1.5), np.full(nb, -3.0)])
    hi = np.concatenate([np.full(nk, 5.0), np.ones(nq), np.full(np_ + nt, 1.5), np.full(nb, 3.0)])
    sol = least_squares(resid, x0, bounds=(lo, hi), method="trf")
    x = sol.x
    k = {c: float(math.exp(x[ci[c]])) for c in cores}
    q = {c: float(x[nk + i]) for i, c in enumerate(qcores)}
    for c in cores:
        if c not in q:
            same = [q[o] for o in qcores if shrink_group(o) == shrink_group(c)]
            q[c] = statistics.mean(same) if same else fa.Q_PRIOR
    b = float(x[-1]) if nb else 0.0
    for c in fa.PIPELINE:  # cores without rows: the family's geometric mean, at the core's own width
        fam = [o for o in cores if shrink_group(o) == shrink_group(c)]
        if c not in k and fam:
            shared = statistics.mean(math.log(k[o]) - b * math.log(fa.CORE_SPECS[o][0]) for o in fam)
            k[c] = math.exp(shared + b * math.log(fa.CORE_SPECS[c][0]))
            q[c] = statistics.mean(q[o] for o in fam)
    p = {key: float(math.exp(x[nk + nq + i])) for i, key in enumerate(isas)}
    t = {key: float(math.exp(x[nk + nq + np_ + i])) for i, key in enumerate(rts)}
    rms = float(np.sqrt(np.mean(resid(x)[:len(pairs)] ** 2))) if pairs else 0.0
    return BlockFit(dict(models), k, q, p, t, rms, b, precision_sigma)


def lodo(pairs: Sequence[tuple[fe.Row, fa.DevProfile]], models: dict[str, str],
         precision_sigma: float = PRECISION_SIGMA) -> list[fe.Scored]:
    """Leave-one-SoC-out (``fe.Row.fold``)."""
    out = []
    for group in sorted({r.fold for r, _ in pairs}):
        train = [(r, p) for r, p in pairs if r.fold != group]
        result = fit(train, models, precision_sigma)
        seen = {r.core for r, _ in train}
        for r, p in pairs:
            if r.fold == group and (ms := result.predict(r, p)) is not None:
                out.append(fe.Scored(r, ms, None, r.core in seen))
    return out


def core_models() -> dict[str, str]:
    """The block-pricing model of every core (``armsim_blocks.CORE_MODELS``): by what the core is."""
    return {core: model for core, (_, model, _) in CORE_MODELS.items()}


def acceptance(pairs: Sequence[tuple[fe.Row, fa.DevProfile]], models: dict[str, str]) -> dict[str, Any]:
    """Issue 31 part 6: the QRB2210 (2025 ncnn code) predicted from the 2022 A53 boards only."""
    train = [(r, p) for r, p in pairs if r.core == "Cortex-A53" and "QRB2210" not in r.device]
    test = [(r, p) for r, p in pairs if "QRB2210" in r.device]
    if not train or not test:
        return {"rows": 0}
    result = fit(train, models)
    errs: dict[str, list[float]] = {}
    for r, p in test:
        ms = result.predict(r, p)
        if ms is None:
            continue
        for cat in ["all", *fe.category_of(r)]:
            errs.setdefault(cat, []).append(ms / r.avg_ms - 1)
    return {cat: fe.summarize(v) for cat, v in errs.items()}


def inorder_overrides() -> dict[str, dict[str, Any]]:
    """Each in-order model's LLVM source, revision and override table with sources (kept in the params)."""
    from lodevem.worker.armsim.armsim_cores import INORDER_MODELS, INORDER_REVISION

    return {name: {"llvm_mcpu": model.mcpu, "source": model.source, "revision": INORDER_REVISION,
                   "overrides": [{"pattern": o.pattern, "latency": o.latency, "acc_latency": o.acc_latency,
                                  "units": [list(u) for u in o.units] if o.units else None,
                                  "extra_units": [list(u) for u in o.extra_units], "source": o.source}
                                 for o in model.overrides]}
            for name, model in INORDER_MODELS.items()}


def block_params(rows: Sequence[fe.Row], profiles: Sequence[fa.DevProfile]) -> Optional[dict[str, Any]]:
    """The ``block_model`` section of armsim's params (None: no profile has block cycles)."""
    pairs = matched(rows, profiles)
    if not pairs:
        return None
    models = core_models()
    result = fit(pairs, models)
    summary = fe.score_summary(lodo(pairs, models))
    return {
        "formula": ("ms = cycles_m(profile) * k[core] * {int8|fp16}[isa] * runtime[rt, pipeline] * ((1 - q) + q / threads) / "
                    "(clock_GHz * 1e6); cycles_m = sum over executed blocks of count x llvm-mca cycles per "
                    "execution under model m of the core's pipeline family"),
        "models": models,
        "model_rule": ("by what the core is, never by fold error: in-order cores by lodevem's in-order model on LLVM 19's "
                       "figures for that core with cited overrides, out-of-order cores by llvm-mca's out-of-order "
                       "model of the core or of its documented derivative"),
        "model_sources": {core: why for core, (_, _, why) in CORE_MODELS.items()},
        "inorder_overrides": inorder_overrides(),
        "k": {c: round(v, 5) for c, v in sorted(result.k.items())},
        "q": {c: round(v, 4) for c, v in sorted(result.q.items())},
        "int8": {isa: round(v, 4) for (prec, isa), v in result.p.items() if prec == "int8"},
        "fp16": {isa: round(v, 4) for (prec, isa), v in result.p.items() if prec == "fp16"},
        "runtime": [{"runtime": rt, "pipeline": fam, "factor": round(v, 4)} for (rt, fam), v in sorted(result.t.items())],
        "runtime_note": ("cycles factor of a runtime's code against ncnn's, per pipeline family (each family's own "
                         "pricing model), prior 1 +- precision_sigma in log: what the model misses about it"),
        "pipeline": dict(fa.PIPELINE),
        "fitted_cores": sorted({r.core for r, _ in pairs}),
        "rows": len(pairs), "rms_log": round(result.rms_log, 4),
        "shrink_sigma": SHRINK_SIGMA, "q_prior": [fa.Q_PRIOR, fa.Q_SIGMA], "precision_sigma": PRECISION_SIGMA,
        "width_slope": round(result.width_slope, 4), "width_sigma": WIDTH_SIGMA if WIDTH_COVARIATE else None,
        "width_source": "decode widths of fit_armsim.CORE_SPECS (Arm TRMs / Software Optimization Guides)",
        "uncertainty": {"folds": "soc", "categories": summary["categories"], "per_kind": summary["per_kind"],
                        "per_board": summary["per_board"]},
        "acceptance_qrb2210_from_2022_a53": acceptance(pairs, models),
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", type=Path, default=fa.DEFAULT_PROFILES)
    parser.add_argument("--data", type=Path, default=fe.DEFAULT_DATA)
    parser.add_argument("--acceptance", action="store_true")
    args = parser.parse_args(argv)
    rows = fe.load_rows(args.data)
    profiles = fa.load_profiles(args.profiles)
    pairs = matched(rows, profiles)
    print(f"{sum(bool(p.block_cycles) for p in profiles)} profiles with block cycles; {len(pairs)} of {len(rows)} "
          f"dev rows matched ({', '.join(sorted({r.core for r, _ in pairs}))})")
    if not pairs:
        print("no profile has block cycles (scripts/profile_armsim_dev.py --blocks)")
        return 1
    models = core_models()
    print("  models: " + ", ".join(f"{c} {m}" for c, m in models.items()))
    result = fit(pairs, models)
    print("  fit: k " + ", ".join(f"{c} {v:.3f}" for c, v in sorted(result.k.items()))
          + "; q " + ", ".join(f"{c} {v:.2f}" for c, v in sorted(result.q.items()))
          + "; precision " + ", ".join(f"{pr} {i} {v:.2f}" for (pr, i), v in result.p.items())
          + "; runtime " + ", ".join(f"{rt} {fam} {v:.2f}" for (rt, fam), v in result.t.items())
          + f"; rms(log) {result.rms_log:.3f}")
    summary = fe.score_summary(lodo(pairs, models))
    for board, s in summary["per_board"].items():
        print(f"  {board[:60]:<60s} {s['mape_pct']:6.1f}% bias {s['bias_pct']:+6.1f}% ({s['rows']} rows)")
    if args.acceptance:
        for cat, s in acceptance(pairs, models).items():
            if isinstance(s, dict) and s:
                print(f"ACCEPTANCE QRB2210 from 2022 A53 boards {cat}: MAPE {s['mape_pct']:.1f}% "
                      f"bias {s['bias_pct']:+.1f}% ({s['rows']} rows; target <= 15%)")
    print(fe.lodo_line("armsim-blocks", summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
