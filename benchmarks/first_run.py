"""What `make demo` costs on a fresh machine, step by step, and that it leaves no dangling images.

    .venv/bin/python benchmarks/first_run.py [--tier tier2] [--venv] [--json out.json]
    .venv/bin/python benchmarks/first_run.py --demo-only    # the demo's commands, images present
    .venv/bin/python benchmarks/first_run.py --quick

Full mode times what a fresh machine pays after the Docker engine is installed:

* ``--venv`` (optional): ``python -m venv`` + ``pip install --no-cache-dir`` of torch and
  lodevem into a throw-away folder (what ``make setup`` does; network-bound);
* the wheels of the images the demo needs (``make demo`` builds only those: the tier2 torch
  demo needs ``lodevem-bench`` alone), downloaded into an empty folder with pip's cache off;
* ``docker build --no-cache`` of each of those images under a throw-away tag (removed after),
  so the real images and other users of the engine are untouched;
* the demo's own commands (``scripts/demo.sh``: zoo, derive, two ``start`` runs) in a fresh
  folder, so every export, derivation and measurement is made anew.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lodevem.sandbox import image  # noqa: E402

DEMO_RUNTIMES = ("torch",)  # scripts/demo.sh runs the default runtime only
_STEP_ID = re.compile(r"^ ---> ([0-9a-f]{12})$")


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
    """scripts/demo.sh's commands (quick: its first two on one small model and one profile)."""
    if quick:
        return [("zoo mobilenet_v3_small", lodevem("zoo", "mobilenet_v3_small", "--out", "models/", cwd=folder)),
                ("start (1 model x nokia_c1, cold)", lodevem("start", "models/mobilenet_v3_small.pt", "--profile",
                                                             "nokia_c1", "--runs", "2", "--warmup", "0", cwd=folder))]
    steps = [("zoo (3 models)", lodevem("zoo", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "--out", "models/",
                                        cwd=folder)),
             ("derive pruned", lodevem("derive", "models/mobilenet_v2.pt", "--levels", "pruned", "--out", "models/",
                                       cwd=folder))]
    models = sorted(str(p.relative_to(folder)) for p in (folder / "models").glob("*.pt"))
    steps.append((f"start ({len(models)} models x {tier})", lodevem("start", *models, "--tier", tier, cwd=folder)))
    steps.append((f"start --levels all x {tier}", lodevem("start", "models/mobilenet_v2.pt", "--levels", "all",
                                                           "--tier", tier, "--output", "results/levels", cwd=folder)))
    return steps


def fresh_venv(folder: Path) -> float:
    """``make setup`` into ``folder``: a new venv, torch and lodevem from the index, no pip cache."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "pip"), "install", "--quiet", "--no-cache-dir"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run([*pip, "-e", f"{ROOT}[test]"], check=True)
    return time.perf_counter() - started


def fresh_build(spec: image.ImageSpec) -> dict:
    """Wheels into an empty folder, then ``--no-cache`` build under a throw-away tag; how many of
    the images the build's steps made are left untagged and outside the final image's ancestry."""
    client = image.docker_client(timeout=600)
    row: dict = {"image": spec.tag}
    with tempfile.TemporaryDirectory(prefix="lodevem-wheels-") as tmp:
        started = time.perf_counter()
        image.download_wheels(Path(tmp), None, spec.requirements)
        row["wheel_download_s"] = round(time.perf_counter() - started, 1)
    lines: list[str] = []
    tag = f"{spec.repo}:first-run-timing"
    started = time.perf_counter()
    info = image.build_image(lines.append, spec=spec, tag=tag, nocache=True)
    row["docker_build_nocache_s"] = round(time.perf_counter() - started, 1)
    row["size_mb"] = info.size_mb
    row["left_dangling"] = len(left_dangling(client, info.id, lines))
    client.images.remove(info.id, force=True)
    return row


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
        report["builds"] = [fresh_build(spec) for spec in specs]
        for row in report["builds"]:
            total += row["wheel_download_s"] + row["docker_build_nocache_s"]
            print(f"{row['image']}: wheels {row['wheel_download_s']:.1f} s, docker build --no-cache "
                  f"{row['docker_build_nocache_s']:.1f} s, {row['size_mb']:,.0f} MB, "
                  f"untagged images left: {row['left_dangling']}")
    with tempfile.TemporaryDirectory(prefix="lodevem-first-run-") as tmp:
        report["demo_steps"] = demo_steps(Path(tmp), args.tier, args.quick)
    for name, seconds in report["demo_steps"]:
        total += seconds
        print(f"{name:<40}{seconds:8.1f} s")
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
