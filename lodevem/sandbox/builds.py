"""Building several of lodevem's images at once (``lodevem build-image``, ``make image``).

Why in parallel: an image build is mostly one process unpacking wheels and the engine hashing
the layers it committed, so on a 2-core machine a second build runs almost for free beside the
first. The images are independent except a layered one (``ImageSpec.layered_on``: the converter
on the benchmark image), which starts when its base is built; the longest chain (bench, then
convert) is started first, and the small images fill the other slot meanwhile. ``jobs=1`` builds
them one after another, in ``specs_for_runtimes`` order, as before.

Which images need a build (``plan_builds``) is decided before any starts: missing, built from
another recipe (``image_is_current``), ``--force``, or layered on a base rebuilt here.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from .image import (
    DEFAULT_DEBIAN_MIRROR,
    ImageInfo,
    ImageSpec,
    build_image,
    docker_client,
    ensure_base_image,
    image_is_current,
    image_status,
)

__all__ = ["BuildPlan", "Built", "build_images", "plan_builds"]


@dataclass(frozen=True)
class BuildPlan:
    """What ``build-image`` will do: the images to build, each with why, and those already built."""

    to_build: tuple[tuple[ImageSpec, str], ...]  # (spec, why it is built: a few words)
    present: tuple[tuple[ImageSpec, str], ...]  # (spec, short image id)


@dataclass(frozen=True)
class Built:
    """One finished build, as ``build_images`` reports it when it ends."""

    spec: ImageSpec
    info: ImageInfo


def plan_builds(specs: Sequence[ImageSpec], force: bool = False) -> BuildPlan:
    """Which of ``specs`` need a build, and why (read from the engine and the build contexts)."""
    to_build: list[tuple[ImageSpec, str]] = []
    present: list[tuple[ImageSpec, str]] = []
    rebuilt: set[str] = set()
    for spec in specs:  # specs_for_runtimes order: a base before what is layered on it
        status = image_status(spec=spec)
        if force:
            why = "--force"
        elif spec.layered_on is not None and spec.layered_on in rebuilt:
            why = f"layered on {spec.layered_on}, which is rebuilt"
        elif not status.present:
            why = "not built yet"
        elif not image_is_current(spec):
            why = "built from another recipe (Dockerfile, pins or sources changed)"
        else:
            present.append((spec, status.short_id))
            continue
        to_build.append((spec, why))
        rebuilt.add(spec.name)
    return BuildPlan(tuple(to_build), tuple(present))


def _chain_length(spec: ImageSpec, specs: Sequence[ImageSpec]) -> int:
    """How many builds wait on ``spec`` (itself included): the longest chains start first."""
    return 1 + sum(_chain_length(other, specs) for other in specs if other.layered_on == spec.name)


def build_images(specs: Sequence[ImageSpec], jobs: int = 2, debian_mirror: str = DEFAULT_DEBIAN_MIRROR,
                 on_line: Optional[Callable[[ImageSpec, str], None]] = None,
                 on_built: Optional[Callable[[Built], None]] = None) -> list[Built]:
    """Build ``specs`` (``plan_builds``' ``to_build``), up to ``jobs`` at once, a layered image
    after its base; ``on_line`` gets each build's log lines, ``on_built`` each image as it ends.
    The first failure is raised once the builds already running have ended (none starts after
    it); the images built before it stay built."""
    pending = sorted(specs, key=lambda s: -_chain_length(s, specs))
    names = {s.name for s in specs}
    client = docker_client(timeout=600)
    try:  # once, before any build: two builds must not both debootstrap the missing base image
        ensure_base_image(client, (lambda line: on_line(pending[0], line)) if on_line and pending else None,
                          debian_mirror)
    finally:
        client.close()
    done: list[Built] = []
    finished: set[str] = set()
    lock = threading.Lock()
    failure: Optional[Exception] = None

    def one(spec: ImageSpec) -> Built:
        progress = (lambda line: on_line(spec, line)) if on_line else None
        built = Built(spec, build_image(progress, debian_mirror=debian_mirror, spec=spec))
        with lock:
            if on_built:
                on_built(built)
        return built

    running: dict[Future[Built], ImageSpec] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="build-image") as pool:
        while pending or running:
            ready = [s for s in pending if s.layered_on is None or s.layered_on not in names
                     or s.layered_on in finished]
            while failure is None and ready and len(running) < max(1, jobs):
                spec = ready.pop(0)
                pending.remove(spec)
                running[pool.submit(one, spec)] = spec
            if not running:
                break  # a failure stopped the rest, or a layered image's base failed
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ended:
                spec = running.pop(future)
                try:
                    done.append(future.result())
                    finished.add(spec.name)
                except Exception as exc:  # re-raised below, once the running builds have ended
                    failure = failure or exc
    if failure is not None:
        raise failure
    return done
