"""Benchmark of a fully cached rerun: ``lodevem start`` twice on the same inputs, in one run.

    .venv/bin/python benchmarks/cached_rerun.py [--models tiny_cnn,mobilenet_v2,squeezenet1_1]
        [--tier tier2] [--backend docker] [--reruns 3] [--json out.json]
    .venv/bin/python benchmarks/cached_rerun.py --quick

Writes the zoo models into a fresh temporary folder, then runs the real CLI as a user would
(``python -m lodevem.cli start MODELS --tier T --backend B --output DIR``, a new interpreter
each time, so import time counts):

* first run: empty ``--output``: every export, prediction, measurement and figure is made;
* reruns: the same command again, every pair a cache hit (the script checks that the rerun's
  rows say ``memory_cached`` and that the predictor reports no latency-cache miss).

Prints the first run's wall time, each rerun's and their median, the ratio rerun/first, and
the CPU seconds of the lodevem process (user + system: what the machine's load does not
inflate; a container's CPU is not counted), which heavy modules a rerun imported (``-X importtime``; target: none of torch, nn_meter,
matplotlib, onnx, sklearn). Target: rerun <= 1 s. The machine's load average is printed too:
on a shared 2-core machine the rerun's time moves with it.

Needs the Docker engine and the image (``lodevem build-image``) for ``--backend docker``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lodevem import zoo  # noqa: E402
from lodevem.store import SHARED_STORE_ENV  # noqa: E402

HEAVY = ("torch", "nn_meter", "matplotlib", "onnx", "sklearn", "scipy", "numpy", "pandas")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_start(models: list[Path], tier: str, backend: str, output: Path, importtime: bool = False,
              cpu: list[float] | None = None, shared_store: bool = False) -> tuple[float, str]:
    """Wall seconds of one ``lodevem start`` in a new interpreter, and its stderr; its CPU
    seconds (user + system, the figure the machine's load does not inflate) go into ``cpu``.
    ``shared_store``: keep the caller's ``$LODEVEM_SHARED_STORE`` (--quick, under the tests: the
    exports and conversions other tests made); else the first run is cold."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not shared_store:
        env.pop(SHARED_STORE_ENV, None)
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "lodevem.cli", "start",
           *map(str, models), "--tier", tier, "--backend", backend, "--output", str(output)]
    cpu_before, started = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if cpu is not None:
        cpu.append(_children_cpu_s() - cpu_before)
    if done.returncode != 0:
        raise SystemExit(f"lodevem start exited {done.returncode}:\n{done.stderr[-2000:]}")
    return wall, done.stderr


def heavy_imports(importtime_stderr: str) -> list[str]:
    found = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.split(".")[0] in HEAVY:
                found.add(name.split(".")[0])
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny_cnn,mobilenet_v2,squeezenet1_1")
    parser.add_argument("--tier", default="tier2")
    parser.add_argument("--backend", default="docker", choices=["docker", "process"])
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true",
                        help="tiny_cnn on tier3, one rerun (seconds; the test suite runs it): the rerun must "
                        "still be fully cached and import nothing heavy, the 1 s target is not judged")
    args = parser.parse_args()
    if args.quick:
        args.models, args.tier, args.reruns = "tiny_cnn", "tier3", 1

    with tempfile.TemporaryDirectory(prefix="lodevem-cached-rerun-") as tmp:
        folder = Path(tmp)
        models = [zoo.write(name, folder / "models") for name in args.models.split(",")]
        output = folder / "results"
        first_cpu: list[float] = []
        first, _ = run_start(models, args.tier, args.backend, output, cpu=first_cpu, shared_store=args.quick)
        rerun_cpu: list[float] = []
        reruns = [run_start(models, args.tier, args.backend, output, cpu=rerun_cpu, shared_store=args.quick)[0]
                  for _ in range(args.reruns)]
        _, imported = run_start(models, args.tier, args.backend, output, importtime=True, shared_store=args.quick)
        payload = json.loads((output / "benchmark_results.json").read_text())
        cached = all(r["memory_cached"] for r in payload["results"])
        latency_cache = payload["environment"]["extra"]["predictor"].get("latency_cache", {})
    rerun = statistics.median(reruns)
    result = {
        "models": args.models.split(","), "tier": args.tier, "backend": args.backend,
        "pairs": len(payload["results"]), "first_s": round(first, 3), "reruns_s": [round(r, 3) for r in reruns],
        "rerun_median_s": round(rerun, 3), "ratio": round(rerun / first, 4),
        "first_cpu_s": round(first_cpu[0], 3), "rerun_cpu_median_s": round(statistics.median(rerun_cpu), 3),
        "rerun_all_memory_cached": cached, "rerun_latency_cache": latency_cache,
        "rerun_heavy_imports": heavy_imports(imported), "load_average": os.getloadavg(),
    }
    print(f"{len(result['models'])} models x {args.tier} ({result['pairs']} pairs), backend {args.backend}")
    print(f"first run        {first:7.2f} s")
    print(f"cached reruns    {', '.join(f'{r:.2f}' for r in reruns)} s (median {rerun:.2f} s; target <= 1 s)")
    print(f"rerun / first    {rerun / first:7.3f}")
    print(f"CPU (user+sys)   first {first_cpu[0]:.2f} s of lodevem itself (containers not counted), "
          f"rerun median {statistics.median(rerun_cpu):.2f} s")
    print(f"rerun: every measurement cached: {cached}; latency cache {latency_cache}")
    print(f"rerun imported heavy modules: {', '.join(result['rerun_heavy_imports']) or 'none'}")
    print(f"load average     {', '.join(f'{v:.2f}' for v in result['load_average'])} (shared machine)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if cached and (args.quick or rerun <= 1.0) and not result["rerun_heavy_imports"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
