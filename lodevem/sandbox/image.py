"""Build lodevem's images (``lodevem-bench:<version>`` and one per on-device runtime) on machines
with or without a registry.

Images (``IMAGES``): ``bench`` (torch + onnxruntime: inspect, ONNX export, derive, and the torch
and onnxruntime measurements), ``litert`` and ``ncnn`` (python3 + numpy + that runtime only, so
a tflite/ncnn measurement's baseline is that runtime's, as in an app that ships it) and
``convert`` (litert-torch + pnnx on top of the bench image's torch: built on demand, only for
the conversions, never measured). All are built from the same ``Dockerfile``; the context differs
by its wheels. ``convert`` is layered on ``bench`` (``ImageSpec.layered_on``): built FROM it with
only the wheels bench lacks, so torch (~1.1 GB installed) is downloaded, installed and stored once
and a first run that measures under tflite pays for the converters' own packages only.

Why it is done this way (see ``Dockerfile``): build containers here can reach Debian's apt over
HTTP but pip cannot reach the index (TLS interception), and no container registry is reachable.
So the wheels are resolved and downloaded on the HOST into the build context (cached under
``~/.cache/lodevem/build`` so a rebuild costs seconds), the base image ``debian:bookworm`` is
pulled when a registry answers and otherwise made offline with debootstrap + ``docker import``
under the same name, and the build goes through docker-py's low-level API (legacy builder: the
CLI has no buildx) with ``forcerm`` so a failed step leaves no container behind.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from ..errors import BackendUnavailable, LodevemError
from .image_context import (  # noqa: F401  (re-exported: callers build contexts through this face)
    Progress,
    build_dir,
    context_digest,
    context_dir,
    download_wheels,
    ensure_base_image,
    layer_buildargs,
    layer_wheels,
    prepare_context,
    say,
)
from .image_specs import (  # noqa: F401  (the catalogue, re-exported: callers import it from here)
    ARMSIM,
    ARMSIM_ACTION,
    BASE_IMAGE,
    BENCH,
    CONVERT,
    CONVERT_REQUIREMENTS,
    CONVERTERS,
    DEFAULT_DEBIAN_MIRROR,
    IMAGE_REPO,
    IMAGE_REQUIREMENTS,
    IMAGE_TAG,
    IMAGES,
    RUNTIME_IMAGES,
    RUNTIME_OWN_IMAGES,
    TORCH_PIN,
    GuestWheels,
    ImageSpec,
    image_targets,
    spec_for,
    specs_for_runtimes,
)


@dataclass(frozen=True)
class ImageInfo:
    """The built (or already present) benchmark image."""

    tag: str
    id: str
    size_mb: float
    build_s: float
    base_source: str  # "present" | "pulled" | "debootstrap"

    @property
    def short_id(self) -> str:
        return self.id.removeprefix("sha256:")[:12]


class ImageStatus(NamedTuple):
    """Unpacks as ``(present, tag, id)``; attributes for ``lodevem check``."""

    present: bool
    tag: str
    id: Optional[str]

    @property
    def short_id(self) -> str:
        return (self.id or "").removeprefix("sha256:")[:12]


def docker_client(timeout: int = 120):  # -> docker.DockerClient
    """A docker-py client that answered ``ping``; one-line BackendUnavailable otherwise."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as exc:  # docker-py raises several unrelated types for "no daemon"
        where = (f"DOCKER_HOST={os.environ['DOCKER_HOST']}" if os.environ.get("DOCKER_HOST")
                 else "unix:///var/run/docker.sock (DOCKER_HOST is not set)")
        raise BackendUnavailable(
            f"no Docker daemon reachable at {where} ({type(exc).__name__}); start it with "
            "`sudo scripts/setup-docker.sh` (or `dockerd >/tmp/dockerd.log 2>&1 &`)"
        ) from None


