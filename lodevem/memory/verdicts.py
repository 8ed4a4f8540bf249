"""A run's verdict, from what the sandbox reported: ``fits``, ``oom`` (with the phase it died
in), ``thrashing``, ``timeout`` or ``error``, as one typed ``MemoryMeasurement`` (see the page
cache note in ``lodevem.measure`` for why fitting needs VmHWM <= limit); and the records of runs
that did not happen (a model that could not be run, a row inferred from a larger limit's run)."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..results import HostTimings, MeasuredModel, MemoryMeasurement, OomPhase, PeakMemory, SandboxFacts
from ..sandbox.client import MeasureSettings, ModelSection, SandboxRun, WorkerClient
from ..wire.verdict import Verdict
from .planning import inferred_note

__all__ = ["classify", "failed_measurement", "inferred", "oom_phase", "to_measurement"]

_PHASES = (("run ", OomPhase.INFERENCE), ("warmup ", OomPhase.WARMUP), ("loaded", OomPhase.WARMUP),
           ("imported", OomPhase.MODEL_LOAD), ("start", OomPhase.RUNTIME_IMPORT))


def _mb(kb: Optional[float]) -> Optional[float]:
    return None if kb is None else round(kb / 1024, 1)


def oom_phase(stderr_tail: str) -> Optional[OomPhase]:
    """Where the worker was when it died, from its last progress line."""
    lines = [ln.split("lodevem-worker: ", 1)[1] for ln in stderr_tail.splitlines() if "lodevem-worker: " in ln]
    for prefix, phase in _PHASES:
        if lines and lines[-1].startswith(prefix):
            return phase
    return OomPhase.BEFORE_START if not lines else None


def classify(run: SandboxRun) -> tuple[Verdict, Optional[str], Optional[OomPhase]]:
    """``(verdict, one-line explanation or None, phase or None)`` for one run."""
    outcome, limit = run.outcome, run.outcome.limit_mb
    problem = run.problem()
    if problem is not None:
        kind, message = problem
        if kind != Verdict.OOM:
            return kind, message, None
        phase = oom_phase(outcome.stderr_tail)
        where = f" {phase}" if phase else ""
        return Verdict.OOM, f"out of memory at {limit} MB{where} ({outcome.limit_enforcement})", phase
    memory = run.reply.memory if run.reply is not None else None
    hwm = _mb(memory.hwm_kb) if memory is not None else None
    if limit is not None and hwm is not None and hwm > limit:
        return Verdict.OOM, (f"peak RSS {hwm:.0f} MB exceeds the {limit} MB limit (it ran only because the runtime's "
                       "shared pages were cached and charged outside the container)"), OomPhase.RSS_OVER_LIMIT
    return Verdict.FITS, None, None


def to_measurement(run: SandboxRun, *, identity: str, model_sha256: str, settings: MeasureSettings,
                   worker_version: str) -> MemoryMeasurement:
    verdict, message, phase = classify(run)
    outcome, reply = run.outcome, run.reply
    mem = reply.memory if reply is not None else None
    model = (reply.model if reply is not None else None) or ModelSection()
    timings = reply.latency if reply is not None else None
    cgroup_peak = outcome.observed.get("cgroup_peak_mb")
    if cgroup_peak is None and mem is not None and mem.cgroup_peak_bytes and outcome.backend == "docker":
        cgroup_peak = round(mem.cgroup_peak_bytes / 2**20, 1)
    faults = mem.major_faults if mem is not None else None
    fitted = mem if verdict in (Verdict.FITS, Verdict.OOM) else None  # only then are its figures a peak
    peak = PeakMemory(major_faults=faults) if fitted is None else PeakMemory(
        _mb(fitted.hwm_kb), _mb(fitted.runtime_baseline_kb), _mb(fitted.model_increment_kb), cgroup_peak, faults)
    return MemoryMeasurement(
        verdict=verdict, limit_mb=int(outcome.limit_mb or 0), runtime=settings.runtime, threads=settings.threads,
        error=message, phase=phase,
        peak=peak, host=(HostTimings(timings.mean_ms, timings.std_ms, timings.p50_ms, timings.p95_ms,
                                     timings.throughput_ips) if timings else HostTimings()),
        sandbox=SandboxFacts(backend=outcome.backend, limit_enforcement=outcome.limit_enforcement, image_id=identity,
                             worker_version=(reply.worker_version if reply is not None else None) or worker_version,
                             wall_s=outcome.wall_s, observed=dict(outcome.observed)),
        model=MeasuredModel(model_sha256, model.format, model.params))


def failed_measurement(limit_mb: int, error: str, client: WorkerClient, settings: MeasureSettings,
                       model_sha256: str) -> MemoryMeasurement:
    """An ``error`` verdict for a model that could not even be run (export or derivation failed)."""
    return MemoryMeasurement(
        verdict=Verdict.ERROR, limit_mb=limit_mb, runtime=settings.runtime, threads=settings.threads, error=error,
        peak=PeakMemory(), model=MeasuredModel(model_sha256),
        sandbox=SandboxFacts(backend=client.backend.name, limit_enforcement="", image_id=client.backend.identity,
                             worker_version=client.worker_version, wall_s=0.0))


def inferred(reference: MemoryMeasurement, limit_mb: int) -> MemoryMeasurement:
    """The row of a limit far above the reference run's peak (``memory.planning``): the same
    figures, no run of its own (``wall_s`` 0), and ``limit_enforcement`` saying where from."""
    assert reference.peak.rss_mb is not None
    sandbox = replace(reference.sandbox, wall_s=0.0,
                      limit_enforcement=inferred_note(reference.limit_mb, reference.peak.rss_mb, limit_mb))
    return replace(reference, limit_mb=limit_mb, inferred_from_mb=reference.limit_mb, sandbox=sandbox)


