"""Plan and run every (model x device profile) pair: the pipeline's run face.

The work is arranged so nothing is done twice: each distinct file is exported to ONNX once (in
the sandbox) and its latency predicted once for all profiles with the predictor loaded once;
memory does not depend on the CPU, so a verdict is shared by every profile with the same RAM
(16 profiles -> 6 limits), and of those only the largest and the limits near or below its peak
are measured: the rows of limits far above it are inferred from it (``memory.planning``; all
measured with ``--no-infer``). Files live in the artifact store (``store``), rows are written to
the run state atomically after every measurement (``runner.state``), so an interrupted run keeps
what finished and ``--resume`` continues it.

The package, in the order a run walks it: ``config`` (``RunConfig``, one typed part per concern),
``run`` (``Run``: what the stages share and what only the run owns: the inputs checked before any
container, the output lock, the state file, the manifest), ``models`` (the models made ready:
per runtime, levels derived, exports read), ``stages`` (predict, evaluate, measure behind one
interface: plan the jobs, run a job in the session, return a typed record) and ``state`` (the
rows kept as they finish). One ``ModelFile`` record per model travels from the command line to
its CSV rows (``PairResult.from_records``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from .. import measure
from ..accuracy import with_drops
from ..errors import InputError, Interrupted
from ..gates import Budget, check_budget, no_figures
from ..progress import ProgressSink
from ..report.combine import merged_manifest, previous_manifest
from ..report.layers import LAYERS_NAME, write_layers_csv
from ..report.manifest import Manifest
from ..results import Accuracy, PairResult, label_models
from ..results.model_file import with_levels
from ..results.outcome import StartResult
from ..safe_io.sniff import name_mismatch
from ..sandbox.base import Backend
from .config import RunConfig
from .device_stage import DeviceStage, open_phone
from .models import converted_level, export_sources, latency_runtime, measured_runtime, per_runtime, prepare_models
from .run import OutputClaim, Run
from .stages import EvaluationStage, FloorStage, LatencyStage, MeasureStage, schedule
from .state import STATE_FILE, Recorder, interrupted_note

__all__ = ["STATE_FILE", "BenchmarkOutcome", "OutputClaim", "RunConfig", "converted_level", "label_models",
           "report_folders",
           "latency_runtime", "run_benchmark", "start"]


@dataclass
class BenchmarkOutcome:
    """Rows in (model, tier, profile) order, the manifest, and warnings for the user."""

    rows: list[PairResult]
    manifest: Manifest
    warnings: list[str] = field(default_factory=list)
    asked: frozenset[str] = frozenset()  # the labels of this run's models (rows of others: an earlier run's)


def run_benchmark(config: RunConfig, progress: Optional[ProgressSink] = None,
                  backend: Optional[Backend] = None) -> BenchmarkOutcome:
    """Predict latency and measure memory for every (model x profile) pair of ``config``.

    ``backend``: an isolation backend to use instead of opening ``config.sandbox.backend``.
    """
    files = label_models(config.models)
    phone = open_phone(config.sandbox.device, config.sandbox.benchmark_binary, config.runtimes,
                       config.memory.timeout_s)  # before anything slow: adb answers, the binary fits the phone
    run = Run.begin(config, progress, backend)
    config = run.config  # with what opening it settled: the default runtime, the samples' shape
    for said in filter(None, (name_mismatch(s.path, s.label) for s in files)):
        run.warn(said)  # the bytes decide the format (safe_io.sniff); the name only confirms
    # the user's files exported first (a bad one stops the run here); what each file is decides
    # its rows: levels of a float file, a compressed file as it is (results.model_file.with_levels)
    sources = with_levels(files, config.inputs.levels, export_sources(run, files))
    planned = [m for base in sources for m in per_runtime(base, config.runtimes)]
    state = run.state(planned)

    models = prepare_models(run, sources)
    cells = {job.model.label: record for job, record in schedule(run, LatencyStage(models))}
    write_layers_csv(config.results.output / LAYERS_NAME,  # where the time goes, per cell (report.layers)
                     [(label, pid, lat) for label, c in cells.items() for pid, lat in c.latencies.items()])
    # without --eval-data a pruned row still says whether it was fine-tuned (accuracy_note)
    evaluated = {job.model.label: record for job, record in schedule(run, EvaluationStage(models))}
    accuracies = with_drops(models, {m.label: evaluated.get(m.label, Accuracy()) for m in models})
    run.warnings.extend(w for w in run.predictor.warnings if w not in run.warnings)  # every runtime's

    manifest = run.manifest(models)
    all_pairs = {(m.label, p.id) for m in models for p in config.profiles}
    run.progress.start_pairs(len(all_pairs), len(state.done() & all_pairs))
    floors = {model.label: floor for model, floor in schedule(run, FloorStage(models))}
    recorder = Recorder(config.results.output, config.profiles, config.memory.threads, run.progress, models,
                        {label: c.latencies for label, c in cells.items()}, floors, state, manifest,
                        {label: c.channels_removed for label, c in cells.items()}, accuracies,
                        user_names=run.user_names())
    if recorder.combined:  # rows of an earlier run with the same settings share the table: and the manifest
        earlier = previous_manifest(config.results.output)
        if earlier is not None:
            recorder.manifest = manifest = merged_manifest([earlier, manifest])
            run.warn(f"{config.results.output} held rows of other models measured with the same settings: this run's "
                     "rows join them in one table (--overwrite replaces them instead)")
    for model in models:
        if model.unusable is not None:
            for limit in recorder.by_limit:
                recorder(model.label, limit, measure.failed_measurement(
                    limit, model.unusable, run.session.client, config.settings(measured_runtime(run, model)),
                    model.sha256))
    try:
        schedule(run, MeasureStage([m for m in models if m.unusable is None], recorder, recorder.pending))
    finally:
        recorder.flush()
    on_phone = DeviceStage(models, phone)
    try:
        measured = [row for _, row in schedule(run, on_phone) if row]
    finally:
        on_phone.finish()
    run.warnings.extend(w for w in run.store.warnings if w not in run.warnings)  # entries set aside
    return BenchmarkOutcome(recorder.rows() + measured, manifest, run.warnings, frozenset(m.label for m in models))


def start(config: RunConfig, budget: Budget, latex_marks: str = "text",
          progress: Optional[ProgressSink] = None) -> StartResult:
    """``lodevem start``: claim the output folder, run every pair, write every output file and
    judge the budget. An interrupt unwinds as ``Interrupted`` saying what was kept."""
    from ..reporter import write_all

    output = config.results.output
    with OutputClaim(output):
        started = time.time()
        try:
            outcome = run_benchmark(config, progress)
        except KeyboardInterrupt as exc:
            raise Interrupted.from_interrupt(exc, interrupted_note(output, started)) from None
        written = write_all(outcome.rows, config.profiles, outcome.manifest, output, latex_marks=latex_marks)
    nothing = no_figures(outcome.rows)  # not a result at all: no gate is judged
    return StartResult(outcome.rows, config.profiles, outcome.warnings, written,
                       [] if nothing else check_budget(outcome.rows, budget), nothing, outcome.asked)


def report_folders(folders: Sequence[Path], output: Optional[Path] = None) -> list[Path]:
    """``lodevem report DIR...``: one folder's ``report.html`` again from its results file; with
    ``output`` (needed for several folders), every output file (CSV, JSON, .tex, paper kit,
    figures, report.html) of the folders' rows as one table, when their settings agree
    (``report.combine``; ``InputError`` naming what differs, exit 2)."""
    from ..report.combine import combine_folders
    from ..report.html import rebuild
    from ..reporter import write_all

    if output is None:
        if len(folders) != 1:
            raise InputError("lodevem report: several results folders are combined into one: name it with --output DIR")
        return [rebuild(folders[0])]
    rows, manifest = combine_folders(folders)
    if not rows:
        raise InputError(f"{', '.join(map(str, folders))}: no result rows to report")
    Path(output).mkdir(parents=True, exist_ok=True)
    return write_all(rows, (), manifest, Path(output))
