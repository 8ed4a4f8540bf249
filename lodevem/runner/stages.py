"""The run's stages behind one small interface: plan the jobs, run a job in the session, return a
typed record.

Why one interface: the runner used to call each stage its own way (a thread pool here, a loop
there, the run context handed down as ``Any``), so adding a stage meant learning all of them.
Now ``schedule`` runs any ``Stage``: it asks for the jobs (``plan``), lets the stage start its
slow work for all of them at once when it has any (``start``: armsim's conversion and emulation),
then runs the jobs, ``parallel`` at a time or in order, and returns (job, record) pairs in the
order planned. The stages: ``LatencyStage`` (cells per model), ``EvaluationStage`` (accuracy per
row), ``FloorStage`` (``--find-floor``) and ``MeasureStage`` (peak RAM per RAM limit).
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Generic, Optional, Sequence, TypeVar

from .. import measure
from ..accuracy import EvaluationJob, evaluate_model
from ..latency.kinds import ConvertedFile
from ..latency.records import LatencyPrediction
from ..measure import plan_for
from ..predict import converted_file
from ..profiles import Profile
from ..results import Accuracy, MemoryMeasurement, ModelFile
from ..sandbox.client import MeasureSettings
from .models import latency_runtime, measured_runtime
from .run import Run

__all__ = ["EvaluationStage", "FloorStage", "LatencyStage", "MeasureStage", "Stage", "schedule"]

Job = TypeVar("Job")
Record = TypeVar("Record")


class Stage(Generic[Job, Record]):
    """One stage of a run: ``plan`` its jobs, ``run`` one of them, ``parallel`` at a time."""

    title = ""  # the progress line when the stage begins (empty: none)

    def heading(self, run: Run) -> str:
        return self.title

    def plan(self, run: Run) -> Sequence[Job]:
        """The jobs, in the order their records are wanted."""
        raise NotImplementedError

    def start(self, run: Run, jobs: Sequence[Job]) -> None:
        """Begin slow work for every job at once (default: nothing to begin)."""

    def run(self, run: Run, job: Job) -> Record:
        """One job, run in the run's session."""
        raise NotImplementedError

    def parallel(self, run: Run) -> int:
        return 1


def schedule(run: Run, stage: Stage[Job, Record]) -> list[tuple[Job, Record]]:
    """Run ``stage``'s jobs (see the module docstring); records in the planned order."""
    jobs = list(stage.plan(run))
    if stage.heading(run) and jobs:
        run.progress.stage(stage.heading(run))
    stage.start(run, jobs)
    workers = max(1, min(len(jobs), stage.parallel(run)))
    if workers == 1:
        return [(job, stage.run(run, job)) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(zip(jobs, pool.map(lambda job: stage.run(run, job), jobs)))


def _all_at_once(run: Run) -> int:
    """``--jobs``, else the CPU cores: how many models a stage works on at once."""
    return run.config.memory.jobs or os.cpu_count() or 1


# -- latency ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LatencyJob:
    """One model's cells, for the runtime its rows stand for (``models.latency_runtime``)."""

    model: ModelFile
    runtime: str


@dataclass(frozen=True)
class ModelCells:
    """A model's latency on every profile, and, for a file with all-zero output channels, the
    latency of its graph with them removed (calibrated like its own, so the two compare)."""

    latencies: dict[str, LatencyPrediction]
    channels_removed: dict[str, Optional[float]]


class LatencyStage(Stage[LatencyJob, ModelCells]):
    """Every model's cells through the run's one ``Predictor``: kinds that work outside this
    process start on every model at once (``start``), then the cells are walked in order, so
    notes and warnings are deterministic."""

    title = "predicting latency"

    def __init__(self, models: Sequence[ModelFile]) -> None:
        self.models = models

    def plan(self, run: Run) -> list[LatencyJob]:
        predictor, default = run.predictor, run.config.latency.latency_runtime
        return [LatencyJob(m, predictor.runtime_for(latency_runtime(m.runtime or run.config.runtimes[0], default)))
                for m in self.models]

    def _convert(self, run: Run, job: LatencyJob) -> Optional[Callable[[], ConvertedFile]]:
        """The model in the runtime's own form, made on demand (``predict.converted_file``)."""
        return None if job.model.unusable is not None else converted_file(run.session.converts, job.model,
                                                                              job.runtime)

    def start(self, run: Run, jobs: Sequence[LatencyJob]) -> None:
        config = run.config

        def prepare(job: LatencyJob) -> None:
            run.predictor.prepare(job.model.graph_path, config.profiles, config.memory.threads, job.model.level,
                                  self._convert(run, job), runtime=job.runtime)

        with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), _all_at_once(run)))) as pool:
            list(pool.map(prepare, jobs))

    def run(self, run: Run, job: LatencyJob) -> ModelCells:
        config, model = run.config, job.model
        threads = config.memory.threads
        cells = run.predictor.cells(model.graph_path, config.profiles, threads, model.level, self._convert(run, job),
                                    export_error=model.graph_error or "", runtime=job.runtime)
        removed: dict[str, Optional[float]] = {}
        if model.channels_removed_graph is not None:
            without = run.predictor.cells(model.channels_removed_graph, config.profiles, threads, runtime=job.runtime)
            removed = {pid: cell.latency_ms for pid, cell in without.items()}
        return ModelCells(cells, removed)


