"""Plan and run every (model x device profile) pair.

The work is arranged so nothing is done twice: each distinct file is exported to ONNX once (in
the sandbox) and its latency predicted once for all profiles with the predictor loaded once;
memory does not depend on the CPU, so a verdict is shared by every profile with the same RAM
(16 profiles -> 6 limits), and of those only the largest and the limits near or below its peak
are measured: the rows of limits far above it are inferred from it (``memory.planning``; all
measured with ``--no-infer``). Files live in the artifact store (``store``), rows are written to
the run state atomically after every measurement (``report.runstate``), so an interrupted run
keeps what finished and ``--resume`` continues it.

One ``ModelFile`` record per model travels from the command line to its CSV rows, filled in as
the run learns about it (its derived variant, its export) and assembled with its latency and
memory records into rows (``PairResult.from_records``); one ``RunContext`` holds what every step
of a run shares.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, Optional

from . import measure
from .accuracy import evaluate_models, with_drops
from .accuracy.data import (
    DEFAULT_EVAL_LIMIT,
    DEFAULT_FINETUNE_EPOCHS,
    MAX_FINETUNE_SAMPLES,
    ImageDecoding,
    prepare_calibration_data,
    prepare_eval_data,
)
from .derive import FineTune, derive_cached
from .errors import InputError, LodevemError, ModelFileError
from .latency.calibration import CalibrationSet
from .latency.estimator import DEFAULT_RUNTIME
from .predict import LatencyPrediction, Predictor, SandboxAccess, converted_file
from .profiles import Profile
from .progress import NullProgress, ProgressSink
from .report.manifest import DataSetEntry, Manifest, collect_manifest
from .report.runstate import STATE_FILE, Recorder, load_state  # noqa: F401  (STATE_FILE: re-exported)
from .results import Accuracy, ExportResult, ModelFile, PairResult, label_models  # noqa: F401  (label_models: re-exported)
from .results.notes import kernel_precisions
from .sandbox import Backend, open_backend
from .sandbox.artifacts import ConvertCache, ExportCache
from .sandbox.client import MeasureSettings, WorkerClient
from .sandbox.usercode import ModelLoading, with_code_hint
from .store import ArtifactStore, cache_root, digest, file_digest
from .worker.images import Preprocessing
from .worker.precision import LEVEL_FILE_PRECISION, PARTLY_QUANTIZED
from .worker.registry import CONVERT_ACTIONS, RUNTIMES, canonical, measured_under, predicted_for

MB = 1024 * 1024


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on; built from the CLI's options or directly by library users."""

    models: tuple[Path, ...]
    profiles: tuple[Profile, ...]
    warmup: int = 5
    runs: int = 50
    output: Path = Path("results")
    backend: str = "auto"
    # What measures the memory: one row per runtime. Empty (the default): the runtime latencies are
    # predicted for (``latency_runtime``, tflite), so both figures of a row describe the runtime a
    # phone app ships; torch and onnxruntime are opt-in comparisons (``resolved_runtimes``).
    runtimes: tuple[str, ...] = ()
    jobs: Optional[int] = None
    threads: int = 1
    predictor: str = "auto"
    latency_runtime: str = DEFAULT_RUNTIME
    nnmeter_data: Optional[Path] = None
    input_shape: Optional[tuple[int, ...]] = None
    timeout_s: float = 600.0
    find_floor: bool = False
    infer: bool = True  # False (--no-infer): measure every RAM limit, none inferred (memory.planning)
    levels: tuple[str, ...] = ()
    no_cache: bool = False
    resume: bool = False
    # replace another run's results in ``output`` (else refuse: report.runstate.refuse_other_run)
    overwrite: bool = False
    calibrations: Optional[Path] = None
    uncalibrated: bool = False
    # An .npz of ``inputs`` (N x C x H x W float32) calibrating the int8 files tflite/ncnn rows
    # convert to; None: the converter's synthetic inputs, and every such row says so. The hook
    # for real calibration data (a CLI option reading the user's data writes this file).
    calibration_inputs: Optional[Path] = None
    command_line: tuple[str, ...] = ()
    loading: ModelLoading = field(default_factory=ModelLoading)  # --code, --arch
    # --backend slurm only (see sandbox.slurm_backend.SlurmSettings); the workdir defaults to <output>/.slurm
    slurm_partition: Optional[str] = None
    slurm_account: Optional[str] = None
    slurm_time: Optional[int] = None
    slurm_workdir: Optional[Path] = None
    # --eval-data / --eval-limit: accuracy of every row on labelled samples (lodevem.accuracy)
    eval_data: Optional[Path] = None
    # --calib-data: the user's inputs, validated and normalised into ``calibration_inputs``
    calib_data: Optional[Path] = None
    eval_limit: int = DEFAULT_EVAL_LIMIT
    # --finetune-data / --finetune-epochs: the derived pruned level fine-tuned (worker.finetune)
    finetune_data: Optional[Path] = None
    finetune_epochs: int = DEFAULT_FINETUNE_EPOCHS
    # --preprocess: how the images of an ImageFolder tree given as data become inputs (worker.images)
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    # lodevem 0.1's comma form (``runtime="torch,tflite"``), read into ``runtimes``
    runtime: InitVar[Optional[str]] = None

    def __post_init__(self, runtime: Optional[str]) -> None:
        names = self.runtimes.split(",") if isinstance(self.runtimes, str) else list(self.runtimes)
        if runtime:
            names += runtime.split(",")
        names = [canonical(n) or str(n).strip().lower() for n in names if str(n).strip()]
        unknown = [n for n in names if n not in RUNTIMES]
        if unknown:
            raise InputError(f"runtime {', '.join(unknown)}: expected one of {', '.join(RUNTIMES)}")
        object.__setattr__(self, "runtimes", tuple(dict.fromkeys(names)))

    @property
    def resolved_runtimes(self) -> tuple[str, ...]:
        """The runtimes measured: those given, else the latency runtime (``runtimes`` empty)."""
        return self.runtimes or (self.latency_runtime,)

    @classmethod
    def from_cli(cls, paths: Sequence[Path], profiles: Sequence[Profile], command_line: Sequence[str],
                 **options: Any) -> "RunConfig":
        return cls(models=tuple(paths), profiles=tuple(profiles), command_line=tuple(command_line), **options)

    def state_key(self, models: Sequence[ModelFile], calibrations: str = "", evaluation: str = "") -> str:
        """What must match for ``--resume`` to reuse finished rows (not the profile set).
        ``calibrations``: the digest of the calibration records in force (they change latencies);
        ``evaluation``: the digest of the --eval-data samples (they fill the accuracy cells)."""
        key = {
            "calibrations": calibrations,
            "models": [(m.label, m.sha256, m.level) for m in models],
            "warmup": self.warmup, "runs": self.runs, "runtime": ",".join(self.resolved_runtimes),
            "threads": self.threads,
            "predictor": self.predictor, "latency_runtime": self.latency_runtime, "input_shape": self.input_shape,
            "backend": self.backend, "loading": self.loading.key,
        }
        if self.calibration_inputs is not None:  # only then: other runs keep their keys
            key["calibration_inputs"] = file_digest(str(self.calibration_inputs))
        if evaluation:  # only then: the keys of runs without --eval-data stay as they were
            key["evaluation"] = evaluation
        return digest(key)[:16]

    def settings(self, runtime: Optional[str] = None) -> MeasureSettings:
        return MeasureSettings(runtime=runtime or self.resolved_runtimes[0], warmup=self.warmup, runs=self.runs,
                               threads=self.threads, input_shape=self.input_shape)


