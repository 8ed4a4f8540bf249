"""Plan and run every (model x device profile) pair.

The work is arranged so nothing is done twice: each distinct file is exported to ONNX once (in
the sandbox) and its latency predicted once for all profiles with the predictor loaded once;
memory does not depend on the CPU, so each model is measured once per distinct RAM limit (16
profiles -> 6 limits) and the verdict shared by every profile with that limit. Rows are written
to a state file atomically after every measurement, so an interrupted run keeps what finished
and ``--resume`` continues it.

One ``ModelFile`` record per model travels from the command line to its CSV rows, filled in as
the run learns about it (its derived variant, its export); one ``RunContext`` holds what every
step of a run shares.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from . import measure
from .derive import derive_cached
from .errors import InputError, LodevemError, ModelFileError
from .latency.calibration import CalibrationSet
from .measure import ConvertCache, ExportCache, ExportResult, MemoryMeasurement
from .latency.estimator import DEFAULT_RUNTIME, canonical_runtime
from .latency.armsim.run import armsim_cells, armsim_profiler, base_predictor_mode, describe_armsim
from .predict import LatencyPrediction, Predictor
from .profiles import Profile
from .progress import NullProgress, ProgressSink
from .report.files import CSV_NAME, JSON_NAME, write_csv, write_json
from .report.manifest import collect_manifest
from .results import ModelFile, PairResult, RunState
from .sandbox import Backend, open_backend
from .sandbox.client import MeasureSettings, WorkerClient
from .sandbox.usercode import ModelLoading

STATE_FILE = ".lodevem-state.json"
MB = 1024 * 1024


def label_models(paths: Sequence[Path], levels: Sequence[str] = ()) -> list[ModelFile]:
    """Check the files exist and give each a row label: its file name, made unambiguous.

    Two files named ``model.pt`` in different folders become ``a/model.pt`` and ``b/model.pt``
    (the shortest distinguishing parent path). The same file given twice is benchmarked once.
    With ``levels``, each file yields one model per level, labelled ``<label>@<level>``
    (``fp32`` is the file as given).
    """
    unique: dict[Path, Path] = {}
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: model file not found")
        if not path.is_file():
            raise InputError(f"{path}: not a file (expected a model file such as model.pt)")
        unique.setdefault(path.resolve(), path)
    resolved = list(unique)
    labels = {p: p.name for p in resolved}
    depth = 1
    while len(set(labels.values())) < len(labels) and depth < 32:
        depth += 1
        clashing = {lab for lab in labels.values() if list(labels.values()).count(lab) > 1}
        for p in resolved:
            if labels[p] in clashing:
                labels[p] = "/".join(p.parts[-depth:])
    models = []
    for p in resolved:
        model = ModelFile.from_path(p, labels[p])
        if not levels:
            models.append(model)
        for level in levels:
            models.append(dataclasses.replace(model, label=f"{labels[p]}@{level}",
                                              level=None if level == "fp32" else level))
    return models


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on; built from the CLI's options or directly by library users."""

    models: tuple[Path, ...]
    profiles: tuple[Profile, ...]
    warmup: int = 5
    runs: int = 50
    output: Path = Path("results")
    backend: str = "auto"
    runtime: str = "torch"
    jobs: Optional[int] = None
    threads: int = 1
    predictor: str = "auto"
    latency_runtime: str = DEFAULT_RUNTIME
    nnmeter_data: Optional[Path] = None
    input_shape: Optional[tuple[int, ...]] = None
    timeout_s: float = 600.0
    find_floor: bool = False
    levels: tuple[str, ...] = ()
    no_cache: bool = False
    resume: bool = False
    calibrations: Optional[Path] = None
    uncalibrated: bool = False
    command_line: tuple[str, ...] = ()
    loading: ModelLoading = field(default_factory=ModelLoading)  # --code, --arch
    # --backend slurm only (see sandbox.slurm_backend.SlurmSettings); the workdir defaults to <output>/.slurm
    slurm_partition: Optional[str] = None
    slurm_account: Optional[str] = None
    slurm_time: Optional[int] = None
    slurm_workdir: Optional[Path] = None

    @classmethod
    def from_cli(cls, paths: Sequence[Path], profiles: Sequence[Profile], command_line: Sequence[str],
                 **options: Any) -> "RunConfig":
        return cls(models=tuple(paths), profiles=tuple(profiles), command_line=tuple(command_line), **options)

    def state_key(self, models: Sequence[ModelFile], calibrations: str = "") -> str:
        """What must match for ``--resume`` to reuse finished rows (not the profile set).
        ``calibrations``: the digest of the calibration records in force (they change latencies)."""
        key = {
            "calibrations": calibrations,
            "models": [(m.label, m.sha256, m.level) for m in models],
            "warmup": self.warmup, "runs": self.runs, "runtime": self.runtime, "threads": self.threads,
            "predictor": self.predictor, "latency_runtime": self.latency_runtime, "input_shape": self.input_shape,
            "backend": self.backend, "loading": self.loading.key,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def runtimes(self) -> tuple[str, ...]:
        """``runtime`` as a list: ``"torch,tflite"`` measures every model under each, one row each."""
        return tuple(dict.fromkeys(r.strip() for r in self.runtime.split(",") if r.strip())) or ("torch",)

    def settings(self, runtime: Optional[str] = None) -> MeasureSettings:
        return MeasureSettings(runtime=runtime or self.runtime, warmup=self.warmup, runs=self.runs,
                               threads=self.threads, input_shape=self.input_shape)


@dataclass
class BenchmarkOutcome:
    """Rows in (model, tier, profile) order, the manifest, and warnings for the user."""

    rows: list[PairResult]
    manifest: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


@dataclass
class RunContext:
    """What every step of one run shares: settings, the sandbox, caches, progress, warnings."""

    config: RunConfig
    client: WorkerClient
    exports: ExportCache
    progress: ProgressSink
    warnings: list[str] = field(default_factory=list)
    converts: Optional[ConvertCache] = None

    @property
    def cache_dir(self) -> Path:
        return self.config.output / ".cache"

    @property
    def backend(self) -> Backend:
        return self.client.backend


def run_benchmark(config: RunConfig, progress: Optional[ProgressSink] = None,
                  backend: Optional[Backend] = None) -> BenchmarkOutcome:
    """Predict latency and measure memory for every (model x profile) pair of ``config``.

    ``backend``: an isolation backend to use instead of opening ``config.backend``.
    """
    models = label_models(config.models, config.levels)
    predictor = Predictor(mode=base_predictor_mode(config.predictor), data_dir=config.nnmeter_data,
                          runtime=config.latency_runtime, cache_dir=config.output / ".cache" / "latency",
                          use_cache=not config.no_cache)
    # fail fast: --predictor nn-meter without data, unknown cores (regressors load on a cache miss)
    predictor.require(config.profiles, load=False)
    calibrations = CalibrationSet(config.calibrations, enabled=not config.uncalibrated)
    calibrations.check()  # and on a calibration record that does not read
    warnings: list[str] = []
    if backend is None:
        backend, backend_warning = open_backend(config.backend, slurm=_slurm_settings(config),
                                                on_status=progress.working_on if progress is not None else None)
        if backend_warning:
            warnings.append(backend_warning)
    backend.sweep_stale()
    for runtime in config.runtimes:  # a missing runtime or converter image stops the run before any work
        backend.identity_for(runtime)
    client = WorkerClient(backend, loading=config.loading)
    ctx = RunContext(config, client, ExportCache(client, config.output / ".cache" / "onnx", config.timeout_s,
                                                 use_cache=not config.no_cache),
                     progress if progress is not None else NullProgress(), warnings,
                     ConvertCache(client, config.output / ".cache" / "converted", config.timeout_s))
    state = _load_state(ctx, [m for base in models for m in _per_runtime(base, config.runtimes)],
                        calibrations.digest())

    ctx.progress.stage("exporting models to ONNX (in the sandbox)")
    for model in {m.path: m for m in models}.values():  # the user's files first: a bad one stops here
        _export(ctx, model.path, model.sha256)
    models = [_derive(ctx, m) for m in models]
    models = [_with_graph(ctx, m) for m in models]
    models = [m for base in models for m in _per_runtime(base, config.runtimes)]
    ctx.progress.stage("predicting latency")
    predictors = _Predictors(config, predictor, ctx.warnings)
    latencies = {m.label: _predict(ctx, predictors.get(m), m, calibrations) for m in models}
    armsim = armsim_profiler(config.predictor, client, config.output / ".cache" / "armsim", config.timeout_s,
                             not config.no_cache, ctx.warnings)
    if armsim is not None:  # armsim's cells where it answers (--predictor armsim|auto, docs/armsim.md)
        ctx.progress.stage("profiling on emulated Arm cores (armsim)")
        with ThreadPoolExecutor(max_workers=max(1, min(len(models), config.jobs or os.cpu_count() or 1))) as pool:
            cells = {m.label: pool.submit(_armsim_cells, ctx, armsim, predictors.get(m).runtime, m,
                                          latencies[m.label]) for m in models}
            latencies = {label: future.result() for label, future in cells.items()}
    removed = {m.label: _predict_channels_removed(ctx, predictors.get(m), m, calibrations) for m in models}
    for used in predictors.all():
        ctx.warnings.extend(w for w in used.warnings if w not in ctx.warnings)

    manifest = collect_manifest(
        list(config.command_line), config.profiles,
        [{"label": m.label, "path": str(m.path), "sha256": m.sha256, "level": m.level} for m in models],
        image_id=backend.identity, backend=backend.name,
        runtimes={r: backend.identity_for(r) for r in config.runtimes},
        extra={"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in config.__dict__.items()
                          if k not in ("profiles", "models", "command_line", "loading")},
               "model_code": config.loading.describe(),
               "predictor": predictor.describe(), "calibrations": calibrations.describe(),
               "armsim": describe_armsim(armsim)},
    )
    all_pairs = {(m.label, p.id) for m in models for p in config.profiles}
    ctx.progress.start_pairs(len(all_pairs), len(state.done() & all_pairs))
    floors = _find_floors(ctx, models)
    recorder = _Recorder(ctx, models, latencies, floors, state, manifest, removed)
    for model in models:
        if model.unusable is not None:
            for limit in recorder.by_limit:
                recorder(model.label, limit, measure.failed_measurement(limit, model.unusable, client,
                                                                        config.settings(_runtime(ctx, model)),
                                                                        model.sha256))
    try:
        _measure_pending(ctx, [m for m in models if m.unusable is None], recorder)
    finally:
        recorder.flush()

    return BenchmarkOutcome(recorder.rows(), manifest, ctx.warnings)


