"""Real peak RAM under each device's memory limit: the memory stage's face.

The worker runs in a container (or child process) limited to the profile's RAM, through
``sandbox.client``; this module caches measurements (``MeasureCache``, in the artifact store),
schedules runs (``measure_models``: a reference run, then the limits ``memory.planning`` says can
bite) and bisects the floor (``find_floor``), in the order ``memory.schedule`` keeps. The records
live in ``results``, the verdict rules in ``memory.verdicts``. All sizes are MiB, which is what
Docker's ``m`` suffix and the profiles' ``ram_mb`` mean.

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

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional, Union

from .errors import InputError
from .memory.cache import MeasureCache, cache_key
from .memory.schedule import FloorSearch, LimitSchedule, ResultFn, by_content
from .memory.verdicts import classify, failed_measurement, inferred, oom_phase, to_measurement
from .results import ConversionResult, ConvertedFile, ExportResult, Fallback, FloorResult, MemoryMeasurement, ModelFile
from .runtimes import FALLBACK, adapter
from .safe_io.sniff import content_suffix
from .sandbox.artifacts import ConvertCache, ExportCache, loading_sha256
from .sandbox.client import MeasureSettings, WorkerClient
from .sandbox.session import Session
from .store import ArtifactStore, file_digest, run_store
from .wire.precision import INT8_LEVELS
from .wire.registry import measured_under


@dataclass(frozen=True)
class RunFiles:
    """What one run of a model under a runtime loads besides the model file: the ONNX export
    onnxruntime runs (a model that is not one), or the tflite / ncnn conversion; ``error`` when
    the file could not be made. The measurement and the evaluation of a row use the same files."""

    onnx_path: Optional[Path] = None
    conversion: Optional[ConversionResult] = None
    error: str = ""


@dataclass
class MeasurePlan:
    """Shared settings of one measure_models / find_floor call (and of an evaluation, which runs
    the very files a measurement of the row runs: ``files``)."""

    client: WorkerClient
    settings: MeasureSettings
    timeout_s: float
    cache: MeasureCache
    exports: Optional[ExportCache]
    converts: Optional[ConvertCache] = None
    calibration: Optional[Path] = None  # an .npz of ``inputs`` that calibrates int8 conversions (None: synthetic)

    def identity_of(self, runtime: str) -> str:
        """The measuring image (tflite and ncnn have their own) and, for a converted file, its converter."""
        identity = self.client.backend.identity_for(runtime)
        pin = adapter(runtime).converter_pin
        return f"{identity}|{pin}" if pin else identity

    @property
    def identity(self) -> str:
        return self.identity_of(self.settings.runtime)

    def key(self, model: ModelFile, limit: int, settings: Optional[MeasureSettings] = None) -> str:
        s = settings or self.settings
        level = [model.convert_level] if model.convert_level and adapter(s.runtime).converts else []
        if level and self.calibration is not None and model.convert_level in INT8_LEVELS:
            level.append(self.converts.store.file_sha256(self.calibration) if self.converts is not None
                         else file_digest(self.calibration))  # another calibration makes another file
        return cache_key(loading_sha256(model.measured_sha256, self.client.cache_key), limit, s.runtime,
                         self.identity_of(s.runtime), self.client.worker_version, s.warmup, s.runs, s.threads,
                         s.input_shape, *level)

    def converted(self, model: ModelFile) -> tuple[Optional[ConversionResult], str]:
        """The conversion a tflite/ncnn run measures, at the shape the ONNX export found when
        ``--input-shape`` was not given (ncnn files do not record their input shape). A row of
        level fp16/int8/int8-static converts the fp32 source at that level with the runtime's own
        toolchain (``model.convert_level``); every other row converts its measured file as it is."""
        assert self.converts is not None
        shape = self.settings.input_shape
        if shape is None and self.exports is not None:
            shape = self.exports.export(model.measured_path, model.measured_sha256, None).model.input_shape
        calibration = self.calibration if model.convert_level in INT8_LEVELS else None
        result = self.converts.convert(model.measured_path, model.measured_sha256, self.settings.runtime, shape,
                                       quantize=model.convert_level, calibration=calibration)
        if result.path is None:
            return None, f"{self.settings.runtime} conversion failed: {result.error}"
        return result, ""

    def files(self, model: ModelFile, settings: Optional[MeasureSettings] = None) -> RunFiles:
        """The files a run of ``model`` under ``settings.runtime`` loads (``RunFiles``): an ONNX file
        is exported once, unconstrained, so the measured runs time onnxruntime and not the export."""
        settings = settings or self.settings
        runtime = adapter(settings.runtime)
        if runtime.converts:
            conversion, error = self.converted(model)
            return RunFiles(conversion=conversion, error=error)
        if runtime.runs_onnx_export and content_suffix(model.measured_path) != ".onnx":  # the bytes decide
            assert self.exports is not None
            export = self.exports.runtime_export(model.measured_path, model.measured_sha256, settings.input_shape)
            if export.path is None:
                return RunFiles(error=f"ONNX export failed: {export.error}")
            return RunFiles(onnx_path=export.path)
        return RunFiles()

    def measure(self, model: ModelFile, limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        if not adapter(self.settings.runtime).converts:
            return self._measured(model, limit, reference_s, self.settings)
        conversion, error = self.converted(model)
        if conversion is None:
            if model.runs_as_is:  # a file torch runs as it is: torch's figure, saying why
                torch = replace(self.settings, runtime=measured_under(FALLBACK, content_suffix(model.measured_path)))
                return replace(self._measured(model, limit, reference_s, torch),
                               fallback=Fallback(error, torch.runtime))
            return failed_measurement(limit, error, self.client, self.settings, model.measured_sha256)
        value = self._measured(model, limit, reference_s, self.settings, conversion)
        return replace(value, converted=converted_file(conversion),
                       note=conversion_note(conversion, model.convert_level))

    def _measured(self, model: ModelFile, limit: int, reference_s: Optional[float], settings: MeasureSettings,
                  conversion: Optional[ConversionResult] = None) -> MemoryMeasurement:
        """One run of ``model`` under ``settings.runtime`` (``conversion``: the file a tflite/ncnn
        run loads), or its cached figures."""
        key = self.key(model, limit, settings)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        onnx_path = None
        if conversion is None:  # a converted file came with the call; else what the runtime runs
            files = self.files(model, settings)
            if files.error:
                return failed_measurement(limit, files.error, self.client, settings, model.measured_sha256)
            onnx_path = files.onnx_path
        run_settings = replace(settings, input_shape=conversion.input_shape) if conversion is not None else settings
        self.client.backend.prewarm(settings.runtime)
        run = self.client.measure(model.measured_path, limit, run_settings, self.timeout_s, onnx_path=onnx_path,
                                  reference_s=reference_s,
                                  converted_path=conversion.path if conversion is not None else None)
        value = to_measurement(run, identity=self.identity_of(settings.runtime), model_sha256=model.measured_sha256,
                               settings=settings, worker_version=self.client.worker_version)
        self.cache.put(key, value)
        return value


def converted_file(conversion: ConversionResult) -> ConvertedFile:
    """The converted file's figures for its rows: its size (the published files' own), the
    precision and scheme the worker read back from it, and the conversion's seconds."""
    return ConvertedFile(conversion.size_bytes, conversion.precision, conversion.scheme, conversion.seconds)


