"""Plan and run every (model x device profile) pair.

The work is arranged so nothing is done twice: each model is exported to ONNX once (in the
sandbox) and its latency predicted once for all profiles with the predictor loaded once; memory
does not depend on the CPU, so each model is measured once per distinct RAM limit (16 profiles
-> 6 limits) and the verdict shared by every profile with that limit. Rows are written to a
state file atomically after every measurement, so an interrupted run keeps what finished and
``--resume`` continues it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from . import measure
from .derive import derive_cached
from .errors import InputError, LodevemError, ModelFileError
from .report.manifest import collect_manifest
from .predict import LatencyPrediction, Predictor
from .profiles import Profile
from .progress import NullProgress, ProgressSink
from .results import PairResult, RunState
from .worker import WorkerRequest

STATE_FILE = ".lodevem-state.json"
MB = 1024 * 1024


@dataclass(frozen=True)
class ModelFile:
    """A model to benchmark: a user's file as given, or a variant derived from it (``level``)."""

    path: Path
    label: str
    sha256: str
    size_bytes: int
    level: Optional[str] = None


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
        sha, size = measure.file_sha256(p), p.stat().st_size
        if not levels:
            models.append(ModelFile(p, labels[p], sha, size))
        for level in levels:
            models.append(ModelFile(p, f"{labels[p]}@{level}", sha, size, None if level == "fp32" else level))
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
    nnmeter_data: Optional[Path] = None
    input_shape: Optional[tuple[int, ...]] = None
    timeout_s: float = 600.0
    find_floor: bool = False
    levels: tuple[str, ...] = ()
    no_cache: bool = False
    resume: bool = False
    command_line: tuple[str, ...] = ()

    @classmethod
    def from_cli(cls, paths: Sequence[Path], profiles: Sequence[Profile], command_line: Sequence[str],
                 **options: Any) -> "RunConfig":
        return cls(models=tuple(paths), profiles=tuple(profiles), command_line=tuple(command_line), **options)

    def state_key(self, models: Sequence[ModelFile]) -> str:
        """What must match for ``--resume`` to reuse finished rows (not the profile set)."""
        key = {
            "models": [(m.label, m.sha256, m.level) for m in models],
            "warmup": self.warmup, "runs": self.runs, "runtime": self.runtime, "threads": self.threads,
            "predictor": self.predictor, "input_shape": self.input_shape, "backend": self.backend,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class BenchmarkOutcome:
    """Rows in (model, tier, profile) order, the manifest, and warnings for the user."""

    rows: list[PairResult]
    manifest: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


# Worker error kinds that mean the user's file (or --input-shape) is unusable: a bad input, stopped
# before any measurement with exit code 2, rather than a row of errors.
UNUSABLE_FILE_KINDS = ("not_found", "state_dict", "optimizer_checkpoint", "not_a_model", "corrupt",
                       "unsupported_format", "bad_input_shape")


def export_onnx(backend: Any, path: Path, config: RunConfig, cache_dir: Path) -> tuple[Optional[Path], str, dict]:
    """ONNX export of a model file in the sandbox (never in this process), cached by sha256 + shape.

    Returns (path or None, message when it failed, the worker's ``model`` block); raises
    ``ModelFileError`` when the file itself cannot be benchmarked.
    """
    target = measure.onnx_cache_path(cache_dir, measure.file_sha256(path), config.input_shape)
    request = WorkerRequest(action="export-onnx", model_path=str(path),
                            input_shape=list(config.input_shape) if config.input_shape else None,
                            onnx_path=str(target), warmup=0, runs=1)
    outcome = backend.run(request, None, config.timeout_s)
    result = outcome.result or {}
    if result.get("ok") and target.is_file():
        return target, "", result.get("model") or {}
    error = result.get("error") or {}
    if error.get("kind") in UNUSABLE_FILE_KINDS:
        raise ModelFileError(error["message"])
    return None, error.get("message") or measure.classify(outcome)[1] or "ONNX export failed", result.get("model") or {}


def _export_all(models: Sequence[ModelFile], specs: dict[str, "measure.ModelSpec"], failed: dict[str, str],
                done: dict[Path, tuple], backend: Any, config: RunConfig, cache_dir: Path,
                progress: ProgressSink) -> dict[str, tuple]:
    """The ONNX graph each model's latency is predicted from, each distinct file exported once.

    fp16 and int8 levels are predicted from the original's fp32 graph (the predictor applies the
    level's factor), so they share the original's export; a pruned variant is a smaller dense
    model and is predicted from its own derived file. ``done`` holds the exports made so far
    (by file path) and gains the new ones.
    """
    exports = {}
    for model in models:
        if model.label in failed:
            exports[model.label] = (None, failed[model.label], {})
            continue
        path = specs[model.label].path if model.level == "pruned" else model.path
        if path not in done:
            progress.working_on(f"exporting {path.name}")
            done[path] = export_onnx(backend, path, config, cache_dir / "onnx")
        exports[model.label] = done[path]
    return exports


def _row(model: ModelFile, profile: Profile, latency: LatencyPrediction, memory: "measure.MemoryMeasurement",
         info: dict, config: RunConfig, floor_mb: Optional[int]) -> PairResult:
    energy = (latency.latency_ms * profile.power_w
              if latency.latency_ms is not None and profile.power_w is not None else None)
    return PairResult(
        model_label=model.label, model_path=str(model.path), model_sha256=model.sha256, level=model.level,
        model_format=info.get("format"), model_file_mb=round(model.size_bytes / MB, 3),
        params=info.get("params"),
        profile_id=profile.id, profile_label=profile.label, tier=profile.tier, chipset=profile.chipset,
        ram_mb=profile.ram_mb, core=latency.core or profile.fastest_cluster.core,
        clock_ghz=latency.clock_ghz or profile.fastest_cluster.clock_ghz, threads=config.threads,
        latency_ms=latency.latency_ms, latency_source=latency.latency_source,
        latency_uncertainty=latency.uncertainty, latency_note=latency.note,
        verdict=memory.verdict, peak_rss_mb=memory.peak_rss_mb, runtime_baseline_mb=memory.runtime_baseline_mb,
        model_increment_mb=memory.model_increment_mb, cgroup_peak_mb=memory.cgroup_peak_mb,
        limit_mb=memory.limit_mb, limit_enforcement=memory.limit_enforcement, backend=memory.backend,
        runtime=memory.runtime, memory_error=memory.error, memory_cached=memory.cached,
        host_latency_mean_ms=memory.host_latency_mean_ms, host_latency_std_ms=memory.host_latency_std_ms,
        host_latency_p50_ms=memory.host_latency_p50_ms, host_latency_p95_ms=memory.host_latency_p95_ms,
        host_throughput_ips=memory.host_throughput_ips, host_latency_unstable=unstable(memory),
        power_w=profile.power_w, energy_mj=energy, min_ram_mb=floor_mb,
    )


def unstable(memory: "measure.MemoryMeasurement") -> Optional[str]:
    """pyperf's rule of thumb for the host timings: std >= 10 % of the mean is unstable."""
    mean, std = memory.host_latency_mean_ms, memory.host_latency_std_ms
    if not mean or std is None or std < 0.10 * mean:
        return None
    return f"std is {100 * std / mean:.0f} % of the mean"


def _measurement_specs(models: Sequence[ModelFile], backend: Any, config: RunConfig, cache_dir: Path,
                       progress: ProgressSink) -> tuple[dict[str, "measure.ModelSpec"], dict[str, str]]:
    """What each model's memory is measured on: the file itself, or for a ``--levels`` variant the
    file derived once in the sandbox without a limit.

    Measuring the derived file, not a derivation inside the measured run, keeps the original's
    load and the quantization/pruning machinery out of the variant's peak RAM (+110 MB for
    int8-static on mobilenet_v2, see ``derive.derive_cached``). Returns (specs, label -> error).
    """
    specs: dict[str, measure.ModelSpec] = {}
    failed: dict[str, str] = {}
    for model in models:
        path = model.path
        if model.level is not None:
            progress.working_on(f"deriving {model.label} in the sandbox")
            try:
                path = derive_cached(model.path, model.level, cache_dir / "derived", backend, config.input_shape,
                                     config.timeout_s, model.sha256).path
            except LodevemError as exc:
                failed[model.label] = f"could not derive {model.level}: {exc}"
                continue
        specs[model.label] = measure.ModelSpec(path, key=model.label, input_shape=config.input_shape)
    return specs, failed


def run_benchmark(config: RunConfig, progress: Optional[ProgressSink] = None) -> BenchmarkOutcome:
    """Predict latency and measure memory for every (model x profile) pair of ``config``."""
    progress = progress if progress is not None else NullProgress()
    models = label_models(config.models, config.levels)
    warnings: list[str] = []
    predictor = Predictor(mode=config.predictor, data_dir=config.nnmeter_data)
    predictor.require(config.profiles)  # fail fast: --predictor nn-meter without data, unknown cores
    backend, backend_warning = measure.default_backend(config.backend)
    if backend_warning:
        warnings.append(backend_warning)
    if backend.name == "docker":
        measure.sweep_stale_containers(backend.client)
    cache_dir = config.output / ".cache"
    state = _load_state(config, models, warnings)

    progress.stage("exporting models to ONNX (in the sandbox)")
    exported: dict[Path, tuple] = {}
    for path in dict.fromkeys(m.path for m in models):  # the user's files first: a bad one stops here
        progress.working_on(f"exporting {path.name}")
        exported[path] = export_onnx(backend, path, config, cache_dir / "onnx")
    specs, failed = _measurement_specs(models, backend, config, cache_dir, progress)
    exports = _export_all(models, specs, failed, exported, backend, config, cache_dir, progress)
    progress.stage("predicting latency")
    latencies = _predict_all(predictor, models, exports, config)
    warnings.extend(predictor.warnings)

    all_pairs = {(m.label, p.id) for m in models for p in config.profiles}
    progress.start_pairs(len(all_pairs), len(state.done() & all_pairs))
    models = [dataclasses.replace(m, size_bytes=specs[m.label].path.stat().st_size) if m.label in specs else m
              for m in models]
    floors = _find_floors(models, specs, backend, config, cache_dir, progress, warnings)
    recorder = _Recorder(config, {m.label: m for m in models}, exports, latencies, floors, state, progress)
    for label, error in failed.items():
        for limit in recorder.by_limit:
            recorder(label, limit, measure.failed_measurement(limit, error, backend, config.runtime,
                                                              recorder.models[label].sha256, config.threads))
    _measure_pending(models, specs, backend, config, cache_dir, recorder, progress, warnings)

    order = {p.id: i for i, p in enumerate(config.profiles)}
    model_order = {m.label: i for i, m in enumerate(models)}
    rows = sorted((r for r in state.rows if r.profile_id in order and r.model_label in model_order),
                  key=lambda r: (model_order[r.model_label], order[r.profile_id]))
    manifest = collect_manifest(
        list(config.command_line), config.profiles,
        [{"label": m.label, "path": str(m.path), "sha256": m.sha256, "level": m.level} for m in models],
        image_id=backend.identity, backend=backend.name,
        extra={"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in config.__dict__.items()
                          if k not in ("profiles", "models", "command_line")},
               "predictor": predictor.describe()},
    )
    return BenchmarkOutcome(rows, manifest, warnings)


