"""What one run did, gathered from what it recorded: ``RunFacts`` for the methods text.

Why apart from the text (``methodology``): the facts are read from the rows and the manifest
once, typed, and then both the paper kit and the HTML report say them; a sentence can only
quote a figure that is a field here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..latency.described import describe_kind
from ..latency.paper import KindPaper, KindUse
from ..results import PairResult
from ..results.columns import map_text
from ..safe_io.markup import literal_value
from ..version import __version__
from ..wire.registry import on_device_runtimes
from ..wire.shape_sources import SOURCE_WORDS
from ..wire.verdict import Verdict
from .cells import RunCounts, run_counts
from .legend import row_cell
from .manifest import Manifest, ManifestLike, manifest_dict
from .run_record import MeasureOptions

__all__ = ["AccuracyFacts", "KindFacts", "LatencyFacts", "MemoryFacts", "RunFacts", "ScopeFacts", "SoftwareFacts",
           "run_facts"]


@dataclass(frozen=True)
class KindFacts:
    """One predictor kind the run's latencies came from: what the run did with it, and its own
    words for the methods (``latency.paper``)."""

    use: KindUse
    mark: str
    paper: KindPaper


@dataclass(frozen=True)
class SoftwareFacts:
    """What the run ran on: lodevem, the packages, the images and the host (the manifest's)."""

    lodevem_version: str
    git_commit: Optional[str]
    git_dirty: Optional[bool]
    packages: Mapping[str, Optional[str]]
    image_id: Optional[str]
    docker_version: Optional[str]
    host_machine: Optional[str]
    host_cpu: Optional[str]
    cgroup_version: Optional[str]
    images: tuple[tuple[str, str], ...] = ()  # (tag, id) of every image the run used
    # (runtime, its package version, converter, converter version) as pinned for the images
    runtime_versions: tuple[tuple[str, Optional[str], Optional[str], Optional[str]], ...] = ()


@dataclass(frozen=True)
class ScopeFacts:
    """What was benchmarked: the models, files, devices and settings the rows cover."""

    models: tuple[str, ...]
    profiles: tuple[str, ...]
    devices: tuple[str, ...]  # "label (chipset, fastest core @ clock, RAM)" per profile
    tiers: tuple[str, ...]
    threads: tuple[int, ...]
    levels: tuple[str, ...]
    counts: Optional[RunCounts] = None
    input_shapes: tuple[str, ...] = ()  # "1x3x32x32 (the evaluation data's sample shape)" per distinct shape
    budgets: tuple[tuple[str, int], ...] = ()  # (profile label, app budget MB)
    user_precisions: tuple[str, ...] = ()  # precisions of the user's own files other than fp32


@dataclass(frozen=True)
class LatencyFacts:
    """Where the run's latencies came from."""

    kinds: tuple[KindFacts, ...]  # in the registry's order (latency.pool.KINDS)
    derived_cores: tuple[str, ...]
    calibrations: tuple[str, ...]
    # (runtime the rows were measured under, runtime their latency was predicted for), per row group
    latency_for: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MemoryFacts:
    """How peak RAM was measured: runtimes, sandboxes, limits, passes and what each file was."""

    runtimes: tuple[str, ...]
    backends: tuple[str, ...]
    enforcements: tuple[str, ...]
    inferred_rows: int  # memory figures inferred from the run at a larger limit (memory.planning)
    measured_rows: int  # memory figures with a run at their own limit
    warmup: Optional[int]
    runs: Optional[int]
    verdicts: tuple[Verdict, ...]
    runtime_baseline_mb: tuple[float, ...]  # (min, max) over rows that ran, or ()
    baselines: tuple[tuple[str, float, float], ...] = ()  # (runtime, min, max) baseline MB over rows that ran
    # (runtime, level, converted precision, scheme alone) of each level a runtime's own converter made
    converted_levels: tuple[tuple[str, str, Optional[str], Optional[str]], ...] = ()
    fallbacks: tuple[str, ...] = ()  # labels of the files measured under torch because a converter refused
    memory_notes: tuple[str, ...] = ()  # each distinct row note on how the measured file was made


@dataclass(frozen=True)
class AccuracyFacts:
    """What --eval-data / --finetune-data did (all empty without them)."""

    evaluation: Optional[str] = None  # --eval-data as the manifest describes it (lodevem.accuracy)
    finetune: Optional[str] = None  # --finetune-data: "<epochs> epoch(s) on <data>" (worker.derive.finetune)
    evaluated_rows: int = 0  # rows with a top-1 figure
    unevaluated_rows: int = 0  # rows of an evaluated run without one (accuracy_note says why)


@dataclass(frozen=True)
class RunFacts:
    """Everything the paper kit says, read from one run's rows and manifest (nothing else), by part."""

    software: SoftwareFacts
    scope: ScopeFacts
    latency: LatencyFacts
    memory: MemoryFacts
    accuracy: AccuracyFacts = field(default_factory=AccuracyFacts)

    @property
    def predicted(self) -> bool:
        return bool(self.latency.kinds)


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(v for v in values if v not in (None, "")))


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _inert_row(row: PairResult) -> PairResult:
    return map_text(row, literal_value)


