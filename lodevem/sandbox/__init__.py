"""The sandbox: where a user's model file is loaded, always under limits, never in this process.

``base`` defines the ``Backend`` protocol, the ``RunOutcome`` record and the thrashing monitor;
``docker_backend`` and ``process_backend`` run on this machine, ``slurm_backend`` submits each
run as a Slurm job (``slurm_job`` is what the job runs on the node); ``client`` is the one owner of
the worker protocol (requests out, typed replies in); ``image`` builds the Docker image;
``session`` is what a command opens: the backend (through ``open_backend``, its one caller in
the package), its client, the artifact store and the export and conversion caches. The
concrete backends import docker-py or touch cgroups only when constructed, so importing this
package is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..errors import BackendUnavailable, InputError
from .base import Backend, RunOutcome, ThrashMonitor

if TYPE_CHECKING:
    from .slurm_backend import SlurmSettings

BACKENDS = ("auto", "docker", "process", "slurm")

__all__ = ["BACKENDS", "Backend", "RunOutcome", "ThrashMonitor", "open_backend"]


# Why ``auto`` never falls back to the process backend: a model file is code, and the process
# backend runs it as a child of this machine's user (often root) with no filesystem or network
# sandbox. Running it that way must be a choice the user typed, not a consequence of a stopped
# daemon or a mistyped DOCKER_HOST.
NO_FALLBACK = ("; lodevem does not fall back to running model files outside a container (--backend process "
               "runs them as child processes of this machine: memory limit only, no filesystem or network "
               "sandbox)")


def open_backend(requested: str = "auto", slurm: "Optional[SlurmSettings]" = None,
                 on_status: Optional[Callable[[str], None]] = None) -> tuple[Backend, Optional[str]]:
    """``(backend, warning or None)`` for ``--backend``.

    ``auto`` and ``docker`` mean the Docker backend, or ``BackendUnavailable`` saying how to start
    the daemon or build the image (and, for ``auto``, why there is no fallback). ``process`` is
    the process backend, with a warning that says what it does not isolate. ``slurm`` submits
    each run as a Slurm job (``slurm``: where and how; ``on_status``: job counts for progress),
    with the same kind of warning: a job's cgroup limits memory, nothing else.
    """
    if requested not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    if requested == "process":
        from .process_backend import ProcessBackend

        backend = ProcessBackend()
        return backend, (f"--backend process: model files run as child processes of this machine under "
                         f"{backend.enforcement(1024).replace('=1024MB', '')}, without a filesystem or "
                         "network sandbox")
    if requested == "slurm":
        from .slurm_backend import SlurmBackend, SlurmSettings

        settings = slurm or SlurmSettings()
        return SlurmBackend(settings, on_status=on_status), (
            f"--backend slurm: model files run as Slurm jobs limited by the job's memory cgroup (--mem), without "
            f"a filesystem or network sandbox; the nodes need this lodevem install and {settings.workdir}")
    from .docker_backend import DockerBackend

    try:
        return DockerBackend(), None
    except BackendUnavailable as exc:
        if requested == "docker":
            raise
        raise BackendUnavailable(f"{exc}{NO_FALLBACK}") from None
