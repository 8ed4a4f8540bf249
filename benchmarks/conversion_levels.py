"""What each compression level costs to make with the runtime's own toolchain, and what it gives.

    .venv/bin/python benchmarks/conversion_levels.py [--model mobilenet_v2] [--shape 1x3x224x224]
        [--runtimes tflite,ncnn] [--levels fp32,fp16,int8,int8-static] [--json out.json]
    .venv/bin/python benchmarks/conversion_levels.py --quick      # tiny_cnn at 1x3x32x32, ncnn only

For one zoo model, each (runtime x level) conversion once, into a fresh store (no cache), in the
converter image under the work memory limit (``ConvertCache.convert``, as a run does):

* converter seconds (the worker's own figure: conversion + quantization + calibration) and the
  whole sandbox run's wall time (container start, torch import, load, conversion);
* the converted file's size (all its files) and its ratio to fp32's;
* the precision the worker read back from the file's bytes, and its scheme line.

Targets it informs (issue 28): ``--levels all --runtime tflite,ncnn`` on one zoo model within
5 minutes cold on 2 cores. Needs the Docker engine and the converter image
(``lodevem build-image --runtime tflite,ncnn``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodevem import zoo  # noqa: E402
from lodevem.sandbox.artifacts import ConvertCache  # noqa: E402
from lodevem.sandbox.client import WorkerClient  # noqa: E402
from lodevem.sandbox.docker_backend import DockerBackend  # noqa: E402
from lodevem.store import ArtifactStore, file_digest  # noqa: E402
from lodevem.wire.precision import CONVERT_QUANTIZE  # noqa: E402

ALL_LEVELS = ("fp32", *CONVERT_QUANTIZE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--shape", default="1x3x224x224")
    parser.add_argument("--runtimes", default="tflite,ncnn")
    parser.add_argument("--levels", default=",".join(ALL_LEVELS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quick", action="store_true", help="tiny_cnn at 1x3x32x32, ncnn only (for tests)")
    args = parser.parse_args()
    if args.quick:
        args.model, args.shape, args.runtimes = "tiny_cnn", "1x3x32x32", "ncnn"
    shape = tuple(int(d) for d in args.shape.split("x"))
    runtimes = [r for r in args.runtimes.split(",") if r]
    levels = [lv for lv in args.levels.split(",") if lv]
    rows = []
    with tempfile.TemporaryDirectory(prefix="lodevem-levels-") as tmp:
        model = zoo.write(args.model, Path(tmp))
        sha = file_digest(model)
        converts = ConvertCache(WorkerClient(DockerBackend()), ArtifactStore(Path(tmp) / "store"), timeout_s=1800)
        started = time.monotonic()
        for runtime in runtimes:
            for level in levels:
                t0 = time.monotonic()
                result = converts.convert(model, sha, runtime, shape, quantize=None if level == "fp32" else level)
                rows.append({"model": args.model, "shape": args.shape, "runtime": runtime, "level": level,
                             "ok": result.path is not None, "error": result.error or None,
                             "converter_s": result.seconds, "sandbox_wall_s": round(time.monotonic() - t0, 1),
                             "size_bytes": result.size_bytes, "precision": result.precision,
                             "scheme": result.scheme, "calibration": result.calibration})
        total = time.monotonic() - started
    fp32 = {r["runtime"]: r["size_bytes"] for r in rows if r["level"] == "fp32" and r["size_bytes"]}
    print(f"{'runtime':8} {'level':12} {'converter s':>11} {'wall s':>7} {'size MB':>8} {'x fp32':>7}  precision")
    for r in rows:
        if not r["ok"]:
            print(f"{r['runtime']:8} {r['level']:12} error: {r['error']}")
            continue
        ratio = r["size_bytes"] / fp32[r["runtime"]] if r["runtime"] in fp32 else None
        print(f"{r['runtime']:8} {r['level']:12} {r['converter_s'] or 0:11.1f} {r['sandbox_wall_s']:7.1f} "
              f"{r['size_bytes'] / 2**20:8.2f} {ratio if ratio is not None else float('nan'):7.3f}  {r['precision']}")
    for r in rows:
        if r["ok"]:
            print(f"scheme {r['runtime']} {r['level']}: {r['scheme']}")
    print(f"all conversions ({len(rows)}) in {total:.1f} s wall")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
