"""Peak RAM per runtime (torch, onnxruntime, LiteRT, ncnn), conversion times, image sizes and build times.

    .venv/bin/python benchmarks/runtime_memory.py [--models mobilenet_v2,mobilenet_v3_small,resnet18]
        [--limit 1024] [--fresh-builds] [--json out.json]
    .venv/bin/python benchmarks/runtime_memory.py --quick

* peak RSS (VmHWM), runtime baseline (RSS after import) and model increment of each zoo model
  under each runtime, measured by lodevem itself (``measure_models``, Docker backend, 1 thread,
  cache disabled) at ``--limit`` MB, plus the verdict at the Nokia 8110 4G's 256 MB;
* conversion time of each model to .tflite (litert-torch) and ncnn (pnnx): the converter's own
  seconds as the worker reports them, and the whole sandbox run's wall time (converter image
  start + torch import + load + conversion), into a fresh folder (no cache);
* size of each image lodevem builds; with ``--fresh-builds`` also each image's build time from
  scratch (wheel download into an empty folder + ``docker build --no-cache``, under a throw-away
  tag that is removed afterwards, so the real images and other users of the engine are not
  touched): what a fresh CI machine pays.

Needs the Docker engine and the images (``lodevem build-image --runtime torch,tflite,ncnn``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodevem import measure, zoo  # noqa: E402
from lodevem.sandbox import image  # noqa: E402
from lodevem.sandbox.client import MeasureSettings, WorkerClient  # noqa: E402
from lodevem.sandbox.docker_backend import DockerBackend  # noqa: E402

RUNTIMES = ("torch", "onnxruntime", "tflite", "ncnn")
KAIOS_MB = 256  # nokia_8110_4g


def conversions(client: WorkerClient, models: list[Path], workdir: Path,
                converted: tuple[str, ...] = ("tflite", "ncnn")) -> list[dict]:
    rows = []
    for model in models:
        for runtime in converted:
            target = workdir / f"{model.stem}.{'tflite' if runtime == 'tflite' else 'ncnn.param'}"
            t0 = time.monotonic()
            run = client.convert(model, runtime, target, None, timeout_s=900)
            wall = time.monotonic() - t0
            converted = run.reply.converted if run.reply is not None else None
            size = sum(Path(p).stat().st_size for p in image_files(target)) if run.ok else None
            rows.append({"model": model.stem, "runtime": runtime, "ok": run.ok,
                         "error": None if run.ok else run.failure_message(),
                         "converter_s": converted.seconds if converted else None, "sandbox_wall_s": round(wall, 1),
                         "size_mb": round(size / 2**20, 1) if size else None})
    return rows


def image_files(target: Path) -> list[str]:
    from lodevem.wire.protocol import artifact_files

    return artifact_files(str(target))


def memory(client: WorkerClient, models: list[Path], limit: int, warmup: int, runs: int, cache: Path,
           runtimes: tuple[str, ...] = RUNTIMES) -> list[dict]:
    rows = []
    for runtime in runtimes:
        settings = MeasureSettings(runtime=runtime, warmup=warmup, runs=runs, threads=1)
        results = measure.measure_models(models, [limit, KAIOS_MB], client=client, settings=settings, jobs=1,
                                         timeout_s=900, cache_dir=cache / "measure", use_cache=False)
        for model in models:
            m, kaios = results[(str(model), limit)], results[(str(model), KAIOS_MB)]
            rows.append({"model": model.stem, "runtime": runtime, "verdict": m.verdict, "peak_rss_mb": m.peak.rss_mb,
                         "runtime_baseline_mb": m.peak.runtime_baseline_mb, "model_increment_mb": m.peak.model_increment_mb,
                         "host_latency_mean_ms": m.host.mean_ms, "at_256mb": kaios.verdict,
                         "error": m.error})
    return rows


def images(fresh: bool) -> list[dict]:
    client = image.docker_client(timeout=600)
    rows = []
    for spec in image.specs_for_runtimes(list(RUNTIMES)):
        status = image.image_status(client, spec)
        row = {"image": spec.tag, "size_mb": round(client.images.get(spec.tag).attrs["Size"] / 2**20)
               if status.present else None}
        if fresh:
            with tempfile.TemporaryDirectory(prefix="lodevem-wheels-") as tmp:
                t0 = time.monotonic()
                image.download_wheels(Path(tmp), None, spec.requirements)
                row["wheel_download_s"] = round(time.monotonic() - t0, 1)
            tag = f"{spec.repo}:build-timing"
            t0 = time.monotonic()
            info = image.build_image(None, spec=spec, tag=tag, nocache=True)
            row["docker_build_nocache_s"] = round(time.monotonic() - t0, 1)
            row["fresh_size_mb"] = round(client.images.get(tag).attrs["Size"] / 2**20)
            client.images.remove(info.id, force=True)
        rows.append(row)
    return rows


def table(rows: list[dict], columns: list[str]) -> str:
    widths = [max(len(c), *(len(_cell(r.get(c))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(_cell(r.get(c)).ljust(w) for c, w in zip(columns, widths)) for r in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return "-" if value is None else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,mobilenet_v3_small,resnet18")
    parser.add_argument("--limit", type=int, default=1024, help="MB limit of the peak-RSS runs")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--fresh-builds", action="store_true", help="time each image's build from scratch")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true",
                        help="tiny_cnn, torch and ncnn only, 1 pass (seconds; the test suite runs it)")
    args = parser.parse_args()
    runtimes, converted = RUNTIMES, ("tflite", "ncnn")
    if args.quick:  # every section runs, on the smallest model and the fastest converter
        args.models, args.warmup, args.runs, args.fresh_builds = "tiny_cnn", 0, 1, False
        runtimes, converted = ("torch", "ncnn"), ("ncnn",)

    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="lodevem-rt-bench-") as tmp:
        folder = Path(tmp)
        models = [zoo.write(name, folder / "models") for name in args.models.split(",")]
        client = WorkerClient(DockerBackend())
        t0 = time.monotonic()
        report["conversions"] = conversions(client, models, folder / "converted-fresh", converted)
        print(f"conversions ({time.monotonic() - t0:.0f} s):\n" + table(
            report["conversions"], ["model", "runtime", "ok", "converter_s", "sandbox_wall_s", "size_mb", "error"]))
        t0 = time.monotonic()
        report["memory"] = memory(client, models, args.limit, args.warmup, args.runs, folder / "cache", runtimes)
        print(f"\npeak RAM at {args.limit} MB, {args.warmup}+{args.runs} passes, 1 thread "
              f"({time.monotonic() - t0:.0f} s):\n" + table(
                  report["memory"], ["model", "runtime", "verdict", "runtime_baseline_mb", "model_increment_mb",
                                     "peak_rss_mb", "host_latency_mean_ms", "at_256mb", "error"]))
    report["images"] = images(args.fresh_builds)
    print("\nimages:\n" + table(report["images"], ["image", "size_mb", "wheel_download_s", "docker_build_nocache_s",
                                                   "fresh_size_mb"]))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
