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

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

from ..errors import BackendUnavailable, LodevemError
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
    LITERT,
    LITERT_PIN,
    LITERT_REQUIREMENTS,
    NCNN,
    NCNN_PIN,
    NCNN_REQUIREMENTS,
    NUMPY_PIN,
    RUNTIME_IMAGES,
    TORCH_PIN,
    GuestWheels,
    ImageSpec,
    image_targets,
    spec_for,
    specs_for_runtimes,
)

Progress = Callable[[str], None]


# The image's python is Debian bookworm's 3.11 on glibc 2.36: accept any manylinux up to that.
_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)] + ["manylinux2014_x86_64"]
_WORKER_FILES = ("__init__.py", "version.py")  # plus the worker/ package (_WORKER_PACKAGE) and the zoo, copied whole
_WORKER_PACKAGE = "worker"
_WORKER_PACKAGES = (_WORKER_PACKAGE, "zoo")  # the zoo: `--arch zoo:NAME` builds one in the sandbox


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


def _say(progress: Optional[Progress], line: str) -> None:
    if progress is not None and line.strip():
        progress(line.rstrip())


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


def build_dir() -> Path:
    """``$XDG_CACHE_HOME/lodevem/build`` (``store.user_cache_dir``): wheels and context survive
    between builds."""
    from ..store import user_cache_dir

    return user_cache_dir() / "build"


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


def ensure_base_image(client, progress: Optional[Progress] = None,
                      debian_mirror: str = DEFAULT_DEBIAN_MIRROR) -> str:
    """Make ``debian:bookworm`` exist: already there, pulled, or debootstrapped offline from
    ``debian_mirror``."""
    import docker.errors

    try:
        client.images.get(BASE_IMAGE)
        return "present"
    except docker.errors.ImageNotFound:
        pass
    _say(progress, f"base image {BASE_IMAGE} missing: trying docker pull")
    try:
        repo, tag = BASE_IMAGE.split(":")
        client.images.pull(repo, tag=tag)
        return "pulled"
    except Exception as exc:  # no registry: DNS/connection errors arrive as APIError
        _say(progress, f"pull failed ({str(exc).splitlines()[0][:120]}); building it with debootstrap")
    _debootstrap_import(client, progress, debian_mirror)
    return "debootstrap"


def _debootstrap_import(client, progress: Optional[Progress], debian_mirror: str) -> None:
    if shutil.which("debootstrap") is None:
        raise BackendUnavailable(
            f"cannot pull {BASE_IMAGE} and debootstrap is not installed: `apt-get install -y debootstrap` "
            "(or run scripts/setup-docker.sh)"
        )
    if os.geteuid() != 0:
        raise BackendUnavailable(f"building {BASE_IMAGE} with debootstrap needs root: run `sudo lodevem build-image`")
    build_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=build_dir()) as tmp:
        rootfs, tar_path = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        cmd = ["debootstrap", "--variant=minbase", "bookworm", str(rootfs), debian_mirror]
        _say(progress, "$ " + " ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-5:]
            _say(progress, line)
        if proc.wait() != 0:
            raise LodevemError(f"debootstrap failed (exit {proc.returncode}): {tail[-1] if tail else 'no output'}")
        # The apt caches are ~80 MB the image never needs (the Dockerfile runs apt-get update).
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / sub).glob("*"):
                if entry.is_file():
                    entry.unlink()
        _say(progress, f"importing the root fs as {BASE_IMAGE}")
        with tarfile.open(tar_path, "w") as tar:
            tar.add(rootfs, arcname=".")
        repo, tag = BASE_IMAGE.split(":")
        client.api.import_image_from_file(str(tar_path), repository=repo, tag=tag)


