"""Per-profile latency: nn-Meter where its data exists, the calibrated estimator everywhere.

One :class:`Predictor` per run. For each model it extracts nn-Meter's kernels once, then for each
profile predicts single-thread (or ``--threads N``) fp32 latency on the profile's fastest
cluster:

* **nn-Meter path** - nn-Meter's regressor gives each kernel's time on its own reference (Pixel 4
  Cortex-A76 at 2.42 GHz); each kernel is carried to the profile's core and clock with the
  estimator's ratio time(kernel, core, clock) / time(kernel, A76, 2.42 GHz). Both paths therefore
  share the estimator's shape and differ only in the per-kernel base figure.
* **estimator path** - :mod:`lodevem.latency.estimator` alone.

``mode="auto"`` takes nn-Meter when the profile's predictor folder exists, else the estimator;
``"nn-meter"`` refuses to run without the data (``InputError`` naming the folder looked in);
``"estimator"`` never looks for nn-Meter data. A latency that cannot be estimated is ``None``
with the reason, never a made-up number.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Sequence

from .errors import InputError
from .latency.estimator import Estimator, work_vector
from .latency.kernels import DEFAULT_RULES, KernelGraph, extract_kernels
from .latency.nnmeter import (
    CPU_PREDICTORS,
    KernelPredictions,
    NnMeterCache,
    NnMeterPredictorSet,
    default_data_dir,
    predictor_dir,
)
from .profiles import Cluster, Profile

__all__ = ["MODES", "KernelLatency", "LatencyPrediction", "Predictor", "format_clock"]

Mode = Literal["auto", "nn-meter", "estimator"]
MODES: tuple[str, ...] = ("auto", "nn-meter", "estimator")
# Compression levels (lodevem.levels) whose speed differs from the fp32 graph's, see _level().
_FP32_LEVELS = (None, "fp32", "pruned")  # pruned: its own (smaller) exported graph, fp32 arithmetic
_INT8_LEVELS = ("int8", "int8-static")


def format_clock(clock_ghz: float) -> str:
    """``2.0`` -> ``2.0``, ``2.42`` -> ``2.42``: one decimal at least, no float noise."""
    text = f"{clock_ghz:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@dataclass(frozen=True)
class KernelLatency:
    """One kernel's share of a prediction (``ms`` None: nn-Meter has no predictor for it)."""

    name: str
    nnmeter_type: str
    category: str
    ms: Optional[float]


@dataclass(frozen=True)
class LatencyPrediction:
    """The latency cell of one (model, profile) pair, with where the number comes from."""

    latency_ms: Optional[float]
    latency_source: str
    threads: int
    core: str
    clock_ghz: float
    uncertainty: Optional[str] = None
    note: Optional[str] = None
    kernels: tuple[KernelLatency, ...] = ()

    @classmethod
    def unavailable(cls, profile: Profile, reason: str, threads: int = 1) -> "LatencyPrediction":
        """A cell with no number and the reason (e.g. the model could not be exported)."""
        cluster = profile.fastest_cluster
        return cls(None, "unavailable", threads, cluster.core, cluster.clock_ghz, note=f"no latency: {reason}")


