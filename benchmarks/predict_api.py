#!/usr/bin/env python
"""Speed of the Python latency API (``lodevem.Predictor``), the way a NAS loop uses it.

    PYTHONPATH=. .venv/bin/python benchmarks/predict_api.py [--models all] [--calls 50] [--json out.json]
    PYTHONPATH=. .venv/bin/python benchmarks/predict_api.py --quick

1. One-off costs, printed apart: ``import lodevem``, building a ``Predictor`` (profiles and the
   estimator's parameters), and the first prediction ever (imports torch, onnx and nn-Meter's
   converter; warmed with tiny_cnn, not counted below).
2. Per zoo model, first call: ``predictor.predict(name, profile)`` with an empty export cache,
   i.e. build the model, export it to ONNX in this process (onnxsim included), extract its
   kernels, predict, apply the profile's calibration. Target (issue 14): <= 1 s per model.
3. Per call once the model's kernel graph is extracted: ``--calls`` predictions per model,
   cycling over all 16 shipped profiles, calibration applied on the calibrated one. Target:
   <= 20 ms per call.
4. For reference: an ``nn.Module`` passed directly is exported on every call (a module can
   change structure between calls); its per-call time is the export's.

The calibration used is written into a temporary folder (one record, a made-up measurement of
tiny_cnn on jiophone2: it exercises the code path, it is not a device figure). Wall time and
this process's CPU time are both printed: on a shared machine the wall time of a CPU-bound step
grows with the load (the load average is printed too), its CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all", help="comma-separated zoo names, or 'all'")
    parser.add_argument("--calls", type=int, default=50, help="cached predictions timed per model")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--quick", action="store_true",
                        help="one small model, 5 calls (seconds; the test suite runs it); targets not judged")
    args = parser.parse_args()
    if args.quick:
        args.models, args.calls = "squeezenet1_1", 5

    t0 = time.perf_counter()
    import lodevem

    t_import = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="lodevem-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        predictor = lodevem.Predictor(calibrations=root / "calibrations", cache_dir=root / "cache",
                                      predictor="estimator")
        profiles = predictor.profiles()
        t_build = time.perf_counter() - t0

        t0 = time.perf_counter()
        predictor.predict("tiny_cnn", "jiophone2")
        t_first = time.perf_counter() - t0

        from lodevem import zoo
        from lodevem.latency.calibration import Measurement

        names = zoo.names() if args.models == "all" else args.models.split(",")
        names = [n for n in names if n != "tiny_cnn"] if args.models == "all" else names
        # one record, so the calibration step runs in the timed calls (made-up figure, see above)
        predictor.calibrate("jiophone2", [Measurement("tiny_cnn", 40.0, "benchmark: made-up figure")],
                            runtime="tflite", threads=1)

        load = os.getloadavg()[0]
        first: dict[str, float] = {}
        first_cpu: dict[str, float] = {}
        for name in names:
            t0, c0 = time.perf_counter(), time.process_time()
            result = predictor.predict(name, "jiophone2")
            first[name], first_cpu[name] = time.perf_counter() - t0, time.process_time() - c0
            assert result.latency_ms is not None, result.note

        per_call: dict[str, float] = {}
        for name in names:
            times = []
            for i in range(args.calls):
                profile = profiles[i % len(profiles)]
                t0 = time.perf_counter()
                predictor.predict(name, profile)
                times.append(time.perf_counter() - t0)
            per_call[name] = statistics.fmean(times)

        module = zoo.build("mobilenet_v2")
        module_times = []
        for _ in range(1 if args.quick else 3):
            t0 = time.perf_counter()
            predictor.predict(module, "jiophone2")
            module_times.append(time.perf_counter() - t0)
        predictor.close()

    print(f"import lodevem: {t_import * 1000:.0f} ms; Predictor(): {t_build * 1000:.0f} ms; "
          f"first prediction ever (tiny_cnn, imports torch/onnx/nn-Meter): {t_first:.2f} s")
    print(f"load average before the timed part: {load:.1f} (cores: {os.cpu_count()})")
    print(f"{'model':<22} {'first call wall (CPU)':>24} {'cached call (mean of ' + str(args.calls) + ')':>26}")
    for name in names:
        print(f"{name:<22} {first[name]:>9.3f} s ({first_cpu[name]:.3f} s CPU) {per_call[name] * 1000:>20.3f} ms")
    worst_first, worst_call = max(first.values()), max(per_call.values())
    print(f"first call CPU time: median {statistics.median(first_cpu.values()):.3f} s, "
          f"max {max(first_cpu.values()):.3f} s")
    print(f"first call: median {statistics.median(first.values()):.3f} s, max {worst_first:.3f} s "
          f"(target <= 1 s per model): {'PASS' if worst_first <= 1.0 else 'FAIL'}")
    print(f"cached call: median {statistics.median(per_call.values()) * 1000:.3f} ms, max {worst_call * 1000:.3f} ms "
          f"(target <= 20 ms): {'PASS' if worst_call <= 0.020 else 'FAIL'}")
    print(f"nn.Module (mobilenet_v2) passed directly, exported every call: "
          f"{statistics.fmean(module_times):.3f} s per call (mean of {len(module_times)})")
    if args.json:
        args.json.write_text(json.dumps({"import_s": t_import, "predictor_s": t_build, "first_ever_s": t_first,
                                         "first_call_s": first, "first_call_cpu_s": first_cpu, "load_average": load,
                                         "cached_call_s": per_call,
                                         "module_call_s": module_times}, indent=1))
    return 0 if args.quick or (worst_first <= 1.0 and worst_call <= 0.020) else 1


if __name__ == "__main__":
    sys.exit(main())
