"""The armsim work a 5-model x tier2 ``start`` adds, a cached rerun's, and the image build time.

    .venv/bin/python benchmarks/armsim_time.py [--quick] [--runtime tflite|ncnn]
        [--models mobilenet_v2,mobilenet_v3_small,resnet18,squeezenet1_1,shufflenet_v2_x1_0]
        [--tier tier2|all] [--jobs N] [--fresh-build] [--json out.json]

What a ``start --predictor armsim`` run adds over the estimator is the armsim stage the runner
kind runs (``lodevem.latency.armsim.kind.ArmsimKind``, through the predictor pool; here in parallel over models):
for every model its conversion for the latency runtime (the run's ConvertCache; a ``--runtime
tflite|ncnn`` run has it already) and one profile per distinct (ISA, uarch) of the tier's
fastest cores, each a full emulation in the lodevem-armsim image. This script runs exactly that
stage on zoo models, into a fresh cache, and prints:

* conversions: count and wall seconds (0 added when the run measures under that runtime);
* profiles: count, wall seconds of the stage, emulation seconds summed over profiles;
* the cached rerun of the same stage (target: 0 profiles, ~0 s);
* with ``--fresh-build``: the armsim image's build time from scratch (``docker build --no-cache``
  under a throw-away tag, removed afterwards; wheels from the host's cache).

Cells without a cost model are reported as such (the stage still profiles: that is the cost).
``--quick`` (the tests' mode): tiny_cnn under ncnn on the tier's first core only. Needs the
Docker engine and the armsim + converter images (``lodevem build-image --runtime armsim``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodevem import zoo  # noqa: E402
from lodevem.latency.armsim.isa import covered, isa_for_core, uarch_for_core  # noqa: E402
from lodevem.latency.armsim.profiler import ArmsimProfiler, ProfileJob  # noqa: E402
from lodevem.profiles import load_profiles, select_profiles  # noqa: E402
from lodevem.sandbox import image  # noqa: E402
from lodevem.sandbox.artifacts import ConvertCache, ExportCache  # noqa: E402
from lodevem.sandbox.client import WorkerClient  # noqa: E402
from lodevem.sandbox.docker_backend import DockerBackend  # noqa: E402
from lodevem.store import ArtifactStore  # noqa: E402

MODELS = "mobilenet_v2,mobilenet_v3_small,resnet18,squeezenet1_1,shufflenet_v2_x1_0"


def stage(client: WorkerClient, models: list[Path], runtime: str, cores: list[str], cache: Path, jobs: int,
          timeout_s: float) -> dict:
    """The armsim stage of one run: conversions, then every model's profiles, models in parallel."""
    store = ArtifactStore(cache)
    exports = ExportCache(client, store, timeout_s)
    converts = ConvertCache(client, store, timeout_s)
    profiler = ArmsimProfiler(client, store.folder("armsim"), timeout_s)
    targets = sorted({(isa_for_core(c), uarch_for_core(c)) for c in cores if covered(runtime, c)})
    t0 = time.monotonic()
    conversions = {}
    for model in models:
        sha = zoo_sha(model)
        shape = exports.export(model, sha, None).model.input_shape
        conversions[model] = (converts.convert(model, sha, runtime, shape), shape)
    convert_s = time.monotonic() - t0
    failures: list[str] = []

    def one(model: Path) -> None:
        conversion, shape = conversions[model]
        if conversion.path is None:
            failures.append(f"{model.stem}: {conversion.error}")
            return
        for isa, uarch in targets:
            result = profiler.profile(ProfileJob(conversion.path, runtime, isa, 1, "auto", uarch, shape))
            if result.profile is None:
                failures.append(f"{model.stem} {isa}: {result.error}")

    t1 = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, models))
    return {"conversions": sum(1 for c, _ in conversions.values() if not c.cached), "convert_s": round(convert_s, 1),
            "targets": [f"{isa}/{uarch}" for isa, uarch in targets], "profiles_made": profiler.made,
            "profiles_cached": profiler.hits, "profile_stage_s": round(time.monotonic() - t1, 1),
            "emulation_s": round(profiler.emulation_s, 1), "failures": failures}


def zoo_sha(path: Path) -> str:
    from lodevem.worker.load.formats import file_sha256

    return file_sha256(str(path))


def fresh_build() -> dict:
    tag = f"{image.ARMSIM.repo}:benchmark-{os.getpid()}"
    info = image.build_image(spec=image.ARMSIM, tag=tag, nocache=True)
    try:
        image.docker_client().images.remove(tag, noprune=False)
    except Exception:
        pass
    return {"fresh_build_s": info.build_s, "size_mb": info.size_mb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny_cnn, ncnn, the tier's first core")
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--runtime", default="tflite", choices=("tflite", "ncnn"))
    parser.add_argument("--tier", default="tier2", help="a tier, or all: every core of the shipped profiles")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--fresh-build", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    profiles = select_profiles(load_profiles(), tiers=[] if args.tier == "all" else [args.tier])
    cores = sorted({p.fastest_cluster.core for p in profiles})
    names, runtime = args.models.split(","), args.runtime
    if args.quick:
        names, runtime, cores = ["tiny_cnn"], "ncnn", cores[:1]
    client = WorkerClient(DockerBackend())
    report: dict = {"models": names, "runtime": runtime, "tier": args.tier, "cores": cores, "jobs": args.jobs,
                    "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="armsim-time-") as tmp:
        folder = Path(tmp) / "models"
        folder.mkdir()
        for name in names:
            zoo.write(name, folder)
        models = [folder / f"{n}.pt" for n in names]
        cache = Path(tmp) / "cache"
        report["first_run"] = stage(client, models, runtime, cores, cache, args.jobs, args.timeout)
        report["cached_rerun"] = stage(client, models, runtime, cores, cache, args.jobs, args.timeout)
    if args.fresh_build:
        report.update(fresh_build())
    first, rerun = report["first_run"], report["cached_rerun"]
    print(f"armsim stage, {len(names)} model(s) x {args.tier} ({', '.join(cores)}), {runtime}, {args.jobs} job(s), "
          f"{os.cpu_count()} CPU(s)")
    print(f"  conversions: {first['conversions']} in {first['convert_s']} s (none added when --runtime {runtime})")
    print(f"  profiles: {first['profiles_made']} ({', '.join(first['targets'])}) in {first['profile_stage_s']} s "
          f"wall, {first['emulation_s']} s of sandbox runs summed")
    print(f"  cached rerun: {rerun['profiles_made']} profiles made, {rerun['profiles_cached']} from the cache, "
          f"{rerun['profile_stage_s']} s; conversions {rerun['conversions']}")
    for failure in first["failures"]:
        print(f"  failed: {failure}")
    if "fresh_build_s" in report:
        print(f"  fresh image build: {report['fresh_build_s']} s, {report['size_mb']} MB")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