class Predictor:
    """Latency predictions for one run: predictor sets and kernel lists are loaded once.

    ``data_dir``: the nn-Meter data folder (``--nnmeter-data``); ``None`` means
    ``$LODEVEM_NNMETER_DATA``, else nn-Meter's own configured folder (``~/.nn_meter/data``).
    ``breakdown=True`` keeps per-kernel figures in each prediction. ``warnings`` collects
    run-level messages (fallbacks, kernels nn-Meter skipped), each once.
    """

    def __init__(
        self,
        mode: Mode | str = "auto",
        data_dir: Optional[Path | str] = None,
        estimator: Optional[Estimator] = None,
        breakdown: bool = False,
    ) -> None:
        if mode not in MODES:
            raise InputError(f"unknown latency predictor '{mode}', expected one of {', '.join(MODES)}")
        self.mode = mode
        self.data_dir = default_data_dir(data_dir)
        self.estimator = estimator if estimator is not None else Estimator.load()
        self.breakdown = breakdown
        self.nnmeter = NnMeterCache(self.data_dir)
        self.warnings: list[str] = []
        self._graphs: dict[tuple[str, str], KernelGraph | InputError] = {}
        self._nn_cache: dict[tuple[str, str], KernelPredictions] = {}
        self._digests: dict[Path, str] = {}
        self._works: dict[str, tuple[tuple[float, ...], ...]] = {}

    # -- what the run will use ------------------------------------------------------------------

    def uses_nnmeter(self, profile: Profile) -> bool:
        """Whether ``profile`` goes through nn-Meter in this run's mode."""
        if self.mode == "estimator":
            return False
        name = profile.nnmeter_predictor
        usable = name in CPU_PREDICTORS and self.nnmeter.available(name)
        return usable or self.mode == "nn-meter"

    def require(self, profiles: Sequence[Profile]) -> None:
        """Fail fast, before any benchmark runs, if ``nn-meter`` mode lacks data or a profile's
        core has no estimator parameters. Loads the predictor sets (once) as a side effect."""
        for profile in profiles:
            self._cluster(profile)
            if self.uses_nnmeter(profile):
                self._predictor_set(profile)

    def describe(self) -> dict[str, object]:
        """What the run used, for the manifest."""
        params = self.estimator.params.get("provenance", {})
        return {
            "mode": self.mode,
            "nnmeter_data": str(self.data_dir),
            "nnmeter_predictors": {
                s.name: {"folder": str(s.folder), "kernels": sorted(s.regressors), "legacy_pickles": list(s.legacy_files)}
                for s in self.nnmeter.loaded()
            },
            "estimator": {"version": self.estimator.version, "params": str(self.estimator.path),
                          "fit_date": params.get("fit_date"), "lodo_mape_pct": self.estimator.lodo_mape_pct},
        }

    # -- prediction -------------------------------------------------------------------------------

    def predict(
        self, onnx_path: Path | str, profiles: Sequence[Profile], threads: int = 1, level: Optional[str] = None
    ) -> dict[str, LatencyPrediction]:
        """Latency of one exported model on every profile, keyed by profile id.

        ``level`` is the compression variant the file is (``lodevem.levels``): ``fp16`` and the
        ``int8`` levels are predicted as the fp32 graph divided by the fitted per-core factors.
        """
        if threads < 1:
            raise InputError(f"--threads must be >= 1, got {threads}")
        if level not in _FP32_LEVELS + _INT8_LEVELS + ("fp16",):
            raise InputError(f"no latency model for level '{level}'")
        return {p.id: self._predict_one(Path(onnx_path), p, threads, level) for p in profiles}

    def _predict_one(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str]) -> LatencyPrediction:
        cluster = self._cluster(profile)
        core, clock = cluster.core, cluster.clock_ghz
        use_nn = self.uses_nnmeter(profile)
        pset = self._predictor_set(profile) if use_nn else None
        rules = pset.fusion_rules if pset is not None else DEFAULT_RULES
        graph = self._graph(onnx_path, rules)
        if isinstance(graph, InputError):
            source = f"nn-meter:{profile.nnmeter_predictor}" if use_nn else self.estimator.label
            return LatencyPrediction(None, source, threads, core, clock, note=f"no latency: {graph}")
        speedup = self.estimator.thread_speedup(core, threads, cluster.count)
        factors, level_note = self._level(graph, core, level)
        if pset is None:
            return self._estimate(graph, profile, threads, speedup, factors, level_note)
        return self._nnmeter(graph, pset.name, profile, threads, speedup, factors, level_note)

    def _cluster(self, profile: Profile) -> Cluster:
        """The fastest cluster, after checking the estimator knows every core of the profile
        (a clear ``InputError``, whichever path runs: nn-Meter's transfer needs the estimator too)."""
        for cluster in profile.cpu:
            try:
                self.estimator.core(cluster.core)
            except InputError as exc:
                raise InputError(f"profile '{profile.id}': {exc}") from None
        return profile.fastest_cluster

    def _level(self, graph: KernelGraph, core: str, level: Optional[str]) -> tuple[list[float], Optional[str]]:
        """Per-kernel time divisor for a compression level, and the note saying what was assumed."""
        n = len(graph.kernels)
        if level in _FP32_LEVELS:
            return [1.0] * n, None
        if level == "fp16":
            factor = self.estimator.fp16_speedup(core)
            if factor == 1.0:
                return [1.0] * n, f"fp16 variant: {core} has no fp16 arithmetic, fp32 speed assumed"
            return [factor] * n, f"fp16 variant: fp32 estimate / {factor:.2f} (ncnn fp16 speed-up, fitted)"
        ratio = self.estimator.int8_speedup(core)
        if level == "int8":  # dynamic quantization: only Linear layers run in int8
            return [ratio if k.category == "fc" else 1.0 for k in graph.kernels], (
                f"int8 (dynamic) variant: fc kernels / {ratio:.2f} (fp32/int8 ratio of {core}, ncnn), convs fp32")
        return [ratio] * n, f"int8 variant: fp32 estimate / {ratio:.2f} (fp32/int8 ratio of {core}, ncnn)"

    def _estimate(self, graph: KernelGraph, profile: Profile, threads: int, speedup: float,
                  factors: Sequence[float], level_note: Optional[str]) -> LatencyPrediction:
        cluster = profile.fastest_cluster
        core, clock = cluster.core, cluster.clock_ghz
        per_kernel = [self.estimator.work_ms(w, core, clock) / speedup / f for w, f in zip(self._work(graph), factors)]
        notes = [level_note]
        if self.mode == "auto":
            name = profile.nnmeter_predictor
            reason = (f"no nn-Meter data in {predictor_dir(self.data_dir, name)}" if name in CPU_PREDICTORS
                      else f"nn-Meter predictor '{name}' is not a CPU predictor")
            notes.append(f"{reason}: offline estimator")
            self._warn(f"{reason}: latencies come from the offline estimator")
        return LatencyPrediction(
            latency_ms=sum(per_kernel),
            latency_source=f"{self.estimator.label} ({core}@{format_clock(clock)}GHz)",
            threads=threads,
            core=core,
            clock_ghz=clock,
            uncertainty=self.estimator.uncertainty(core),
            note=_join(notes),
            kernels=self._breakdown(graph, per_kernel),
        )

    def _nnmeter(self, graph: KernelGraph, name: str, profile: Profile, threads: int, speedup: float,
                 factors: Sequence[float], level_note: Optional[str]) -> LatencyPrediction:
        cluster = profile.fastest_cluster
        core, clock = cluster.core, cluster.clock_ghz
        ref_core, ref_clock = CPU_PREDICTORS[name]
        base = self._nn_base(graph, name)
        works = self._work(graph)
        per_kernel: list[Optional[float]] = []
        for work, ms, factor in zip(works, base.ms, factors):
            if ms is None:
                per_kernel.append(None)
                continue
            ratio = self.estimator.transfer_ratio(work, core, clock, ref_core, ref_clock)
            per_kernel.append(ms * ratio / speedup / factor)
        source = f"nn-meter:{name}→{core}@{format_clock(clock)}GHz"
        covered = [m for m in per_kernel if m is not None]
        skipped_note = base.warning()
        if skipped_note:
            skipped = [(w, f) for w, m, f in zip(works, base.ms, factors) if m is None]
            est_ms = sum(self.estimator.work_ms(w, core, clock) / f for w, f in skipped) / speedup
            self._warn(f"{Path(graph.source).name}: {skipped_note}")
            skipped_note += f" (the estimator puts them at {est_ms:.1f} ms)"
        if not covered:
            return LatencyPrediction(None, source, threads, core, clock,
                                     note=f"no latency: {skipped_note or 'nn-Meter covers no kernel of this model'}")
        return LatencyPrediction(
            latency_ms=sum(covered),
            latency_source=source,
            threads=threads,
            core=core,
            clock_ghz=clock,
            uncertainty=f"nn-Meter's own error on {ref_core}, then transfer {self.estimator.uncertainty(core)}",
            note=_join([level_note, skipped_note]),
            kernels=self._breakdown(graph, per_kernel),
        )

    def kernel_graph(self, onnx_path: Path | str, profile: Profile) -> KernelGraph | InputError:
        """The (cached) kernel graph ``profile``'s prediction of ``onnx_path`` is made from, for
        steps after prediction such as calibration (``lodevem.latency.calibration``)."""
        pset = self._predictor_set(profile) if self.uses_nnmeter(profile) else None
        return self._graph(Path(onnx_path), pset.fusion_rules if pset is not None else DEFAULT_RULES)

    # -- caches ---------------------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _predictor_set(self, profile: Profile) -> NnMeterPredictorSet:
        name = profile.nnmeter_predictor
        if name not in CPU_PREDICTORS:
            raise InputError(
                f"profile '{profile.id}': nn-Meter predictor '{name}' does not model a phone CPU core; lodevem "
                f"can carry only {', '.join(CPU_PREDICTORS)} to a profile's core (use --predictor auto or estimator)"
            )
        return self.nnmeter.get(name)

    def _graph(self, onnx_path: Path, rules: Path) -> KernelGraph | InputError:
        key = (str(onnx_path.resolve()), self._rules_digest(rules))
        if key not in self._graphs:
            try:
                self._graphs[key] = extract_kernels(onnx_path, rules)
            except InputError as exc:
                self._graphs[key] = exc
        return self._graphs[key]

    def _work(self, graph: KernelGraph) -> tuple[tuple[float, ...], ...]:
        key = graph.sha256 + graph.rules
        if key not in self._works:
            self._works[key] = tuple(work_vector(k) for k in graph.kernels)
        return self._works[key]

    def _rules_digest(self, rules: Path) -> str:
        """Rules files are tiny; hashing them lets identical rules share one kernel extraction."""
        if rules not in self._digests:
            self._digests[rules] = hashlib.sha256(Path(rules).read_bytes()).hexdigest()
        return self._digests[rules]

    def _nn_base(self, graph: KernelGraph, name: str) -> KernelPredictions:
        key = (graph.sha256 + graph.rules, name)
        if key not in self._nn_cache:
            self._nn_cache[key] = self.nnmeter.get(name).predict(graph.kernels)
        return self._nn_cache[key]

    def _breakdown(self, graph: KernelGraph, per_kernel: Sequence[Optional[float]]) -> tuple[KernelLatency, ...]:
        if not self.breakdown:
            return ()
        return tuple(KernelLatency(k.name, k.nnmeter_type, k.category, ms) for k, ms in zip(graph.kernels, per_kernel))


def _join(notes: Sequence[Optional[str]]) -> Optional[str]:
    text = "; ".join(n for n in notes if n)
    return text or None
