"""``lodevem build-image``: build the images some runtimes need, skipping the ones that are current.

Why apart from ``image`` (which knows how to build one image): the rule for a set of images is
the command's promise: an image whose recipe (Dockerfile, pins, sources) is unchanged is kept
unless ``--force``; one built from another recipe is rebuilt; an image layered on the benchmark
image is rebuilt when that base was rebuilt in this call. What happens is told to ``events`` (the
terminal), since a build takes minutes and its log is the only sign of life.

Why ``jobs`` builds at once: an image build is mostly one process unpacking wheels and the engine
hashing the layers it committed, so on a 2-core machine a second build runs almost for free beside
the first (the LiteRT and ncnn images: 44 s together, 112 s one after the other, at a load of ~10).
A layered image (the converter, on the benchmark image) starts when its base is built; the longest
chain starts first and the small images fill the other slot meanwhile.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, ContextManager, Optional, Protocol, Sequence

from .image import (
    DEFAULT_DEBIAN_MIRROR,
    ImageInfo,
    ImageSpec,
    ImageStatus,
    build_image,
    docker_client,
    ensure_base_image,
    image_is_current,
    image_status,
)
from .image import specs_for_runtimes as _specs


class ImageEvents(Protocol):
    """What ``build_images`` reports while it works (``report.terminal.Terminal`` implements it)."""

    def image_kept(self, status: ImageStatus) -> None:
        """``status``'s image is present and current: not rebuilt."""

    def image_stale(self, status: ImageStatus) -> None:
        """``status``'s image was built from another recipe: it is rebuilt now."""

    def images_building(self, tags: Sequence[str]) -> ContextManager[Callable[[str, str], Any]]:
        """While ``tags`` build (some at once): the callable takes (tag, each line of its build log)."""

    def image_built(self, info: ImageInfo) -> None:
        """``info``'s image is built (called as each build ends)."""


def build_images(runtimes: Sequence[str], events: ImageEvents, *, force: bool = False,
                 debian_mirror: str = DEFAULT_DEBIAN_MIRROR, jobs: int = 2) -> list[ImageInfo]:
    """Build the images ``runtimes`` need (``image.specs_for_runtimes``, bench first), up to
    ``jobs`` at once; return the images built (the kept ones are only reported). The first
    failure is raised once the builds already running have ended (none starts after it)."""
    wanted: list[ImageSpec] = []
    rebuilt: set[str] = set()
    for spec in _specs(tuple(runtimes)):
        status = image_status(spec=spec)
        layered_on_new = spec.layered_on is not None and spec.layered_on in rebuilt  # its base is rebuilt now
        if status.present and not force and not layered_on_new and image_is_current(spec):
            events.image_kept(status)
            continue
        if status.present and not force:
            events.image_stale(status)
        wanted.append(spec)
        rebuilt.add(spec.name)
    if not wanted:
        return []
    client = docker_client(timeout=600)
    try:  # once, before any build: two builds must not both debootstrap a missing base image
        ensure_base_image(client, None, debian_mirror)
    finally:
        client.close()
    with events.images_building([s.tag for s in wanted]) as log_line:
        return _build_all(wanted, jobs, lambda spec: build_image(lambda line: log_line(spec.tag, line),
                                                                 debian_mirror=debian_mirror, spec=spec),
                          events.image_built)


def _chain_length(spec: ImageSpec, specs: Sequence[ImageSpec]) -> int:
    """How many builds wait on ``spec`` (itself included): the longest chains start first."""
    return 1 + sum(_chain_length(other, specs) for other in specs if other.layered_on == spec.name)


def _build_all(specs: Sequence[ImageSpec], jobs: int, build: Callable[[ImageSpec], ImageInfo],
               built: Callable[[ImageInfo], None]) -> list[ImageInfo]:
    """``build`` each of ``specs``, ``jobs`` at a time, a layered image after its base.

    The builds run in daemon threads: an interrupt (Ctrl-C, SIGTERM) ends the command and with it
    their connections to the engine, which then stops the builds, as it did when one build ran in
    the main thread; a pool's threads would be waited for."""
    pending = sorted(specs, key=lambda s: -_chain_length(s, specs))
    names = {s.name for s in specs}
    finished: set[str] = set()
    done: list[ImageInfo] = []
    ended: "queue.Queue[tuple[ImageSpec, Optional[ImageInfo], Optional[Exception]]]" = queue.Queue()
    failure: Optional[Exception] = None

    def one(spec: ImageSpec) -> None:
        try:
            info = build(spec)
        except Exception as exc:  # reported to the main thread, raised there
            ended.put((spec, None, exc))
            return
        ended.put((spec, info, None))

    running = 0
    while pending or running:
        ready = [s for s in pending if s.layered_on not in names or s.layered_on in finished]
        while failure is None and ready and running < max(1, jobs):
            spec = ready.pop(0)
            pending.remove(spec)
            threading.Thread(target=one, args=(spec,), name=f"build-image {spec.name}", daemon=True).start()
            running += 1
        if not running:
            break  # a failure stopped the rest (a layered image's base failed)
        spec, info, error = ended.get()
        running -= 1
        if error is not None:
            failure = failure or error
        elif info is not None:
            built(info)
            done.append(info)
            finished.add(spec.name)
    if failure is not None:
        raise failure
    return done
