"""What ``--backend slurm`` needs for a converted runtime (tflite, ncnn), decided once per runtime.

Why this split: a tflite or ncnn measurement is two steps with different needs. The conversion
(PyTorch -> ``.tflite`` / ncnn ``.param+.bin``) needs the converter (litert-torch, pnnx: torch
plus ~2 GB), the measurement only the runtime (ai-edge-litert, ncnn: tens of MB). A cluster's
nodes should not have to carry the converters, so the conversion runs once, where it can:

1. on the submitting host, in the Docker converter image (``lodevem-convert``), when the Docker
   engine answers and the image is built (the same sandbox as ``--backend docker`` converts in);
2. else as a Slurm job, when the nodes' python has the converter package;
3. else nothing is run: one line names what is missing.

The converted files land in the run's artifact store (``<output>/.cache``), which the nodes read
in place, so ``--output`` must be on the file system the nodes share (as ``--slurm-workdir``,
which defaults to ``<output>/.slurm``). The measurement then runs in the job's cgroup like every
Slurm run, with the nodes' runtime package (``pip install 'lodevem[slurm-runtimes]'``).

What the nodes run is checked with the python the jobs use (``SlurmBackend.python``) on this
host: the nodes must have the same install (the worker version check enforces the rest).
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import BackendUnavailable
from ..wire.registry import RUNTIMES
from . import image as image_mod

_VERSION_OF = ("import importlib.metadata as m, sys\n"
               "try:\n    print(m.version(sys.argv[1]))\n"
               "except m.PackageNotFoundError:\n    sys.exit(3)\n")


def installed_version(python: str, distribution: str) -> Optional[str]:
    """The version of ``distribution`` installed for ``python``; None when it is not installed."""
    try:
        done = subprocess.run([python, "-c", _VERSION_OF, distribution], capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = done.stdout.strip()
    return version if done.returncode == 0 and version else None


def pinned(distribution: str) -> str:
    """``distribution==version`` as the images pin it (what to install on the nodes)."""
    for requirement in (*(r for own in image_mod.RUNTIME_OWN_IMAGES for r in own.requirements),
                        *image_mod.CONVERT_REQUIREMENTS):
        if requirement.split("==")[0].lower() == distribution.lower():
            return requirement
    return distribution


@dataclass(frozen=True)
class SlurmRuntime:
    """How one runtime is served on Slurm: the nodes' version of its package and, for a
    converted runtime, where its conversions run (``converter``: a Docker backend on this host,
    or None for a Slurm job)."""

    runtime: str
    version: str
    converter: Any = None  # a DockerBackend (the converter image) or None: convert as a Slurm job
    converts_in: str = ""  # "docker" | "slurm" | "" (nothing to convert)

    def identity(self, base: str) -> str:
        """``base`` (the backend's identity) plus the runtime package's version, for cache keys."""
        return f"{base}|{RUNTIMES[self.runtime].package}=={self.version}" if self.version else base


class SlurmRuntimes:
    """Resolves each runtime once (thread-safe) and keeps the Docker converter it opened."""

    def __init__(self, python: str) -> None:
        self.python = python
        self._lock = threading.Lock()
        self._resolved: dict[str, SlurmRuntime] = {}
        self._docker: Any = None
        self._docker_error: Optional[str] = None

    def resolve(self, runtime: str) -> SlurmRuntime:
        """The runtime's plan; ``BackendUnavailable`` (one line) when the nodes cannot measure it
        or nothing can convert to it."""
        with self._lock:
            if runtime not in self._resolved:
                self._resolved[runtime] = self._resolve(runtime)
            return self._resolved[runtime]

    def _resolve(self, runtime: str) -> SlurmRuntime:
        spec = RUNTIMES.get(runtime)
        if spec is None or spec.converter is None:  # torch, onnxruntime: the install's own packages
            return SlurmRuntime(runtime, "")
        version = installed_version(self.python, spec.package)
        if version is None:
            raise BackendUnavailable(
                f"--backend slurm --runtime {runtime}: the nodes' python ({self.python}) has no {spec.package}, "
                f"which measures {runtime} in the job: pip install '{pinned(spec.package)}' there "
                "(or lodevem[slurm-runtimes])")
        docker = self._docker_converter(runtime)
        if docker is not None:
            return SlurmRuntime(runtime, version, docker, "docker")
        if installed_version(self.python, spec.converter.package) is not None:
            return SlurmRuntime(runtime, version, None, "slurm")
        raise BackendUnavailable(
            f"--backend slurm --runtime {runtime}: nothing can convert to {runtime}: the Docker converter image "
            f"{image_mod.CONVERT.tag} is not usable on this machine ({self._docker_error}) and the nodes' python "
            f"({self.python}) has no {spec.converter.package}: build the image with `lodevem build-image --runtime "
            f"{runtime}` or pip install '{pinned(spec.converter.package)}' on the nodes")

    def _docker_converter(self, runtime: str) -> Any:
        """A Docker backend whose default image is the converter image; None (the reason kept
        for the message) when the engine does not answer or the image is not built."""
        if self._docker is None and self._docker_error is None:
            try:
                from .docker_backend import DockerBackend

                docker = DockerBackend(image_mod.CONVERT.tag)
                docker.sweep_stale()
                self._docker = docker
            except BackendUnavailable as exc:
                self._docker_error = str(exc).split(": build it")[0][:200]
            except ImportError:
                self._docker_error = "docker-py is not installed"
        return self._docker

    def converters(self) -> list[Any]:
        """The Docker backends opened so far (to cancel with the Slurm jobs)."""
        with self._lock:
            return [self._docker] if self._docker is not None else []