def _per_runtime(model: ModelFile, runtimes: Sequence[str]) -> list[ModelFile]:
    """One model per runtime: with several, each gets its own rows, labelled ``<label> [<runtime>]``."""
    if len(runtimes) == 1:
        return [dataclasses.replace(model, runtime=runtimes[0])]
    return [dataclasses.replace(model, label=f"{model.label} [{r}]", runtime=r) for r in runtimes]


def _runtime(ctx: RunContext, model: ModelFile) -> str:
    """What measures ``model``: its runtime; an .onnx file has no torch form, so under ``torch``
    it is run by onnxruntime (its rows say so)."""
    runtime = model.runtime or ctx.config.runtimes[0]
    return "onnxruntime" if runtime == "torch" and model.path.suffix.lower() == ".onnx" else runtime


def latency_runtime(measurement_runtime: str, default: str) -> str:
    """THE ONE PLACE where the runtime a row is measured under maps to the runtime its latency is
    predicted for: a row measured under tflite or ncnn shows the latency predicted for that
    runtime (the estimator's ``tflite`` / ``ncnn`` labels); torch and onnxruntime rows, which no
    phone app ships, keep ``--latency-runtime`` (``default``)."""
    return measurement_runtime if measurement_runtime in ("tflite", "ncnn") else default


