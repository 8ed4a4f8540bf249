"""Shared fixtures: the real Docker engine and benchmark image, built once per session."""

from __future__ import annotations

import os
from typing import Optional

import pytest

from lodevem.errors import BackendUnavailable
from lodevem.sandbox import image


def _daemon_reason() -> Optional[str]:
    try:
        image.docker_client(timeout=10)
        return None
    except BackendUnavailable as exc:
        return str(exc)


@pytest.fixture(scope="session")
def docker_backend():
    """A DockerBackend on the real engine. Skips on a developer machine without a daemon;
    fails under CI (CI=true), where .ci/run must have started one."""
    reason = _daemon_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide a Docker daemon: {reason}")
        pytest.skip(f"Docker daemon unreachable: {reason}")
    if not image.image_status().present:
        image.build_image()
    from lodevem.sandbox.docker_backend import DockerBackend

    backend = DockerBackend()
    backend.sweep_stale()
    return backend
