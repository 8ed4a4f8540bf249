"""What `make demo` costs on a fresh machine, phase by phase, and that it leaves no dangling images.

    .venv/bin/python benchmarks/first_run.py [--tier tier2] [--venv] [--json out.json]
    .venv/bin/python benchmarks/first_run.py --demo-only    # the demo's commands, images present
    .venv/bin/python benchmarks/first_run.py --quick

Full mode times the phases of ``scripts/demo.sh`` after the Docker engine is installed, in its
order and with its overlap, one line per phase as it ends and the total on the closing line:

* ``--venv`` (optional): ``python -m venv`` + ``pip install --no-cache-dir --no-compile`` of
  torch and lodevem into a throw-away folder (what ``make setup-demo`` does; network-bound);
* the benchmark image: its wheels downloaded into an empty folder with pip's cache off, then
  ``docker build --no-cache`` under a throw-away tag (removed after), so the real images and
  other users of the engine are untouched;
* the rest of the images the demo needs (the Makefile's ``DEMO_RUNTIMES``; under tflite
  ``lodevem-litert`` and the converter image ``lodevem-convert``, layered on the throw-away bench
  image), built the same way two at a time in the background while the next phases run;
* the demo's own commands in a fresh folder: zoo, derive, then (after waiting for the images)
  the two ``start`` runs, sharing one store as ``scripts/demo.sh`` makes them
  (``LODEVEM_SHARED_STORE``), so every export, derivation and measurement is made anew once.

The demo's commands run on the real ``lodevem-*`` images (the throw-away builds are timed, not
used). CPU seconds beside the wall times (the machine is shared, so wall times are inflated by
other users' work): ``own`` is this script's children (the lodevem CLI processes, pip),
``containers`` the Docker engine's ``docker`` cpuacct cgroup (every container and build step on
the engine: ours, and any other user's that ran meanwhile, so an upper bound).

It also counts the images each build left untagged (target: 0; lodevem removes its build-stage
images). The base image ``debian:bookworm`` is taken as present (a pull is ~50 MB; without a
registry debootstrap makes it, which this does not time). The load average is printed with the
total.

``--quick`` (seconds, for the test suite) times only the demo's first steps on the smallest zoo
model (zoo + one ``start`` on one profile, a cold output folder; exports and conversions from
the session's ``LODEVEM_SHARED_STORE`` when the caller set one) and lists the images the demo
needs with whether they are present; it builds nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lodevem.sandbox import image  # noqa: E402
from lodevem.store import SHARED_STORE_ENV  # noqa: E402

_STEP_ID = re.compile(r"^ ---> ([0-9a-f]{12})$")


def demo_runtimes() -> tuple[str, ...]:
    """The Makefile's ``DEMO_RUNTIMES`` (what ``make demo`` builds images for and measures under)."""
    found = re.search(r"^DEMO_RUNTIMES \?= *(\S+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    return tuple(found.group(1).split(",")) if found else ("torch",)


DEMO_RUNTIMES = demo_runtimes()


DOCKER_CPUACCT = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")  # cgroup v1, cgroupfs driver


def cpu_now() -> tuple[float, float]:
    """(CPU seconds of this script's finished children, of the engine's containers; nan if unknown)."""
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        containers = int(DOCKER_CPUACCT.read_text()) / 1e9
    except (OSError, ValueError):
        containers = float("nan")
    return own.ru_utime + own.ru_stime, containers


def cpu_since(start: tuple[float, float]) -> dict:
    now = cpu_now()
    return {"cpu_own_s": round(now[0] - start[0], 1), "cpu_containers_s": round(now[1] - start[1], 1)}


def lodevem(*args: str, cwd: Path, env: dict) -> float:
    """Wall seconds of one CLI command in a new interpreter (import time counts, as for a user)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lodevem.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lodevem {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def demo_env(folder: Path, quick: bool) -> dict:
    """The demo's environment: its two runs share one store (scripts/demo.sh sets
    ``LODEVEM_SHARED_STORE`` to ``results/.cache``); quick mode keeps the caller's (the test
    session's store), a full run starts from nothing."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not quick:
        env[SHARED_STORE_ENV] = str(folder / "results" / ".cache")
    return env