class _Predictors:
    """One Predictor per latency runtime the run's rows need (``latency_runtime``), the run's own
    (``--latency-runtime``) first; one that cannot be made for a runtime (``--predictor nn-meter``
    predicts TFLite only) falls back to the run's, with a warning."""

    def __init__(self, config: RunConfig, default: Predictor, warnings: list[str]) -> None:
        self.config, self.default, self.warnings = config, default, warnings
        self.by_runtime: dict[str, Predictor] = {default.runtime: default}

    def get(self, model: ModelFile) -> Predictor:
        wanted = canonical_runtime(latency_runtime(model.runtime or self.config.runtimes[0],
                                                   self.config.latency_runtime))
        if wanted not in self.by_runtime:
            config = self.config
            try:
                self.by_runtime[wanted] = Predictor(mode=config.predictor, data_dir=config.nnmeter_data, runtime=wanted,
                                                    cache_dir=config.output / ".cache" / "latency",
                                                    use_cache=not config.no_cache)
            except InputError as exc:
                self.warnings.append(f"rows measured under {wanted}: latency for {self.default.runtime} ({exc})")
                self.by_runtime[wanted] = self.default
        return self.by_runtime[wanted]

    def all(self) -> list[Predictor]:
        return list({id(p): p for p in self.by_runtime.values()}.values())


