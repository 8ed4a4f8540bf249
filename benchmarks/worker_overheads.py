"""Two fixed costs of the worker that used to be wall-time asserts in the tests, as figures.

    .venv/bin/python benchmarks/worker_overheads.py [--model mobilenet_v2] [--json out.json]
    .venv/bin/python benchmarks/worker_overheads.py --quick

* export cache hit: ``python -m lodevem.worker`` asked for an ONNX export that already exists
  (the host's cache path with its record) answers without importing torch. Printed: the first
  (real) export's wall time and the cache hit's (median of ``--repeat``). Target: hit <= 1.5 s.
  The test (tests/test_worker.py) asserts the functional part: no torch import on a hit.
* timeout enforcement: a Docker measurement of a million passes with ``timeout_s=3`` must end
  as ``timeout``; printed: how long after the start the verdict came back (container start,
  the 3 s, the kill and the cleanup). Target: < 30 s. The test
  (tests/test_measure_docker.py) asserts the verdict and that no container is left.

Both run on the shared machine: the load average is printed with them. ``--quick`` uses
tiny_cnn and one repeat (seconds; the test suite runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lodevem import measure, zoo  # noqa: E402
from lodevem.sandbox.client import MeasureSettings, WorkerClient  # noqa: E402

HIT_TARGET_S, TIMEOUT_TARGET_S = 1.5, 30.0


def worker(request: dict, cwd: Path) -> tuple[float, dict, str]:
    """Wall seconds, the reply and stderr of one worker process, as the host starts it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lodevem.worker", "--request", json.dumps(request)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    wall = time.perf_counter() - started
    reply = json.loads(done.stdout.splitlines()[-1])
    if not reply["ok"]:
        raise SystemExit(f"worker failed: {reply['error']}")
    return wall, reply, done.stderr


def export_cache_hit(model: Path, folder: Path, repeat: int) -> dict:
    request = {"action": "export-onnx", "model_path": str(model), "onnx_path": str(folder / f"{model.stem}.onnx")}
    first, reply, _ = worker(request, folder)
    assert reply["onnx"]["cached"] is False
    hits = []
    for _ in range(repeat):
        wall, reply, stderr = worker(request, folder)
        if not reply["onnx"]["cached"] or "imported torch" in stderr:
            raise SystemExit("the second export was not a cache hit without torch: the figure would be meaningless")
        hits.append(wall)
    return {"model": model.stem, "first_export_s": round(first, 3), "hits_s": [round(h, 3) for h in hits],
            "hit_median_s": round(statistics.median(hits), 3)}


def timeout_enforcement(model: Path, timeout_s: float = 3.0) -> dict:
    from lodevem.sandbox.docker_backend import DockerBackend

    settings = MeasureSettings(warmup=1, runs=1_000_000)
    started = time.monotonic()
    result = measure.measure_models([model], [1024], client=WorkerClient(DockerBackend()), settings=settings, jobs=1,
                                    timeout_s=timeout_s, use_cache=False)[(str(model), 1024)]
    return {"timeout_s": timeout_s, "verdict": result.verdict, "returned_after_s": round(time.monotonic() - started, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2", help="zoo model of the export cache hit")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny_cnn, one repeat")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    name, repeat = ("tiny_cnn", 1) if args.quick else (args.model, args.repeat)

    with tempfile.TemporaryDirectory(prefix="lodevem-worker-bench-") as tmp:
        folder = Path(tmp)
        model = zoo.write(name, folder / "models")
        hit = export_cache_hit(model, folder, repeat)
        tiny = model if name == "tiny_cnn" else zoo.write("tiny_cnn", folder / "models")
        stop = timeout_enforcement(tiny)
    load = os.getloadavg()
    print(f"export of {hit['model']} through the worker: first {hit['first_export_s']:.2f} s, cache hit "
          f"{hit['hit_median_s']:.2f} s (median of {repeat}; target <= {HIT_TARGET_S} s): "
          f"{'PASS' if hit['hit_median_s'] <= HIT_TARGET_S else 'MISSED'}")
    print(f"a {stop['timeout_s']:.0f} s timeout on a million passes: verdict {stop['verdict']}, back after "
          f"{stop['returned_after_s']:.1f} s (target < {TIMEOUT_TARGET_S:.0f} s): "
          f"{'PASS' if stop['verdict'] == 'timeout' and stop['returned_after_s'] < TIMEOUT_TARGET_S else 'MISSED'}")
    print(f"load average {', '.join(f'{v:.2f}' for v in load)} (shared machine)")
    if args.json:
        args.json.write_text(json.dumps({"export_cache_hit": hit, "timeout": stop, "load_average": load}, indent=1))
    if stop["verdict"] != "timeout":
        return 1  # a functional failure, in any mode
    if args.quick:
        return 0  # quick mode checks the figures are produced; the targets are judged in a full run
    return 0 if hit["hit_median_s"] <= HIT_TARGET_S and stop["returned_after_s"] < TIMEOUT_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