def demo_phases(folder: Path, tier: str, quick: bool, show, before_runs=None) -> None:
    """scripts/demo.sh's commands (quick: its first two on one small model and one profile), with
    ``--runtime`` as ``make demo`` passes it (DEMO_RUNTIMES); ``show`` gets each phase when it
    ends. ``before_runs``: called between the derivation and the two runs (the full mode waits
    there for the images building meanwhile)."""
    runtime = ("--runtime", ",".join(DEMO_RUNTIMES))
    env = demo_env(folder, quick)

    def step(name: str, *args: str) -> None:
        show([(name, lodevem(*args, cwd=folder, env=env))])

    if quick:
        step("zoo tiny_cnn", "zoo", "tiny_cnn", "--out", "models/")
        step("start (1 model x nokia_c1, cold)", "start", "models/tiny_cnn.pt", "--profile", "nokia_c1",
             "--runs", "2", "--warmup", "0", *runtime)
        return
    step("zoo (3 models)", "zoo", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "--out", "models/")
    step("derive pruned", "derive", "models/mobilenet_v2.pt", "--levels", "pruned", "--out", "models/")
    if before_runs is not None:
        before_runs()
    models = sorted(str(p.relative_to(folder)) for p in (folder / "models").glob("*.pt"))
    step(f"start ({len(models)} models x {tier})", "start", *models, "--tier", tier, *runtime)
    step(f"start --levels all x {tier}", "start", "models/mobilenet_v2.pt", "--levels", "all", "--tier", tier,
         "--output", "results/levels", *runtime)