def _slurm_settings(config: RunConfig) -> Optional[Any]:
    """Where ``--backend slurm`` submits; ``--resume`` also reattaches to its still-running jobs."""
    if config.backend != "slurm":
        return None
    from .sandbox.slurm_backend import SlurmSettings

    return SlurmSettings(workdir=config.slurm_workdir or config.output / ".slurm", partition=config.slurm_partition,
                         account=config.slurm_account, time_min=config.slurm_time, reattach=config.resume)


def _load_state(ctx: RunContext, models: Sequence[ModelFile], calibrations: str = "") -> RunState:
    """The finished rows to keep: those of an interrupted run with the same key under --resume.

    ``--resume`` over a run of other models or options refuses (resuming would overwrite its
    rows); a state file lodevem cannot read is set aside under a new name, with a warning, and the
    run starts afresh.
    """
    config = ctx.config
    key = config.state_key(models, calibrations)
    if not config.resume:
        return RunState(key)
    path = config.output / STATE_FILE
    try:
        state = RunState.load(path)
    except InputError as exc:
        aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
        path.rename(aside)
        ctx.warnings.append(f"--resume: {exc}; kept it as {aside.name} and started afresh")
        return RunState(key)
    if state is None or state.config_key == key:
        return state or RunState(key)
    raise InputError(f"--resume: {config.output} holds an interrupted run of other models or options; "
                     "resume it with the same command, run without --resume to start afresh, or choose "
                     "another --output")


def _export(ctx: RunContext, path: Path, sha256: str) -> ExportResult:
    """ONNX export of a file in the sandbox (never in this process), cached by content + shape;
    raises ``ModelFileError`` when the worker refuses the file itself."""
    ctx.progress.working_on(f"exporting {path.name}")
    export = ctx.exports.export(path, sha256, ctx.config.input_shape)
    if export.unusable:
        raise ModelFileError(export.error)
    return export


def _derive(ctx: RunContext, model: ModelFile) -> ModelFile:
    """For a ``--levels`` variant, the file derived once in the sandbox without a limit.

    Measuring the derived file, not a derivation inside the measured run, keeps the original's
    load and the quantization/pruning machinery out of the variant's peak RAM (+110 MB for
    int8-static on mobilenet_v2, see ``derive.derive_cached``).
    """
    if model.level is None:
        return model
    ctx.progress.working_on(f"deriving {model.label} in the sandbox")
    try:
        return derive_cached(model, ctx.cache_dir / "derived", ctx.client, ctx.config.input_shape,
                             ctx.config.timeout_s)
    except LodevemError as exc:
        return dataclasses.replace(model, unusable=f"could not derive {model.level}: {exc}")