def run_facts(rows: Sequence[PairResult], manifest: ManifestLike) -> RunFacts:
    """Gather what the run used from its rows (per pair) and its manifest (per run: the typed
    record, or its JSON form read back from a results file). Every string of the rows and the
    manifest is made inert first (``safe_io.markup.literal``): a name a user chose is text in the
    methods paragraph, never a ``{cite:}`` / ``{code:}`` token or a line break."""
    rows = [_inert_row(r) for r in rows]
    env = Manifest.from_dict(literal_value(manifest_dict(manifest)))
    predictor = env.run.predictor or {}
    measured = env.run.config.measure if env.run.config is not None else None
    return RunFacts(
        software=_software_facts(rows, env), scope=_scope_facts(rows),
        latency=_latency_facts(rows, env, predictor if isinstance(predictor, Mapping) else {}),
        memory=_memory_facts(rows, measured),
        accuracy=AccuracyFacts(
            evaluation=env.run.evaluation,
            finetune=env.run.finetune,
            evaluated_rows=sum(1 for r in rows if r.accuracy.top1_pct is not None),
            unevaluated_rows=sum(1 for r in rows if r.accuracy.top1_pct is None
                                 and (r.accuracy.note or r.accuracy.samples is not None))))


def _software_facts(rows: Sequence[PairResult], env: Manifest) -> SoftwareFacts:
    return SoftwareFacts(
        lodevem_version=env.lodevem.version or __version__, git_commit=env.lodevem.git_commit,
        git_dirty=env.lodevem.git_dirty, packages=dict(env.packages), image_id=env.backend.image_id,
        docker_version=env.backend.docker_server_version, host_machine=env.host.machine,
        host_cpu=env.host.cpu_model, cgroup_version=env.host.cgroup_version,
        images=tuple(sorted(env.backend.images.items())),
        runtime_versions=tuple((name, info.version, info.converter, info.converter_version)
                               for name, info in env.runtimes.items() if name in {r.memory.runtime for r in rows}))


def _scope_facts(rows: Sequence[PairResult]) -> ScopeFacts:
    return ScopeFacts(
        models=_distinct([r.model.label for r in rows]),
        profiles=_distinct([r.device.profile_id for r in rows]),
        devices=_distinct([f"{r.device.label} ({r.device.chipset}, {r.device.core} @ {r.device.clock_ghz:g} GHz, "
                           f"{r.device.ram_mb} MB)" for r in rows]),
        tiers=_distinct([r.device.tier for r in rows]),
        threads=tuple(sorted(_distinct([r.device.threads for r in rows]))),
        levels=_distinct([r.model.level for r in rows]),
        counts=run_counts(rows),
        input_shapes=_distinct([f"{r.model.input_shape} "
                                f"({SOURCE_WORDS.get(r.model.input_shape_source, r.model.input_shape_source)})"
                                if r.model.input_shape_source else r.model.input_shape
                                for r in rows if r.model.input_shape]),
        budgets=_distinct([(r.device.label, r.device.app_budget_mb) for r in rows
                           if r.device.app_budget_mb is not None]),
        user_precisions=_distinct([r.model.precision for r in rows if r.model.level is None and r.model.precision
                                   and r.model.precision != "fp32"]))