@dataclass
class BenchmarkOutcome:
    """Rows in (model, tier, profile) order, the manifest, and warnings for the user."""

    rows: list[PairResult]
    manifest: Manifest
    warnings: list[str] = field(default_factory=list)


@dataclass
class RunContext:
    """What every step of one run shares: settings, the sandbox, caches, progress, warnings."""

    config: RunConfig
    client: WorkerClient
    exports: ExportCache
    progress: ProgressSink
    store: ArtifactStore
    warnings: list[str] = field(default_factory=list)
    converts: Optional[ConvertCache] = None
    derived: dict[tuple[Path, str], ModelFile] = field(default_factory=dict)  # (file, level): one derivation
    finetune: Optional[FineTune] = None  # --finetune-data for the pruned level

    @property
    def backend(self) -> Backend:
        return self.client.backend


def run_benchmark(config: RunConfig, progress: Optional[ProgressSink] = None,
                  backend: Optional[Backend] = None) -> BenchmarkOutcome:
    """Predict latency and measure memory for every (model x profile) pair of ``config``.

    ``backend``: an isolation backend to use instead of opening ``config.backend``.
    """
    models = label_models(config.models, config.levels)
    store = ArtifactStore(cache_root(config.output), use_cache=not config.no_cache)
    calibrations = CalibrationSet(config.calibrations, enabled=not config.uncalibrated)
    opened: list[WorkerClient] = []  # the sandbox's client, once the backend is open (kinds that run in it)
    predictor = Predictor(mode=config.predictor, data_dir=config.nnmeter_data, runtime=config.latency_runtime,
                          cache_dir=store.folder("latency"), use_cache=not config.no_cache, calibrations=calibrations,
                          sandbox=SandboxAccess(lambda: opened[0] if opened else None, store.folder,
                                                config.timeout_s, not config.no_cache))
    # fail fast: --predictor nn-meter without data, unknown cores (regressors load on a cache miss)
    predictor.require(config.profiles, load=False)
    calibrations.check()  # and on a calibration record that does not read
    warnings: list[str] = []
    if config.finetune_data is not None and "pruned" not in config.levels:
        raise InputError("--finetune-data fine-tunes the derived pruned level: add --levels pruned (or all)")
    if backend is None:
        backend, backend_warning = open_backend(config.backend, slurm=_slurm_settings(config),
                                                on_status=progress.working_on if progress is not None else None)
        if backend_warning:
            warnings.append(backend_warning)
    backend.sweep_stale()
    config = _with_default_runtime(config, backend, warnings)
    for runtime in config.resolved_runtimes:  # a missing runtime or converter image stops the run before any work
        backend.identity_for(runtime)
    client = WorkerClient(backend, loading=config.loading)
    opened.append(client)
    # The data, validated before any model container starts: bad data is exit 2. A file is read
    # here; an ImageFolder tree is walked here and its images decoded in one sandbox run.
    images = ImageDecoding(client, config.preprocessing, config.timeout_s)
    eval_data = None
    if config.eval_data is not None:
        eval_data = prepare_eval_data(config.eval_data, config.eval_limit, store, images=images)
        if config.input_shape is None:  # the samples' shape is the shape the rows are measured with
            config = dataclasses.replace(config, input_shape=eval_data.input_shape)
    finetune_data = (prepare_eval_data(config.finetune_data, MAX_FINETUNE_SAMPLES, store, option="--finetune-data",
                                       images=images) if config.finetune_data is not None else None)
    finetune = (FineTune(finetune_data.path, finetune_data.sha256, config.finetune_epochs, finetune_data.describe())
                if finetune_data is not None else None)
    if finetune_data is not None and config.input_shape is None:  # its samples are the model's inputs too
        config = dataclasses.replace(config, input_shape=finetune_data.input_shape)
    calibration_data = None
    if config.calib_data is not None:
        calibration_data = prepare_calibration_data(config.calib_data, store, images=images)
        config = dataclasses.replace(config, calibration_inputs=calibration_data.path)
    predictor.require(config.profiles, load=False)  # and what needs the sandbox (--predictor armsim: its image)
    ctx = RunContext(config, client, ExportCache(client, store, config.timeout_s),
                     progress if progress is not None else NullProgress(), store, warnings,
                     ConvertCache(client, store, config.timeout_s), finetune=finetune)
    planned = [m for base in models for m in _per_runtime(base, config.resolved_runtimes)]
    state = load_state(config.output, config.state_key(planned, calibrations.digest(),
                                                       eval_data.sha256 if eval_data else ""),
                       config.resume, ctx.warnings,
                       pairs={(m.label, p.id) for m in planned for p in config.profiles}, overwrite=config.overwrite)

    ctx.progress.stage("exporting models to ONNX (in the sandbox)")
    for model in {m.path: m for m in models}.values():  # the user's files first: a bad one stops here
        export = _export(ctx, model.path, model.sha256)
        problem = finetune_data.labels_problem(export.model.classes, model.path.name) if finetune_data else None
        if problem:  # the data alone shows it cannot fine-tune this model (issue 38): refused, exit 2
            raise InputError(problem)
    models = [m for base in models for m in _per_runtime(base, config.resolved_runtimes)]
    models = [_derive(ctx, m) for m in models]
    models = [_with_graph(ctx, m) for m in models]
    ctx.progress.stage("predicting latency")
    serving = [(m, _serving(ctx, predictor, m)) for m in models]
    # kinds that work outside this process (armsim: conversion and emulation) start on every model
    # at once, --jobs at a time; the cells are then walked in order (deterministic notes and warnings)
    with ThreadPoolExecutor(max_workers=max(1, min(len(models), config.jobs or os.cpu_count() or 1))) as pool:
        list(pool.map(lambda pair: _prepare(ctx, pair[1], pair[0]), serving))
    latencies = {m.label: _predict(ctx, door, m) for m, door in serving}
    removed = {m.label: _predict_channels_removed(ctx, _serving(ctx, predictor, m), m) for m in models}
    # without --eval-data a pruned row still says whether it was fine-tuned (accuracy_note)
    accuracies = (evaluate_models(ctx, models, eval_data) if eval_data is not None
                  else with_drops(models, {m.label: Accuracy() for m in models}))
    ctx.warnings.extend(w for w in predictor.warnings if w not in ctx.warnings)  # every runtime's, from one pool

    manifest = collect_manifest(
        list(config.command_line), config.profiles,
        [{"label": m.label, "path": str(m.path), "sha256": m.sha256, "level": m.level} for m in models],
        image_id=backend.identity, backend=backend.name,
        runtimes={r: backend.identity_for(r) for r in config.resolved_runtimes},
        images=backend.image_ids() if hasattr(backend, "image_ids") else None,
        datasets=[DataSetEntry.of(d) for d in (eval_data, finetune_data, calibration_data) if d is not None],
        extra={"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in config.__dict__.items()
                          if k not in ("profiles", "models", "command_line", "loading")},
               "model_code": config.loading.describe(),
               "predictor": predictor.describe(), "calibrations": calibrations.describe(),
               "evaluation": eval_data.describe() if eval_data is not None else None,
               "int8_calibration": (calibration_data.describe() if calibration_data is not None
                                    else "32 seeded synthetic inputs (no --calib-data)"),
               "finetune": (f"{finetune.epochs} epoch(s) on {finetune.describe}" if finetune is not None
                            and "pruned" in config.levels else None)},
    )
    all_pairs = {(m.label, p.id) for m in models for p in config.profiles}
    ctx.progress.start_pairs(len(all_pairs), len(state.done() & all_pairs))
    floors = _find_floors(ctx, models)
    recorder = Recorder(config.output, config.profiles, config.threads, ctx.progress, models, latencies, floors,
                        state, manifest, removed, accuracies)
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
    return measured_under(model.runtime or ctx.config.resolved_runtimes[0], model.path.suffix)


