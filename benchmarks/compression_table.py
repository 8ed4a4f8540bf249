"""The compression table under the runtimes an app ships: model x level x runtime.

    .venv/bin/python benchmarks/compression_table.py [--models mobilenet_v2,mobilenet_v3_small,resnet18]
        [--runtimes tflite,ncnn] [--profile nokia_8110_4g] [--input-shape 1x3x224x224] [--markdown out.md]
    .venv/bin/python benchmarks/compression_table.py --quick

For each zoo model (written into a fresh temporary folder), the real CLI as a user runs it
(``python -m lodevem.cli start MODEL --levels all --runtime tflite,ncnn --profile P``, a new
interpreter each time), twice on the same ``--output``:

* cold: an empty output folder, so every derivation, conversion and measurement runs;
* cached: the same command again, every conversion and measurement served from the store.

Prints one line per (model, level, runtime): the peak RAM (VmHWM, MB) with its verdict on the
profile, the size of the converted file the runtime loaded (MB), its precision and scheme as
the conversion reports them, and the conversion's seconds in the cold run; then the wall and
CPU seconds (this process's children: the CLI, not the containers) of each run and the load
average. Targets (issue 28): int8 and int8-static peaks below fp32 by roughly the weights'
saving and pruned below fp32 under both runtimes; the first model's run <= 5 min cold on 2
cores, <= 30 s cached. A row without a figure prints its one-line reason instead. ``--quick``:
mobilenet_v2 alone at 1x3x96x96 on one profile, its conversions taken from the caller's
``$LODEVEM_SHARED_STORE`` when set (the test suite runs it after tests/test_convert_levels.py and
tests/test_compression_table.py made them); a full run is cold.

Needs the Docker engine and the images of the runtimes (``lodevem build-image --runtime tflite,ncnn``).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lodevem import zoo  # noqa: E402
from lodevem.levels import LEVELS  # noqa: E402
from lodevem.store import SHARED_STORE_ENV  # noqa: E402


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_start(model: Path, runtimes: str, profile: str, shape: str, output: Path,
              shared_store: bool = False) -> tuple[float, float, str]:
    """(wall s, CPU s, stderr) of one ``lodevem start --levels all``; exit 1 (some rows without
    a figure) is a result here, any other failure stops the benchmark. ``shared_store``: keep the
    caller's ``$LODEVEM_SHARED_STORE`` (--quick under the tests: the conversions the other tests
    made of the same model); else the cold run converts everything itself."""
    cmd = [sys.executable, "-m", "lodevem.cli", "start", str(model), "--levels", "all", "--runtime", runtimes,
           "--profile", profile, "--backend", "docker", "--output", str(output), "--predictor", "estimator",
           "--runs", "5", "--warmup", "1"]
    if shape:
        cmd += ["--input-shape", shape]
    cpu, started = _children_cpu_s(), time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    if not shared_store:
        env.pop(SHARED_STORE_ENV, None)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"lodevem start failed (exit {done.returncode}): {done.stderr.strip()[-600:]}")
    return wall, _children_cpu_s() - cpu, done.stderr


def _read_rows(output: Path) -> list[dict[str, str]]:
    with (output / "benchmark_results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def _number(text: str, digits: int = 1) -> str:
    return f"{float(text):,.{digits}f}" if text else "-"


def table_lines(rows: list[dict[str, str]], model: str) -> list[str]:
    """One line per (level, runtime), in level order."""
    order = {level: i for i, level in enumerate(LEVELS)}
    out = []
    for row in sorted(rows, key=lambda r: (order.get(r["level"] or "fp32", 99), r["runtime"])):
        level = row["level"] or "fp32"
        runtime = row["memory_runtime"] or row["runtime"]
        if row["peak_rss_mb"]:
            what = (f"peak {_number(row['peak_rss_mb']):>7} MB {row['verdict']:<6} file "
                    f"{_number(row['converted_mb'], 2):>6} MB {row['converted_precision'] or '-':<12} "
                    f"converted in {_number(row['conversion_s'])} s")
            if row["converted_scheme"]:
                what += f"  ({row['converted_scheme']})"
        else:
            what = f"no figure: {(row['memory_error'] or row['verdict'])[:200]}"
        out.append(f"{model:<20} {level:<12} {runtime:<18} {what}")
    return out


def markdown(rows_by_model: dict[str, list[dict[str, str]]]) -> str:
    """The table docs/runtimes.md shows."""
    order = {level: i for i, level in enumerate(LEVELS)}
    lines = ["| model | level | runtime | peak RAM (MB) | converted file (MB) | precision | conversion (s) |",
             "|---|---|---|---:|---:|---|---:|"]
    for model, rows in rows_by_model.items():
        for row in sorted(rows, key=lambda r: (order.get(r["level"] or "fp32", 99), r["runtime"])):
            peak = _number(row["peak_rss_mb"]) if row["peak_rss_mb"] else f"error: {row['memory_error'][:80]}"
            lines.append(f"| {model} | {row['level'] or 'fp32'} | {row['memory_runtime'] or row['runtime']} | {peak} | "
                         f"{_number(row['converted_mb'], 2)} | {row['converted_precision'] or '-'} | "
                         f"{_number(row['conversion_s'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mobilenet_v2,mobilenet_v3_small,resnet18")
    parser.add_argument("--runtimes", default="tflite,ncnn")
    parser.add_argument("--profile", default="nokia_8110_4g")
    parser.add_argument("--input-shape", default="", help="e.g. 1x3x224x224 (default: the model's)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table as Markdown here")
    parser.add_argument("--quick", action="store_true", help="mobilenet_v2 at 1x3x96x96 only")
    args = parser.parse_args()
    models = ["mobilenet_v2"] if args.quick else [m.strip() for m in args.models.split(",") if m.strip()]
    shape = "1x3x96x96" if args.quick else args.input_shape
    rows_by_model: dict[str, list[dict[str, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="lodevem-compression-") as tmp:
        for name in models:
            path = zoo.write(name, Path(tmp) / "models")
            output = Path(tmp) / f"out-{name}"
            cold = run_start(path, args.runtimes, args.profile, shape, output, shared_store=args.quick)
            rows = _read_rows(output)  # the cold run's: its conversion seconds
            cached = run_start(path, args.runtimes, args.profile, shape, output, shared_store=args.quick)
            served = sum(1 for r in _read_rows(output) if r["memory_cached"] == "True")
            rows_by_model[name] = rows
            print(f"{name} ({shape or 'its own input shape'}, --levels all --runtime {args.runtimes}, "
                  f"profile {args.profile}):")
            for line in table_lines(rows, name):
                print(f"  {line}")
            figures = sum(1 for r in rows if r["peak_rss_mb"])
            print(f"  rows with a peak: {figures} of {len(rows)}")
            print(f"  cold run   {cold[0]:7.1f} s wall, {cold[1]:6.1f} s CPU (target <= 300 s)")
            print(f"  cached run {cached[0]:7.1f} s wall, {cached[1]:6.1f} s CPU (target <= 30 s); "
                  f"{served} of {len(rows)} rows served from the measurement cache")
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    if args.markdown is not None:
        args.markdown.write_text(markdown(rows_by_model))
        print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