def image_status(client: Any = None, spec: Optional[ImageSpec] = None) -> ImageStatus:
    """``(present, tag, image id or None)`` of ``spec`` (default: the bench image) for ``lodevem
    check``; raises BackendUnavailable. ``client``: a docker-py client to reuse, else one is
    opened (and closed)."""
    import docker.errors

    tag = (spec or BENCH).tag
    own = client is None
    client = client or docker_client(timeout=10)
    try:
        return ImageStatus(True, tag, client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return ImageStatus(False, tag, None)
    finally:
        if own:
            client.close()


RECIPE_LABEL = "lodevem.recipe"


def image_is_current(spec: ImageSpec, progress: Optional[Progress] = None) -> bool:
    """Whether the image of ``spec`` was built from today's recipe: its Dockerfile, pinned wheels,
    sources and guest files (``context_digest(recipe_only=True)``, kept in its ``lodevem.recipe``
    label). An image built before a Dockerfile or pin changed (the converter's ncnn tools,
    armsim's LLVM) is stale, and ``build-image`` rebuilds it without ``--force``; a changed
    worker alone is not (it is bind-mounted at run time)."""
    import docker.errors

    client = docker_client(timeout=10)
    try:
        labels = client.images.get(spec.tag).labels or {}
    except docker.errors.ImageNotFound:
        return False
    finally:
        client.close()
    return labels.get(RECIPE_LABEL) == context_digest(prepare_context(progress, spec), recipe_only=True)


# The legacy builder prints each step's resulting image as " ---> 0123456789ab".
_STEP_ID = re.compile(r"^ ---> ([0-9a-f]{12})$", re.MULTILINE)


def _remove_stage_images(client: Any, final_id: str, step_ids: list[str]) -> None:
    """Remove the build-stage images this build left untagged (the ``deps`` stage: the wheels
    plus the installed packages, 0.4-3 GB per image), so a build leaves no dangling images.

    Only images this build's own log names are candidates, never the final image's ancestors
    (its layer cache), never a tagged image, and nothing another build or container still uses
    (the engine refuses those and they are left). The price: a forced rebuild re-runs the deps
    stage's pip install from the cached wheels instead of reusing that layer."""
    import docker.errors

    try:
        kept = {entry.get("Id", "") for entry in client.api.history(final_id)}
    except docker.errors.APIError:
        return
    kept_short = {k.removeprefix("sha256:")[:12] for k in kept}
    for short in reversed(list(dict.fromkeys(step_ids))):  # the stage's top first, then its parents
        if short in kept_short:
            continue
        try:
            found = client.images.get(short)
            if found.tags or found.id == final_id:
                continue
            client.images.remove(found.id, noprune=False)
        except (docker.errors.ImageNotFound, docker.errors.APIError):
            continue  # already gone with its child, or in use: leave it


def build_image(progress_callback: Optional[Progress] = None,
                debian_mirror: str = DEFAULT_DEBIAN_MIRROR, spec: Optional[ImageSpec] = None, *,
                tag: Optional[str] = None, nocache: bool = False, base_tag: Optional[str] = None) -> ImageInfo:
    """Ensure the base image, download wheels, build ``spec``'s image (default: the bench image);
    stream the log to the callback. ``tag`` (default ``spec.tag``) and ``nocache`` (every layer
    rebuilt, as on a fresh machine) are for timing builds (benchmarks/runtime_memory.py).
    ``debian_mirror`` is used only when the base image has to be made with debootstrap.
    A layered image (``spec.layered_on``) is built FROM that image (``base_tag``, default its
    tag), which must be built first (``specs_for_runtimes`` orders them so).

    Always builds (the layer cache makes an unchanged rebuild take seconds): that is what picks up
    a changed worker or Dockerfile.
    """
    started = time.monotonic()
    client = docker_client(timeout=600)
    base_source = ensure_base_image(client, progress_callback, debian_mirror)
    spec = spec or BENCH
    tag = tag or spec.tag
    if spec.layered_on is not None:
        base_spec = IMAGES[spec.layered_on]
        wanted = base_tag or base_spec.tag
        if image_status(client, base_spec).id is None and wanted == base_spec.tag:
            raise BackendUnavailable(f"{spec.tag} is built on {wanted}, which is not built: "
                                     f"`lodevem build-image --runtime torch` first")
    ctx = prepare_context(progress_callback, spec)
    previous = image_status(client, spec).id if tag == spec.tag else None
    say(progress_callback, f"building {tag} from {ctx}")
    image_id: Optional[str] = None
    tail: list[str] = []
    step_ids: list[str] = []  # every image a step of this build produced or reused (" ---> <id>")
    stream = client.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, pull=False,
                              nocache=nocache, decode=True,
                              labels={"lodevem.context": context_digest(ctx),
                                      RECIPE_LABEL: context_digest(ctx, recipe_only=True)},
                              buildargs={"IMAGE_TITLE": spec.repo, "IMAGE_DESCRIPTION": spec.description,
                                         **layer_buildargs(spec, base_tag)})
    for chunk in stream:
        if "error" in chunk:
            raise LodevemError(f"image build failed: {str(chunk['error']).strip().splitlines()[-1]} "
                               f"(last lines: {' | '.join(tail[-3:])})")
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            tail = (tail + [text])[-20:]
            say(progress_callback, text)
            step_ids += _STEP_ID.findall(text)
        image_id = (chunk.get("aux") or {}).get("ID", image_id)
    image = client.images.get(tag)
    _remove_stage_images(client, image.id, step_ids)
    if image_id is not None and image.id != image_id:
        raise LodevemError(f"image build finished but {tag} is {image.id}, not the built {image_id}")
    if previous is not None and previous != image.id:
        try:  # the superseded build, now untagged: its unique layers are ~1 MB, but it clutters `docker images`
            client.images.remove(previous, noprune=False)
        except Exception:  # still used by a container, or shares a tag: leave it
            pass
    return ImageInfo(tag=tag, id=image.id, size_mb=round(image.attrs.get("Size", 0) / 2**20, 1),
                     build_s=round(time.monotonic() - started, 1), base_source=base_source)