def fresh_venv(folder: Path) -> float:
    """``make setup`` into ``folder``: a new venv, torch and lodevem from the index, no pip cache."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "pip"), "install", "--quiet", "--no-cache-dir", "--no-compile"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run([*pip, "-e", str(ROOT)], check=True)  # make setup-demo: no test extras
    return time.perf_counter() - started


def fresh_build(spec: image.ImageSpec, built: dict[str, str]) -> dict:
    """Wheels into an empty folder, then ``--no-cache`` build under a throw-away tag (a layered
    image on its base's throw-away tag, from ``built``: spec name -> tag); how many of the images
    the build's steps made are left untagged and outside the final image's ancestry. The caller
    removes the images (``remove_builds``), layered ones first."""
    client = image.docker_client(timeout=600)
    row: dict = {"image": spec.tag}
    with tempfile.TemporaryDirectory(prefix="lodevem-wheels-") as tmp:
        started = time.perf_counter()
        image.download_wheels(Path(tmp), None, spec.requirements)
        row["wheel_download_s"] = round(time.perf_counter() - started, 1)
    lines: list[str] = []
    tag = f"{spec.repo}:first-run-timing"
    started, cpu_start = time.perf_counter(), cpu_now()
    info = image.build_image(lines.append, spec=spec, tag=tag, nocache=True,
                             base_tag=built.get(spec.layered_on or ""))
    row["docker_build_nocache_s"] = round(time.perf_counter() - started, 1)
    row.update(cpu_since(cpu_start))
    row["size_mb"] = info.size_mb
    if spec.layered_on:  # what the layer adds on disk: the docker images SIZE counts the base too
        row["layered_on"] = built.get(spec.layered_on)
        row["own_mb"] = round(info.size_mb - client.images.get(built[spec.layered_on]).attrs["Size"] / 2**20, 1)
    row["left_dangling"] = len(left_dangling(client, info.id, lines))
    row["id"] = info.id
    built[spec.name] = tag
    return row


def remove_builds(rows: list[dict]) -> None:
    """The throw-away images, the last built (a layer on an earlier one) first."""
    client = image.docker_client(timeout=600)
    for row in reversed(rows):
        client.images.remove(row["id"], force=True)


def left_dangling(client, final_id: str, log_lines: list[str]) -> list[str]:
    """Images a build's log names that still exist untagged and are not the final image's layers."""
    import docker.errors

    ancestry = {e.get("Id", "").removeprefix("sha256:")[:12] for e in client.api.history(final_id)}
    left = []
    for short in dict.fromkeys(m for line in log_lines for m in _STEP_ID.findall(line)):
        if short in ancestry:
            continue
        try:
            if not client.images.get(short).tags:
                left.append(short)
        except docker.errors.ImageNotFound:
            pass
    return left


def build_phases(specs: list[image.ImageSpec], report: dict) -> tuple[list[tuple[str, float]], object]:
    """The benchmark image's build (a phase of its own, as in scripts/demo.sh), then the rest of
    the demo's images started two at a time in the background; returns the first phase and a
    function that waits for the rest (the phase "images: waiting" the demo has too)."""
    from concurrent.futures import ThreadPoolExecutor

    built: dict[str, str] = {}
    report["builds"] = [fresh_build(specs[0], built)]
    bench = report["builds"][0]
    pool = ThreadPoolExecutor(max_workers=2)
    futures = [pool.submit(fresh_build, spec, built) for spec in specs[1:]]
    started = time.perf_counter()

    def wait_rest() -> list[tuple[str, float]]:
        waited = time.perf_counter()
        report["builds"] += [f.result() for f in futures]
        pool.shutdown()
        report["images_in_background_s"] = round(time.perf_counter() - started, 1)
        return [("images: waiting for the rest", time.perf_counter() - waited)]

    return [(f"image {bench['image']}", bench["wheel_download_s"] + bench["docker_build_nocache_s"])], wait_rest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="tier2")
    parser.add_argument("--venv", action="store_true", help="also time make setup (a fresh venv)")
    parser.add_argument("--quick", action="store_true", help="the demo's first steps on one model, no builds")
    parser.add_argument("--demo-only", action="store_true", help="time the demo's commands only (images present)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    specs = image.specs_for_runtimes(list(DEMO_RUNTIMES))
    report: dict = {"demo_images": [s.tag for s in specs], "load_average_start": os.getloadavg()}
    print(f"images make demo builds: {', '.join(report['demo_images'])} "
          f"(make test builds {', '.join(s.tag for s in image.specs_for_runtimes(list(image.RUNTIME_IMAGES)))})")
    phases: list[tuple[str, float]] = []

    def show(new: list[tuple[str, float]]) -> list[tuple[str, float]]:
        for name, seconds in new:
            print(f"{name:<44}{seconds:8.1f} s", flush=True)
        phases.extend(new)
        return new

    if args.venv and not (args.quick or args.demo_only):
        with tempfile.TemporaryDirectory(prefix="lodevem-venv-") as tmp:
            show([("make setup-demo (fresh venv, no pip cache)", fresh_venv(Path(tmp) / "venv"))])
    wait_rest = None
    if args.quick or args.demo_only:
        for spec in specs:
            status = image.image_status(spec=spec)
            print(f"{spec.tag}: {'present ' + status.short_id if status.present else 'NOT BUILT'}")
    else:
        first, wait_rest = build_phases(specs, report)
        show(first)
    try:
        with tempfile.TemporaryDirectory(prefix="lodevem-first-run-") as tmp:
            cpu_start = cpu_now()
            waiting = (lambda: show(wait_rest())) if wait_rest is not None else None
            demo_phases(Path(tmp), args.tier, args.quick, show, waiting)
            report["demo_cpu"] = cpu_since(cpu_start)
    finally:
        if "builds" in report:
            remove_builds(report["builds"])
    for row in report.get("builds", []):
        layer = f" (own layers {row['own_mb']:,.0f} MB on {row['layered_on']})" if "own_mb" in row else ""
        print(f"  {row['image']}: wheels {row['wheel_download_s']:.1f} s, docker build --no-cache "
              f"{row['docker_build_nocache_s']:.1f} s (CPU {row['cpu_containers_s']:.0f} s), "
              f"{row['size_mb']:,.0f} MB{layer}, untagged images left: {row['left_dangling']}")
    if "images_in_background_s" in report:
        print(f"  the rest of the images built in the background for {report['images_in_background_s']:.1f} s "
              "(beside zoo and derive)")
    print(f"demo CPU: own {report['demo_cpu']['cpu_own_s']:.1f} s, containers "
          f"{report['demo_cpu']['cpu_containers_s']:.1f} s (engine-wide)")
    total = sum(seconds for _, seconds in phases)
    report["phases"], report["total_s"] = phases, round(total, 1)
    report["load_average_end"] = os.getloadavg()
    what = "demo steps" if args.quick or args.demo_only else ("setup + " if args.venv else "") + "images + demo"
    print(f"total ({what}){'':<{max(1, 31 - len(what))}}{total:8.1f} s = {total / 60:.1f} min; load average "
          f"{', '.join(f'{v:.2f}' for v in report['load_average_start'])} at start, "
          f"{', '.join(f'{v:.2f}' for v in report['load_average_end'])} at end (shared machine)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    builds_clean = all(row["left_dangling"] == 0 for row in report.get("builds", []))
    return 0 if builds_clean else 1


if __name__ == "__main__":
    sys.exit(main())
