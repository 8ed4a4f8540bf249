"""``lodevem build-image``: build the images some runtimes need, skipping the ones that are current.

Why apart from ``image`` (which knows how to build one image): the rule for a set of images is
the command's promise: an image whose recipe (Dockerfile, pins, sources) is unchanged is kept
unless ``--force``; one built from another recipe is rebuilt; an image layered on the benchmark
image is rebuilt when that base was rebuilt in this call. What happens is told to ``events`` (the
terminal), since a build takes minutes and its log is the only sign of life.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager, Protocol, Sequence

from .image import DEFAULT_DEBIAN_MIRROR, ImageInfo, ImageStatus, build_image, image_is_current, image_status
from .image import specs_for_runtimes as _specs


class ImageEvents(Protocol):
    """What ``build_images`` reports while it works (``report.terminal.Terminal`` implements it)."""

    def image_kept(self, status: ImageStatus) -> None:
        """``status``'s image is present and current: not rebuilt."""

    def image_stale(self, status: ImageStatus) -> None:
        """``status``'s image was built from another recipe: it is rebuilt now."""

    def image_building(self, tag: str) -> ContextManager[Callable[[str], Any]]:
        """While ``tag`` builds: the callable takes each line of the build log."""

    def image_built(self, info: ImageInfo) -> None:
        """``info``'s image is built."""


def build_images(runtimes: Sequence[str], events: ImageEvents, *, force: bool = False,
                 debian_mirror: str = DEFAULT_DEBIAN_MIRROR) -> list[ImageInfo]:
    """Build the images ``runtimes`` need (``image.specs_for_runtimes``, bench first); return the
    images built (the kept ones are only reported)."""
    built: list[ImageInfo] = []
    bench_rebuilt = False
    for spec in _specs(tuple(runtimes)):
        status = image_status(spec=spec)
        layered_on_new = spec.layered_on is not None and bench_rebuilt  # rebuilt on a base rebuilt just now
        if status.present and not force and not layered_on_new and image_is_current(spec):
            events.image_kept(status)
            continue
        if status.present and not force:
            events.image_stale(status)
        bench_rebuilt = bench_rebuilt or spec.name == "bench"
        with events.image_building(spec.tag) as log_line:
            info = build_image(log_line, debian_mirror=debian_mirror, spec=spec)
        events.image_built(info)
        built.append(info)
    return built
