"""The run manifest: everything needed to say where a results file came from and to redo it.

Stored as the ``environment`` block of ``benchmark_results.json``. Collecting it is cheap and
side-effect free: package versions come from ``importlib.metadata`` (nothing heavy is imported),
``git`` and the Docker engine are asked with short timeouts, and every probe that fails records
``None`` instead of raising, because a missing fact must never cost the user their results.

How to reproduce a run from a manifest:

1. Check out ``lodevem.git_commit`` (``git_dirty: true`` means the tree had local edits, so the
   commit alone is not the code that ran) and install the ``packages`` versions listed, on a
   host of the same ``host.cgroup_version``; predicted latencies depend only on the code, the
   model and the profiles, peak RAM also on the runtime in the image.
2. Rebuild or load the benchmark image and compare its id with ``backend.image_id``.
3. Check the inputs against their hashes: ``sha256sum`` each model (``models[].sha256``) and
   each profile YAML (``profiles[].sha256``; custom profiles are listed with their path).
4. Run ``command`` (the exact command line, shell-quoted) from the same working directory.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

from .. import __version__
from ..profiles import Profile
from ..sandbox.base import cgroup_version, host_memory_mb
from ..worker.registry import RUNTIMES

MANIFEST_VERSION = 1
# Distributions whose versions change the numbers (or their provenance).
PACKAGES = ("torch", "nn-meter", "onnx", "onnxsim", "onnxruntime", "docker", "pandas", "numpy",
            "scikit-learn", "torch-pruning", "matplotlib", "ai-edge-litert", "ncnn", "pnnx", "litert-torch")
_PROBE_TIMEOUT_S = 2.0


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, Optional[str]]:
    """Installed version of each distribution, None when absent (no module is imported)."""
    versions: dict[str, Optional[str]] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _git(args: Sequence[str], cwd: Path) -> Optional[str]:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def lodevem_source() -> dict[str, Any]:
    """Version and git commit of the lodevem code that ran.

    The commit is recorded only when the package's parent folder is itself a git checkout (an
    editable install): a wheel installed into some other project's repository must not report
    that project's commit as lodevem's.
    """
    root = Path(__file__).resolve().parent.parent.parent
    commit = dirty = None
    if (root / ".git").exists():
        commit = _git(["rev-parse", "HEAD"], root)
        status = _git(["status", "--porcelain", "--untracked-files=no"], root) if commit else None
        dirty = None if status is None else bool(status)
    return {"version": __version__, "git_commit": commit, "git_dirty": dirty,
            "source": str(root / "lodevem")}


def docker_server_version(timeout: float = _PROBE_TIMEOUT_S) -> Optional[str]:
    """The Docker engine's version, or None when docker-py or the engine is not reachable quickly.
    The local socket is asked directly (no docker-py import); another DOCKER_HOST via docker-py."""
    from ..sandbox.engine import EngineAPI

    engine = EngineAPI.from_env(timeout=timeout)
    if engine is not None:
        try:
            return engine.version()
        except OSError:
            return None
    try:
        import docker
    except ImportError:
        return None
    client = None
    try:
        client = docker.from_env(timeout=timeout)
        return str(client.version().get("Version")) or None
    except Exception:  # docker-py raises several types for "no engine"; None says it all
        return None
    finally:
        if client is not None:
            client.close()


def _cpuinfo() -> Optional[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or None
    for key in ("model name", "Hardware", "Processor", "cpu model"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or None


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def host_info() -> dict[str, Any]:
    """The machine the memory was measured on (the latency is predicted, not measured here)."""
    affinity = getattr(os, "sched_getaffinity", None)
    version = cgroup_version()
    return {
        "cpu_model": _cpuinfo(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(affinity(0)) if affinity else None,
        "mem_total_mb": host_memory_mb(),
        "machine": platform.machine(),
        "kernel": platform.release(),
        "os": _os_name(),
        "cgroup_version": f"v{version}" if version else None,
    }


def runtime_versions(runtime: str) -> dict[str, Optional[str]]:
    """The runtime's package and version in its image, and its converter's (tflite, ncnn), as
    pinned in ``sandbox.image`` (the process backend runs the host's: see ``packages``)."""
    from ..sandbox.image import CONVERTERS, IMAGES, RUNTIME_IMAGES

    spec = RUNTIMES.get(runtime)
    package = spec.package if spec is not None else None
    pins = dict(r.split("==", 1) for name in RUNTIME_IMAGES.get(runtime, ()) for r in IMAGES[name].requirements)
    converter, converter_version = CONVERTERS.get(runtime, (None, None))
    return {"package": package, "version": pins.get(package or ""), "converter": converter,
            "converter_version": converter_version}


def collect_manifest(command_line: Sequence[str], profiles: Sequence[Profile],
                     models: Sequence[Mapping[str, Any]], image_id: Optional[str], backend: str,
                     extra: Optional[Mapping[str, Any]] = None,
                     runtimes: Optional[Mapping[str, str]] = None,
                     images: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """The ``environment`` block of a results file (see the module docstring for reproducing).

    ``runtimes``: each measured runtime and the identity of what measured it (image id); the
    block names the runtime's and its converter's pinned versions (``runtime_versions``).
    ``images``: tag -> id of every image the run used (measurement and converter images).

    ``models`` are dicts with at least ``label``, ``path`` and ``sha256``; ``extra`` holds the
    run's settings (warm-up, runs, threads, predictor and its data, ...) and is stored as given.
    The Docker engine is asked for its version only for the docker backend.
    """
    now = datetime.now(timezone.utc).replace(microsecond=0)
    argv = [str(a) for a in command_line]
    return {
        "manifest_version": MANIFEST_VERSION,
        "created_utc": now.isoformat().replace("+00:00", "Z"),
        "command_line": argv,
        "command": shlex.join(argv),
        "working_directory": os.getcwd(),
        "lodevem": lodevem_source(),
        "python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "packages": package_versions(),
        "host": host_info(),
        "backend": {"name": backend, "image_id": image_id, "images": dict(images or {}),
                    "docker_server_version": docker_server_version() if backend == "docker" else None},
        "profiles": [{"id": p.id, "tier": p.tier, "ram_mb": p.ram_mb,
                      "path": str(p.path) if p.path else None, "sha256": p.sha256} for p in profiles],
        "models": [dict(m) for m in models],
        "runtimes": {name: {**runtime_versions(name), "measured_in": identity}
                     for name, identity in (runtimes or {}).items()},
        "extra": dict(extra or {}),
    }