def conversion_note(conversion: ConversionResult, level: Optional[str]) -> Optional[str]:
    """For an int8 file calibrated while converting, a note saying on what (synthetic inputs
    unless data was given); None for any other conversion."""
    if conversion.calibration or level == "int8-static":
        return calibration_note(conversion.calibration, level or conversion.precision or "int8")
    return None


def calibration_note(calibration: Optional[str], level: str = "int8-static") -> str:
    """The line every calibrated int8 row carries about its activation scales: what the
    conversion says calibrated it (``worker.export.calibration``: real data, or its synthetic default)."""
    what = calibration or "synthetic inputs"
    synthetic = calibration is None or any(word in calibration.lower() for word in ("synthetic", "random"))
    return f"{level} scales come from {what}" + (
        ", not from real data: activation ranges (and accuracy) may differ on real inputs" if synthetic else "")


def _as_model(model: Union[ModelFile, Path, str]) -> ModelFile:
    if isinstance(model, ModelFile):
        return model
    path = Path(model)
    if not path.is_file():
        raise InputError(f"{path}: model file not found")
    return ModelFile.from_path(path)


def plan_for(session: Session, settings: MeasureSettings, calibration: Optional[Path] = None) -> MeasurePlan:
    """The plan of measurements (or an evaluation) under ``settings`` in a run's ``session``: its
    client, caches and store."""
    return MeasurePlan(session.client, settings, session.timeout_s, MeasureCache(session.store), session.exports,
                       session.converts if adapter(settings.runtime).converts else None, calibration)