def _latency_facts(rows: Sequence[PairResult], env: Manifest, predictor: Mapping[str, Any]) -> LatencyFacts:
    derived = _distinct([r.device.core for r in rows if r.latency.for_derived_core])
    return LatencyFacts(
        kinds=_kind_facts(rows, predictor, env.packages), derived_cores=derived,
        calibrations=_distinct([c for r in rows for c in r.latency.calibrations]),
        latency_for=_distinct([(r.memory.runtime, r.latency.runtime) for r in rows
                               if r.latency.ms is not None and r.latency.runtime]))


def _memory_facts(rows: Sequence[PairResult], measured: Optional[MeasureOptions]) -> MemoryFacts:
    ran = [r.memory.runtime_baseline_mb for r in rows if r.memory.runtime_baseline_mb is not None]
    return MemoryFacts(
        runtimes=_distinct([r.memory.runtime for r in rows
                            if r.verdict != Verdict.ERROR or r.memory.limit_enforcement]),
        backends=_distinct([r.memory.backend for r in rows if r.memory.limit_enforcement]),
        enforcements=_distinct([r.memory.enforcement for r in rows
                                if r.memory.inferred_from_mb is None]),
        inferred_rows=sum(1 for r in rows if r.memory.inferred_from_mb is not None),
        measured_rows=sum(1 for r in rows if r.memory.inferred_from_mb is None and r.memory.limit_enforcement),
        warmup=measured.warmup if measured is not None else None,
        runs=measured.runs if measured is not None else None,
        verdicts=_distinct([r.verdict for r in rows]),
        runtime_baseline_mb=(min(ran), max(ran)) if ran else (),
        baselines=tuple((rt, min(v), max(v)) for rt in _distinct([r.memory.runtime for r in rows])
                        for v in [[r.memory.runtime_baseline_mb for r in rows
                                   if r.memory.runtime == rt and r.memory.runtime_baseline_mb is not None]] if v),
        converted_levels=_distinct([(r.memory.runtime, r.model.level, r.memory.converted.precision,
                                     r.memory.converted.scheme_alone) for r in rows
                                    if r.model.level and r.memory.runtime in on_device_runtimes()
                                    and r.memory.converted.mb is not None and not r.memory.fallback]),
        fallbacks=_distinct([r.model.label for r in rows if r.memory.fallback]),
        memory_notes=_distinct([note for r in rows if not r.memory.fallback for note in r.memory.notes]))


def _kind_facts(rows: Sequence[PairResult], predictor: Mapping[str, Any],
                packages: Mapping[str, Optional[str]]) -> tuple[KindFacts, ...]:
    """Each kind the rows' latencies came from (``latency_kind``), with what it served and its words."""
    served = [r for r in rows if r.latency.ms is not None]
    profiles = _distinct([r.device.profile_id for r in rows])
    out = []
    for name in sorted(_distinct([r.latency.kind or "" for r in served]), key=lambda k: (describe_kind(k).order, k)):
        mine = [r for r in served if (r.latency.kind or "") == name]
        figures = [c.figure for c in map(row_cell, mine) if c is not None and c.figure is not None]
        own = _distinct([r.device.profile_id for r in mine])
        use = KindUse(name, own, len(profiles), cells=len(mine), total_cells=len(served),
                      whole_profiles=all((r.latency.kind or "") == name for r in served if r.device.profile_id in own),
                      runtimes=_distinct([r.latency.runtime for r in mine]),
                      cores=_distinct([r.device.core for r in mine]),
                      threads=tuple(sorted(_distinct([r.device.threads for r in mine]))), figures=_distinct(figures),
                      described=predictor, packages=dict(packages))
        described = describe_kind(name)
        out.append(KindFacts(use, described.mark, described.paper(use)))
    return tuple(out)