# -- accuracy ---------------------------------------------------------------------------------------

class EvaluationStage(Stage[EvaluationJob, Accuracy]):
    """Every row's accuracy on ``--eval-data``, ``--jobs`` at a time, under the runtime that
    measures the row, on the files its measurement runs (``accuracy.evaluate``)."""

    def __init__(self, models: Sequence[ModelFile]) -> None:
        self.models = models

    def heading(self, run: Run) -> str:
        data = run.eval_data
        return f"evaluating accuracy on {data.samples} samples of {data.source.name} (in the sandbox)" if data else ""

    def plan(self, run: Run) -> list[EvaluationJob]:
        data = run.eval_data
        if data is None:
            return []
        return [EvaluationJob(m, dataclasses.replace(run.config.settings(measured_runtime(run, m)),
                                                     input_shape=data.input_shape), data) for m in self.models]

    def parallel(self, run: Run) -> int:
        return run.config.memory.jobs or 1

    def run(self, run: Run, job: EvaluationJob) -> Accuracy:
        plan = plan_for(run.session, job.settings, run.config.data.calibration_inputs)
        return evaluate_model(job, plan, run.store, run.progress.working_on)


# -- memory -----------------------------------------------------------------------------------------

class FloorStage(Stage[ModelFile, Optional[int]]):
    """``--find-floor``: the smallest RAM limit (8 MB tolerance) each usable model completes in."""

    def __init__(self, models: Sequence[ModelFile]) -> None:
        self.models = models

    def plan(self, run: Run) -> list[ModelFile]:
        return [m for m in self.models if m.unusable is None] if run.config.memory.find_floor else []

    def run(self, run: Run, job: ModelFile) -> Optional[int]:
        config = run.config
        run.progress.working_on(f"bisecting the RAM floor of {job.label}")
        settings = MeasureSettings(runtime=measured_runtime(run, job), warmup=1, runs=3,
                                   input_shape=config.inputs.input_shape)
        session = run.session
        floor = measure.find_floor(job, client=session.client, settings=settings, timeout_s=config.memory.timeout_s,
                                   exports=session.exports, converts=session.converts, store=session.store,
                                   calibration=config.data.calibration_inputs)
        if floor.floor_mb is None:
            run.warnings.append(f"{job.label}: no RAM floor found ({floor.error})")
        return floor.floor_mb


@dataclass(frozen=True)
class MeasureJob:
    """Models measured together: one runtime, the RAM limits their unfinished pairs need."""

    runtime: str
    limits: tuple[int, ...]
    models: tuple[ModelFile, ...]


Recorded = Callable[[str, int, MemoryMeasurement], None]


class MeasureStage(Stage[MeasureJob, None]):
    """Each model with unfinished pairs, measured once per RAM limit those pairs need; every
    measurement goes to ``recorder`` (``runner.state.Recorder``) as it finishes.

    Models are grouped by runtime and by the limits they still need, so a resumed run measures
    no (model, limit) whose rows are all kept, even when another model needs that limit. In a
    fresh run every model needs every limit: one group, run ``--jobs`` at a time.
    """

    def __init__(self, models: Sequence[ModelFile], recorder: measure.ResultFn,
                 pending: Callable[[str], Sequence[Profile]]) -> None:
        self.models, self.recorder, self.pending = models, recorder, pending

    def plan(self, run: Run) -> list[MeasureJob]:
        config = run.config
        groups: dict[tuple[str, tuple[int, ...]], list[ModelFile]] = {}
        reference = max(p.ram_mb for p in config.profiles)
        for m in self.models:
            limits = tuple(sorted({p.ram_mb for p in self.pending(m.label)}))
            if limits and config.memory.infer and not config.results.no_cache:
                # a resumed run infers from the same reference run, served from the measurement cache
                # (with --no-cache it would be run again: the largest pending limit is the reference)
                limits = tuple(sorted({*limits, reference}))
            if limits:
                groups.setdefault((measured_runtime(run, m), limits), []).append(m)
        onnx_files = [m.label for (runtime, _), group in groups.items() for m in group
                      if runtime != (m.runtime or config.runtimes[0])]
        if onnx_files:
            run.warnings.append(f"{', '.join(onnx_files)}: ONNX file(s) measured with onnxruntime (--runtime torch "
                                "applies to PyTorch files)")
        return [MeasureJob(runtime, limits, tuple(group)) for (runtime, limits), group in groups.items()]

    def run(self, run: Run, job: MeasureJob) -> None:
        config, session = run.config, run.session
        run.progress.working_on(f"measuring {len(job.models)} model(s) under {len(job.limits)} RAM limit(s)")
        measure.measure_models(job.models, job.limits, client=session.client, settings=config.settings(job.runtime),
                               jobs=config.memory.jobs, timeout_s=config.memory.timeout_s, exports=session.exports,
                               on_result=self.recorder, converts=session.converts, store=session.store,
                               infer=config.memory.infer, calibration=config.data.calibration_inputs)
