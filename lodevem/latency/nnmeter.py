"""The nn-Meter predictor kind (``--predictor nn-meter``): nn-Meter's per-kernel regressors,
carried to the profile's core, clock, threads and arithmetic.

Its data (the regressor files, their loading and the one download) live in ``nnmeter_data``;
this module is the plug-in the predictor registry sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..errors import InputError
from .kinds import KindSetup, PredictionJob, breakdown, estimate_graph, plan_arithmetic, rules_digest
from .memory import resolve
from .nnmeter_data import (
    CPU_PREDICTORS,
    ENV_VAR,
    FUSION_RULES,
    KernelPredictions,
    NnMeterCache,
    NnMeterPredictorSet,
    default_data_dir,
    describe_data,
    expected_kernels,
    fetch_predictors,
    predictor_dir,
)
from .paper import KindPaper, KindUse
from .papers import nnmeter_paper
from .records import LatencyPrediction, format_clock, join_notes, uncertainty_band
from .selection import Availability, HeldOutError, HeldOutRow
from .work import graph_works

if TYPE_CHECKING:
    from ..profiles import Profile

__all__ = [
    "CPU_PREDICTORS",
    "ENV_VAR",
    "KernelPredictions",
    "NnMeterCache",
    "NnMeterKind",
    "NnMeterPredictorSet",
    "default_data_dir",
    "describe_data",
    "expected_kernels",
    "fetch_predictors",
    "predictor_dir",
]


# ---------------------------------------------------------------------------------------------
# The nn-Meter predictor kind (``--predictor nn-meter``, and ``auto`` where its data exists)
# ---------------------------------------------------------------------------------------------

class NnMeterKind:
    """nn-Meter's regressor gives each kernel's time on its own reference (TFLite 2.1 on a Pixel 4
    Cortex-A76 at 2.42 GHz, one thread); each kernel is carried to the profile's core, clock,
    thread count and arithmetic with the estimator's ratio of the two ``Estimate``s of that
    kernel (target at its own arithmetic / reference fp32). It is TFLite by construction, so it
    serves only the runtimes whose registry entry names it (tflite)."""

    name = "nn-meter"
    title = "nn-Meter"
    # its predictor data are downloaded (lodevem fetch-predictors), not shipped, and it states no
    # held-out error on these phones: opt-in (--predictor nn-meter), never the default
    availability = Availability.OPTIONAL
    mark = "\u2020"

    @staticmethod
    def paper(use: KindUse) -> KindPaper:
        """Its methods sentence, limitation and references (``latency.paper``)."""
        return nnmeter_paper(use)

    def __init__(self, setup: KindSetup) -> None:
        self.setup, self.estimator, self.cache = setup, setup.estimator, setup.nnmeter
        self.data_dir = setup.data_dir
        self._base: dict[tuple[str, str], KernelPredictions] = {}
        self._identities: dict[str, dict[str, Any]] = {}
        self._used: dict[str, Optional[list[str]]] = {}  # name -> legacy pickles read (None: unknown)

    @staticmethod
    def _serves(runtime: str) -> bool:
        from ..wire.registry import RUNTIMES

        return runtime in RUNTIMES and "nn-meter" in RUNTIMES[runtime].predictors

    def check_runtime(self, runtime: str) -> None:
        if not self._serves(runtime):
            raise InputError(f"--predictor nn-meter predicts TFLite 2.1 latencies, not {runtime}: use "
                             f"--latency-runtime tflite, or --predictor estimator / auto for {runtime}")

    def unavailable(self, profile: "Profile", runtime: str) -> Optional[str]:
        name = profile.nnmeter_predictor
        if not self._serves(runtime):
            return f"nn-Meter predicts TFLite 2.1, not {runtime}"
        if name not in CPU_PREDICTORS:
            return f"nn-Meter predictor '{name}' is not a CPU predictor"
        if not self.cache.available(name):
            return f"no nn-Meter data in {predictor_dir(self.data_dir, name)}"
        return None

    def held_out(self, profile: "Profile", runtime: str, threads: int, arithmetic: str) -> Optional[HeldOutError]:
        """None: nn-Meter's own error is on its reference core, not held out on these phones (the
        cell's band is the transfer's)."""
        return None

    def held_out_rows(self) -> tuple[HeldOutRow, ...]:
        return ()  # no held-out figure on these phones: never the default (it is opt-in anyway)

    def require(self, profile: "Profile", load: bool) -> None:
        self._check_cpu_predictor(profile)
        if load or not self.cache.available(profile.nnmeter_predictor):
            self.cache.get(profile.nnmeter_predictor)  # raises the InputError naming the folder/file

    def identity(self, profile: "Profile") -> dict[str, Any]:
        """The predictor folder as the cache key sees it: every regressor file's name and content
        digest (streamed, once per run: a file rewritten in place with its old size and time is
        another predictor, issue 38), and the rules."""
        self.require(profile, load=False)
        name = profile.nnmeter_predictor
        if name not in self._identities:
            folder = predictor_dir(self.data_dir, name)
            from .cache import file_digest

            files = [[p.name, file_digest(p)] for p in sorted(folder.glob("*.pkl"))]
            self._identities[name] = {"name": name, "folder": str(folder), "files": files}
        return {"nnmeter": self._identities[name],
                "rules_sha256": rules_digest(predictor_dir(self.data_dir, name) / FUSION_RULES)}

    def evidence(self, profile: "Profile") -> Any:
        loaded = {s.name: s for s in self.cache.loaded()}.get(profile.nnmeter_predictor)
        legacy = list(loaded.legacy_files) if loaded is not None else None
        self._used[profile.nnmeter_predictor] = legacy
        return legacy

    def replay(self, profile: "Profile", evidence: Any) -> None:
        self._used.setdefault(profile.nnmeter_predictor, evidence)

    def predict(self, job: PredictionJob, warn: Any) -> LatencyPrediction:
        self._check_cpu_predictor(job.profile)
        cluster = job.profile.fastest_cluster
        core, clock, runtime, name = cluster.core, cluster.clock_ghz, job.runtime, job.profile.nnmeter_predictor
        pset = self.cache.get(name)
        graph = job.graph(pset.fusion_rules)
        if isinstance(graph, InputError):
            return LatencyPrediction(None, f"nn-meter:{name} {runtime}", job.threads, core, clock, runtime,
                                     note=f"no latency: {graph}")
        plan = plan_arithmetic(graph, job.level, runtime)
        target = estimate_graph(self.estimator, graph, plan, job, runtime)
        ref_core, ref_clock = CPU_PREDICTORS[name]
        # nn-Meter's phone (a Pixel 4) is not in the SoC table: its memory system is the pooled one
        reference = self.estimator.estimate(graph_works(graph.kernels, resolve(None, ref_core)),
                                            ["fp32"] * len(graph.kernels), ref_core, ref_clock, runtime)
        key = (graph.sha256 + graph.rules, name)
        if key not in self._base:
            self._base[key] = pset.predict(graph.kernels)
        base = self._base[key]
        per_kernel = [None if ms is None else ms * t.ms / r.ms if r.ms > 0 else 0.0
                      for ms, t, r in zip(base.ms, target.kernels, reference.kernels)]
        source = f"nn-meter:{name} {runtime}→{core}@{format_clock(clock)}GHz"
        skipped_note = base.warning()
        if skipped_note:
            est_ms = sum(t.ms for ms, t in zip(base.ms, target.kernels) if ms is None)
            warn(f"{Path(graph.source).name}: {skipped_note}")
            skipped_note += f" (the estimator puts them at {est_ms:.1f} ms)"
        covered = [(ms, t) for ms, t in zip(per_kernel, target.kernels) if ms is not None]
        if not covered:
            return LatencyPrediction(None, source, job.threads, core, clock, runtime,
                                     note=f"no latency: {skipped_note or 'nn-Meter covers no kernel of this model'}")
        ms = sum(m for m, _ in covered)
        compute = sum(m * t.compute_ms / t.ms for m, t in covered if t.ms > 0)
        mape = target.figure.mape_pct if target.figure else None
        low, high = uncertainty_band(ms, mape)
        return LatencyPrediction(
            latency_ms=ms, latency_source=source, threads=job.threads, core=core, clock_ghz=clock, runtime=runtime,
            uncertainty=f"nn-Meter's own error on {ref_core}, then transfer {target.uncertainty}",
            note=join_notes([plan.note(target), skipped_note]),
            kernels=breakdown(graph, per_kernel, self.setup.breakdown), latency_low_ms=low, latency_high_ms=high,
            compute_ms=compute, memory_ms=ms - compute, graph_sha256=graph.sha256, uncertainty_pct=mape)

    def describe(self) -> dict[str, Any]:
        loaded = {s.name: s for s in self.cache.loaded()}
        predictors: dict[str, object] = {}
        for name in sorted(set(self._used) | set(loaded)):
            folder = predictor_dir(self.data_dir, name)
            legacy = list(loaded[name].legacy_files) if name in loaded else self._used.get(name)
            predictors[name] = {"folder": str(folder), "kernels": sorted(p.stem for p in folder.glob("*.pkl")),
                                "legacy_pickles": legacy,
                                "reference": dict(zip(("core", "clock_ghz"), CPU_PREDICTORS.get(name, ())))}
        return {"nnmeter_data": str(self.data_dir), "nnmeter_predictors": predictors}

    @staticmethod
    def _check_cpu_predictor(profile: "Profile") -> None:
        name = profile.nnmeter_predictor
        if name not in CPU_PREDICTORS:
            raise InputError(
                f"profile '{profile.id}': nn-Meter predictor '{name}' does not model a phone CPU core; lodevem "
                f"can carry only {', '.join(CPU_PREDICTORS)} to a profile's core (use --predictor auto or estimator)"
            )
