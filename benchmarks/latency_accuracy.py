#!/usr/bin/env python
"""How good is the offline latency estimator? Leave-one-device-out on the dev data, plus timing.

    python benchmarks/latency_accuracy.py [--data ../shared/data/arm-cpu-latency-dev.csv]

1. Leave-one-device-out (LODO): for every board with 1-thread fp32 rows, refit the estimator on
   all other boards (``scripts/fit_estimator.py``'s ``fit``, same options as the shipped params)
   and predict the held-out rows. Beside it, a FLOPs-proportional baseline: latency = MACs /
   (clock x one MACs-per-cycle constant per core type), fitted on the same fold. Printed: MAPE
   and the share of rows within ±10 % / ±25 %, overall, per board, and split by whether the
   held-out core type had other boards in the fold (Kirin 970 is the only Cortex-A73 board).
2. Leave-one-model-out: refit without one benchmark model, predict it on every board; a check
   that the per-class costs generalise to a network the fit has not seen.
3. Time to predict the 11 zoo models on the 16 shipped profiles from existing ONNX exports,
   split into the one-off nn-Meter import (it pulls in scikit-learn) and the prediction itself.
Target (issue 5): estimator MAPE <= 15 % and at most half the baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import fit_estimator as fe  # noqa: E402  (the fit script is the single definition of the fit)

TARGET_MAPE = 15.0
TARGET_RATIO = 0.5


def _row(label: str, s: dict) -> str:
    return f"  {label:<44s} {s['mape_pct']:6.1f}%   {s['within_10_pct']:6.1f}%   {s['within_25_pct']:6.1f}%   {s['rows']:4d}"


def accuracy(rows: list[fe.Row], works: dict[str, fe.ModelWork]) -> dict:
    scored = fe.lodo(rows, works)
    summary = fe.lodo_summary(scored)
    folds = len(summary["per_device"])
    print(f"Leave-one-device-out: {folds} held-out boards, {len(scored)} one-thread fp32 rows")
    print(f"  {'':<44s} {'MAPE':>7s}   {'±10%':>7s}   {'±25%':>7s}   rows")
    print(_row("estimator v1 (kernel cost model)", summary["estimator"]))
    print(_row("FLOPs-proportional baseline", summary["baseline"]))
    if summary["estimator_core_seen_in_fold"]:
        print(_row("estimator, core type seen in the fold", summary["estimator_core_seen_in_fold"]))
    if summary["estimator_core_unseen_in_fold"]:
        unseen = sorted({s.core for s in scored if not s.core_seen})
        print(_row(f"estimator, core unseen ({', '.join(unseen)}: derived)", summary["estimator_core_unseen_in_fold"]))
    print("  per held-out board (estimator MAPE / mean signed error | baseline MAPE):")
    for device, d in summary["per_device"].items():
        base = [abs(s.baseline_ms / s.actual_ms - 1) for s in scored if s.device == device]
        print(f"    {device[:58]:<58s} {'/'.join(c.removeprefix('Cortex-') for c in d['cores']):<8s} "
              f"{d['mape_pct']:5.1f}% / {d['bias_pct']:+6.1f}% | {100 * float(np.mean(base)):5.1f}%")
    est, base = summary["estimator"]["mape_pct"], summary["baseline"]["mape_pct"]
    ratio = est / base if base else float("inf")
    met = est <= TARGET_MAPE and ratio <= TARGET_RATIO
    print(f"  target MAPE <= {TARGET_MAPE:g}% and <= {TARGET_RATIO:g}x baseline: "
          f"{'MET' if met else 'NOT MET'} (estimator {est:.1f}%, {ratio:.2f}x the baseline's {base:.1f}%)")
    return summary


def leave_one_model_out(rows: list[fe.Row], works: dict[str, fe.ModelWork]) -> None:
    errors: dict[str, list[float]] = {}
    for model in works:
        result = fe.fit(rows, {k: v for k, v in works.items() if k != model})
        for r in rows:
            if r.model == model and r.threads == 1 and r.precision == "fp32":
                errors.setdefault(model, []).append(result.predict(works[model].work, r.core, r.clock_ghz) / r.avg_ms - 1)
    flat = [e for v in errors.values() for e in v]
    print(f"Leave-one-model-out: MAPE {100 * float(np.mean(np.abs(flat))):.1f}% over {len(flat)} rows; per model: "
          + ", ".join(f"{m} {100 * float(np.mean(np.abs(v))):.0f}%" for m, v in errors.items()))


def timing(cache: Path) -> None:
    """11 zoo models x 16 profiles from existing exports (exported first if missing)."""
    from lodevem import zoo
    from lodevem.profiles import load_profiles

    cache.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in zoo.names():
        path = cache / f"{name}.onnx"
        if not path.exists():
            import torch

            from lodevem.worker import export_module

            export_module(zoo.build(name), torch.zeros(1, 3, 224, 224), str(path))
        paths[name] = path
    profiles = load_profiles()
    t0 = time.perf_counter()
    from lodevem.latency import kernels
    from lodevem.predict import Predictor

    kernels._import_nn_meter()
    t1 = time.perf_counter()
    predictor = Predictor("auto", data_dir=cache / "no-nnmeter-data")
    results = {name: predictor.predict(path, profiles) for name, path in paths.items()}
    t2 = time.perf_counter()
    again = Predictor("auto", data_dir=cache / "no-nnmeter-data")
    t3 = time.perf_counter()
    for name, path in paths.items():
        assert again.predict(path, profiles) == results[name], "predictions must be deterministic"
    t4 = time.perf_counter()
    cells = sum(len(r) for r in results.values())
    print(f"Timing ({len(paths)} zoo models x {len(profiles)} profiles = {cells} predictions, estimator path):")
    print(f"  one-off import of nn-Meter's converter/detector (pulls in scikit-learn): {t1 - t0:.2f} s")
    print(f"  prediction incl. kernel extraction, first run:  {t2 - t1:.2f} s")
    print(f"  same again with a fresh Predictor (deterministic, checked): {t4 - t3:.2f} s")
    try:
        import os

        print(f"  host load average while timing: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    a53 = statistics.median(r.latency_ms for res in results.values() for r in res.values() if r.latency_ms)
    print(f"  (median predicted latency over all cells: {a53:.0f} ms)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=fe.DEFAULT_DATA)
    parser.add_argument("--onnx-cache", type=Path, default=fe.DEFAULT_CACHE)
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args(argv)

    if not args.skip_timing:
        timing(args.onnx_cache / "zoo-224")
        print()
    rows = fe.load_rows(args.data)
    works = fe.model_work(fe.export_zoo(args.onnx_cache))
    accuracy(rows, works)
    print()
    leave_one_model_out(rows, works)
    return 0


if __name__ == "__main__":
    sys.exit(main())
