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


@pytest.fixture(scope="session")
def digits_files(tmp_path_factory: pytest.TempPathFactory):
    """The digits CNN in four formats and its test split as an .npz and an ImageFolder tree
    (``tests/digits.py``), written once per session."""
    from digits import write_digits

    return write_digits(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="session")
def app_backend(docker_backend):
    """The session's DockerBackend with the litert, ncnn and converter images."""
    for spec in image.specs_for_runtimes(["tflite", "ncnn"]):
        if not image.image_status(spec=spec).present:
            image.build_image(spec=spec)
    return docker_backend


@pytest.fixture(scope="session")
def shared_store(tmp_path_factory: pytest.TempPathFactory):
    """One artifact store for the session's runs (``shared_output``): a conversion, export or
    evaluation one test made is a cache hit for the next, as for a user's reruns."""
    return tmp_path_factory.mktemp("shared-cache")


@pytest.fixture
def shared_output(tmp_path, shared_store):
    """An empty ``--output`` folder whose cache folder (``<output>/.cache``) is the session's store."""
    from lodevem.store import cache_root

    out = tmp_path / "out"
    out.mkdir()
    cache_root(out).symlink_to(shared_store, target_is_directory=True)
    return out