def _plan(client: WorkerClient, settings: MeasureSettings, timeout_s: float, cache_dir: Optional[Path],
          use_cache: bool, exports: Optional[ExportCache], converts: Optional[ConvertCache] = None,
          store: Optional[ArtifactStore] = None, calibration: Optional[Path] = None) -> MeasurePlan:
    """``store``: the run's artifact store; else one rooted at ``cache_dir``'s parent (``cache_dir``
    is ``<root>/measure``, the layout library callers pass)."""
    if store is None and cache_dir is not None:
        store = run_store(Path(cache_dir).parent, use_cache=use_cache)
    runtime = adapter(settings.runtime)
    missing = exports is None or (runtime.converts and converts is None)
    if store is None and runtime.makes_files and missing:
        raise InputError(f"runtime {settings.runtime} needs a cache folder for its exports (cache_dir)")
    if store is not None and (exports is None or converts is None):  # a library caller's: the session's caches
        session = Session.with_client(client, store, timeout_s)
        exports = exports if exports is not None else session.exports
        if converts is None and runtime.converts:
            converts = session.converts
    return MeasurePlan(client, settings, timeout_s, MeasureCache(store), exports, converts, calibration)


def measure_models(models: Iterable[Union[ModelFile, Path, str]], limits_mb: Iterable[int], *, client: WorkerClient,
                   settings: MeasureSettings = MeasureSettings(), jobs: Optional[int] = None, timeout_s: float = 300.0,
                   cache_dir: Optional[Path] = None, use_cache: bool = True, exports: Optional[ExportCache] = None,
                   on_result: Optional[ResultFn] = None, converts: Optional[ConvertCache] = None,
                   store: Optional[ArtifactStore] = None, infer: bool = True,
                   calibration: Optional[Path] = None) -> dict[tuple[str, int], MemoryMeasurement]:
    """Measure every model under every DISTINCT limit, ``jobs`` runs at a time; results are keyed
    by (model label, limit).

    Profiles with the same RAM share one run (the runner passes the distinct limits; duplicate
    limits and byte-identical model files are measured once). Per model the largest limit runs
    first: its wall time is the unconstrained reference the thrashing detector compares to.
    The largest limit is the reference run; ``memory.planning`` decides from its peak which
    smaller limits are measured and which rows are inferred from it (``infer=False``, the CLI's
    ``--no-infer``: every limit is measured). ``calibration``: an .npz of ``inputs`` calibrating
    the int8 levels tflite/ncnn rows convert to (None: the worker's synthetic inputs).
    With ``jobs > 1`` every run uses one thread (parallel runs with more threads slow each other
    down); ``threads`` changes host latency only, not the memory verdict. ``cache_dir`` is
    ``<output>/.cache/measure``; ``use_cache=False`` re-measures but still refreshes the cache.
    """
    targets = [_as_model(m) for m in models]
    limits = sorted({int(v) for v in limits_mb}, reverse=True)
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs > 1:
        settings = replace(settings, threads=1)
    plan = _plan(client, settings, timeout_s, cache_dir, use_cache, exports, converts, store, calibration)
    if not limits:
        return {}
    client.backend.reset()
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="lodevem-measure") as pool:
        schedule = LimitSchedule(pool, plan.measure, by_content(targets), limits, infer, on_result)
        try:
            return schedule.run()
        except BaseException:
            client.backend.cancel()
            schedule.cancel()
            raise


def find_floor(model: Union[ModelFile, Path, str], *, client: WorkerClient, settings: MeasureSettings = MeasureSettings(
               warmup=1, runs=3), timeout_s: float = 300.0, lo_mb: int = 64, hi_mb: int = 4096, tolerance_mb: int = 8,
               cache_dir: Optional[Path] = None, use_cache: bool = True, exports: Optional[ExportCache] = None,
               on_probe: Optional[ResultFn] = None, converts: Optional[ConvertCache] = None,
               store: Optional[ArtifactStore] = None, calibration: Optional[Path] = None) -> FloorResult:
    """Bisect the limit for the smallest one at which the model completes and fits.

    "At what point does the model break?": fits at ``floor_mb``, fails at ``fails_at_mb``, and the
    two are at most ``tolerance_mb`` apart. The first probes after the top run bracket its peak
    (``planning.floor_bracket``), so the search usually ends in 3-4 runs. Thrashing and timeouts
    count as failing; a worker error stops the search (it would fail at any limit).
    """
    target = _as_model(model)
    plan = _plan(client, settings, timeout_s, cache_dir, use_cache, exports, converts, store, calibration)
    client.backend.reset()
    try:
        return FloorSearch(plan.measure, target, tolerance_mb, on_probe).search(lo_mb, hi_mb)
    except BaseException:
        client.backend.cancel()
        raise


__all__ = ["MemoryMeasurement", "FloorResult", "ExportResult", "ConversionResult", "MeasureCache", "MeasurePlan",
           "RunFiles", "classify", "cache_key", "measure_models", "find_floor", "oom_phase", "failed_measurement",
           "plan_for", "to_measurement", "inferred"]