def _load_state(config: RunConfig, models: Sequence[ModelFile], warnings: list[str]) -> RunState:
    """The finished rows to keep: those of an interrupted run with the same key under --resume."""
    key = config.state_key(models)
    state = RunState.load(config.output / STATE_FILE) if config.resume else None
    if state is not None and state.config_key == key:
        return state
    if config.resume and state is not None:
        warnings.append("--resume: the previous run used other models or options; starting afresh")
    return RunState(key)


def _predict_all(predictor: Predictor, models: Sequence[ModelFile], exports: dict[str, tuple], config: RunConfig
                 ) -> dict[str, dict[str, LatencyPrediction]]:
    """Latency of every model on every profile; a model without an export gets cells saying why."""
    latencies = {}
    for model in models:
        onnx_path, error, _ = exports[model.label]
        if onnx_path is None:
            latencies[model.label] = {p.id: LatencyPrediction.unavailable(p, f"no ONNX export: {error}",
                                                                          config.threads) for p in config.profiles}
        else:
            latencies[model.label] = predictor.predict(onnx_path, config.profiles, threads=config.threads,
                                                       level=model.level)
    return latencies


def _find_floors(models: Sequence[ModelFile], specs: dict[str, "measure.ModelSpec"], backend: Any,
                 config: RunConfig, cache_dir: Path, progress: ProgressSink, warnings: list[str]
                 ) -> dict[str, Optional[int]]:
    """``--find-floor``: the smallest RAM limit (8 MB tolerance) each model completes in."""
    floors: dict[str, Optional[int]] = {}
    if not config.find_floor:
        return floors
    for model in models:
        if model.label not in specs:
            continue
        progress.working_on(f"bisecting the RAM floor of {model.label}")
        floor = measure.find_floor(specs[model.label], backend=backend, runtime=config.runtime,
                                   timeout_s=config.timeout_s, cache_dir=cache_dir / "measure",
                                   use_cache=not config.no_cache)
        floors[model.label] = floor.floor_mb
        if floor.floor_mb is None:
            warnings.append(f"{model.label}: no RAM floor found ({floor.error})")
    return floors


