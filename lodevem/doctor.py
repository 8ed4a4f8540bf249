"""Environment checks behind ``lodevem check``: is what ``start`` needs ready on this host?

Each check returns a record rather than printing, so the CLI formats them and tests assert on
them. A check never raises: a missing dependency is exactly what it exists to report.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from .errors import LodevemError

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One line of ``lodevem check``."""

    name: str
    status: Status
    detail: str
    hint: str = ""
    required: bool = True


def check_docker() -> Check:
    hint = (
        "install and start the engine: apt-get install -y docker.io && "
        "(dockerd >/tmp/dockerd.log 2>&1 &) - or run scripts/setup-docker.sh"
    )
    from .errors import BackendUnavailable
    from .sandbox.image import docker_client

    try:
        client = docker_client(timeout=5)
    except BackendUnavailable as exc:
        return Check("Docker daemon", "fail", str(exc), hint)
    try:
        version = client.version().get("Version", "?")
    finally:
        client.close()
    return Check("Docker daemon", "ok", f"reachable, server {version}")


def check_image() -> Check:
    from .sandbox.image import image_status

    try:
        status = image_status()
    except Exception as exc:
        return Check("Benchmark image", "fail", f"cannot query: {str(exc).splitlines()[0][:160]}",
                     "start the Docker daemon first")
    if status.present:
        return Check("Benchmark image", "ok", f"{status.tag} present ({status.short_id})")
    return Check("Benchmark image", "fail", f"{status.tag} not built", "run: lodevem build-image")


def check_runtime_images() -> list[Check]:
    """One line per optional image set: each on-device runtime's (without tflite's, the default
    runtime, ``start`` measures under torch and says why) and armsim's (``--predictor armsim``,
    opt-in: the default latency never needs it). A missing one is a failure with its hint, not
    required: what it enables is opt-in (``lodevem build-image --runtime ...`` builds it)."""
    from .sandbox.image import IMAGES, RUNTIME_IMAGES, image_status

    checks = []
    from .wire.registry import CONVERT_ACTIONS, DEFAULT_LATENCY_RUNTIME

    for runtime in (*CONVERT_ACTIONS, "armsim"):  # the runtimes with images of their own, then armsim's
        parts, missing = [], []
        for name in RUNTIME_IMAGES[runtime]:
            try:
                status = image_status(spec=IMAGES[name])
            except Exception as exc:
                return [Check("Runtime images", "warn", f"cannot query: {str(exc).splitlines()[0][:160]}",
                              required=False)]
            parts.append(f"{status.tag} {'present (' + status.short_id + ')' if status.present else 'not built'}")
            if not status.present:
                missing.append(status.tag)
        use = ("for --predictor armsim (opt-in; the default latency never uses it)" if runtime == "armsim" else
               f"for --runtime {runtime}" + (" (the default)" if runtime == DEFAULT_LATENCY_RUNTIME else ""))
        checks.append(Check(f"{runtime} images", "fail" if missing else "ok", "; ".join(parts),
                            f"{use}: lodevem build-image --runtime {runtime}" if missing else "", required=False))
    return checks


def check_cgroups() -> Check:
    from .sandbox.base import cgroup_version

    version = cgroup_version()
    if version is None:
        return Check("cgroups", "fail", "no cgroup hierarchy mounted at /sys/fs/cgroup",
                     "memory limits need a Linux host with cgroups")
    if version == 2:
        controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        ok = "memory" in controllers
    else:
        ok = Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
    detail = f"v{version}, memory controller {'present' if ok else 'missing'}"
    return Check("cgroups", "ok" if ok else "fail", detail,
                 "enable the memory controller (cgroup_enable=memory)")


def check_torch() -> Check:
    if importlib.util.find_spec("torch") is None:
        from .sandbox.image import TORCH_PIN

        return Check("torch", "fail", "not installed", f"pip install {TORCH_PIN} (CPU wheel)")
    from importlib.metadata import version

    return Check("torch", "ok", f"{version('torch')} (host side: ONNX export of zoo models)")


def check_nnmeter() -> Check:
    try:
        with warnings.catch_warnings():  # nn_meter imports the deprecated pkg_resources
            warnings.simplefilter("ignore")
            import nn_meter  # noqa: F401  (import is what we check)
    except Exception as exc:
        return Check("nn-Meter", "fail", f"import failed: {str(exc).splitlines()[0][:160]}",
                     "pip install nn-meter==2.0 'setuptools<82'")
    from .latency.nnmeter import describe_data

    detail, has_data = describe_data()
    if has_data:
        return Check("nn-Meter", "ok", f"importable; {detail}")
    # Importable but without its predictor data, nn-Meter cannot predict anything: a ✓ here
    # would promise `--predictor nnmeter` works. Not required: the offline estimator covers it.
    return Check("nn-Meter", "warn",
                 f"importable, but its predictor data is missing ({detail}); --predictor nn-meter (opt-in) "
                 "needs it, the default latency (lodevem's offline estimator) does not",
                 "fetch it with: lodevem fetch-predictors (into that folder; for another, set "
                 "$LODEVEM_NNMETER_DATA or pass --nnmeter-data DIR to fetch-predictors and start)",
                 required=False)


def run_checks(backend: str = "docker") -> list[Check]:
    """Every check ``lodevem check`` prints, with ``required`` set for the chosen backend."""
    checks = [check_docker(), check_cgroups(), check_torch(), check_nnmeter()]
    if checks[0].status == "ok":
        checks[1:1] = [check_image(), *check_runtime_images()]
    if backend == "process":
        checks = [
            Check(c.name, "warn" if c.status == "fail" else c.status, c.detail, c.hint,
                  required=False)
            if c.name in ("Docker daemon", "Benchmark image") else c
            for c in checks
        ]
    if os.geteuid() != 0 and backend == "process":
        checks.append(Check("process backend", "warn",
                            "not root: cgroup limits may be unavailable, RLIMIT_AS is the fallback",
                            required=False))
    return checks


@dataclass(frozen=True)
class Readiness:
    """``lodevem check``'s answer: every check in order, and the failure when a required one
    failed (``None``: ready). A record, so the command prints it and then exits by it."""

    checks: tuple[Check, ...]

    @property
    def failure(self) -> "Optional[LodevemError]":
        failed = [c for c in self.checks if c.status == "fail" and c.required]
        if not failed:
            return None
        return LodevemError(f"{len(failed)} required check(s) failed: {', '.join(c.name for c in failed)}")


def readiness(backend: str = "docker") -> Readiness:
    """``run_checks`` as one record (``lodevem check``)."""
    return Readiness(tuple(run_checks(backend)))
