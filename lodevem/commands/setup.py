"""Getting ready and looking around: ``list``, ``check``, ``build-image``, ``fetch-predictors``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..sandbox.image import DEFAULT_DEBIAN_MIRROR
from ..wire.registry import DEFAULT_LATENCY_RUNTIME
from . import TERMINAL, finish
from .options import nnmeter_data_option, profiles_dir_option, runtime_option, tier_choice


@click.command("list")
@click.option("--tier", "tiers", multiple=True, type=tier_choice, help="Only this tier (repeatable).")
@profiles_dir_option
def list_cmd(tiers: tuple[str, ...], profiles_dirs: tuple[Path, ...]) -> None:
    """List the device profiles.

    Example:

        lodevem list --tier tier3
    """
    from ..profiles import choose_profiles

    TERMINAL.profiles(choose_profiles(profiles_dirs, tiers=tiers))


@click.command()
# Not backend_option: this chooses which readiness checks are required, it runs no model.
@click.option(
    "--backend",
    type=click.Choice(["docker", "process"]),
    default="docker",
    show_default=True,
    help="The backend start will run with, which decides what must be ready: with process, "
    "the Docker daemon and image are reported but not required.",
)
def check(backend: str) -> None:
    """Check that what `start` needs is ready: Docker, cgroups, nn-Meter, torch.

    Exits 0 only when everything required is ready; each ✗ comes with a hint. The Docker
    daemon is the one $DOCKER_HOST names (default: the local socket); nn-Meter's data is looked
    for where `start` looks: $LODEVEM_NNMETER_DATA, else nn-Meter's configured folder.

    Example:

        lodevem check
    """
    from ..doctor import readiness

    found = readiness(backend)
    TERMINAL.checks(found)
    finish(found)


@click.command("build-image")
@runtime_option
@click.option("--force", is_flag=True,
              help="Rebuild even when the image exists and its recipe (Dockerfile, pins, sources) is unchanged.")
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(1, 8), metavar="N",
              help="Images built at once (a layered image waits for its base); 1 builds them one by one.")
@click.option("--debian-mirror", default=DEFAULT_DEBIAN_MIRROR, show_default=True, metavar="URL",
              envvar="LODEVEM_DEBIAN_MIRROR", show_envvar=True,
              help="Debian mirror debootstrap uses when no registry answers and the debian:bookworm "
              "base image is made offline (it then also serves the image's apt-get).")
def build_image_cmd(runtimes: tuple[str, ...], force: bool, jobs: int, debian_mirror: str) -> None:
    """Build the Docker images the measurements of --runtime run in (offline base image if needed).

    Default: the images `start` needs without --runtime (tflite).
    Always the benchmark image (torch + onnxruntime: exports, derivations); tflite adds
    lodevem-litert (LiteRT only) and the converter image lodevem-convert (litert-torch and pnnx
    layered on the benchmark image's torch: ~1.3 GB of its own), ncnn adds lodevem-ncnn and the
    converter image, armsim the emulated-Arm-core
    profiler lodevem-armsim (qemu-user + arm64/armhf LiteRT and ncnn) and the converter image. The Python wheels and the
    build contexts are cached in $XDG_CACHE_HOME/lodevem/build (default ~/.cache/lodevem/build),
    so an unchanged rebuild takes seconds. Independent images are built --jobs at a time.

    Example:

        lodevem build-image --runtime torch,tflite,ncnn
    """
    from ..sandbox.rebuild import build_images

    build_images(runtimes or (DEFAULT_LATENCY_RUNTIME,), TERMINAL, force=force, debian_mirror=debian_mirror, jobs=jobs)


@click.command("fetch-predictors")
@click.option("--name", default="cortexA76cpu_tflite21", show_default=True,
              help="nn-Meter predictor to download.")
@nnmeter_data_option
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=click.FloatRange(1),
              help="Seconds allowed for the whole download (connecting, every read, the transfer); "
              "unlike start's --timeout, not per measurement.")
def fetch_predictors_cmd(name: str, nnmeter_data: Optional[Path], timeout_s: float) -> None:
    """Download nn-Meter's published predictor data (the only command that downloads).

    `start` never downloads; without this data it uses lodevem's offline estimator.

    Example:

        lodevem fetch-predictors --nnmeter-data ~/nnmeter-data
    """
    from ..latency.nnmeter import fetch_predictors

    with TERMINAL.status(f"downloading nn-Meter predictor {name}", on_stdout=True):
        folder = fetch_predictors(name, nnmeter_data, timeout_s)
    TERMINAL.fetched(name, folder)
