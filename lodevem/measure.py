"""Real peak RAM under each device's memory limit: the host side of the measurement.

The worker runs in a container (or child process) limited to the profile's RAM; this module
plans those runs, turns each ``RunOutcome`` into a verdict, caches, and cleans up. All sizes are
MiB, which is what Docker's ``m`` suffix and the profiles' ``ram_mb`` mean.

Page cache: why verdicts are decided on VmHWM, with the page cache warm
-----------------------------------------------------------------------
A memory cgroup is charged for the page-cache pages its processes read *first*; pages already
cached are charged to whoever read them. libtorch alone is 434 MB of file, so the same run is
charged very differently depending on what ran before. Measured here (tiny_cnn, 5+20 passes,
torch runtime, lodevem-bench image, Docker on cgroup v1):

==========  ===========  ===========  ===================================================
cache       VmHWM (MiB)  cgroup peak  outcome at a tight limit
==========  ===========  ===========  ===================================================
warm        237 - 240    151 - 152    150 MiB: OOM-killed in 1.6 s; 160 MiB: exit 0 with
                                      VmHWM 235 (over the limit, libs charged elsewhere)
cold        237          486 (1 GiB)  256 MiB: exit 0, VmHWM 217 (pages evicted mid-run);
(dropped)                             200 and 160 MiB: thrashing, 230 major faults/s, 10 min
                                      to finish when not stopped (stopped here after ~9 s)
==========  ===========  ===========  ===================================================

Dropping caches before every run would make the cold column repeatable, but it needs root on
the host, slows every run, disturbs parallel runs and the rest of the machine, and is not
possible in the process backend of a non-root user. So lodevem chooses the warm state and
accounts for the file pages explicitly:

1. ``prewarm()``: before the first constrained run, a throw-away unlimited container reads the
   image's shared libraries and imports torch/onnxruntime; the model file is read on the host
   when it is hashed. These pages are then charged outside every measured cgroup, so each run
   sees the same cache state whatever ran before (VmHWM over 5 runs: CV well under 1 %).
2. The peak reported is VmHWM, the process's own resident high-water mark (anonymous + file
   pages it mapped), which is what a phone's low-memory killer sees and does not depend on
   who was charged for the cache. The cgroup peak is reported too, for information.
3. ``fits`` needs both: the kernel let the run finish under the limit AND VmHWM <= limit. A
   run that finished only because its libraries' pages were charged elsewhere (VmHWM 235 MiB
   at a 160 MiB limit) is ``oom`` with that explanation, so the verdict is the same as with a
   cold cache, where the kernel would have thrashed or killed it.

Result with this choice: VmHWM of mobilenet_v2 at 1 GiB over 5 runs has a CV of 0.27 %, the same
verdicts at every limit from both backends, and ``find_floor`` puts tiny_cnn's floor at 245 MiB
and mobilenet_v2's at 276 MiB (8 MiB tolerance), just above their VmHWM.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from .sandbox.base import CANCEL, Backend, Cancelled, RunOutcome
from .errors import BackendUnavailable
from .results import write_atomic
from .worker import WORKER_VERSION, WorkerRequest

_PHASES = (("run ", "during inference"), ("warmup ", "during warm-up"), ("loaded", "during warm-up"),
           ("imported", "while loading the model"), ("start", "during runtime import"))


@dataclass(frozen=True)
class ModelSpec:
    """A model file to measure; ``key`` is the runner's row label (defaults to the path)."""

    path: Path
    key: str = ""
    input_shape: Optional[tuple[int, ...]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        if not self.key:
            object.__setattr__(self, "key", str(self.path))


@dataclass(frozen=True)
class MemoryMeasurement:
    """One model under one memory limit. Latency fields are the HOST CPU's (informational)."""

    verdict: str
    limit_mb: int
    peak_rss_mb: Optional[float]
    runtime_baseline_mb: Optional[float]
    model_increment_mb: Optional[float]
    cgroup_peak_mb: Optional[float]
    error: Optional[str]
    phase: Optional[str]
    backend: str
    limit_enforcement: str
    runtime: str
    wall_s: float
    image_id: str
    worker_version: str
    model_sha256: str
    threads: int
    model_format: Optional[str] = None
    params: Optional[int] = None
    major_faults: Optional[int] = None
    host_latency_mean_ms: Optional[float] = None
    host_latency_std_ms: Optional[float] = None
    host_latency_p50_ms: Optional[float] = None
    host_latency_p95_ms: Optional[float] = None
    host_throughput_ips: Optional[float] = None
    cached: bool = False
    observed: dict[str, Any] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MemoryMeasurement":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class FloorResult:
    """Smallest limit (within ``tolerance_mb``) at which the model still completes."""

    model_key: str
    floor_mb: Optional[int]  # None: fails even at hi_mb, or an error stopped the search
    fails_at_mb: Optional[int]  # the largest limit that failed (floor is in (fails_at, floor])
    tolerance_mb: int
    probes: tuple[tuple[int, str], ...]  # (limit, verdict) in the order tried
    at_floor: Optional[MemoryMeasurement]
    error: Optional[str] = None


# --- verdicts ----------------------------------------------------------------------------------

def _mb(kb: Optional[float]) -> Optional[float]:
    return None if kb is None else round(kb / 1024, 1)


def oom_phase(stderr_tail: str) -> Optional[str]:
    """Where the worker was when it died, from its last progress line."""
    lines = [ln.split("lodevem-worker: ", 1)[1] for ln in stderr_tail.splitlines() if "lodevem-worker: " in ln]
    for prefix, phase in _PHASES:
        if lines and lines[-1].startswith(prefix):
            return phase
    return "before the worker started" if not lines else None


def classify(outcome: RunOutcome) -> tuple[str, Optional[str], Optional[str]]:
    """``(verdict, one-line explanation or None, phase or None)`` for one run."""
    limit = outcome.limit_mb
    if outcome.thrashing:
        return "thrashing", f"stopped as thrashing after {outcome.wall_s:.0f} s: {outcome.thrash_evidence}", None
    if outcome.timed_out:
        return "timeout", f"no result within the {outcome.wall_s:.0f} s wall-clock timeout", None
    if outcome.oom_killed:
        phase = oom_phase(outcome.stderr_tail)
        return "oom", f"out of memory at {limit} MB{' ' + phase if phase else ''} ({outcome.limit_enforcement})", phase
    result = outcome.result
    if result is None:
        last = (outcome.stderr_tail.strip().splitlines() or ["no output"])[-1][:200]
        return "error", f"worker died with exit code {outcome.exit_code} and no result: {last}", None
    if not result.get("ok"):
        err = result.get("error") or {}
        return "error", str(err.get("message") or f"worker failed (exit {outcome.exit_code})"), None
    hwm = _mb((result.get("memory") or {}).get("hwm_kb"))
    if limit is not None and hwm is not None and hwm > limit:
        return "oom", (f"peak RSS {hwm:.0f} MB exceeds the {limit} MB limit (it ran only because the runtime's "
                       "shared pages were cached and charged outside the container)"), "rss over limit"
    return "fits", None, None


def to_measurement(outcome: RunOutcome, *, identity: str, model_sha256: str, runtime: str,
                   threads: int) -> MemoryMeasurement:
    verdict, message, phase = classify(outcome)
    result = outcome.result or {}
    mem, lat, model = result.get("memory") or {}, result.get("latency") or {}, result.get("model") or {}
    cgroup_peak = outcome.observed.get("cgroup_peak_mb")
    if cgroup_peak is None and (mem.get("cgroup") or {}).get("peak_bytes") and outcome.backend == "docker":
        cgroup_peak = round(mem["cgroup"]["peak_bytes"] / 2**20, 1)
    fitted = verdict in ("fits", "oom") and bool(mem)
    return MemoryMeasurement(
        verdict=verdict, limit_mb=int(outcome.limit_mb or 0), peak_rss_mb=_mb(mem.get("hwm_kb")) if fitted else None,
        runtime_baseline_mb=_mb(mem.get("runtime_baseline_kb")) if fitted else None,
        model_increment_mb=_mb(mem.get("model_increment_kb")) if fitted else None,
        cgroup_peak_mb=cgroup_peak if fitted else None, error=message, phase=phase, backend=outcome.backend,
        limit_enforcement=outcome.limit_enforcement, runtime=runtime, wall_s=outcome.wall_s, image_id=identity,
        worker_version=WORKER_VERSION, model_sha256=model_sha256, threads=threads,
        model_format=model.get("format"), params=model.get("params"), major_faults=mem.get("major_faults"),
        host_latency_mean_ms=lat.get("mean_ms"), host_latency_std_ms=lat.get("std_ms"),
        host_latency_p50_ms=lat.get("p50_ms"), host_latency_p95_ms=lat.get("p95_ms"),
        host_throughput_ips=lat.get("throughput_ips"), observed=dict(outcome.observed))


# --- cache -------------------------------------------------------------------------------------

_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """Hash (never load) the model file; reading it also warms its page cache on the host."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        _SHA_CACHE[key] = digest.hexdigest()
    return _SHA_CACHE[key]


def failed_measurement(limit_mb: int, error: str, backend: Backend, runtime: str, model_sha256: str,
                       threads: int) -> MemoryMeasurement:
    """An ``error`` verdict for a model that could not even be run (export or derivation failed)."""
    return MemoryMeasurement(
        verdict="error", limit_mb=limit_mb, peak_rss_mb=None, runtime_baseline_mb=None, model_increment_mb=None,
        cgroup_peak_mb=None, error=error, phase=None, backend=backend.name, limit_enforcement="",
        runtime=runtime, wall_s=0.0, image_id=backend.identity, worker_version=WORKER_VERSION,
        model_sha256=model_sha256, threads=threads)


def onnx_cache_path(onnx_dir: Path, model_sha256: str, input_shape: Optional[Sequence[int]]) -> Path:
    """Where the ONNX export of a model file at an input shape is cached: one per key."""
    shape = "x".join(map(str, input_shape)) if input_shape else "auto"
    return Path(onnx_dir) / f"{model_sha256[:32]}-{shape}.onnx"


def cache_key(model_sha256: str, limit_mb: int, runtime: str, identity: str, worker_version: str, warmup: int,
              runs: int, threads: int, input_shape: Optional[Sequence[int]]) -> str:
    """Everything a measurement depends on; ``identity`` is the image id (or the host python)."""
    payload = json.dumps([model_sha256, limit_mb, runtime, identity, worker_version, warmup, runs, threads,
                          list(input_shape) if input_shape else None])
    return hashlib.sha256(payload.encode()).hexdigest()


class MeasureCache:
    """One JSON file per measurement under ``<output>/.cache/measure``; written atomically."""

    def __init__(self, directory: Optional[Path], enabled: bool = True) -> None:
        self.dir = Path(directory) if directory is not None else None
        self.enabled = enabled and self.dir is not None

    def get(self, key: str) -> Optional[MemoryMeasurement]:
        if not self.enabled:
            return None
        path = self.dir / f"{key}.json"  # type: ignore[operator]
        try:
            return replace(MemoryMeasurement.from_dict(json.loads(path.read_text())), cached=True)
        except (OSError, ValueError, TypeError):
            return None

    def put(self, key: str, value: MemoryMeasurement) -> None:
        # Timeouts say more about the machine than the model, and errors can be fixed without
        # changing the file (permissions, a worker bug): neither is cached. Both are quick to redo
        # or deserve a retry.
        if self.dir is None or value.verdict in ("timeout", "error"):
            return
        write_atomic(self.dir / f"{key}.json", json.dumps(value.to_dict(), indent=1))


# --- backends, cleanup -------------------------------------------------------------------------

def default_backend(requested: str = "auto") -> tuple[Backend, Optional[str]]:
    """``(backend, warning or None)``: docker when the daemon answers and the image is built.

    ``auto`` falls back to the process backend with a warning for the CLI to show; ``docker``
    insists (BackendUnavailable, whose message says how to start dockerd or build the image).
    """
    from .sandbox.process_backend import ProcessBackend

    if requested not in ("auto", "docker", "process"):
        raise ValueError(f"backend must be auto, docker or process, got {requested!r}")
    if requested != "process":
        try:
            from .sandbox.docker_backend import DockerBackend

            return DockerBackend(), None
        except BackendUnavailable as exc:
            if requested == "docker":
                raise
            reason = str(exc)
    backend = ProcessBackend()
    if requested == "process":
        return backend, None
    return backend, f"{reason}; falling back to the process backend ({backend.enforcement(1024).replace('=1024MB', '')})"


def sweep_stale_containers(client: Any = None) -> int:
    """Remove labelled containers left by a killed lodevem; 0 when no daemon is reachable.
    ``client``: a docker-py client to reuse (e.g. the backend's), else one is opened."""
    try:
        from .sandbox.docker_backend import sweep_stale_containers as sweep

        return sweep(client)
    except BackendUnavailable:
        return 0


def cancel_all() -> None:
    """Stop every run of this process now: watch loops kill their child/container, and the
    registry of live containers is emptied (the Ctrl-C / SIGTERM path)."""
    CANCEL.set()
    try:
        from .sandbox.docker_backend import LIVE

        LIVE.remove_all()
    except ImportError:  # docker-py missing: only process runs existed
        pass


class _SigtermAsInterrupt:
    """Within the block, SIGTERM raises KeyboardInterrupt like Ctrl-C (main thread only)."""

    def __enter__(self) -> None:
        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    def __exit__(self, *exc: object) -> None:
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)


# --- the service -------------------------------------------------------------------------------

ResultFn = Callable[[str, int, MemoryMeasurement], None]


@dataclass
class _Plan:
    """Shared settings of one measure_models / find_floor call."""

    backend: Backend
    runtime: str
    warmup: int
    runs: int
    threads: int
    timeout_s: float
    cache: MeasureCache
    onnx_dir: Optional[Path]
    lock: threading.Lock = field(default_factory=threading.Lock)
    exported: dict[str, Optional[str]] = field(default_factory=dict)  # onnx path -> error or None

    def key(self, sha: str, limit: int, spec: ModelSpec) -> str:
        return cache_key(sha, limit, self.runtime, self.backend.identity, WORKER_VERSION, self.warmup, self.runs,
                         self.threads, spec.input_shape)

    def onnx_path(self, spec: ModelSpec, sha: str) -> Optional[str]:
        if self.runtime != "onnxruntime" or spec.path.suffix.lower() == ".onnx" or self.onnx_dir is None:
            return None
        return str(onnx_cache_path(self.onnx_dir, sha, spec.input_shape))

    def ensure_onnx(self, spec: ModelSpec, sha: str) -> Optional[str]:
        """Export once, unconstrained, so the measured runs time onnxruntime and not the export."""
        path = self.onnx_path(spec, sha)
        if path is None or Path(path).exists():
            return None
        with self.lock:
            if path in self.exported:
                return self.exported[path]
        request = WorkerRequest(action="export-onnx", model_path=str(spec.path), onnx_path=path,
                                input_shape=list(spec.input_shape) if spec.input_shape else None)
        outcome = self.backend.run(request, None, max(self.timeout_s, 300.0))
        error = None if outcome.result and outcome.result.get("ok") else classify(outcome)[1]
        with self.lock:
            self.exported[path] = error
        return error

    def measure(self, spec: ModelSpec, sha: str, limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        key = self.key(sha, limit, spec)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        export_error = self.ensure_onnx(spec, sha)
        if export_error is not None:
            return failed_measurement(limit, f"ONNX export failed: {export_error}", self.backend, self.runtime,
                                      sha, self.threads)
        self.backend.prewarm()
        request = WorkerRequest(action="measure", model_path=str(spec.path), warmup=self.warmup, runs=self.runs,
                                threads=self.threads, runtime=self.runtime, onnx_path=self.onnx_path(spec, sha),
                                input_shape=list(spec.input_shape) if spec.input_shape else None)
        outcome = self.backend.run(request, limit, self.timeout_s, reference_s=reference_s)
        value = to_measurement(outcome, identity=self.backend.identity, model_sha256=sha, runtime=self.runtime,
                               threads=self.threads)
        self.cache.put(key, value)
        return value


def _as_spec(model: Union[ModelSpec, Path, str]) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else ModelSpec(Path(model))


def measure_models(models: Iterable[Union[ModelSpec, Path, str]], limits_mb: Iterable[int], *,
                   backend: Optional[Backend] = None, runtime: str = "torch", warmup: int = 5, runs: int = 50,
                   threads: int = 1, jobs: Optional[int] = None, timeout_s: float = 300.0,
                   cache_dir: Optional[Path] = None, use_cache: bool = True,
                   on_result: Optional[ResultFn] = None) -> dict[tuple[str, int], MemoryMeasurement]:
    """Measure every model under every DISTINCT limit, ``jobs`` runs at a time.

    Profiles with the same RAM share one run (the runner passes the distinct limits; duplicate
    limits and byte-identical model files are measured once). Per model the largest limit runs
    first: its wall time is the unconstrained reference the thrashing detector compares to.
    With ``jobs > 1`` every run uses one thread (parallel runs with more threads slow each other
    down); ``threads`` changes host latency only, not the memory verdict. ``cache_dir`` is
    ``<output>/.cache/measure``; ``use_cache=False`` re-measures but still refreshes the cache.
    """
    specs = [_as_spec(m) for m in models]
    limits = sorted({int(v) for v in limits_mb}, reverse=True)
    if backend is None:
        backend, _ = default_backend("auto")
    jobs = max(1, jobs or os.cpu_count() or 1)
    plan = _Plan(backend=backend, runtime=runtime, warmup=warmup, runs=runs, threads=1 if jobs > 1 else threads,
                 timeout_s=timeout_s, cache=MeasureCache(cache_dir, enabled=use_cache),
                 onnx_dir=(Path(cache_dir).parent / "onnx") if cache_dir is not None else None)
    if runtime == "onnxruntime" and plan.onnx_dir is None:
        import tempfile

        plan.onnx_dir = Path(tempfile.mkdtemp(prefix="lodevem-onnx-"))
    groups: dict[str, list[ModelSpec]] = {}  # by content: byte-identical files are measured once
    for spec in specs:
        if not spec.path.is_file():
            raise FileNotFoundError(f"model file not found: {spec.path}")
        groups.setdefault(file_sha256(spec.path), []).append(spec)
    results: dict[tuple[str, int], MemoryMeasurement] = {}
    CANCEL.clear()
    with _SigtermAsInterrupt(), ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="lodevem-measure") as pool:
        running: dict[Future, tuple[str, int]] = {}

        def submit(sha: str, limit: int, reference_s: Optional[float]) -> None:
            running[pool.submit(plan.measure, groups[sha][0], sha, limit, reference_s)] = (sha, limit)

        try:
            for sha in groups:
                submit(sha, limits[0], None)
            while running:
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in done:
                    sha, limit = running.pop(future)
                    value = future.result()
                    for spec in groups[sha]:
                        results[(spec.key, limit)] = value
                        if on_result is not None:
                            on_result(spec.key, limit, value)
                    if limit == limits[0]:
                        reference = value.wall_s if value.verdict == "fits" else None
                        for smaller in limits[1:]:
                            submit(sha, smaller, reference)
        except BaseException:
            cancel_all()
            for future in running:
                future.cancel()
            raise
    return results


def find_floor(model: Union[ModelSpec, Path, str], *, backend: Optional[Backend] = None, runtime: str = "torch",
               warmup: int = 1, runs: int = 3, threads: int = 1, timeout_s: float = 300.0, lo_mb: int = 64,
               hi_mb: int = 4096, tolerance_mb: int = 8, cache_dir: Optional[Path] = None, use_cache: bool = True,
               on_probe: Optional[ResultFn] = None) -> FloorResult:
    """Bisect the limit for the smallest one at which the model completes and fits.

    "At what point does the model break?": fits at ``floor_mb``, fails at ``fails_at_mb``, and the
    two are at most ``tolerance_mb`` apart. Thrashing and timeouts count as failing; a worker
    error stops the search (it would fail at any limit).
    """
    spec = _as_spec(model)
    if backend is None:
        backend, _ = default_backend("auto")
    sha = file_sha256(spec.path)
    plan = _Plan(backend=backend, runtime=runtime, warmup=warmup, runs=runs, threads=threads, timeout_s=timeout_s,
                 cache=MeasureCache(cache_dir, enabled=use_cache),
                 onnx_dir=(Path(cache_dir).parent / "onnx") if cache_dir is not None else None)
    probes: list[tuple[int, str]] = []
    CANCEL.clear()

    def probe(limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        value = plan.measure(spec, sha, limit, reference_s)
        probes.append((limit, value.verdict))
        if on_probe is not None:
            on_probe(spec.key, limit, value)
        return value

    try:
        with _SigtermAsInterrupt():
            top = probe(hi_mb, None)
            if top.verdict == "error":
                return FloorResult(spec.key, None, None, tolerance_mb, tuple(probes), None, top.error)
            if not top.fits:
                return FloorResult(spec.key, None, hi_mb, tolerance_mb, tuple(probes), None,
                                   f"does not fit even at {hi_mb} MB ({top.verdict})")
            reference = top.wall_s
            good, good_value, bad = hi_mb, top, None
            low = probe(lo_mb, reference)
            if low.verdict == "error":
                return FloorResult(spec.key, None, None, tolerance_mb, tuple(probes), None, low.error)
            if low.fits:
                return FloorResult(spec.key, lo_mb, None, tolerance_mb, tuple(probes), low)
            bad = lo_mb
            while good - bad > tolerance_mb:
                mid = (good + bad) // 2
                value = probe(mid, reference)
                if value.verdict == "error":
                    return FloorResult(spec.key, None, bad, tolerance_mb, tuple(probes), None, value.error)
                if value.fits:
                    good, good_value = mid, value
                else:
                    bad = mid
            return FloorResult(spec.key, good, bad, tolerance_mb, tuple(probes), good_value)
    except BaseException:
        cancel_all()
        raise


__all__ = ["ModelSpec", "MemoryMeasurement", "FloorResult", "Cancelled", "classify", "cache_key",
           "default_backend", "measure_models", "find_floor", "sweep_stale_containers", "cancel_all", "oom_phase"]