def latency_runtime(measurement_runtime: str, default: str) -> str:
    """The runtime a row measured under ``measurement_runtime`` has its latency predicted for:
    the registry's rule (``worker.registry.predicted_for``): its own when it has a latency
    model, else ``--latency-runtime`` (``default``)."""
    return predicted_for(measurement_runtime, default)


def _serving(ctx: RunContext, predictor: Predictor, model: ModelFile) -> Predictor:
    """The run's one predictor pool, for the runtime ``model``'s rows stand for (``latency_runtime``;
    ``Predictor.serving`` falls back to ``--latency-runtime`` with a warning where the chosen
    ``--predictor`` cannot serve it)."""
    runtime = model.runtime or ctx.config.resolved_runtimes[0]
    return predictor.serving(latency_runtime(runtime, ctx.config.latency_runtime))


def _slurm_settings(config: RunConfig) -> Optional[Any]:
    """Where ``--backend slurm`` submits; ``--resume`` also reattaches to its still-running jobs."""
    if config.backend != "slurm":
        return None
    from .sandbox.slurm_backend import SlurmSettings

    return SlurmSettings(workdir=config.slurm_workdir or config.output / ".slurm", partition=config.slurm_partition,
                         account=config.slurm_account, time_min=config.slurm_time, reattach=config.resume)