class _Recorder:
    """Turns each finished measurement into rows for every profile with that RAM limit, and
    saves the state atomically before reporting progress (an interrupt then loses nothing)."""

    def __init__(self, config: RunConfig, models: dict[str, ModelFile], exports: dict[str, tuple],
                 latencies: dict[str, dict[str, LatencyPrediction]], floors: dict[str, Optional[int]],
                 state: RunState, progress: ProgressSink) -> None:
        self.config, self.models, self.exports, self.latencies = config, models, exports, latencies
        self.floors, self.state, self.progress = floors, state, progress
        self.done = state.done()
        self.by_limit: dict[int, list[Profile]] = {}
        for profile in config.profiles:
            self.by_limit.setdefault(profile.ram_mb, []).append(profile)

    def pending(self, label: str) -> list[Profile]:
        return [p for p in self.config.profiles if (label, p.id) not in self.done]

    def __call__(self, label: str, limit_mb: int, memory: "measure.MemoryMeasurement") -> None:
        exported = self.exports[label][2]  # the measured file's own figures win (a variant's, not its original's)
        info = {"format": memory.model_format or exported.get("format"),
                "params": memory.params if memory.params is not None else exported.get("params")}
        finished = [p for p in self.by_limit[limit_mb] if (label, p.id) not in self.done]
        for profile in finished:
            self.state.rows.append(_row(self.models[label], profile, self.latencies[label][profile.id], memory,
                                        info, self.config, self.floors.get(label)))
            self.done.add((label, profile.id))
        self.state.save(self.config.output / STATE_FILE)
        for profile in finished:
            self.progress.pair_done(label, profile.label)


