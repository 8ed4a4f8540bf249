"""Docker backend: one locked-down, memory-limited container per worker run.

Why a container and not just a limit: ``mem_limit = memswap_limit`` gives the process exactly the
phone's RAM and no swap (the README's rule), and the container also keeps an untrusted pickle
away from the host: no network, read-only root, no capabilities, no new privileges, a pids
limit, a non-root user, the model mounted read-only.

Every container is labelled ``lodevem=1`` and registered in the backend's ``live`` registry while
it exists, so Ctrl-C, SIGTERM, a timeout or a crash in lodevem itself all end with it removed
(``finally`` here, plus ``cancel`` for the signal path, plus ``sweep_stale_containers`` at start).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

from ..errors import BackendUnavailable, Cancelled, ModelFileError
from ..safe_io import OUTPUT_TAIL_BYTES, REPLY_TAIL_BYTES
from ..wire.protocol import artifact_files
from ..wire.registry import COMPARISON_RUNTIME
from ..wire.requests import WorkerRequest
from . import image as image_mod
from .base import PIDS_LIMIT, Cancellable, ProgressFn, RunOutcome, ThrashMonitor, tail, work_limit_mb
from .containers import LABEL, LiveContainers, labels, owner_alive, sweep_stale_containers
from .engine import EngineAPI
from .mounts import container_mounts
from .scratch import CONTAINER_UID, MAX_OUTPUT_BYTES, log_tail, scratch_dir, take_output, tree_bytes
from .watch import WatchResult, watch

REQUEST_IN_IMAGE = "/request/request.json"
# A container's log on the host's disk: one json-file of at most this size (Docker rotates it
# away past it), so a model that prints 300 MB leaves at most this much; the host reads back only
# the last lines of it (Docker splits a line into 16 KiB messages, so lines bound the bytes).
LOG_MAX_SIZE = "8m"
PROGRESS_LINES = 20
CONTAINER_USER = "1000:1000"  # the image's `bench` user


class DockerBackend(Cancellable):
    """Runs the worker in ``lodevem-bench:<version>``, or in the image of the request's runtime
    or converter (``image.spec_for``: ``lodevem-litert``, ``lodevem-ncnn``, ``lodevem-convert``);
    see the module docstring."""

    name = "docker"

    def __init__(self, image: str = image_mod.IMAGE_TAG, *, mount_host_worker: bool = True) -> None:
        self._client: Any = None
        self._client_lock = threading.Lock()
        self.engine = EngineAPI.from_env(timeout=60)
        image_id: Optional[str]
        if self.engine is not None:  # the local socket: no docker-py until a container is needed
            try:
                image_id = self.engine.image_id(image)
            except OSError:
                image_mod.docker_client(timeout=60)  # raises the one-line BackendUnavailable
                raise
        else:
            import docker.errors

            try:
                image_id = self.client.images.get(image).id
            except docker.errors.ImageNotFound:
                image_id = None
        if image_id is None:
            raise BackendUnavailable(f"Docker image {image} not found: build it with `lodevem build-image`")
        self.image_id: str = image_id
        self.image_tag = image
        self._images: dict[str, str] = {image_mod.BENCH.name: image_id}  # spec name -> image id
        self._images_lock = threading.Lock()
        # The host's lodevem package over the image's copy: a changed worker needs no rebuild.
        self.host_pkg = Path(__file__).resolve().parent.parent if mount_host_worker else None
        self._warm_lock = threading.Lock()
        self._warm: set[str] = set()  # spec names prewarmed
        super().__init__()
        self.live = LiveContainers()
        self.max_output_bytes = MAX_OUTPUT_BYTES  # the scratch folder's cap, per run

    @property
    def client(self) -> Any:
        """The docker-py client, opened (and docker-py imported) on first use: a run whose every
        measurement is cached creates no container and never needs it."""
        with self._client_lock:
            if self._client is None:
                self._client = image_mod.docker_client(timeout=60)
            return self._client

    @property
    def identity(self) -> str:
        return f"docker:{self.image_id}"

    def identity_for(self, runtime: str) -> str:
        """The measurement image's id for ``runtime``; also checks that its converter image is
        there (tflite, ncnn), so a missing image stops the run before any work."""
        for name in image_mod.RUNTIME_IMAGES.get(runtime, ("bench",)):
            self._image(image_mod.IMAGES[name], runtime)
        return f"docker:{self._image(image_mod.spec_for('measure', runtime), runtime)}"

    def image_ids(self) -> dict[str, str]:
        """Tag -> id of every image this backend has looked up (what the run used), for the manifest."""
        with self._images_lock:
            return {image_mod.IMAGES[name].tag if name in image_mod.IMAGES else name: found
                    for name, found in self._images.items()}

    def _image(self, spec: "image_mod.ImageSpec", runtime: str) -> str:
        """The id of ``spec``'s image, looked up once; one-line BackendUnavailable when missing."""
        with self._images_lock:
            if spec.name not in self._images:
                if self.engine is not None:
                    found = self.engine.image_id(spec.tag)
                else:
                    import docker.errors

                    try:
                        found = self.client.images.get(spec.tag).id
                    except docker.errors.ImageNotFound:
                        found = None
                if found is None:
                    raise BackendUnavailable(f"Docker image {spec.tag} ({spec.description}) not found: build it with "
                                             f"`lodevem build-image --runtime {runtime}`")
                self._images[spec.name] = found
            return self._images[spec.name]

    def _image_for(self, request: WorkerRequest) -> str:
        # the armsim image is built by `build-image --runtime armsim`, whatever runtime it profiles
        named = "armsim" if request.action == image_mod.ARMSIM_ACTION else request.runtime
        return self._image(image_mod.spec_for(request.action, request.runtime), named)

    def cancel(self) -> None:
        """Stop every run now: watch loops kill their container, and the live ones are removed."""
        super().cancel()
        self.live.remove_all()

    def sweep_stale(self) -> int:
        """Remove containers left behind by a killed lodevem (see ``sweep_stale_containers``).
        Listing goes through the socket; docker-py is opened only when something must go."""
        if self.engine is not None:
            try:
                listed = self.engine.containers(f"{LABEL}=1")
            except OSError:
                listed = None
            if listed is not None and all(owner_alive(c, self.live.ids()) for c in listed):
                return 0
        return sweep_stale_containers(self.client, self.live.ids())

    def prewarm(self, runtime: str = COMPARISON_RUNTIME) -> None:
        """Read the shared libraries of ``runtime``'s image once in a throw-away, unlimited container.

        Their page-cache pages are then charged to that (removed) container's parent, not to the
        measured ones, whatever ran before: that is what makes verdicts repeatable (measure.py).
        """
        spec = image_mod.spec_for("measure", runtime)
        with self._warm_lock:
            if spec.name in self._warm:
                return
            script = ("find /opt/pydeps /usr/lib -name '*.so*' -type f -exec cat {} + >/dev/null 2>&1; "
                      f"python3 -c 'import {spec.warm_imports}'")
            container = self.client.containers.create(
                self._image(spec, runtime), entrypoint=["sh", "-c", script], network_disabled=True, read_only=True,
                cap_drop=["ALL"], security_opt=["no-new-privileges"], user=CONTAINER_USER, pids_limit=PIDS_LIMIT,
                mem_limit=f"{work_limit_mb()}m", memswap_limit=f"{work_limit_mb()}m",
                labels=labels(**{"lodevem.role": "prewarm"}))
            self.live.add(container)
            try:
                container.start()
                container.wait(timeout=300)
            finally:
                try:
                    container.remove(force=True)
                except Exception:
                    pass
                self.live.discard(container)
            self._warm.add(spec.name)

    def run(self, request: WorkerRequest, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Optional[ProgressFn] = None) -> RunOutcome:
        if not Path(request.model_path).is_file():
            raise ModelFileError(f"{request.model_path}: model file not found")
        if not Path(request.model_path).stat().st_mode & 0o004:
            # The container runs as uid 1000: a file only its owner can read would fail inside.
            raise ModelFileError(f"{request.model_path} is not readable by the container's user (uid 1000): "
                                 "make it world-readable (chmod o+r) or use --backend process")
        files, out_dir = request.files(), None
        if ((files.onnx_path and not Path(files.onnx_path).exists()) or files.derive_out
                or (files.converted_path and not Path(files.converted_path).exists())):
            out_dir = scratch_dir()
        try:
            mounts, inner = container_mounts(request, out_dir, self.host_pkg)
            inner_files = inner.files()
            outcome = self._run_container(inner, mounts, limit_mb, timeout_s, reference_s, on_progress,
                                          Path(out_dir) if out_dir is not None else None)
            # A conversion's files in artifact_files order reversed: an ncnn .bin before the .param
            # that marks the conversion done (the host cache's test for a hit).
            converted = artifact_files(files.converted_path)[::-1] if files.converted_path else []
            for wanted in (files.onnx_path, files.derive_out, files.channels_removed_path, *converted):
                if out_dir is not None and wanted:
                    take_output(Path(out_dir), Path(wanted).name, Path(wanted), self.max_output_bytes)
            # Messages name what the user knows: each path the worker saw, mapped back to the host's.
            pairs = [(inner.model_path, request.model_path), (inner_files.onnx_path, files.onnx_path),
                     (inner_files.converted_path, files.converted_path),
                     (inner_files.calibration_path, files.calibration_path),
                     (inner_files.derive_out, files.derive_out), (inner_files.data_path, files.data_path),
                     *zip(inner.code_paths, request.code_paths)]
            host_paths = {inside: host for inside, host in pairs if inside and host}
            return dataclasses.replace(outcome, host_paths=host_paths)
        finally:
            if out_dir is not None:
                shutil.rmtree(out_dir, ignore_errors=True)

    def _run_container(self, request: WorkerRequest, mounts: list[Any], limit_mb: Optional[int],
                       timeout_s: float, reference_s: Optional[float], on_progress: Optional[ProgressFn],
                       scratch: Optional[Path]) -> RunOutcome:
        """One container's life: created locked down, registered live, watched, and removed
        whatever happens (with the request's folder)."""
        from docker.types import Mount

        started = time.monotonic()
        request_dir, request_file = _request_file(request)
        mounts = [*mounts, Mount(REQUEST_IN_IMAGE, str(request_file), type="bind", read_only=True)]
        try:
            container = self._create(request, mounts, limit_mb)
        except BaseException:
            shutil.rmtree(request_dir, ignore_errors=True)
            raise
        self.live.add(container)
        try:
            container.start()
            return self._outcome(container, limit_mb, started, timeout_s, reference_s, on_progress, scratch)
        finally:
            try:
                container.remove(force=True)
            except Exception:  # removed by the signal path already
                pass
            self.live.discard(container)
            shutil.rmtree(request_dir, ignore_errors=True)

    def _create(self, request: WorkerRequest, mounts: list[Any], limit_mb: Optional[int]) -> Any:
        """The container, created (not started) with the module docstring's locks: no network,
        read-only root, no capabilities, a pids limit, a non-root user, memory = memory+swap; its
        log capped on the host's disk (json-file, one file of LOG_MAX_SIZE)."""
        from docker.types import LogConfig

        threads = str(request.threads)
        limits: dict[str, Any] = {}
        if limit_mb is not None:
            limits = {"mem_limit": f"{limit_mb}m", "memswap_limit": f"{limit_mb}m"}
        return self.client.containers.create(
            self._image_for(request), ["--request-file", REQUEST_IN_IMAGE], **limits,
            network_disabled=True, read_only=True, tmpfs={"/tmp": "size=64m"}, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], pids_limit=PIDS_LIMIT, user=CONTAINER_USER, mounts=mounts,
            log_config=LogConfig(type=LogConfig.types.JSON, config={"max-size": LOG_MAX_SIZE, "max-file": "1"}),
            environment={"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads},
            labels=labels(**{"lodevem.limit_mb": str(limit_mb), "lodevem.model": Path(request.model_path).name}),
        )

    def _outcome(self, container: Any, limit_mb: Optional[int], started: float, timeout_s: float,
                 reference_s: Optional[float], on_progress: Optional[ProgressFn],
                 scratch: Optional[Path]) -> RunOutcome:
        """Watch the started container to its end and read what it left: exit, OOM kill, the
        tails of its output. A container removed from outside mid-run is an error, not a crash."""
        import docker.errors

        monitor = ThrashMonitor(limit_mb * 2**20 if limit_mb else None, reference_s)
        try:
            ended = self._watch(container, monitor, started, timeout_s, on_progress, scratch)
            exit_code, timed_out, evidence, breach = ended.exit_code, ended.timed_out, ended.evidence, ended.breach
            stdout = log_tail(container, REPLY_TAIL_BYTES, stdout=True)
            stderr = log_tail(container, OUTPUT_TAIL_BYTES, stdout=False)
            container.reload()
            state = container.attrs.get("State", {})
        except docker.errors.APIError as exc:
            if self.cancelled.is_set():
                raise Cancelled("measurement cancelled") from None
            # Removed from outside (`docker rm -f`, a daemon restart): an error, not a crash.
            exit_code, timed_out, evidence, breach, stdout, state = None, False, None, "", "", {}
            stderr = f"container {container.short_id} vanished during the run: {exc.explanation or exc}"
        return RunOutcome(
            backend=self.name, exit_code=exit_code, oom_killed=bool(state.get("OOMKilled")),
            timed_out=timed_out, thrashing=evidence is not None, thrash_evidence=evidence or "",
            wall_s=round(time.monotonic() - started, 3), stdout=stdout,
            stderr_tail=tail(stderr), limit_mb=limit_mb,
            limit_enforcement=(f"docker cgroup v{self._cgroup_version()} memory+swap={limit_mb}MB"
                               if limit_mb else "none (unconstrained reference)"),
            observed=monitor.summary(), limit_breach=breach)

    def _watch(self, container: Any, monitor: ThrashMonitor, started: float, timeout_s: float,
               on_progress: Optional[ProgressFn], scratch: Optional[Path]) -> WatchResult:
        """The shared watch loop (``watch.watch``) with the container's wait, stats and kill, the
        scratch folder's size as a further limit, and the progress lines of stderr's tail."""
        import requests

        def wait(timeout: float) -> Optional[int]:
            try:
                return int(container.wait(timeout=timeout)["StatusCode"])
            except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
                return None

        def kill() -> Optional[int]:
            try:
                container.kill()
            except Exception:
                pass
            return int(container.wait(timeout=30)["StatusCode"])

        def breach() -> str:
            written = tree_bytes(scratch) if scratch is not None else 0
            return (f"stopped: the sandbox wrote {written / 2**20:.0f} MB into its output folder, over the "
                    f"{self.max_output_bytes // 2**20} MB cap") if written > self.max_output_bytes else ""

        last: list[str] = []  # the last stderr line passed on

        def progress() -> None:  # the new lines among the last few of stderr (never the whole log)
            if on_progress is None:
                return
            lines = log_tail(container, OUTPUT_TAIL_BYTES, stdout=False, lines=PROGRESS_LINES).splitlines()
            seen = max((i + 1 for i, line in enumerate(lines) if last and line == last[0]), default=0)
            for line in lines[seen:]:
                on_progress(line)
            if lines:
                last[:] = lines[-1:]

        return watch(wait, lambda: self._sample(container), kill, monitor, started, timeout_s,
                     cancelled=self.cancelled, breach=breach, tick=progress)

    @staticmethod
    def _sample(container: Any) -> tuple[Optional[int], Optional[int]]:
        try:
            stats = container.stats(stream=False, one_shot=True).get("memory_stats") or {}
        except Exception:  # exited between wait and stats
            return None, None
        inner = stats.get("stats") or {}
        faults = inner.get("total_pgmajfault", inner.get("pgmajfault"))
        return stats.get("usage"), faults

    def _cgroup_version(self) -> str:
        if not hasattr(self, "_cgv"):
            try:
                self._cgv = str(self.client.info().get("CgroupVersion", "1"))
            except Exception:
                self._cgv = "?"
        return self._cgv


def _request_file(request: WorkerRequest) -> tuple[str, Path]:
    """The request in a read-only file the container's user can read, in a folder of its own
    (not on the command line: --arch-kwargs can be long); returns the folder and the file."""
    request_dir = tempfile.mkdtemp(prefix="lodevem-request-")
    request_file = Path(request_dir) / "request.json"
    request_file.write_text(request.to_json(), encoding="utf-8")
    if os.geteuid() == 0:  # the container's user reads it; nobody else on the host
        os.chown(request_dir, CONTAINER_UID, CONTAINER_UID)
        os.chown(request_file, CONTAINER_UID, CONTAINER_UID)
    else:  # a 0700 folder of ours is closed to uid 1000
        os.chmod(request_dir, 0o755)
        os.chmod(request_file, 0o644)
    return request_dir, request_file
