"""An image's build context: the base image, the wheels downloaded on the host, lodevem's own
sources, and the digest that says whether an image is current.

Why apart from the build (``image``): preparing a context is file work on the host (pip
download, copying the worker and the zoo) that a test or a benchmark can do and time without a
Docker engine; only ``image.build_image`` talks to the engine's build API.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..errors import BackendUnavailable, LodevemError
from ..wire.protocol import worker_source_files
from .image_specs import BASE_IMAGE, BENCH, DEFAULT_DEBIAN_MIRROR, IMAGE_REQUIREMENTS, IMAGES, GuestWheels, ImageSpec

Progress = Callable[[str], None]

# The image's python is Debian bookworm's 3.11 on glibc 2.36: accept any manylinux up to that.
_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)] + ["manylinux2014_x86_64"]


def say(progress: Optional[Progress], line: str) -> None:
    if progress is not None and line.strip():
        progress(line.rstrip())


def build_dir() -> Path:
    """``$XDG_CACHE_HOME/lodevem/build`` (``store.user_cache_dir``): wheels and context survive
    between builds."""
    from ..store import user_cache_dir

    return user_cache_dir() / "build"


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
    say(progress, f"base image {BASE_IMAGE} missing: trying docker pull")
    try:
        repo, tag = BASE_IMAGE.split(":")
        client.images.pull(repo, tag=tag)
        return "pulled"
    except Exception as exc:  # no registry: DNS/connection errors arrive as APIError
        say(progress, f"pull failed ({str(exc).splitlines()[0][:120]}); building it with debootstrap")
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
        say(progress, "$ " + " ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-5:]
            say(progress, line)
        if proc.wait() != 0:
            raise LodevemError(f"debootstrap failed (exit {proc.returncode}): {tail[-1] if tail else 'no output'}")
        # The apt caches are ~80 MB the image never needs (the Dockerfile runs apt-get update).
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / sub).glob("*"):
                if entry.is_file():
                    entry.unlink()
        say(progress, f"importing the root fs as {BASE_IMAGE}")
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
        say(progress, f"wheels cached in {dest}")
        return
    cmd = [sys.executable, "-m", "pip", "download", "--dest", str(dest), "--only-binary=:all:",
           "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
    for platform in (guest.platforms if guest is not None else _PLATFORMS):
        cmd += ["--platform", platform]
    cmd += list(requirements_list) + (["--no-deps"] if guest is not None else ["pip"])
    say(progress, "$ pip download " + " ".join(requirements_list))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(("Saved", "File was already")):
            say(progress, line)
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
    if not (here / "worker" / "__main__.py").is_file():
        raise LodevemError(f"{here / 'worker'}: the worker package is missing")
    for file in worker_source_files(here):  # exactly what the worker version digests
        target = pkg / file.relative_to(here)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)
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
    say(progress, f"{spec.name}: {len(own)} wheels of its own on top of {base.tag} ({len(shared)} shared)")


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
