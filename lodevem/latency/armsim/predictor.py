"""The ``armsim`` latency predictor: the runtime's own Arm instructions, counted on an emulated
core, turned into milliseconds by the per-core cost model (``costmodel.predict_ms``).

The plug-in seam is one class, ``ArmsimPredictor``, with ``covers`` (can it answer this profile
under this runtime) and ``predict`` (LatencyPrediction per profile id, the record the estimator
returns). The run hands it the converted file (the same .tflite / ncnn files ``--runtime``
measures); profiles are made once per (file, ISA, uarch, threads, precision) and cached.

A cell it cannot fill says why (no profile, no cost-model figure for the core) with
``latency_ms=None``: armsim never invents a number, and ``auto`` then uses the estimator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ...profiles import Profile
from ..records import LatencyPrediction, format_clock
from .costmodel import COST_MODEL_VERSION
from .isa import covered, isa_for_core, uarch_for_core
from .profiler import ArmsimProfiler, ProfileJob

CostFn = Callable[[Any, str, float, int], "tuple[float, float, float, str]"]  # costmodel.predict_ms


def default_cost_model() -> Optional[CostFn]:
    """armfit's fitted cost model, or None when this checkout has none (then no armsim number)."""
    try:
        from .costmodel import predict_ms
    except ImportError:
        return None
    return predict_ms


def _unavailable_error() -> type[Exception]:
    try:
        from .costmodel import CostModelUnavailable
    except ImportError:
        return LookupError
    return CostModelUnavailable


def level_precision_path(level: Optional[str]) -> str:
    """The precision path to profile for a compression level. The converted file already carries
    the level (an int8 .tflite runs int8 kernels; an fp16 file's weights are dequantized by
    LiteRT), so every level profiles the runtime's default path on that ISA (``auto``)."""
    return "auto"


class ArmsimPredictor:
    """Latency from instruction profiles; ``runtime``: tflite or ncnn (the converted file's)."""

    def __init__(self, profiler: ArmsimProfiler, runtime: str, cost_model: Optional[CostFn] = None) -> None:
        self.profiler, self.runtime = profiler, runtime
        self.cost_model = cost_model if cost_model is not None else default_cost_model()

    @property
    def available(self) -> bool:
        return self.cost_model is not None

    def covers(self, profile: Profile) -> bool:
        """Whether armsim profiles this runtime on the profile's fastest core."""
        return self.available and covered(self.runtime, profile.fastest_cluster.core)

    def predict(self, converted: Path, profiles: Sequence[Profile], threads: int = 1,
                input_shape: Optional[Sequence[int]] = None, level: Optional[str] = None
                ) -> dict[str, LatencyPrediction]:
        return {p.id: self.predict_one(converted, p, threads, input_shape, level) for p in profiles}

    def predict_one(self, converted: Path, profile: Profile, threads: int = 1,
                    input_shape: Optional[Sequence[int]] = None, level: Optional[str] = None) -> LatencyPrediction:
        cluster = profile.fastest_cluster
        core, clock = cluster.core, cluster.clock_ghz
        threads_used = min(threads, cluster.count)
        isa = isa_for_core(core)
        if self.cost_model is None:
            return LatencyPrediction.unavailable(profile, "the armsim cost model is not installed", threads_used,
                                                 self.runtime)
        if isa is None or not covered(self.runtime, core):
            return LatencyPrediction.unavailable(profile, f"armsim does not profile {self.runtime} on {core}",
                                                 threads_used, self.runtime)
        job = ProfileJob(Path(converted), self.runtime, isa, threads_used, level_precision_path(level),
                         uarch_for_core(core), tuple(input_shape) if input_shape else None)
        result = self.profiler.profile(job)
        if result.profile is None:
            return LatencyPrediction.unavailable(profile, f"armsim profile failed: {result.error}", threads_used,
                                                 self.runtime)
        try:
            ms, low, high, note = self.cost_model(result.profile, core, clock, threads_used)
        except _unavailable_error() as exc:
            return LatencyPrediction.unavailable(profile, f"armsim: {exc}", threads_used, self.runtime)
        source = (f"armsim:{COST_MODEL_VERSION} {self.runtime} {isa} "
                  f"({core}@{format_clock(clock)}GHz)")
        prof = result.profile
        detail = (f"{prof.total_instructions / 1e6:.1f} M instructions/inference, {prof.precision} path, "
                  f"{prof.runtime_version} under qemu -cpu {prof.qemu_cpu}")
        return LatencyPrediction(ms, source, threads_used, core, clock, self.runtime,
                                 uncertainty=f"{low:.3g}-{high:.3g} ms", note=f"{detail}; {note}" if note else detail,
                                 latency_low_ms=low, latency_high_ms=high,
                                 uncertainty_pct=round(100 * (high - ms) / ms, 1) if ms > 0 else None)
