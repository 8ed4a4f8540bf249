"""A phone measurement as a results row: the same ``PairResult`` every other row is, with nothing
predicted in it.

Why a row like the others: the CSV, JSON, LaTeX and the report read one shape. What differs is
said in its fields: ``latency_kind`` ``measured`` (no predictor made it; no held-out band, no
uncertainty: the spread is the binary's own ``std``/min/max in the ``device_*`` fields),
``latency_source`` ``measured on <model> (<SoC>)`` with the tool, its version and the binary's
digest, ``backend`` ``adb`` and a memory figure that is the binary's peak footprint on the phone
(no container, no limit: the phone's own RAM).
"""

from __future__ import annotations

import dataclasses

from ..latency.described import MEASURED
from ..latency.records import LatencyPrediction
from ..profiles import Profile
from ..results import (
    MeasuredModel,
    MemoryMeasurement,
    ModelFile,
    PairResult,
    PeakMemory,
    PhoneMeasurement,
    SandboxFacts,
)
from ..wire.verdict import Verdict
from .bench import DeviceMeasurement

__all__ = ["MEASURED_KIND", "device_latency", "device_row"]

MEASURED_KIND = MEASURED  # the reports' words for it: latency.described


def device_latency(found: DeviceMeasurement, profile: Profile) -> LatencyPrediction:
    """The latency cell of a phone measurement: the binary's mean, its own statistics in the note."""
    stats, run = found.run.stats, found.run
    cluster = profile.fastest_cluster
    version = f"{run.tool} {run.version}" if run.version else f"{run.tool} (version not printed by the binary)"
    spread = f", std {stats.std_ms:.4g} ms" if stats.std_ms is not None else ""
    return LatencyPrediction(
        stats.mean_ms, f"{found.measured_on}: {version}, binary sha256 {found.binary_sha256[:12]}", found.threads,
        cluster.core, cluster.clock_ghz, found.runtime,
        note=(f"mean of {stats.count} timed runs after {found.warmup} warm-up run(s) on the phone: min "
              f"{stats.min_ms:.4g} ms, max {stats.max_ms:.4g} ms{spread} ({run.tool}'s own statistics)"),
        kind=MEASURED_KIND)


def device_row(model: ModelFile, profile: Profile, found: DeviceMeasurement) -> PairResult:
    """One row: ``model`` measured on the phone ``profile`` describes (``device.profile``)."""
    run = found.run
    memory = MemoryMeasurement(
        verdict=Verdict.FITS, limit_mb=profile.ram_mb, runtime=found.runtime, threads=found.threads,
        peak=PeakMemory(rss_mb=run.peak_memory_mb), model=MeasuredModel(model.sha256),
        sandbox=SandboxFacts(backend="adb", image_id="", worker_version="", wall_s=0.0,
                             limit_enforcement="none: the phone's own RAM (the benchmark binary ran to the end)"),
        note=("peak: the binary's own peak memory footprint (--report_peak_memory_footprint)"
              if run.peak_memory_mb is not None else "no peak: the binary printed no peak memory footprint"))
    row = PairResult.from_records(model, profile, device_latency(found, profile), memory, threads=found.threads)
    stats = run.stats
    return dataclasses.replace(row, phone=PhoneMeasurement(
        measured_on=found.device.label, runs=stats.count, latency_min_ms=stats.min_ms, latency_max_ms=stats.max_ms,
        latency_std_ms=stats.std_ms, latency_p50_ms=stats.p50_ms, peak_mb=run.peak_memory_mb,
        op_profile=run.op_profile, runtime_version=run.version, binary_sha256=found.binary_sha256))