def download_wheels(dest: Path, progress: Optional[Progress] = None,
                    requirements_list: tuple[str, ...] = IMAGE_REQUIREMENTS,
                    guest: Optional[GuestWheels] = None) -> None:
    """Resolve ``requirements_list`` for cp311/manylinux on the host; skipped when already done.
    ``guest``: an Arm guest's wheel set instead (its platforms, exactly its list: no deps, no pip)."""
    dest.mkdir(parents=True, exist_ok=True)
    if guest is not None:
        requirements_list = guest.requirements
    requirements = "\n".join(requirements_list) + "\n"  # pip itself is downloaded, not installed
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text() == requirements and (dest / "requirements.txt").exists():
        _say(progress, f"wheels cached in {dest}")
        return
    cmd = [sys.executable, "-m", "pip", "download", "--dest", str(dest), "--only-binary=:all:",
           "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
    for platform in (guest.platforms if guest is not None else _PLATFORMS):
        cmd += ["--platform", platform]
    cmd += list(requirements_list) + (["--no-deps"] if guest is not None else ["pip"])
    _say(progress, "$ pip download " + " ".join(requirements_list))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(("Saved", "File was already")):
            _say(progress, line)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise LodevemError(f"pip download of the image's wheels failed: {last}")
    (dest / "requirements.txt").write_text(requirements)
    stamp.write_text(requirements)


def prepare_context(progress: Optional[Progress] = None, spec: Optional[ImageSpec] = None) -> Path:
    """The build context of ``spec`` (default bench): Dockerfile, wheels/ (cached) and the worker."""
    spec = spec or BENCH
    repo_dockerfile = Path(__file__).resolve().parent.parent.parent / spec.dockerfile
    if not repo_dockerfile.is_file():
        raise LodevemError(f"{repo_dockerfile}: Dockerfile not found; build the image from a lodevem checkout")
    ctx = context_dir(spec)
    if spec.layered_on is None:
        download_wheels(ctx / "wheels", progress, spec.requirements)
    else:
        layer_wheels(spec, ctx / "wheels", progress)
    for guest in spec.guest_wheels:
        download_wheels(ctx / guest.subdir, progress, guest=guest)
    shutil.copy2(repo_dockerfile, ctx / "Dockerfile")
    pkg = ctx / "lodevem"
    shutil.rmtree(pkg, ignore_errors=True)
    pkg.mkdir()
    here = Path(__file__).resolve().parent.parent  # the lodevem package
    worker = here / _WORKER_PACKAGE
    if not (worker / "__main__.py").is_file():
        raise LodevemError(f"{worker}: the worker package is missing")
    for name in _WORKER_FILES:
        if (here / name).is_file():
            shutil.copy2(here / name, pkg / name)
    for package in _WORKER_PACKAGES:
        shutil.copytree(here / package, pkg / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for source in spec.extra_sources:
        target = ctx / Path(source).name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(here / source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return ctx


def context_dir(spec: ImageSpec) -> Path:
    """Where ``spec``'s build context lives (its wheels cached between builds)."""
    return build_dir() / ("context" if spec is BENCH else f"context-{spec.name}")


def layer_wheels(spec: ImageSpec, dest: Path, progress: Optional[Progress] = None) -> None:
    """``dest`` holds the wheels of ``spec`` that its ``layered_on`` image lacks (plus pip to run),
    and a requirements.txt naming exactly those files, installed ``--no-deps`` on top of it.

    Why by file name: both sets are resolved by the same pip for the same platform, so a wheel
    file both need is the same version; one the layer needs in another version is kept and
    shadows the base's (``DEPS_DIR`` comes first on ``PYTHONPATH``)."""
    assert spec.layered_on is not None
    base = IMAGES[spec.layered_on]
    full = build_dir() / f"wheels-{spec.name}"  # the full resolution, cached
    download_wheels(full, progress, spec.requirements)
    base_wheels = context_dir(base) / "wheels"
    download_wheels(base_wheels, progress, base.requirements)  # cached when the base was built here
    shared = {p.name for p in base_wheels.glob("*.whl")}
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.iterdir():
        old.unlink()
    own = []
    for wheel in sorted(full.glob("*.whl")):
        if wheel.name in shared and not wheel.name.startswith("pip-"):
            continue
        try:
            os.link(wheel, dest / wheel.name)
        except OSError:
            shutil.copy2(wheel, dest / wheel.name)
        if not wheel.name.startswith("pip-"):
            own.append(f"/wheels/{wheel.name}")
    (dest / "requirements.txt").write_text("\n".join(own) + "\n")
    _say(progress, f"{spec.name}: {len(own)} wheels of its own on top of {base.tag} ({len(shared)} shared)")


def layer_buildargs(spec: ImageSpec, base_tag: Optional[str] = None) -> dict[str, str]:
    """The Dockerfile's build args that layer ``spec`` on its base image (none for a plain one)."""
    if spec.layered_on is None:
        return {}
    return {"BASE_IMAGE": base_tag or IMAGES[spec.layered_on].tag, "DEPS_DIR": "/opt/pylayer",
            "PIP_DEPS": "--no-deps"}


def context_digest(ctx: Path, *, recipe_only: bool = False) -> str:
    """sha256 over the context's small files (not the wheels): for logs and image labels.
    ``recipe_only``: without the baked worker (``lodevem/``), which every run bind-mounts from
    the host anyway: what decides whether an image is stale (``image_is_current``)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in ctx.rglob("*") if p.is_file() and p.suffix != ".whl"):
        rel = path.relative_to(ctx).as_posix()
        if recipe_only and rel.startswith("lodevem/"):
            continue
        digest.update(rel.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


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
    _say(progress_callback, f"building {tag} from {ctx}")
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
            _say(progress_callback, text)
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