def _with_graph(ctx: RunContext, model: ModelFile) -> ModelFile:
    """The ONNX graph the model's latency is predicted from, and the measured file's figures.

    fp16 and int8 levels are predicted from the original's fp32 graph (the predictor applies the
    level's factor), so they share the original's export; a pruned variant is a smaller dense
    model and is predicted from its own derived file.
    """
    if model.unusable is not None:
        return dataclasses.replace(model, graph_error=model.unusable)
    pruned = model.level == "pruned"
    export = (_export(ctx, model.measured_path, model.measured_sha256) if pruned
              else _export(ctx, model.path, model.sha256))
    model = dataclasses.replace(model, graph_path=export.path, graph_error=export.error)
    if model.level is None:  # a variant's format and params come from its derivation
        model = dataclasses.replace(model, format=export.model.format, params=export.model.params,
                                    class_name=export.model.class_name, sparsity=export.model.sparsity,
                                    channels_removed_graph=export.channels_removed_path,
                                    precision=export.model.precision, quantization=export.model.quantization)
    else:  # a variant computes in its level's precision (predicted from the original's graph)
        model = dataclasses.replace(model, precision=_LEVEL_PRECISION.get(model.level, export.model.precision))
    return model


_LEVEL_PRECISION = {"fp16": "fp16", "int8": "int8-dynamic", "int8-static": "int8-static"}


def _predict(ctx: RunContext, predictor: Predictor, model: ModelFile,
             calibrations: CalibrationSet) -> dict[str, LatencyPrediction]:
    """Latency of one model on every profile, scaled by each profile's calibration (a step after
    the prediction); a model without an export gets cells saying why. ``predictor`` is the one
    for the runtime the model's rows are measured under (``latency_runtime``)."""
    config = ctx.config
    if model.graph_path is None:
        reason = f"no ONNX export: {model.graph_error}"
        return {p.id: LatencyPrediction.unavailable(p, reason, config.threads, predictor.runtime)
                for p in config.profiles}
    predicted = predictor.predict(model.graph_path, config.profiles, threads=config.threads, level=model.level)
    by_id = {p.id: p for p in config.profiles}
    return {pid: calibrations.apply(predictor, model.graph_path, by_id[pid], prediction)
            for pid, prediction in predicted.items()}


def _armsim_cells(ctx: RunContext, profiler: Any, runtime: str, model: ModelFile,
                  cells: dict[str, LatencyPrediction]) -> dict[str, LatencyPrediction]:
    if model.unusable is not None or ctx.converts is None:
        return cells
    config = ctx.config
    return armsim_cells(config.predictor, profiler, ctx.converts, ctx.exports, runtime,
                        (model.measured_path, model.measured_sha256), (model.path, model.sha256), model.level,
                        config.profiles, config.threads, config.input_shape, cells, ctx.warnings)


def _predict_channels_removed(ctx: RunContext, predictor: Predictor, model: ModelFile,
                              calibrations: CalibrationSet) -> dict[str, Optional[float]]:
    """For a file with all-zero output channels: the latency of its graph with them removed
    (calibrated like the row's own latency, so the two compare)."""
    if model.channels_removed_graph is None:
        return {}
    predicted = predictor.predict(model.channels_removed_graph, ctx.config.profiles, threads=ctx.config.threads)
    by_id = {p.id: p for p in ctx.config.profiles}
    return {pid: calibrations.apply(predictor, model.channels_removed_graph, by_id[pid], cell).latency_ms
            for pid, cell in predicted.items()}


def sparsity_note(model: ModelFile) -> Optional[str]:
    """What the zeros of a pruned file mean for its latency, or None for a dense file."""
    found = model.sparsity
    if found is None or not found.pruned:
        return None
    parts = [f"{found.zero_fraction:.0%} of the Conv/Linear weights are zero"]
    if found.masked_layers:
        parts.append(f"prune masks attached on {found.masked_layers} layer(s)")
    if found.zero_channels:
        parts.append(f"{found.zero_channels} of {found.channels} output channels entirely zero")
    text = (f"{'; '.join(parts)}: a dense runtime multiplies zeros like any other weight, so this is the dense "
            f"model's latency; `lodevem derive --levels pruned` removes channels physically")
    if model.channels_removed_graph is not None:
        text += "; latency_if_channels_removed_ms: the same graph with the all-zero channels removed"
    elif found.zero_channels and found.channels_removed:
        text += f"; no channels-removed figure ({found.channels_removed})"
    return text