def _export(ctx: RunContext, path: Path, sha256: str) -> ExportResult:
    """ONNX export of a file in the sandbox (never in this process), cached by content + shape;
    raises ``ModelFileError`` when the worker refuses the file itself."""
    ctx.progress.working_on(f"exporting {path.name}")
    export = ctx.exports.export(path, sha256, ctx.config.input_shape)
    if export.unusable:
        raise ModelFileError(with_code_hint(export.error, path))
    return export


def _with_default_runtime(config: RunConfig, backend: Backend, warnings: list[str]) -> RunConfig:
    """``config``, measuring under torch when no ``--runtime`` was given and the backend cannot
    measure the default (the latency runtime: its image is not built, or the process backend's
    python lacks it), with a warning that says why; a runtime the user named stops the run instead."""
    if config.runtimes:
        return config
    try:
        backend.identity_for(config.latency_runtime)
        return config
    except LodevemError as exc:
        warnings.append(f"peak RAM measured under torch, not {config.latency_runtime} (the runtime the latencies "
                        f"stand for, the default): {exc}")
        return dataclasses.replace(config, runtimes=("torch",))


def converted_level(runtime: str, level: Optional[str]) -> Optional[str]:
    """The level a ``runtime`` row makes while converting the fp32 source with the runtime's own
    toolchain (tflite, ncnn: fp16, int8, int8-static), or None: the row measures its file as it is
    (the user's file, or the derived variant: torch and onnxruntime rows, and pruned everywhere,
    pruning being a smaller fp32 model that is then converted)."""
    return level if runtime in CONVERT_ACTIONS and level in LEVEL_FILE_PRECISION else None


