"""The harness's 3 models x 16 profiles through Slurm vs Docker on one node, in one run.

    SLURM_CONF=... .venv/bin/python benchmarks/slurm_vs_docker.py [--models tiny_cnn,mobilenet_v2,resnet18]
    SLURM_CONF=... .venv/bin/python benchmarks/slurm_vs_docker.py --runtime tflite,ncnn --models mobilenet_v2
    SLURM_CONF=... .venv/bin/python benchmarks/slurm_vs_docker.py --quick

Both contenders run ``measure_models`` (one run per DISTINCT RAM limit: 16 profiles -> 6 limits,
``--jobs`` at a time, cache off, the same warmup/runs) on this machine; Slurm through the
single-node cluster of ``scripts/slurm-cluster.sh up``, one job per run. Prints both wall times,
slurm/docker (what a job costs over a container: sbatch, scheduling, the submitit wrapper's
python start, polling), whether every verdict agrees, and the largest VmHWM difference on runs
that fit. Docker runs second, so both see the page cache warmed by the first. ``--runtime``
(default torch): each runtime in turn; tflite and ncnn are converted once (in the Docker
converter image) into one artifact store both backends read, so both measure the same file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodevem import measure, zoo  # noqa: E402
from lodevem.profiles import load_profiles  # noqa: E402
from lodevem.results import ModelFile  # noqa: E402
from lodevem.sandbox.client import MeasureSettings, WorkerClient  # noqa: E402
from lodevem.sandbox.docker_backend import DockerBackend  # noqa: E402
from lodevem.sandbox.slurm_backend import SlurmBackend, SlurmSettings  # noqa: E402


def timed(client: WorkerClient, models: list[Path], limits: list[int], settings: MeasureSettings, jobs: int,
          timeout_s: float, store: Path) -> tuple[float, dict]:
    """Wall seconds and results; ``store``: the artifact store (conversions are shared, each
    backend's measurements are its own: the backend is part of their key)."""
    start = time.monotonic()
    results = measure.measure_models(models, limits, client=client, settings=settings, jobs=jobs,
                                     timeout_s=timeout_s, cache_dir=store / "measure")
    return time.monotonic() - start, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny_cnn,mobilenet_v2,resnet18")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--runtime", default="torch", help="comma-separated: torch, onnxruntime, tflite, ncnn")
    parser.add_argument("--quick", action="store_true",
                        help="tiny_cnn at the two smallest limits, 1 pass (the test suite runs it)")
    args = parser.parse_args()
    if args.quick:
        args.models, args.warmup, args.runs, args.jobs = "tiny_cnn", 0, 1, 1

    work = Path(tempfile.mkdtemp(prefix="lodevem-slurm-bench-"))
    models = [zoo.write(name, work) for name in args.models.split(",")]
    for model in models:
        ModelFile.from_path(model)
    profiles = load_profiles()
    limits = sorted({p.ram_mb for p in profiles})[:2 if args.quick else None]
    docker = DockerBackend()
    docker.sweep_stale()
    docker.prewarm()
    slurm = SlurmBackend(SlurmSettings(workdir=work / "slurm"))
    print(f"{len(models)} models x {len(profiles)} profiles = {len(models) * len(profiles)} pairs; "
          f"{len(limits)} distinct limits {limits}; warmup {args.warmup}, runs {args.runs}; jobs {args.jobs}")
    failed = 0
    for runtime in args.runtime.split(","):
        settings = MeasureSettings(runtime=runtime, warmup=args.warmup, runs=args.runs)
        if runtime != "torch":
            print(f"--- runtime {runtime}")
        failed += compare(slurm, docker, models, limits, settings, args, work / f"store-{runtime}")
    return 1 if failed else 0


def compare(slurm: SlurmBackend, docker: DockerBackend, models: list[Path], limits: list[int],
            settings: MeasureSettings, args: argparse.Namespace, store: Path) -> int:
    """One runtime on both backends; prints the figures, returns how many verdicts differ."""
    slurm_s, on_slurm = timed(WorkerClient(slurm), models, limits, settings, args.jobs, args.timeout, store)
    docker_s, on_docker = timed(WorkerClient(docker), models, limits, settings, args.jobs, args.timeout, store)
    # An error on both sides (a conversion that failed or timed out) is no agreement: counted apart.
    errors = [key for key in on_docker if "error" in (on_slurm[key].verdict, on_docker[key].verdict)]
    disagree = [key for key in on_docker if on_slurm[key].verdict != on_docker[key].verdict or key in errors]
    gaps = [abs(on_slurm[k].peak.rss_mb - on_docker[k].peak.rss_mb) / on_docker[k].peak.rss_mb
            for k in on_docker if on_docker[k].fits and on_slurm[k].fits
            and on_slurm[k].peak.rss_mb and on_docker[k].peak.rss_mb]
    print(f"slurm  (one job per run):       {slurm_s:7.1f} s for {len(on_slurm)} runs")
    print(f"docker (one container per run): {docker_s:7.1f} s for {len(on_docker)} runs")
    print(f"slurm/docker = {slurm_s / docker_s:.2f}")
    print(f"verdicts agree: {len(on_docker) - len(disagree)}/{len(on_docker)}"
          + (f" (differ: {disagree})" if disagree else ""))
    for key in errors[:1]:
        print(f"errors: {len(errors)} runs, e.g. {(on_slurm[key].error or on_docker[key].error or '')[:200]}")
    if gaps:
        print(f"VmHWM difference on runs that fit: max {100 * max(gaps):.1f} %, mean {100 * sum(gaps) / len(gaps):.1f} %")
    for (label, limit), value in sorted(on_slurm.items()):
        other = on_docker[(label, limit)]
        print(f"  {label:24s} {limit:5d} MB  slurm {value.verdict:9s} {value.peak.rss_mb or 0:6.1f} MB {value.sandbox.wall_s:5.1f} s"
              f"   docker {other.verdict:9s} {other.peak.rss_mb or 0:6.1f} MB {other.sandbox.wall_s:5.1f} s")
    return len(disagree)


if __name__ == "__main__":
    sys.exit(main())
