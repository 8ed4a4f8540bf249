"""What `make demo` costs on a fresh machine, step by step, and that it leaves no dangling images.

    .venv/bin/python benchmarks/first_run.py [--tier tier2] [--venv] [--json out.json]
    .venv/bin/python benchmarks/first_run.py --demo-only    # the demo's commands, images present
    .venv/bin/python benchmarks/first_run.py --quick

Full mode times what a fresh machine pays after the Docker engine is installed:

* ``--venv`` (optional): ``python -m venv`` + ``pip install --no-cache-dir`` of torch and
  lodevem into a throw-away folder (what ``make setup`` does; network-bound);
* the wheels of the images the demo needs (``make demo`` builds only those: the Makefile's
  ``DEMO_RUNTIMES``; under tflite ``lodevem-bench``, ``lodevem-litert`` and the converter image
  ``lodevem-convert``, which is layered on the bench image), downloaded into an empty folder with
  pip's cache off;
* ``docker build --no-cache`` of each of those images under a throw-away tag (removed after,
  a layered image built on the throw-away base), so the real images and other users of the
  engine are untouched;
* the demo's own commands (``scripts/demo.sh``: zoo, derive, two ``start`` runs) in a fresh
  folder, so every export, derivation and measurement is made anew.

CPU seconds beside each wall time (the machine is shared, so wall times are inflated by other
users' work): ``own`` is this script's children (the lodevem CLI processes, pip), ``containers``
the Docker engine's ``docker`` cpuacct cgroup (every container and build step on the engine:
ours, and any other user's that ran meanwhile, so an upper bound).

It also counts the images each build left untagged (target: 0; lodevem removes its build-stage
images) and prints the sum. The base image ``debian:bookworm`` is taken as present (a pull is
~50 MB; without a registry debootstrap makes it, which this does not time). The machine is
shared: the load average is printed with the figures.

``--quick`` (seconds, for the test suite) times only the demo's first steps on the smallest zoo
model (zoo + one ``start`` on one profile, a cold output folder) and lists the images the demo
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


def lodevem(*args: str, cwd: Path) -> float:
    """Wall seconds of one CLI command in a new interpreter (import time counts, as for a user)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lodevem.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lodevem {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def demo_steps(folder: Path, tier: str, quick: bool) -> list[tuple[str, float]]:
    """scripts/demo.sh's commands (quick: its first two on one small model and one profile), with
    ``--runtime`` as ``make demo`` passes it (DEMO_RUNTIMES)."""
    runtime = ("--runtime", ",".join(DEMO_RUNTIMES))
    if quick:
        return [("zoo mobilenet_v3_small", lodevem("zoo", "mobilenet_v3_small", "--out", "models/", cwd=folder)),
                ("start (1 model x nokia_c1, cold)", lodevem("start", "models/mobilenet_v3_small.pt", "--profile",
                                                             "nokia_c1", "--runs", "2", "--warmup", "0", *runtime,
                                                             cwd=folder))]
    steps = [("zoo (3 models)", lodevem("zoo", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "--out", "models/",
                                        cwd=folder)),
             ("derive pruned", lodevem("derive", "models/mobilenet_v2.pt", "--levels", "pruned", "--out", "models/",
                                       cwd=folder))]
    models = sorted(str(p.relative_to(folder)) for p in (folder / "models").glob("*.pt"))
    steps.append((f"start ({len(models)} models x {tier})", lodevem("start", *models, "--tier", tier, *runtime,
                                                                    cwd=folder)))
    steps.append((f"start --levels all x {tier}", lodevem("start", "models/mobilenet_v2.pt", "--levels", "all",
                                                           "--tier", tier, "--output", "results/levels", *runtime,
                                                           cwd=folder)))
    return steps


def fresh_venv(folder: Path) -> float:
    """``make setup`` into ``folder``: a new venv, torch and lodevem from the index, no pip cache."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "pip"), "install", "--quiet", "--no-cache-dir"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run([*pip, "-e", f"{ROOT}[test]"], check=True)
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
    total = 0.0
    if args.venv and not (args.quick or args.demo_only):
        with tempfile.TemporaryDirectory(prefix="lodevem-venv-") as tmp:
            report["venv_s"] = round(fresh_venv(Path(tmp) / "venv"), 1)
        total += report["venv_s"]
        print(f"make setup (fresh venv, no pip cache)  {report['venv_s']:8.1f} s")
    if args.quick or args.demo_only:
        for spec in specs:
            status = image.image_status(spec=spec)
            print(f"{spec.tag}: {'present ' + status.short_id if status.present else 'NOT BUILT'}")
    else:
        built: dict[str, str] = {}
        report["builds"] = []
        try:
            for spec in specs:
                report["builds"].append(fresh_build(spec, built))
        finally:
            remove_builds(report["builds"])
        for row in report["builds"]:
            total += row["wheel_download_s"] + row["docker_build_nocache_s"]
            layer = f" (own layers {row['own_mb']:,.0f} MB on {row['layered_on']})" if "own_mb" in row else ""
            print(f"{row['image']}: wheels {row['wheel_download_s']:.1f} s, docker build --no-cache "
                  f"{row['docker_build_nocache_s']:.1f} s (CPU {row['cpu_containers_s']:.0f} s), "
                  f"{row['size_mb']:,.0f} MB{layer}, "
                  f"untagged images left: {row['left_dangling']}")
    with tempfile.TemporaryDirectory(prefix="lodevem-first-run-") as tmp:
        cpu_start = cpu_now()
        report["demo_steps"] = demo_steps(Path(tmp), args.tier, args.quick)
        report["demo_cpu"] = cpu_since(cpu_start)
    for name, seconds in report["demo_steps"]:
        total += seconds
        print(f"{name:<40}{seconds:8.1f} s")
    print(f"demo CPU: own {report['demo_cpu']['cpu_own_s']:.1f} s, containers "
          f"{report['demo_cpu']['cpu_containers_s']:.1f} s (engine-wide)")
    report["total_s"] = round(total, 1)
    report["load_average_end"] = os.getloadavg()
    what = "demo steps" if args.quick or args.demo_only else ("setup + " if "venv_s" in report else "") + "image build + demo"
    print(f"total ({what}){'':<{max(1, 31 - len(what))}}{total:8.1f} s = {total / 60:.1f} min")
    print(f"load average {', '.join(f'{v:.2f}' for v in report['load_average_start'])} at start, "
          f"{', '.join(f'{v:.2f}' for v in report['load_average_end'])} at end (shared machine)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    builds_clean = all(row["left_dangling"] == 0 for row in report.get("builds", []))
    return 0 if builds_clean else 1


if __name__ == "__main__":
    sys.exit(main())