def _derive(ctx: RunContext, model: ModelFile) -> ModelFile:
    """For a ``--levels`` variant, the file its rows measure: under tflite/ncnn the fp32 source,
    converted at the level (``converted_level``); else the file derived once in the sandbox
    without a limit (one derivation per file and level, shared by every runtime's rows).

    Measuring the derived file, not a derivation inside the measured run, keeps the original's
    load and the quantization/pruning machinery out of the variant's peak RAM (+110 MB for
    int8-static on mobilenet_v2, see ``derive.derive_cached``).
    """
    if model.level is None:
        return model
    level = converted_level(_runtime(ctx, model), model.level)
    if level is not None:
        return dataclasses.replace(model, convert_level=level)
    key = (model.path, model.level)
    if key not in ctx.derived:
        ctx.progress.working_on(f"deriving {model.label} in the sandbox")
        try:
            ctx.derived[key] = derive_cached(model, ctx.store, ctx.client, ctx.config.input_shape,
                                             ctx.config.timeout_s, ctx.finetune)
        except LodevemError as exc:
            ctx.derived[key] = dataclasses.replace(model, unusable=f"could not derive {model.level}: {exc}")
    derived = ctx.derived[key]
    return dataclasses.replace(model, **{f: getattr(derived, f) for f in _DERIVED_FIELDS})


# what a derivation fills in (the rest of a row's model record is its own: label, runtime)
_DERIVED_FIELDS = ("variant_path", "variant_sha256", "size_bytes", "format", "params", "note", "unusable")


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
    model = dataclasses.replace(model, graph_path=export.path, graph_error=export.error, classes=export.model.classes,
                                input_shape=export.model.input_shape or ctx.config.input_shape,
                                input_shape_source=export.model.input_shape_source
                                or ("--input-shape" if ctx.config.input_shape else None),
                                # the kernel graph is read only for the partial-quantization note:
                                # a cached rerun of any other file imports no ONNX or nn-Meter
                                precision_by_class=(kernel_precisions(export.path)
                                                    if export.model.precision in PARTLY_QUANTIZED else ()))
    warning = export.model.input_shape_warning
    if warning and f"{model.path.name}: {warning}" not in ctx.warnings:
        ctx.warnings.append(f"{model.path.name}: {warning}")
    if model.level is None:  # a variant's format and params come from its derivation
        model = dataclasses.replace(model, format=export.model.format, params=export.model.params,
                                    class_name=export.model.class_name, sparsity=export.model.sparsity,
                                    channels_removed_graph=export.channels_removed_path,
                                    precision=export.model.precision, quantization=export.model.quantization)
    else:  # a variant computes in its level's precision (predicted from the original's graph)
        model = dataclasses.replace(model, precision=LEVEL_FILE_PRECISION.get(model.level, export.model.precision))
    return model


