"""Benchmark of the measurement service: this design against the naive loop, in one run.

    .venv/bin/python benchmarks/harness.py [--models tiny_cnn,mobilenet_v2,resnet18] [--json out.json]

* design: ``measure_models`` over 3 zoo models x all 16 profiles: one run per DISTINCT RAM limit
  (16 profiles -> 6 limits), ``--jobs`` containers at once, cache disabled;
* naive: one container per (model, profile), one after the other;
* both with the same warmup/runs, after the same page-cache prewarm. Prints both wall times and
  design/naive (target <= 0.35), the VmHWM coefficient of variation over ``--repeat`` runs of one
  model at one limit (target < 1 %), and the per-limit table of the first model's design results.

Needs the Docker engine and the image (``lodevem build-image``).
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodevem import measure, zoo  # noqa: E402
from lodevem.profiles import load_profiles  # noqa: E402
from lodevem.results import ModelFile  # noqa: E402
from lodevem.sandbox.client import MeasureSettings, WorkerClient  # noqa: E402
from lodevem.sandbox.docker_backend import DockerBackend  # noqa: E402


def naive_loop(client: WorkerClient, models: list[Path], profiles: list, settings: MeasureSettings,
               timeout_s: float) -> dict[tuple[str, str], str]:
    """One container per (model, profile), serial: what lodevem would do without planning."""
    verdicts = {}
    for model in models:
        for profile in profiles:
            run = client.measure(model, profile.ram_mb, settings, timeout_s)
            verdicts[(model.name, profile.id)] = measure.classify(run)[0]
    return verdicts


def repeatability(client: WorkerClient, model: Path, limit: int, repeat: int, settings: MeasureSettings) -> dict:
    peaks = []
    for _ in range(repeat):
        res = measure.measure_models([model], [limit], client=client, settings=settings, jobs=1, use_cache=False)
        peaks.append(res[(str(model), limit)].peak_rss_mb)
    mean = statistics.fmean(peaks)
    return {"model": model.name, "limit_mb": limit, "peaks_mb": peaks,
            "cv_percent": 100 * statistics.pstdev(peaks) / mean if mean else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny_cnn,mobilenet_v2,resnet18")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    backend = DockerBackend()
    backend.sweep_stale()
    client = WorkerClient(backend)
    settings = MeasureSettings(warmup=args.warmup, runs=args.runs)
    profiles = load_profiles()
    limits = [p.ram_mb for p in profiles]
    work = Path(tempfile.mkdtemp(prefix="lodevem-bench-"))
    models = [zoo.write(name, work) for name in args.models.split(",")]
    for model in models:
        ModelFile.from_path(model)  # hashing reads it: same warm page cache for both contenders
    backend.prewarm()
    print(f"{len(models)} models x {len(profiles)} profiles = {len(models) * len(profiles)} pairs; "
          f"{len(set(limits))} distinct limits {sorted(set(limits))}; warmup {args.warmup}, runs {args.runs}; "
          f"jobs {args.jobs}; image {backend.image.short_id}", flush=True)

    t0 = time.monotonic()
    design = measure.measure_models(models, limits, client=client, settings=settings, jobs=args.jobs,
                                    timeout_s=args.timeout, use_cache=False)
    design_s = time.monotonic() - t0
    print(f"design: {len(design)} measurements in {design_s:.1f} s", flush=True)
    t0 = time.monotonic()
    naive = naive_loop(client, models, profiles, settings, args.timeout)
    naive_s = time.monotonic() - t0
    print(f"naive:  {len(naive)} containers in {naive_s:.1f} s", flush=True)
    disagree = [k for k, v in naive.items()
                if v != design[(str(work / k[0]), next(p.ram_mb for p in profiles if p.id == k[1]))].verdict]
    ratio = design_s / naive_s
    print(f"ratio design/naive = {ratio:.3f} (target <= 0.35) {'OK' if ratio <= 0.35 else 'MISSED'}; "
          f"verdicts that differ: {len(disagree)} {disagree[:4]}")

    rep = repeatability(client, models[min(1, len(models) - 1)], 1024, args.repeat, settings)
    print(f"VmHWM of {rep['model']} at {rep['limit_mb']} MB over {args.repeat} runs: {rep['peaks_mb']} -> "
          f"CV {rep['cv_percent']:.3f} % (target < 1 %) {'OK' if rep['cv_percent'] < 1 else 'MISSED'}")

    by_limit = defaultdict(list)
    for p in profiles:
        by_limit[p.ram_mb].append(p.id)
    for model in models:
        print(f"\n{model.name} ({ModelFile.from_path(model).sha256[:12]}):")
        print(f"{'limit MB':>8}  {'profiles':>8}  {'verdict':9}  {'peak RSS':>8}  {'baseline':>8}  {'model +':>7}  "
              f"{'cgroup':>6}  {'wall s':>6}")
        for limit in sorted(by_limit):
            m = design[(str(model), limit)]
            cells = [f"{v:8.1f}" if v is not None else f"{'-':>8}" for v in
                     (m.peak_rss_mb, m.runtime_baseline_mb, m.model_increment_mb, m.cgroup_peak_mb)]
            print(f"{limit:8d}  {len(by_limit[limit]):8d}  {m.verdict:9}  {cells[0]}  {cells[1]}  {cells[2][1:]}  "
                  f"{cells[3][2:]}  {m.wall_s:6.1f}")
    if args.json:
        args.json.write_text(json.dumps({
            "design_s": design_s, "naive_s": naive_s, "ratio": ratio, "repeatability": rep, "jobs": args.jobs,
            "warmup": args.warmup, "runs": args.runs, "image_id": backend.image.id,
            "design": {f"{Path(k[0]).name}@{k[1]}": v.to_dict() for k, v in design.items()}}, indent=1))
    return 0 if ratio <= 0.35 and rep["cv_percent"] < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
