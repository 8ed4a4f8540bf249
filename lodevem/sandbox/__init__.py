"""Isolation backends that run the worker under a memory limit: Docker (default) or a child process.

``base`` defines the shared ``Backend`` protocol and ``RunOutcome`` record; the concrete backends
import docker-py or touch cgroups only when constructed, so importing this package is cheap.
"""

from .base import Backend, RunOutcome, ThrashMonitor

__all__ = ["Backend", "RunOutcome", "ThrashMonitor"]
