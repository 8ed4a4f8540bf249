"""Collecting a run's manifest: the code, packages, host and engine that produced its numbers.

Why apart from the records (``manifest``): reading a manifest back (the paper kit, the HTML
report, ``--resume``) must not probe the machine it is read on; only a new run collects, here.
Every probe is cheap and bounded: versions come from ``importlib.metadata``, ``git`` and the
Docker engine are asked with short timeouts, and a probe that fails records ``None``.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

from ..profiles import Profile
from ..sandbox.base import cgroup_version, host_memory_mb
from ..version import __version__
from ..wire.registry import RUNTIMES
from .manifest import (
    BackendInfo,
    DataSetEntry,
    HostInfo,
    LodevemSource,
    Manifest,
    ProfileEntry,
    PythonInfo,
    RuntimeEntry,
)
from .run_record import RunDescription

__all__ = ["PACKAGES", "collect_manifest", "docker_server_version", "host_info", "lodevem_source",
           "package_versions", "runtime_versions"]

# Distributions whose versions change the numbers (or their provenance): lodevem's own
# dependencies, then each runtime's package and converter (the registry's).
PACKAGES = tuple(dict.fromkeys((
    "nn-meter", "onnx", "onnxsim", "docker", "pandas", "numpy", "scikit-learn", "torch-pruning", "matplotlib",
    *(spec.package for spec in RUNTIMES.values()),
    *(spec.converter.package for spec in RUNTIMES.values() if spec.converter))))
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


# --------------------------------------------------------------------------- the record


def lodevem_source() -> LodevemSource:
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
    return LodevemSource(__version__, commit, dirty, str(root / "lodevem"))


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


def host_info() -> HostInfo:
    """The machine the memory was measured on (the latency is predicted, not measured here)."""
    affinity = getattr(os, "sched_getaffinity", None)
    version = cgroup_version()
    return HostInfo(cpu_model=_cpuinfo(), cpu_count=os.cpu_count(),
                    cpu_affinity=len(affinity(0)) if affinity else None, mem_total_mb=host_memory_mb(),
                    machine=platform.machine(), kernel=platform.release(), os=_os_name(),
                    cgroup_version=f"v{version}" if version else None)


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
                     run: Optional[RunDescription] = None,
                     runtimes: Optional[Mapping[str, str]] = None,
                     images: Optional[Mapping[str, str]] = None,
                     datasets: Sequence[DataSetEntry] = ()) -> Manifest:
    """The ``environment`` block of a results file (see the module docstring for reproducing).

    ``runtimes``: each measured runtime and the identity of what measured it (image id); the
    block names the runtime's and its converter's pinned versions (``runtime_versions``).
    ``images``: tag -> id of every image the run used (measurement and converter images).
    ``datasets``: the data sets the run read (``DataSetEntry.of`` an ``accuracy.data.EvalData``).

    ``models`` are dicts with at least ``label``, ``path`` and ``sha256``; ``run`` describes the
    run itself (its options, settings, predictor and data; ``report.run_record``), the JSON's ``extra``.
    The Docker engine is asked for its version only for the docker backend.
    """
    now = datetime.now(timezone.utc).replace(microsecond=0)
    return Manifest(
        created_utc=now.isoformat().replace("+00:00", "Z"),
        command_line=tuple(str(a) for a in command_line),
        working_directory=os.getcwd(),
        lodevem=lodevem_source(),
        python=PythonInfo(platform.python_version(), platform.python_implementation(), sys.executable),
        packages=package_versions(),
        host=host_info(),
        backend=BackendInfo(backend, image_id, dict(images or {}),
                            docker_server_version() if backend == "docker" else None),
        profiles=tuple(ProfileEntry(p.id, p.tier, p.ram_mb, str(p.path) if p.path else None, p.sha256)
                       for p in profiles),
        models=tuple(dict(m) for m in models),
        runtimes={name: RuntimeEntry(**runtime_versions(name), measured_in=identity)
                  for name, identity in (runtimes or {}).items()},
        run=run if run is not None else RunDescription(),
        datasets=tuple(datasets),
    )