def _convert(ctx: RunContext, predictor: Predictor, model: ModelFile) -> Any:
    """``model`` in the runtime's own form, made on demand (``predict.converted_file``)."""
    if ctx.converts is None or model.unusable is not None:
        return None
    return converted_file(ctx.converts, model, predictor.runtime)


def _prepare(ctx: RunContext, predictor: Predictor, model: ModelFile) -> None:
    predictor.prepare(model.graph_path, ctx.config.profiles, ctx.config.threads, model.level,
                      _convert(ctx, predictor, model))


def _predict(ctx: RunContext, predictor: Predictor, model: ModelFile) -> dict[str, LatencyPrediction]:
    """Latency of one model on every profile through the front door (``Predictor.cells``:
    predicted, then scaled by each profile's calibration); a model without an export gets cells
    saying why. ``predictor`` is the one for the runtime the model's rows stand for
    (``latency_runtime``); kinds that run that runtime get its converted file on demand."""
    return predictor.cells(model.graph_path, ctx.config.profiles, ctx.config.threads, model.level,
                           _convert(ctx, predictor, model), export_error=model.graph_error or "")


def _predict_channels_removed(ctx: RunContext, predictor: Predictor, model: ModelFile) -> dict[str, Optional[float]]:
    """For a file with all-zero output channels: the latency of its graph with them removed
    (calibrated like the row's own latency, so the two compare)."""
    if model.channels_removed_graph is None:
        return {}
    cells = predictor.cells(model.channels_removed_graph, ctx.config.profiles, ctx.config.threads)
    return {pid: cell.latency_ms for pid, cell in cells.items()}


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
                                   timeout_s=config.timeout_s, exports=ctx.exports, converts=ctx.converts,
                                   store=ctx.store, calibration=config.calibration_inputs)
        floors[model.label] = floor.floor_mb
        if floor.floor_mb is None:
            ctx.warnings.append(f"{model.label}: no RAM floor found ({floor.error})")
    return floors


def _measure_pending(ctx: RunContext, models: Sequence[ModelFile], recorder: Recorder) -> None:
    """Measure each model with unfinished pairs once per RAM limit those pairs need.

    Models are grouped by runtime and by the limits they still need, so a resumed run measures
    no (model, limit) whose rows are all kept, even when another model needs that limit. In a
    fresh run every model needs every limit: one group, run ``--jobs`` at a time.
    """
    config = ctx.config
    groups: dict[tuple[str, tuple[int, ...]], list[ModelFile]] = {}
    reference = max(p.ram_mb for p in config.profiles)
    for m in models:
        limits = tuple(sorted({p.ram_mb for p in recorder.pending(m.label)}))
        if limits and config.infer and not config.no_cache:
            # a resumed run infers from the same reference run, served from the measurement cache
            # (with --no-cache it would be run again: the largest pending limit is the reference)
            limits = tuple(sorted({*limits, reference}))
        if limits:
            groups.setdefault((_runtime(ctx, m), limits), []).append(m)
    onnx_files = [m.label for (runtime, _), group in groups.items() for m in group
                  if runtime != (m.runtime or config.resolved_runtimes[0])]
    if onnx_files:
        ctx.warnings.append(f"{', '.join(onnx_files)}: ONNX file(s) measured with onnxruntime (--runtime torch "
                            "applies to PyTorch files)")
    for (runtime, limits), group in groups.items():
        ctx.progress.working_on(f"measuring {len(group)} model(s) under {len(limits)} RAM limit(s)")
        measure.measure_models(group, limits, client=ctx.client, settings=config.settings(runtime), jobs=config.jobs,
                               timeout_s=config.timeout_s, exports=ctx.exports, on_result=recorder,
                               converts=ctx.converts, store=ctx.store, infer=config.infer,
                               calibration=config.calibration_inputs)
