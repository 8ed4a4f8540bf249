"""Real peak RAM under each device's memory limit: the memory stage's face.

The worker runs in a container (or child process) limited to the profile's RAM, through
``sandbox.client``; this module holds the records (``MemoryMeasurement``, ``FloorResult``), turns
each run into a verdict, caches measurements and exports, schedules runs (``measure_models``)
and bisects the floor (``find_floor``). All sizes are MiB, which is what Docker's ``m`` suffix
and the profiles' ``ram_mb`` mean.

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
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from .errors import InputError
from .results import ModelFile, write_atomic
from .sandbox.client import MeasureSettings, ModelSection, SandboxRun, WorkerClient
from .sandbox.image import CONVERTERS
from .worker.protocol import artifact_files

_PHASES = (("run ", "during inference"), ("warmup ", "during warm-up"), ("loaded", "during warm-up"),
           ("imported", "while loading the model"), ("start", "during runtime import"))


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

    model_label: str
    floor_mb: Optional[int]  # None: fails even at hi_mb, or an error stopped the search
    fails_at_mb: Optional[int]  # the largest limit that failed (floor is in (fails_at, floor])
    tolerance_mb: int
    probes: tuple[tuple[int, str], ...]  # (limit, verdict) in the order tried
    at_floor: Optional[MemoryMeasurement]
    error: Optional[str] = None


@dataclass(frozen=True)
class ExportResult:
    """The ONNX export of one model file: the graph latency is predicted from (and the file
    onnxruntime runs), or why there is none. ``unusable``: the worker refused the file itself."""

    path: Optional[Path]
    error: str
    model: ModelSection
    unusable: bool = False
    channels_removed_path: Optional[Path] = None  # the graph without its all-zero channels


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


def classify(run: SandboxRun) -> tuple[str, Optional[str], Optional[str]]:
    """``(verdict, one-line explanation or None, phase or None)`` for one run."""
    outcome, limit = run.outcome, run.outcome.limit_mb
    problem = run.problem()
    if problem is not None:
        kind, message = problem
        if kind != "oom":
            return kind, message, None
        phase = oom_phase(outcome.stderr_tail)
        return "oom", f"out of memory at {limit} MB{' ' + phase if phase else ''} ({outcome.limit_enforcement})", phase
    memory = run.reply.memory if run.reply is not None else None
    hwm = _mb(memory.hwm_kb) if memory is not None else None
    if limit is not None and hwm is not None and hwm > limit:
        return "oom", (f"peak RSS {hwm:.0f} MB exceeds the {limit} MB limit (it ran only because the runtime's "
                       "shared pages were cached and charged outside the container)"), "rss over limit"
    return "fits", None, None


def to_measurement(run: SandboxRun, *, identity: str, model_sha256: str, settings: MeasureSettings,
                   worker_version: str) -> MemoryMeasurement:
    verdict, message, phase = classify(run)
    outcome, reply = run.outcome, run.reply
    mem = reply.memory if reply is not None else None
    model = reply.model if reply is not None else ModelSection()
    timings = reply.timings if reply is not None else None
    cgroup_peak = outcome.observed.get("cgroup_peak_mb")
    if cgroup_peak is None and mem is not None and mem.cgroup_peak_bytes and outcome.backend == "docker":
        cgroup_peak = round(mem.cgroup_peak_bytes / 2**20, 1)
    fitted = verdict in ("fits", "oom") and mem is not None
    return MemoryMeasurement(
        verdict=verdict, limit_mb=int(outcome.limit_mb or 0), peak_rss_mb=_mb(mem.hwm_kb) if fitted else None,
        runtime_baseline_mb=_mb(mem.runtime_baseline_kb) if fitted else None,
        model_increment_mb=_mb(mem.model_increment_kb) if fitted else None,
        cgroup_peak_mb=cgroup_peak if fitted else None, error=message, phase=phase, backend=outcome.backend,
        limit_enforcement=outcome.limit_enforcement, runtime=settings.runtime, wall_s=outcome.wall_s,
        image_id=identity, worker_version=(reply.worker_version if reply is not None else None) or worker_version,
        model_sha256=model_sha256, threads=settings.threads, model_format=model.format, params=model.params,
        major_faults=mem.major_faults if mem is not None else None,
        host_latency_mean_ms=timings.mean_ms if timings else None, host_latency_std_ms=timings.std_ms if timings else None,
        host_latency_p50_ms=timings.p50_ms if timings else None, host_latency_p95_ms=timings.p95_ms if timings else None,
        host_throughput_ips=timings.throughput_ips if timings else None, observed=dict(outcome.observed))


def failed_measurement(limit_mb: int, error: str, client: WorkerClient, settings: MeasureSettings,
                       model_sha256: str) -> MemoryMeasurement:
    """An ``error`` verdict for a model that could not even be run (export or derivation failed)."""
    return MemoryMeasurement(
        verdict="error", limit_mb=limit_mb, peak_rss_mb=None, runtime_baseline_mb=None, model_increment_mb=None,
        cgroup_peak_mb=None, error=error, phase=None, backend=client.backend.name, limit_enforcement="",
        runtime=settings.runtime, wall_s=0.0, image_id=client.backend.identity, worker_version=client.worker_version,
        model_sha256=model_sha256, threads=settings.threads)


# --- caches ------------------------------------------------------------------------------------

def loading_sha256(model_sha256: str, loading_key: str) -> str:
    """The file's digest, combined with the run's ``--code``/``--arch`` when given: the same
    weights built by other code are another model to export, derive and measure."""
    if not loading_key:
        return model_sha256
    return hashlib.sha256(f"{model_sha256}\0{loading_key}".encode()).hexdigest()


def onnx_cache_path(onnx_dir: Path, model_sha256: str, input_shape: Optional[Sequence[int]],
                    loading_key: str = "") -> Path:
    """Where the ONNX export of a model file at an input shape is cached: one per key. ``-p``:
    exports carrying ``lodevem.precision`` (an older cache's fp16 or QDQ export is not reused)."""
    shape = "x".join(map(str, input_shape)) if input_shape else "auto"
    return Path(onnx_dir) / f"{loading_sha256(model_sha256, loading_key)[:32]}-{shape}-p.onnx"


@dataclass(frozen=True)
class ConversionResult:
    """A model converted for an on-device runtime (tflite: the ``.tflite``; ncnn: the ``.param``,
    its ``.bin`` beside it), or the converter's reason why not. ``seconds`` is the conversion's
    own time (None on a cache hit: nothing ran)."""

    path: Optional[Path]
    error: str
    input_shape: Optional[tuple[int, ...]]
    seconds: Optional[float] = None
    cached: bool = False


def converted_cache_path(converted_dir: Path, model_sha256: str, runtime: str,
                         input_shape: Optional[Sequence[int]], quantize: Optional[str] = None) -> Path:
    """Where a conversion is cached: one per (file content, input shape, converter and version,
    quantization made while converting)."""
    converter, version = CONVERTERS[runtime]
    shape = "x".join(map(str, input_shape)) if input_shape else "auto"
    suffix = ".tflite" if runtime == "tflite" else ".ncnn.param"
    quantized = f"-{quantize}" if quantize else ""
    return Path(converted_dir) / f"{model_sha256[:32]}-{shape}-{converter}-{version}{quantized}{suffix}"


class ConvertCache:
    """Conversions to tflite / ncnn made in the sandbox (converter image, work limit), cached on
    disk by content + input shape + converter version; a failure is remembered for the run (one
    error row per runtime, not one conversion attempt per RAM limit). Thread-safe."""

    def __init__(self, client: WorkerClient, converted_dir: Path, timeout_s: float) -> None:
        self.client, self.dir, self.timeout_s = client, Path(converted_dir), timeout_s
        self._lock = threading.Lock()
        self._done: dict[Path, ConversionResult] = {}

    def convert(self, path: Path, sha256: str, runtime: str, input_shape: Optional[Sequence[int]],
                quantize: Optional[str] = None) -> ConversionResult:
        shape = tuple(input_shape) if input_shape else None
        target = converted_cache_path(self.dir, loading_sha256(sha256, self.client.cache_key), runtime, shape,
                                      quantize)
        with self._lock:
            if target in self._done:
                return self._done[target]
            if all(Path(f).is_file() for f in artifact_files(str(target))):
                result = ConversionResult(target, "", shape, cached=True)
            else:
                self.dir.mkdir(parents=True, exist_ok=True)  # the process backend's worker writes into it
                run = self.client.convert(path, runtime, target, shape, self.timeout_s, quantize)
                converted = run.reply.converted if run.reply is not None else None
                if run.ok and all(Path(f).is_file() for f in artifact_files(str(target))):
                    result = ConversionResult(target, "", shape, converted.seconds if converted else None)
                else:
                    result = ConversionResult(None, run.failure_message(f"{runtime} conversion failed"), shape)
            self._done[target] = result
            return result


class ExportCache:
    """ONNX exports made in the sandbox, one per (file content, input shape), shared by the
    latency stage (the graph to predict from) and onnxruntime measurements (the file to run).

    An export is kept across runs: beside ``<key>.onnx`` a ``<key>.onnx.json`` records what made
    it (the worker version and the sandbox's identity: another image may export another graph)
    and the worker's model section. A later run with the same maker reuses the file without
    starting a sandbox; any difference, a missing or unreadable record, or ``use_cache=False``
    exports again. Thread-safe: parallel measurement jobs of one model export it once.
    """

    def __init__(self, client: WorkerClient, onnx_dir: Path, timeout_s: float, use_cache: bool = True) -> None:
        self.client, self.dir, self.timeout_s, self.use_cache = client, Path(onnx_dir), timeout_s, use_cache
        self._lock = threading.Lock()
        self._done: dict[Path, ExportResult] = {}

    def _maker(self, sha256: str, input_shape: Optional[Sequence[int]]) -> dict[str, Any]:
        return {"model_sha256": sha256, "input_shape": list(input_shape) if input_shape else None,
                "worker_version": self.client.worker_version, "identity": self.client.backend.identity,
                "loading": self.client.cache_key}

    @staticmethod
    def _stats(*paths: Optional[Path]) -> list[Optional[list[int]]]:
        """Size and modification time of each file (None: absent), to notice a file changed since."""
        stats: list[Optional[list[int]]] = []
        for path in paths:
            if path is None:
                stats.append(None)
                continue
            try:
                stat = path.stat()
                stats.append([stat.st_size, stat.st_mtime_ns])
            except FileNotFoundError:
                stats.append(None)
        return stats

    def _kept(self, target: Path, removed: Optional[Path], maker: dict[str, Any]) -> Optional[ExportResult]:
        if not self.use_cache or not target.is_file():
            return None
        try:
            record = json.loads(target.with_name(target.name + ".json").read_text(encoding="utf-8"))
            if record["maker"] != maker or record["files"] != self._stats(target, removed):
                return None  # made by another image/worker/loading, or a file changed since
            model = ModelSection.parse(record["model"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return ExportResult(target, "", model, channels_removed_path=removed if removed and removed.is_file() else None)

    def export(self, path: Path, sha256: str, input_shape: Optional[Sequence[int]]) -> ExportResult:
        """The graph latency is predicted from: a quantized or fp16 model's float twin."""
        target = onnx_cache_path(self.dir, sha256, input_shape, self.client.cache_key)
        return self._export(path, sha256, target, input_shape, twin=True)

    def runtime_export(self, path: Path, sha256: str, input_shape: Optional[Sequence[int]]) -> ExportResult:
        """The graph onnxruntime measures: the prediction export when the model is fp32, else the
        export as torch writes it (the float twin would hold fp32 weights)."""
        predicted = self.export(path, sha256, input_shape)
        if predicted.model.precision in (None, "fp32") or predicted.unusable:
            return predicted
        target = onnx_cache_path(self.dir, sha256, input_shape, self.client.cache_key)
        return self._export(path, sha256, target.with_name(f"{target.stem}-runtime.onnx"), input_shape, twin=False)

    def _export(self, path: Path, sha256: str, target: Path, input_shape: Optional[Sequence[int]],
                twin: bool) -> ExportResult:
        # the prediction export of a file with all-zero channels also gets the graph without them
        removed = target.with_name(target.stem + ".channels-removed.onnx") if twin else None
        with self._lock:
            if target in self._done:
                return self._done[target]
            maker = {**self._maker(sha256, input_shape), "twin": twin}
            result = self._kept(target, removed, maker)
            if result is None:
                record = target.with_name(target.name + ".json")
                record.unlink(missing_ok=True)  # the record is written only after a good export
                if removed is not None:
                    removed.unlink(missing_ok=True)  # a stale one must not pass for this export's
                run = self.client.export_onnx(path, target, input_shape, self.timeout_s, twin=twin,
                                              channels_removed=removed)
                model = run.reply.model if run.reply is not None else ModelSection()
                if run.ok and target.is_file():
                    result = ExportResult(target, "", model,
                                          channels_removed_path=removed if removed and removed.is_file() else None)
                    write_atomic(record, json.dumps({"maker": maker, "model": asdict(model),
                                                     "files": self._stats(target, removed)}, indent=1))
                else:
                    result = ExportResult(None, run.failure_message("ONNX export failed"), model, run.unusable_file)
            self._done[target] = result
            return result


def cache_key(model_sha256: str, limit_mb: int, runtime: str, identity: str, worker_version: str, warmup: int,
              runs: int, threads: int, input_shape: Optional[Sequence[int]]) -> str:
    """Everything a measurement depends on; ``identity`` is the image id (or the host python),
    ``worker_version`` the version the worker reports (the client refuses any other)."""
    payload = json.dumps([model_sha256, limit_mb, runtime, identity, worker_version, warmup, runs, threads,
                          list(input_shape) if input_shape else None])
    return hashlib.sha256(payload.encode()).hexdigest()


class MeasureCache:
    """One JSON file per measurement under ``<output>/.cache/measure``; written atomically."""

    def __init__(self, directory: Optional[Path], enabled: bool = True) -> None:
        self.dir = Path(directory) if directory is not None else None
        self.enabled = enabled and self.dir is not None

    def get(self, key: str) -> Optional[MemoryMeasurement]:
        if not self.enabled or self.dir is None:
            return None
        try:
            return replace(MemoryMeasurement.from_dict(json.loads((self.dir / f"{key}.json").read_text())), cached=True)
        except (OSError, ValueError, TypeError):
            return None

    def put(self, key: str, value: MemoryMeasurement) -> None:
        # Timeouts say more about the machine than the model, and errors can be fixed without
        # changing the file (permissions, a worker bug): neither is cached. Both are quick to redo
        # or deserve a retry.
        if self.dir is None or value.verdict in ("timeout", "error"):
            return
        write_atomic(self.dir / f"{key}.json", json.dumps(value.to_dict(), indent=1))


# --- the scheduler -----------------------------------------------------------------------------

ResultFn = Callable[[str, int, MemoryMeasurement], None]


@dataclass
class _Plan:
    """Shared settings of one measure_models / find_floor call."""

    client: WorkerClient
    settings: MeasureSettings
    timeout_s: float
    cache: MeasureCache
    exports: Optional[ExportCache]
    converts: Optional[ConvertCache] = None

    @property
    def identity(self) -> str:
        """The measuring image (tflite and ncnn have their own) and, for a converted file, its converter."""
        runtime = self.settings.runtime
        identity = self.client.backend.identity_for(runtime)
        return f"{identity}|{'=='.join(CONVERTERS[runtime])}" if runtime in CONVERTERS else identity

    def key(self, model: ModelFile, limit: int) -> str:
        s = self.settings
        return cache_key(loading_sha256(model.measured_sha256, self.client.cache_key), limit, s.runtime, self.identity,
                         self.client.worker_version, s.warmup, s.runs, s.threads, s.input_shape)

    def converted(self, model: ModelFile) -> tuple[Optional[ConversionResult], str]:
        """The conversion a tflite/ncnn run measures, at the shape the ONNX export found when
        ``--input-shape`` was not given (ncnn files do not record their input shape)."""
        assert self.converts is not None
        shape = self.settings.input_shape
        if shape is None and self.exports is not None:
            shape = self.exports.export(model.measured_path, model.measured_sha256, None).model.input_shape
        result = self.converts.convert(model.measured_path, model.measured_sha256, self.settings.runtime, shape)
        if result.path is None:
            return None, f"{self.settings.runtime} conversion failed: {result.error}"
        return result, ""

    def measure(self, model: ModelFile, limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        key = self.key(model, limit)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        onnx_path = None
        if self.settings.runtime == "onnxruntime" and model.measured_path.suffix.lower() != ".onnx":
            # Exported once, unconstrained, so the measured runs time onnxruntime and not the export.
            assert self.exports is not None
            export = self.exports.runtime_export(model.measured_path, model.measured_sha256, self.settings.input_shape)
            if export.path is None:
                return failed_measurement(limit, f"ONNX export failed: {export.error}", self.client, self.settings,
                                          model.measured_sha256)
            onnx_path = export.path
        settings, converted_path = self.settings, None
        if settings.runtime in CONVERTERS:
            conversion, error = self.converted(model)
            if conversion is None:
                return failed_measurement(limit, error, self.client, settings, model.measured_sha256)
            converted_path = conversion.path
            settings = replace(settings, input_shape=conversion.input_shape)
        self.client.backend.prewarm(settings.runtime)
        run = self.client.measure(model.measured_path, limit, settings, self.timeout_s, onnx_path=onnx_path,
                                  reference_s=reference_s, converted_path=converted_path)
        value = to_measurement(run, identity=self.identity, model_sha256=model.measured_sha256,
                               settings=self.settings, worker_version=self.client.worker_version)
        self.cache.put(key, value)
        return value


def _as_model(model: Union[ModelFile, Path, str]) -> ModelFile:
    if isinstance(model, ModelFile):
        return model
    path = Path(model)
    if not path.is_file():
        raise InputError(f"{path}: model file not found")
    return ModelFile.from_path(path)


def _plan(client: WorkerClient, settings: MeasureSettings, timeout_s: float, cache_dir: Optional[Path],
          use_cache: bool, exports: Optional[ExportCache], converts: Optional[ConvertCache] = None) -> _Plan:
    if exports is None and settings.runtime in ("onnxruntime", *CONVERTERS):
        if cache_dir is None:
            raise InputError(f"runtime {settings.runtime} needs a cache folder for its exports (cache_dir)")
        exports = ExportCache(client, Path(cache_dir).parent / "onnx", timeout_s)
    if converts is None and settings.runtime in CONVERTERS:
        assert cache_dir is not None
        converts = ConvertCache(client, Path(cache_dir).parent / "converted", timeout_s)
    return _Plan(client, settings, timeout_s, MeasureCache(cache_dir, enabled=use_cache), exports, converts)


def measure_models(models: Iterable[Union[ModelFile, Path, str]], limits_mb: Iterable[int], *, client: WorkerClient,
                   settings: MeasureSettings = MeasureSettings(), jobs: Optional[int] = None, timeout_s: float = 300.0,
                   cache_dir: Optional[Path] = None, use_cache: bool = True, exports: Optional[ExportCache] = None,
                   on_result: Optional[ResultFn] = None, converts: Optional[ConvertCache] = None,
                   ) -> dict[tuple[str, int], MemoryMeasurement]:
    """Measure every model under every DISTINCT limit, ``jobs`` runs at a time; results are keyed
    by (model label, limit).

    Profiles with the same RAM share one run (the runner passes the distinct limits; duplicate
    limits and byte-identical model files are measured once). Per model the largest limit runs
    first: its wall time is the unconstrained reference the thrashing detector compares to.
    With ``jobs > 1`` every run uses one thread (parallel runs with more threads slow each other
    down); ``threads`` changes host latency only, not the memory verdict. ``cache_dir`` is
    ``<output>/.cache/measure``; ``use_cache=False`` re-measures but still refreshes the cache.
    """
    targets = [_as_model(m) for m in models]
    limits = sorted({int(v) for v in limits_mb}, reverse=True)
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs > 1:
        settings = replace(settings, threads=1)
    plan = _plan(client, settings, timeout_s, cache_dir, use_cache, exports, converts)
    groups: dict[str, list[ModelFile]] = {}  # by content: byte-identical files are measured once
    for model in targets:
        groups.setdefault(model.measured_sha256, []).append(model)
    results: dict[tuple[str, int], MemoryMeasurement] = {}
    if not limits:
        return results
    client.backend.reset()
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="lodevem-measure") as pool:
        running: dict[Future, tuple[str, int]] = {}

        def submit(sha: str, limit: int, reference_s: Optional[float]) -> None:
            running[pool.submit(plan.measure, groups[sha][0], limit, reference_s)] = (sha, limit)

        try:
            for sha in groups:
                submit(sha, limits[0], None)
            while running:
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in done:
                    sha, limit = running.pop(future)
                    value = future.result()
                    for model in groups[sha]:
                        results[(model.label, limit)] = value
                        if on_result is not None:
                            on_result(model.label, limit, value)
                    if limit == limits[0]:
                        reference = value.wall_s if value.verdict == "fits" else None
                        for smaller in limits[1:]:
                            submit(sha, smaller, reference)
        except BaseException:
            client.backend.cancel()
            for future in running:
                future.cancel()
            raise
    return results


def find_floor(model: Union[ModelFile, Path, str], *, client: WorkerClient, settings: MeasureSettings = MeasureSettings(
               warmup=1, runs=3), timeout_s: float = 300.0, lo_mb: int = 64, hi_mb: int = 4096, tolerance_mb: int = 8,
               cache_dir: Optional[Path] = None, use_cache: bool = True, exports: Optional[ExportCache] = None,
               on_probe: Optional[ResultFn] = None, converts: Optional[ConvertCache] = None) -> FloorResult:
    """Bisect the limit for the smallest one at which the model completes and fits.

    "At what point does the model break?": fits at ``floor_mb``, fails at ``fails_at_mb``, and the
    two are at most ``tolerance_mb`` apart. Thrashing and timeouts count as failing; a worker
    error stops the search (it would fail at any limit).
    """
    target = _as_model(model)
    plan = _plan(client, settings, timeout_s, cache_dir, use_cache, exports, converts)
    probes: list[tuple[int, str]] = []
    client.backend.reset()

    def probe(limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        value = plan.measure(target, limit, reference_s)
        probes.append((limit, value.verdict))
        if on_probe is not None:
            on_probe(target.label, limit, value)
        return value

    def result(floor: Optional[int], fails_at: Optional[int], at_floor: Optional[MemoryMeasurement],
               error: Optional[str] = None) -> FloorResult:
        return FloorResult(target.label, floor, fails_at, tolerance_mb, tuple(probes), at_floor, error)

    try:
        top = probe(hi_mb, None)
        if top.verdict == "error":
            return result(None, None, None, top.error)
        if not top.fits:
            return result(None, hi_mb, None, f"does not fit even at {hi_mb} MB ({top.verdict})")
        reference = top.wall_s
        good, good_value = hi_mb, top
        low = probe(lo_mb, reference)
        if low.verdict == "error":
            return result(None, None, None, low.error)
        if low.fits:
            return result(lo_mb, None, low)
        bad = lo_mb
        while good - bad > tolerance_mb:
            mid = (good + bad) // 2
            value = probe(mid, reference)
            if value.verdict == "error":
                return result(None, bad, None, value.error)
            if value.fits:
                good, good_value = mid, value
            else:
                bad = mid
        return result(good, bad, good_value)
    except BaseException:
        client.backend.cancel()
        raise


__all__ = ["MemoryMeasurement", "FloorResult", "ExportResult", "ExportCache", "ConvertCache", "ConversionResult",
           "converted_cache_path", "classify", "cache_key",
           "measure_models", "find_floor", "oom_phase", "onnx_cache_path", "loading_sha256"]
