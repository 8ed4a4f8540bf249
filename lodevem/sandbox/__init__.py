"""The sandbox: where a user's model file is loaded, always under limits, never in this process.

``base`` defines the ``Backend`` protocol, the ``RunOutcome`` record and the thrashing monitor;
``docker_backend`` and ``process_backend`` are the two backends; ``client`` is the one owner of
the worker protocol (requests out, typed replies in); ``image`` builds the Docker image. The
concrete backends import docker-py or touch cgroups only when constructed, so importing this
package is cheap.
"""

from __future__ import annotations

from typing import Optional

from ..errors import BackendUnavailable, InputError
from .base import Backend, RunOutcome, ThrashMonitor

BACKENDS = ("auto", "docker", "process")

__all__ = ["BACKENDS", "Backend", "RunOutcome", "ThrashMonitor", "open_backend"]


def open_backend(requested: str = "auto") -> tuple[Backend, Optional[str]]:
    """``(backend, warning or None)``: docker when the daemon answers and the image is built.

    ``auto`` falls back to the process backend with a warning for the CLI to show; ``docker``
    insists (BackendUnavailable, whose message says how to start dockerd or build the image).
    """
    from .process_backend import ProcessBackend

    if requested not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    if requested != "process":
        try:
            from .docker_backend import DockerBackend

            return DockerBackend(), None
        except BackendUnavailable as exc:
            if requested == "docker":
                raise
            reason = str(exc)
    backend = ProcessBackend()
    if requested == "process":
        return backend, None
    return backend, f"{reason}; falling back to the process backend ({backend.enforcement(1024).replace('=1024MB', '')})"
