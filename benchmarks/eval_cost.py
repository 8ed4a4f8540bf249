"""What ``--eval-data`` costs: evaluation time per row, and host memory against the data's size.

    .venv/bin/python benchmarks/eval_cost.py [--samples 1000] [--size 224] [--runtime tflite]
    .venv/bin/python benchmarks/eval_cost.py --quick

* the time to evaluate ``--samples`` inputs of 3 x ``--size`` x ``--size`` through the zoo's
  mobilenet_v2 under ``--runtime`` (default tflite: its .tflite under LiteRT, in the lodevem-litert
  image, 1 thread), as lodevem runs it (``WorkerClient.evaluate``, Docker backend, the work limit):
  the whole sandbox run's wall time and the worker's own evaluation seconds. Target: <= 30 s per
  row for 1,000 224x224 inputs on 2 cores. The conversion is made first and timed apart (a run
  makes it once for memory and accuracy alike).
* the host's peak RSS while validating and normalising the data (``prepare_eval_data``, in a fresh
  interpreter each) for a data set of ``--samples`` and one of 4x as many (quick: 40 and 160): the
  reader streams one sample at a time, so the two peaks should be about equal although the second
  file is 4x larger.

The inputs are seeded random numbers and the labels random classes: the weights of the zoo's
mobilenet_v2 are random too, so the accuracy printed is chance level; what is measured is cost.
Needs the Docker engine and the images (``lodevem build-image --runtime torch,tflite``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lodevem import zoo  # noqa: E402
from lodevem.accuracy.data import prepare_eval_data  # noqa: E402
from lodevem.sandbox.artifacts import ConvertCache  # noqa: E402
from lodevem.sandbox.client import MeasureSettings, WorkerClient  # noqa: E402
from lodevem.store import ArtifactStore  # noqa: E402
from lodevem.worker.evaluate.samples import NpzWriter  # noqa: E402

_PEAK = """
import resource, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from lodevem.accuracy.data import prepare_eval_data
from lodevem.store import ArtifactStore
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = prepare_eval_data(Path({path!r}), {limit}, ArtifactStore(Path({store!r})))
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, data.samples)
"""


def write_samples(path: Path, n: int, size: int, classes: int = 1000) -> None:
    """A seeded random data set, written one sample at a time (this process stays small too)."""
    import numpy as np

    rng = np.random.default_rng(0)
    writer = NpzWriter(str(path), n, (3, size, size))
    for _ in range(n):
        writer.add(rng.standard_normal((3, size, size), dtype=np.float32))
    writer.finish(rng.integers(0, classes, n))
    path.chmod(0o644)


def host_peak(path: Path, limit: int, store: Path) -> tuple[float, float, int]:
    """(RSS MB after imports, peak RSS MB after preparing, samples) in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _PEAK.format(root=str(ROOT), path=str(path), limit=limit,
                                                             store=str(store))],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]) / 1024, int(out[1]) / 1024, int(out[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--runtime", default="tflite", choices=("torch", "tflite", "ncnn"))
    parser.add_argument("--quick", action="store_true", help="40 samples (160 for the memory check)")
    args = parser.parse_args()
    n = 40 if args.quick else args.samples
    from lodevem.sandbox.docker_backend import DockerBackend

    with tempfile.TemporaryDirectory(prefix="lodevem-evalcost-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        small, large = work / "small.npz", work / "large.npz"
        write_samples(small, n, args.size)
        write_samples(large, 4 * n, args.size)
        print(f"data: {n} and {4 * n} samples of 3x{args.size}x{args.size} float32 "
              f"({small.stat().st_size / 2**20:.0f} MB and {large.stat().st_size / 2**20:.0f} MB)")
        for label, path, count in (("small", small, n), ("large", large, 4 * n)):
            base, peak, used = host_peak(path, count, work / f"store-{label}")
            print(f"host peak RSS preparing {used} samples: {peak:.0f} MB (after imports {base:.0f} MB, "
                  f"+{peak - base:.0f} MB)")

        store = ArtifactStore(work / "store")
        data = prepare_eval_data(small, n, store)
        model = zoo.write("mobilenet_v2", work)
        model.chmod(0o644)
        client = WorkerClient(DockerBackend())
        settings = MeasureSettings(runtime=args.runtime, threads=1, input_shape=data.input_shape)
        converted = None
        if args.runtime != "torch":
            t0 = time.monotonic()
            conversion = ConvertCache(client, store, 900).convert(model, "sha-eval-cost", args.runtime,
                                                                   data.input_shape)
            if conversion.path is None:
                print(f"conversion failed: {conversion.error}")
                return 1
            converted = conversion.path
            print(f"conversion to {args.runtime}: {time.monotonic() - t0:.1f} s (once per file, shared with memory)")
        t0 = time.monotonic()
        run = client.evaluate(model, data.path, settings, 1800, converted_path=converted)
        wall = time.monotonic() - t0
        counted = run.reply.accuracy if run.reply is not None else None
        if not run.ok or counted is None:
            print(f"evaluation failed: {run.failure_message()}")
            return 1
        per = 1000 * (counted.seconds or wall) / counted.samples
        print(f"evaluate mobilenet_v2 under {args.runtime}: {counted.samples} samples in {wall:.1f} s wall "
              f"(worker {counted.seconds:.1f} s, {per:.1f} ms/sample); top-1 {100 * counted.top1_correct / counted.samples:.1f} % "
              "(random weights and labels: chance)")
        print(f"projected for 1,000 samples: {per:.1f} s evaluation + {wall - (counted.seconds or 0):.1f} s sandbox")
    return 0


if __name__ == "__main__":
    sys.exit(main())