def _find_floors(ctx: RunContext, models: Sequence[ModelFile]) -> dict[str, Optional[int]]:
    """``--find-floor``: the smallest RAM limit (8 MB tolerance) each model completes in."""
    floors: dict[str, Optional[int]] = {}
    config = ctx.config
    if not config.find_floor:
        return floors
    for model in models:
        if model.unusable is not None:
            continue
        ctx.progress.working_on(f"bisecting the RAM floor of {model.label}")
        floor = measure.find_floor(model, client=ctx.client, settings=MeasureSettings(
                                       runtime=_runtime(ctx, model), warmup=1, runs=3, input_shape=config.input_shape),
                                   timeout_s=config.timeout_s, cache_dir=ctx.cache_dir / "measure",
                                   use_cache=not config.no_cache, exports=ctx.exports, converts=ctx.converts)
        floors[model.label] = floor.floor_mb
        if floor.floor_mb is None:
            ctx.warnings.append(f"{model.label}: no RAM floor found ({floor.error})")
    return floors


def unstable(memory: MemoryMeasurement) -> Optional[str]:
    """pyperf's rule of thumb for the host timings: std >= 10 % of the mean is unstable."""
    mean, std = memory.host_latency_mean_ms, memory.host_latency_std_ms
    if not mean or std is None or std < 0.10 * mean:
        return None
    return f"std is {100 * std / mean:.0f} % of the mean"


def pair_result(model: ModelFile, profile: Profile, latency: LatencyPrediction, memory: MemoryMeasurement,
                threads: int, floor_mb: Optional[int], channels_removed_ms: Optional[float] = None) -> PairResult:
    """One row: the model record, the profile, its latency cell and the measurement it shares."""
    energy = (latency.latency_ms * profile.power_w
              if latency.latency_ms is not None and profile.power_w is not None else None)
    return PairResult(
        model_label=model.label, model_path=str(model.path), model_sha256=model.sha256, level=model.level,
        # the measured file's own figures win (a variant's, not its original's)
        model_format=memory.model_format or model.format, model_file_mb=round(model.size_bytes / MB, 3),
        params=memory.params if memory.params is not None else model.params,
        profile_id=profile.id, profile_label=profile.label, tier=profile.tier, chipset=profile.chipset,
        ram_mb=profile.ram_mb, core=latency.core or profile.fastest_cluster.core,
        clock_ghz=latency.clock_ghz or profile.fastest_cluster.clock_ghz, threads=threads,
        latency_ms=latency.latency_ms, latency_source=latency.latency_source,
        latency_uncertainty=latency.uncertainty,
        latency_note="; ".join(n for n in (latency.note, sparsity_note(model)) if n) or None,
        verdict=memory.verdict, peak_rss_mb=memory.peak_rss_mb, runtime_baseline_mb=memory.runtime_baseline_mb,
        model_increment_mb=memory.model_increment_mb, cgroup_peak_mb=memory.cgroup_peak_mb,
        limit_mb=memory.limit_mb, limit_enforcement=memory.limit_enforcement, backend=memory.backend,
        runtime=memory.runtime, memory_error=memory.error, memory_cached=memory.cached,
        host_latency_mean_ms=memory.host_latency_mean_ms, host_latency_std_ms=memory.host_latency_std_ms,
        host_latency_p50_ms=memory.host_latency_p50_ms, host_latency_p95_ms=memory.host_latency_p95_ms,
        host_throughput_ips=memory.host_throughput_ips, host_latency_unstable=unstable(memory),
        power_w=profile.power_w, energy_mj=energy, min_ram_mb=floor_mb,
        model_class=model.class_name, sparsity=model.sparsity.zero_fraction if model.sparsity else None,
        zero_channels=model.sparsity.zero_channels if model.sparsity else None,
        latency_if_channels_removed_ms=channels_removed_ms,
        precision=model.precision, quantization=model.quantization,
        latency_calibrations=latency.calibrations,
    )


