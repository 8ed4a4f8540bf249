"""Benchmark of the measurement planning: this design, the old design and the naive loop, in one run.

    .venv/bin/python benchmarks/harness.py [--models tiny_cnn,mobilenet_v2,resnet18] [--json out.json]
    .venv/bin/python benchmarks/harness.py --quick     # tiny_cnn, one profile per RAM limit (tests)

* design: ``measure_models`` as ``start`` runs it: one reference run per model at the largest
  limit, measured runs only at limits within the margin of its peak or below it, the other rows
  inferred (``memory.planning``); ``--jobs`` containers at once, cache disabled;
* old design: the same scheduler with ``infer=False`` (``--no-infer``): one run per DISTINCT limit;
* naive: one container per (model, profile), one after the other;
* all with the same warmup/runs, after the same page-cache prewarm.

Prints the three wall times, ``ratio design/naive`` (target <= 0.12 on a 2-core machine) with the
old design's ratio beside it, the verdicts of design rows (inferred or measured) that differ from
the naive loop's (must be 0), the largest peak difference of an inferred row against the naive
run at that limit next to the VmHWM spread of the naive runs above the peak, the VmHWM CV over
``--repeat`` runs of one model at one limit, and the per-limit table of each model.
Exit 1 when a verdict differs or an inferred peak is outside the spread. Needs the Docker engine
and the image (``lodevem build-image``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodevem import measure, zoo  # noqa: E402
from lodevem.memory.planning import safe_above  # noqa: E402
from lodevem.profiles import load_profiles  # noqa: E402
from lodevem.results import MemoryMeasurement, ModelFile  # noqa: E402
from lodevem.sandbox.client import MeasureSettings, WorkerClient  # noqa: E402
from lodevem.sandbox.docker_backend import DockerBackend  # noqa: E402

TARGET = 0.12


def naive_loop(client: WorkerClient, models: list[Path], profiles: list, settings: MeasureSettings,
               timeout_s: float) -> dict[tuple[str, str], MemoryMeasurement]:
    """One container per (model, profile), serial: what lodevem would do without planning."""
    found = {}
    for model in models:
        sha = ModelFile.from_path(model).sha256
        for profile in profiles:
            run = client.measure(model, profile.ram_mb, settings, timeout_s)
            found[(model.name, profile.id)] = measure.to_measurement(
                run, identity=client.backend.identity, model_sha256=sha, settings=settings,
                worker_version=client.worker_version)
    return found


def repeatability(client: WorkerClient, model: Path, limit: int, repeat: int, settings: MeasureSettings) -> dict:
    peaks = []
    for _ in range(repeat):
        res = measure.measure_models([model], [limit], client=client, settings=settings, jobs=1, use_cache=False)
        peaks.append(res[(str(model), limit)].peak.rss_mb)
    mean = statistics.fmean(peaks) if peaks else 0.0
    return {"model": model.name, "limit_mb": limit, "peaks_mb": peaks,
            "cv_percent": 100 * statistics.pstdev(peaks) / mean if mean else None}


def timed(label: str, fn: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    value = fn()
    seconds = time.monotonic() - t0
    print(f"{label} in {seconds:.1f} s", flush=True)
    return value, seconds


def compare(models: list[Path], profiles: list, design: dict, naive: dict) -> dict[str, Any]:
    """Design rows against the naive loop's: verdicts that differ, and for inferred rows the peak
    difference next to the spread of the naive peaks at the limits above the margin."""
    disagree, worst, spread = [], 0.0, 0.0
    for model in models:
        above = [naive[(model.name, p.id)].peak.rss_mb for p in profiles
                 if naive[(model.name, p.id)].fits and naive[(model.name, p.id)].peak.rss_mb is not None
                 and p.ram_mb >= safe_above(naive[(model.name, p.id)].peak.rss_mb)]
        if len(above) > 1:
            spread = max(spread, max(above) - min(above))
        for p in profiles:
            mine, theirs = design[(str(model), p.ram_mb)], naive[(model.name, p.id)]
            if mine.verdict != theirs.verdict:
                disagree.append(f"{model.name}@{p.id}: {mine.verdict} vs {theirs.verdict}")
            if mine.inferred_from_mb is not None and theirs.peak.rss_mb is not None and mine.peak.rss_mb is not None:
                worst = max(worst, abs(mine.peak.rss_mb - theirs.peak.rss_mb))
    inferred = sum(1 for model in models for p in profiles if design[(str(model), p.ram_mb)].inferred_from_mb)
    return {"verdicts_differ": disagree, "inferred_rows": inferred, "worst_inferred_peak_diff_mb": worst,
            "naive_spread_mb": spread}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny_cnn,mobilenet_v2,resnet18")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--quick", action="store_true",
                        help="tiny_cnn, one profile per distinct RAM limit, 1 warm-up, 2 runs, no repeatability")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    profiles = load_profiles()
    if args.quick:
        args.models, args.warmup, args.runs, args.repeat = "tiny_cnn", 1, 2, 0
        profiles = list({p.ram_mb: p for p in profiles}.values())

    backend = DockerBackend()
    backend.sweep_stale()
    client = WorkerClient(backend)
    settings = MeasureSettings(warmup=args.warmup, runs=args.runs)
    limits = [p.ram_mb for p in profiles]
    work = Path(tempfile.mkdtemp(prefix="lodevem-bench-"))
    models = [zoo.write(name, work) for name in args.models.split(",")]
    for model in models:
        ModelFile.from_path(model)  # hashing reads it: same warm page cache for every contender
    backend.prewarm()
    print(f"{len(models)} models x {len(profiles)} profiles = {len(models) * len(profiles)} pairs; "
          f"{len(set(limits))} distinct limits {sorted(set(limits))}; warmup {args.warmup}, runs {args.runs}; "
          f"jobs {args.jobs}; image {backend.image_id[7:19]}", flush=True)

    def scheduled(infer: bool) -> dict:
        return measure.measure_models(models, limits, client=client, settings=settings, jobs=args.jobs,
                                      timeout_s=args.timeout, use_cache=False, infer=infer)

    design, design_s = timed("design (inferred far above the peak)", lambda: scheduled(True))
    runs = sum(1 for v in design.values() if v.inferred_from_mb is None)
    print(f"  {runs} measurements, {len(design) - runs} (model, limit) figures inferred", flush=True)
    old, old_s = timed(f"old design ({len(design)} measurements, one per distinct limit)",
                       lambda: scheduled(False))
    naive, naive_s = timed(f"naive ({len(models) * len(profiles)} containers)",
                           lambda: naive_loop(client, models, profiles, settings, args.timeout))
    ratio, old_ratio = design_s / naive_s, old_s / naive_s
    print(f"ratio design/naive = {ratio:.3f} (target <= {TARGET}) {'OK' if ratio <= TARGET else 'MISSED'}; "
          f"old design/naive = {old_ratio:.3f}")
    found = compare(models, profiles, design, naive)
    old_found = compare(models, profiles, old, naive)
    print(f"verdicts that differ from the naive loop: design {len(found['verdicts_differ'])} "
          f"{found['verdicts_differ'][:4]}, old design {len(old_found['verdicts_differ'])}")
    print(f"inferred rows: {found['inferred_rows']} of {len(models) * len(profiles)}; largest |peak - naive peak| of "
          f"an inferred row {found['worst_inferred_peak_diff_mb']:.1f} MB; naive VmHWM spread above the margin "
          f"{found['naive_spread_mb']:.1f} MB", flush=True)
    peaks_ok = found["worst_inferred_peak_diff_mb"] <= max(found["naive_spread_mb"], 2.0)

    rep = None
    if args.repeat:
        rep = repeatability(client, models[min(1, len(models) - 1)], 1024, args.repeat, settings)
        print(f"VmHWM of {rep['model']} at {rep['limit_mb']} MB over {args.repeat} runs: {rep['peaks_mb']} -> "
              f"CV {rep['cv_percent']:.3f} % (target < 1 %)")

    by_limit = defaultdict(list)
    for p in profiles:
        by_limit[p.ram_mb].append(p.id)
    for model in models:
        print(f"\n{model.name} ({ModelFile.from_path(model).sha256[:12]}):")
        print(f"{'limit MB':>8}  {'profiles':>8}  {'verdict':9}  {'peak RSS':>8}  {'measured':>8}  {'cgroup':>6}  "
              f"{'wall s':>6}  how")
        for limit in sorted(by_limit):
            m, o = design[(str(model), limit)], old[(str(model), limit)]
            cells = [f"{v:8.1f}" if v is not None else f"{'-':>8}" for v in (m.peak.rss_mb, o.peak.rss_mb)]
            cgroup = f"{o.peak.cgroup_mb:6.1f}" if o.peak.cgroup_mb is not None else f"{'-':>6}"
            how = f"inferred from {m.inferred_from_mb} MB" if m.inferred_from_mb else "measured"
            print(f"{limit:8d}  {len(by_limit[limit]):8d}  {m.verdict:9}  {cells[0]}  {cells[1]}  {cgroup}  "
                  f"{o.sandbox.wall_s:6.1f}  {how}")
    if args.json:
        args.json.write_text(json.dumps({
            "design_s": design_s, "old_design_s": old_s, "naive_s": naive_s, "ratio": ratio, "old_ratio": old_ratio,
            "comparison": found, "repeatability": rep, "jobs": args.jobs, "warmup": args.warmup, "runs": args.runs,
            "image_id": backend.image_id, "old_measurements": len(old),
            "design": {f"{Path(k[0]).name}@{k[1]}": v.to_dict() for k, v in design.items()}}, indent=1))
    return 0 if not found["verdicts_differ"] and peaks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