def _measure_pending(models: Sequence[ModelFile], specs: dict[str, "measure.ModelSpec"], backend: Any,
                     config: RunConfig, cache_dir: Path, recorder: _Recorder, progress: ProgressSink,
                     warnings: list[str]) -> None:
    """Measure each model with unfinished pairs once per RAM limit those pairs need."""
    pending = [m for m in models if m.label in specs and recorder.pending(m.label)]
    limits = sorted({p.ram_mb for m in pending for p in recorder.pending(m.label)})
    # An .onnx file has no torch form: it is always run by onnxruntime (and its rows say so).
    by_runtime: dict[str, list[ModelFile]] = {}
    for m in pending:
        by_runtime.setdefault("onnxruntime" if m.path.suffix.lower() == ".onnx" else config.runtime, []).append(m)
    if config.runtime == "torch" and by_runtime.get("onnxruntime"):
        warnings.append(f"{', '.join(m.label for m in by_runtime['onnxruntime'])}: ONNX file(s) measured "
                        "with onnxruntime (--runtime torch applies to PyTorch files)")
    for runtime, group in by_runtime.items():
        progress.working_on(f"measuring {len(group)} model(s) under {len(limits)} RAM limit(s)")
        measure.measure_models([specs[m.label] for m in group], limits, backend=backend, runtime=runtime,
                               warmup=config.warmup, runs=config.runs, threads=config.threads, jobs=config.jobs,
                               timeout_s=config.timeout_s, cache_dir=cache_dir / "measure",
                               use_cache=not config.no_cache, on_result=recorder)