class _Recorder:
    """Turns each finished measurement into rows for every profile with that RAM limit, then saves
    the state and rewrites the CSV and JSON atomically, before reporting progress: an interrupt
    loses nothing and leaves a valid partial table."""

    def __init__(self, ctx: RunContext, models: Sequence[ModelFile],
                 latencies: dict[str, dict[str, LatencyPrediction]], floors: dict[str, Optional[int]],
                 state: RunState, manifest: dict[str, Any],
                 channels_removed: Optional[dict[str, dict[str, Optional[float]]]] = None) -> None:
        self.ctx, self.latencies, self.floors, self.state, self.manifest = ctx, latencies, floors, state, manifest
        self.channels_removed = channels_removed or {}
        self.models = {m.label: m for m in models}
        self.done = state.done()
        self.by_limit: dict[int, list[Profile]] = {}
        for profile in ctx.config.profiles:
            self.by_limit.setdefault(profile.ram_mb, []).append(profile)
        self._unsaved = False
        self._order = {p.id: i for i, p in enumerate(ctx.config.profiles)}
        self._model_order = {m.label: i for i, m in enumerate(models)}

    def pending(self, label: str) -> list[Profile]:
        return [p for p in self.ctx.config.profiles if (label, p.id) not in self.done]

    def rows(self) -> list[PairResult]:
        """This run's rows in (model, profile) order; rows of other profiles in the state are left out."""
        return sorted((r for r in self.state.rows if r.profile_id in self._order and r.model_label in self._model_order),
                      key=lambda r: (self._model_order[r.model_label], self._order[r.profile_id]))

    def __call__(self, label: str, limit_mb: int, memory: MemoryMeasurement) -> None:
        finished = [p for p in self.by_limit[limit_mb] if (label, p.id) not in self.done]
        for profile in finished:
            self.state.rows.append(pair_result(self.models[label], profile, self.latencies[label][profile.id],
                                               memory, self.ctx.config.threads, self.floors.get(label),
                                               self.channels_removed.get(label, {}).get(profile.id)))
            self.done.add((label, profile.id))
        # A measurement served from the cache is not lost by an interrupt (the cache has it), so
        # its rows are written with the next fresh one or by ``flush``: a fully cached rerun writes
        # the files once instead of once per measurement.
        self._unsaved = True
        if not memory.cached:
            self.flush()
        for profile in finished:
            self.ctx.progress.pair_done(label, profile.label)

    def flush(self) -> None:
        """Save the state and rewrite the CSV and JSON, if a row was added since the last save."""
        if not self._unsaved:
            return
        output = self.ctx.config.output
        self.state.save(output / STATE_FILE)
        rows = self.rows()
        write_csv(rows, output / CSV_NAME)
        write_json(rows, self.manifest, output / JSON_NAME)
        self._unsaved = False


def _measure_pending(ctx: RunContext, models: Sequence[ModelFile], recorder: _Recorder) -> None:
    """Measure each model with unfinished pairs once per RAM limit those pairs need.

    Models are grouped by runtime and by the limits they still need, so a resumed run measures
    no (model, limit) whose rows are all kept, even when another model needs that limit. In a
    fresh run every model needs every limit: one group, run ``--jobs`` at a time.
    """
    config = ctx.config
    groups: dict[tuple[str, tuple[int, ...]], list[ModelFile]] = {}
    for m in models:
        limits = tuple(sorted({p.ram_mb for p in recorder.pending(m.label)}))
        if limits:
            groups.setdefault((_runtime(ctx, m), limits), []).append(m)
    onnx_files = [m.label for (runtime, _), group in groups.items() for m in group
                  if runtime != (m.runtime or config.runtimes[0])]
    if onnx_files:
        ctx.warnings.append(f"{', '.join(onnx_files)}: ONNX file(s) measured with onnxruntime (--runtime torch "
                            "applies to PyTorch files)")
    for (runtime, limits), group in groups.items():
        ctx.progress.working_on(f"measuring {len(group)} model(s) under {len(limits)} RAM limit(s)")
        measure.measure_models(group, limits, client=ctx.client, settings=config.settings(runtime), jobs=config.jobs,
                               timeout_s=config.timeout_s, cache_dir=ctx.cache_dir / "measure",
                               use_cache=not config.no_cache, exports=ctx.exports, on_result=recorder,
                               converts=ctx.converts)
