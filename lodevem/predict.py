"""Per-profile latency: nn-Meter where its data exists, the calibrated estimator everywhere.

One :class:`Predictor` per run. For each model it extracts nn-Meter's kernels once, then for each
profile predicts single-thread (or ``--threads N``) latency on the profile's fastest cluster,
for one named runtime (``--latency-runtime``: ``tflite`` = TFLite + XNNPACK, or ``ncnn``):

* **nn-Meter path** - nn-Meter's regressor gives each kernel's time on its own reference (TFLite
  2.1 on a Pixel 4 Cortex-A76 at 2.42 GHz); each kernel is carried to the profile's core, clock
  and thread count with the estimator's *TFLite* ratio time(kernel, core, clock, threads) /
  time(kernel, A76, 2.42 GHz, 1 thread). It is TFLite by construction, so it serves only the
  ``tflite`` runtime: with ``ncnn``, ``auto`` takes the estimator and ``nn-meter`` refuses.
* **estimator path** - :mod:`lodevem.latency.estimator` alone, for the chosen runtime.

``mode="auto"`` takes nn-Meter when the profile's predictor folder exists, else the estimator;
``"nn-meter"`` refuses to run without the data (``InputError`` naming the folder looked in);
``"estimator"`` never looks for nn-Meter data. A latency that cannot be estimated is ``None``
with the reason, never a made-up number. Every ``latency_source`` names the runtime.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from . import __version__
from .errors import InputError
from .latency.cache import JsonCache, digest, file_digest
from .latency.estimator import DEFAULT_RUNTIME, Estimator, canonical_runtime, work_vector
from .latency.kernels import DEFAULT_RULES, Kernel, KernelGraph, extract_kernels
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
_NNMETER_RUNTIME = "tflite"  # nn-Meter's CPU predictors model TFLite 2.1


def level_precision(level: Optional[str]) -> str:
    """The arithmetic a compression level runs in (``pruned`` is an fp32 graph)."""
    if level in _INT8_LEVELS:
        return "int8"
    return "fp16" if level == "fp16" else "fp32"


def _prediction_sources() -> list[Path]:
    """The source files a prediction's number comes from (this module and the latency wing)."""
    here = Path(__file__).resolve()
    return [here, *sorted((here.parent / "latency").glob("*.py"))]


def _file_arithmetic(graph: KernelGraph) -> str:
    """The precision whose error figures a file's cell carries: int8 when any kernel is int8,
    else fp16 when any is fp16, else fp32."""
    found = {k.precision for k in graph.kernels}
    return "int8" if "int8" in found else "fp16" if "fp16" in found else "fp32"


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
    runtime: str = ""  # the runtime the number stands for (tflite, ncnn); "" when there is none
    uncertainty: Optional[str] = None
    note: Optional[str] = None
    kernels: tuple[KernelLatency, ...] = ()
    # What scaled this number after prediction, one line each (e.g. a one-shot calibration on
    # the real device); empty when nothing did. The paper kit lists them.
    calibrations: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (the latency cache stores it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LatencyPrediction":
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["kernels"] = tuple(KernelLatency(**k) for k in values.get("kernels") or ())
        values["calibrations"] = tuple(values.get("calibrations") or ())
        return cls(**values)

    @classmethod
    def unavailable(cls, profile: Profile, reason: str, threads: int = 1, runtime: str = "") -> "LatencyPrediction":
        """A cell with no number and the reason (e.g. the model could not be exported)."""
        cluster = profile.fastest_cluster
        return cls(None, "unavailable", threads, cluster.core, cluster.clock_ghz, runtime, note=f"no latency: {reason}")


class Predictor:
    """Latency predictions for one run: predictor sets and kernel lists are loaded once.

    ``data_dir``: the nn-Meter data folder (``--nnmeter-data``); ``None`` means
    ``$LODEVEM_NNMETER_DATA``, else nn-Meter's own configured folder (``~/.nn_meter/data``).
    ``breakdown=True`` keeps per-kernel figures in each prediction. ``warnings`` collects
    run-level messages (fallbacks, kernels nn-Meter skipped), each once. ``runtime``: the runtime
    the latencies stand for (``tflite`` or ``ncnn``, aliases such as ``tflite-xnnpack`` accepted).

    ``cache_dir``: where finished predictions are kept as JSON (``<output>/.cache/latency``),
    keyed by everything that determines them (``cache_identity``), so a rerun of unchanged inputs
    needs neither nn-Meter nor onnx; ``use_cache=False`` recomputes (and refreshes the cache).
    nn-Meter's regressors are loaded only when a prediction is not in the cache.
    """

    def __init__(
        self,
        mode: Mode | str = "auto",
        data_dir: Optional[Path | str] = None,
        estimator: Optional[Estimator] = None,
        breakdown: bool = False,
        runtime: str = DEFAULT_RUNTIME,
        cache_dir: Optional[Path | str] = None,
        use_cache: bool = True,
    ) -> None:
        if mode not in MODES:
            raise InputError(f"unknown latency predictor '{mode}', expected one of {', '.join(MODES)}")
        self.runtime = canonical_runtime(runtime)
        if mode == "nn-meter" and self.runtime != _NNMETER_RUNTIME:
            raise InputError(f"--predictor nn-meter predicts TFLite 2.1 latencies, not {self.runtime}: use "
                             f"--latency-runtime tflite, or --predictor estimator / auto for {self.runtime}")
        self.mode = mode
        self.data_dir = default_data_dir(data_dir)
        self.estimator = estimator if estimator is not None else Estimator.load()
        self.estimator.runtime(self.runtime)  # a runtime the params do not cover: InputError now
        self.breakdown = breakdown
        self.nnmeter = NnMeterCache(self.data_dir)
        self.cache = JsonCache(Path(cache_dir) if cache_dir is not None else None, enabled=use_cache)
        self.warnings: list[str] = []
        self.cache_hits = 0
        self.cache_misses = 0
        self._graphs: dict[tuple[str, str], KernelGraph | InputError] = {}
        self._nn_cache: dict[tuple[str, str], KernelPredictions] = {}
        self._digests: dict[Path, str] = {}
        self._works: dict[str, tuple[tuple[float, ...], ...]] = {}
        self._file_digests: dict[Path, str] = {}
        self._set_identities: dict[str, dict[str, Any]] = {}
        self._nnmeter_used: dict[str, Optional[list[str]]] = {}  # name -> legacy pickles (None: unknown)
        self._collected: Optional[list[str]] = None
        self._params_digest = digest(self.estimator.params)
        # the prediction code itself: an edited cost model must not be served from the cache
        self._code_digest = digest([p.read_text() for p in _prediction_sources()])

    # -- what the run will use ------------------------------------------------------------------

    def uses_nnmeter(self, profile: Profile) -> bool:
        """Whether ``profile`` goes through nn-Meter in this run's mode."""
        if self.mode == "estimator" or self.runtime != _NNMETER_RUNTIME:
            return False
        name = profile.nnmeter_predictor
        usable = name in CPU_PREDICTORS and self.nnmeter.available(name)
        return usable or self.mode == "nn-meter"

    def require(self, profiles: Sequence[Profile], load: bool = True) -> None:
        """Fail fast, before any benchmark runs, if ``nn-meter`` mode lacks data or a profile's
        core has no estimator parameters. ``load=True`` also loads the predictor sets (once), so
        a refused or broken regressor file is reported here; ``load=False`` (the runner) only
        checks that the folders hold a set and leaves loading to the first prediction the cache
        does not hold: a fully cached rerun then reads no pickle at all."""
        for profile in profiles:
            self._cluster(profile)
            if self.uses_nnmeter(profile):
                self._check_cpu_predictor(profile)
                if load or not self.nnmeter.available(profile.nnmeter_predictor):
                    self.nnmeter.get(profile.nnmeter_predictor)  # raises the InputError naming the folder/file

    def describe(self) -> dict[str, object]:
        """What the run used, for the manifest (and the paper kit: ``report.methodology``)."""
        params = self.estimator.params.get("provenance", {})
        unc = self.estimator.params.get("uncertainty", {})
        loaded = {s.name: s for s in self.nnmeter.loaded()}
        nn_predictors: dict[str, object] = {}
        for name in sorted(set(self._nnmeter_used) | set(loaded)):
            folder = predictor_dir(self.data_dir, name)
            legacy = list(loaded[name].legacy_files) if name in loaded else self._nnmeter_used.get(name)
            nn_predictors[name] = {"folder": str(folder), "kernels": sorted(p.stem for p in folder.glob("*.pkl")),
                                   "legacy_pickles": legacy,
                                   "reference": dict(zip(("core", "clock_ghz"), CPU_PREDICTORS.get(name, ())))}
        return {
            "mode": self.mode,
            "latency_runtime": self.runtime,
            "nnmeter_data": str(self.data_dir),
            "nnmeter_predictors": nn_predictors,
            "estimator": {"version": self.estimator.version, "params": str(self.estimator.path),
                          "params_sha256": self._params_digest,
                          "fit_date": params.get("fit_date"), "lodo_mape_pct": self.estimator.lodo_mape_pct,
                          "lodo_within_10_pct": unc.get("lodo_within_10_pct"),
                          "lodo_within_25_pct": unc.get("lodo_within_25_pct"), "lodo_rows": unc.get("lodo_rows"),
                          "baseline_lodo_mape_pct": unc.get("baseline_lodo_mape_pct"),
                          "data_sources": list(params.get("data_sources") or ()),
                          "data_sha256": params.get("data_sha256"),
                          "rows_used": params.get("rows_used"), "same_core_spread": unc.get("same_core_spread"),
                          "oneshot_mape_pct": unc.get("oneshot_mape_pct"), "runtime": self.runtime},
            "latency_cache": {"hits": self.cache_hits, "misses": self.cache_misses},
        }

    def cache_identity(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str]) -> dict[str, Any]:
        """Everything one cached prediction depends on. Whoever adds an input to a prediction
        (a calibration, a latency runtime, a kernel field) must add it here: the record layouts
        are part of the key (their field names), and so are the params file's content and the
        lodevem version, so a code or data change never serves a stale number."""
        use_nn = self.uses_nnmeter(profile)
        name = profile.nnmeter_predictor
        identity: dict[str, Any] = {
            "lodevem": __version__,
            "records": [[f.name for f in fields(c)] for c in (LatencyPrediction, KernelLatency, Kernel)],
            "onnx_sha256": self._file_digest(onnx_path),
            "profile": profile.model_dump(mode="json", exclude={"path", "sha256"}),
            "threads": threads,
            "level": level,
            "mode": self.mode,
            "runtime": self.runtime,
            "code_sha256": self._code_digest,
            "breakdown": self.breakdown,
            "estimator_params_sha256": self._params_digest,
            "nnmeter": self._set_identity(name) if use_nn else None,
            "rules_sha256": self._rules_digest(self._rules_path(profile, use_nn)),
        }
        if self.mode == "auto" and not use_nn:  # the note names the folder that was looked in
            identity["nnmeter_data"] = str(self.data_dir)
        return identity

    # -- prediction -------------------------------------------------------------------------------

    def predict(
        self, onnx_path: Path | str, profiles: Sequence[Profile], threads: int = 1, level: Optional[str] = None
    ) -> dict[str, LatencyPrediction]:
        """Latency of one exported model on every profile, keyed by profile id.

        ``level`` is the compression variant the file is (``lodevem.levels``): ``fp16`` and the
        ``int8`` levels are predicted as the fp32 graph divided by per-kernel factors of the core
        and runtime (``Estimator.precision_divisor``).
        """
        if threads < 1:
            raise InputError(f"--threads must be >= 1, got {threads}")
        if level not in _FP32_LEVELS + _INT8_LEVELS + ("fp16",):
            raise InputError(f"no latency model for level '{level}'")
        return {p.id: self._predict_one(Path(onnx_path), p, threads, level) for p in profiles}

    def _predict_one(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str]) -> LatencyPrediction:
        self._cluster(profile)
        use_nn = self.uses_nnmeter(profile)
        if use_nn:
            self._check_cpu_predictor(profile)
        key = digest(self.cache_identity(onnx_path, profile, threads, level)) if self.cache.dir else None
        entry = self.cache.get(key) if key else None
        if entry is not None:
            try:
                prediction = LatencyPrediction.from_dict(entry["prediction"])
            except (KeyError, TypeError, ValueError):
                prediction = None
            if prediction is not None:
                self.cache_hits += 1
                for message in entry.get("warnings") or ():
                    self._warn(str(message))
                if use_nn:
                    self._nnmeter_used.setdefault(profile.nnmeter_predictor, entry.get("nnmeter_legacy_pickles"))
                return prediction
        self.cache_misses += 1
        self._collected = []
        try:
            prediction = self._compute_one(onnx_path, profile, threads, level, use_nn)
            collected = list(self._collected)
        finally:
            self._collected = None
        legacy = None
        if use_nn:
            loaded = {s.name: s for s in self.nnmeter.loaded()}.get(profile.nnmeter_predictor)
            legacy = list(loaded.legacy_files) if loaded is not None else None
            self._nnmeter_used[profile.nnmeter_predictor] = legacy
        if key:
            self.cache.put(key, {"prediction": prediction.to_dict(), "warnings": collected,
                                 "nnmeter_legacy_pickles": legacy})
        return prediction

    def _compute_one(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str],
                     use_nn: bool) -> LatencyPrediction:
        cluster = self._cluster(profile)
        core, clock = cluster.core, cluster.clock_ghz
        pset = self._predictor_set(profile) if use_nn else None
        rules = pset.fusion_rules if pset is not None else DEFAULT_RULES
        graph = self._graph(onnx_path, rules)
        runtime = _NNMETER_RUNTIME if use_nn else self.runtime
        if isinstance(graph, InputError):
            source = (f"nn-meter:{profile.nnmeter_predictor} {runtime}" if use_nn
                      else f"{self.estimator.label} {runtime}")
            return LatencyPrediction(None, source, threads, core, clock, runtime, note=f"no latency: {graph}")
        factors, level_note = self._level(graph, core, level, runtime, threads, cluster.count)
        precision = level_precision(level) if level is not None else _file_arithmetic(graph)
        if pset is None:
            return self._estimate(graph, profile, threads, factors, level_note, precision)
        return self._nnmeter(graph, pset.name, profile, threads, factors, level_note, precision)

    def _cluster(self, profile: Profile) -> Cluster:
        """The fastest cluster, after checking the estimator knows every core of the profile
        (a clear ``InputError``, whichever path runs: nn-Meter's transfer needs the estimator too)."""
        for cluster in profile.cpu:
            try:
                self.estimator.core(cluster.core)
            except InputError as exc:
                raise InputError(f"profile '{profile.id}': {exc}") from None
        return profile.fastest_cluster

    def _level(self, graph: KernelGraph, core: str, level: Optional[str], runtime: str = DEFAULT_RUNTIME,
               threads: int = 1, cluster_cores: Optional[int] = None) -> tuple[list[float], Optional[str]]:
        """Per-kernel time divisor for a compression level, and the note saying what was assumed.

        A kernel's divisor is ``Estimator.precision_divisor`` of its own work: a function of
        (core, runtime, kernel category via its work terms, precision, threads). A file that is
        itself quantized or fp16 (``level`` None, kernels with their own precision from the
        worker's float twin) gets the same divisors kernel by kernel: int8 kernels only, fp16
        kernels (fp32 speed on cores without fp16 arithmetic), so it equals ``--levels``."""
        n = len(graph.kernels)
        if level is None and any(k.precision != "fp32" for k in graph.kernels):
            return self._file_precision(graph, core, runtime, threads, cluster_cores)
        if level in _FP32_LEVELS:
            return [1.0] * n, None
        precision = level_precision(level)
        works = self._work(graph)
        # Dynamic int8 quantization: only Linear layers run in int8, convs stay fp32.
        in_precision = [k.category == "fc" if level == "int8" else True for k in graph.kernels]
        divisors = [self.estimator.precision_divisor(w, core, precision, runtime, threads, cluster_cores) if on else 1.0
                    for w, on in zip(works, in_precision)]
        assumed = self.estimator.precision_note(core, precision, runtime)
        if precision == "fp16":
            what = "fp16 variant: per-kernel fp16 factors (compute and bytes)"
        elif level == "int8":
            what = "int8 (dynamic) variant: fc kernels at int8 factors, convs fp32"
        else:
            what = "int8 variant: per-kernel int8 factors (ncnn int8 rows)"
        return divisors, "; ".join(x for x in (what, assumed) if x)

    def _file_precision(self, graph: KernelGraph, core: str, runtime: str, threads: int,
                        cluster_cores: Optional[int]) -> tuple[list[float], Optional[str]]:
        """Divisors from each kernel's own precision (a quantized or fp16 file as given)."""
        divisors = [self.estimator.precision_divisor(w, core, k.precision, runtime, threads, cluster_cores)
                    if k.precision in ("int8", "fp16") else 1.0 for w, k in zip(self._work(graph), graph.kernels)]
        counts = {p: sum(1 for k in graph.kernels if k.precision == p) for p in ("int8", "fp16")}
        parts = [f"{counts[p]}/{len(divisors)} kernels {p} at per-kernel {p} factors" for p in ("int8", "fp16")
                 if counts[p]]
        parts += [n for n in (self.estimator.precision_note(core, p, runtime) for p in ("int8", "fp16") if counts[p])
                  if n]
        scheme = f" ({graph.quantization})" if graph.quantization else ""
        return divisors, f"{graph.precision} file{scheme}: " + "; ".join(parts)

    def _estimate(self, graph: KernelGraph, profile: Profile, threads: int, factors: Sequence[float],
                  level_note: Optional[str], precision: str = "fp32") -> LatencyPrediction:
        cluster = profile.fastest_cluster
        core, clock = cluster.core, cluster.clock_ghz
        runtime = self.runtime
        per_kernel = [self.estimator.latency_ms(w, core, clock, runtime, "fp32", threads, cluster.count) / f
                      for w, f in zip(self._work(graph), factors)]
        notes = [level_note]
        if self.mode == "auto":
            name = profile.nnmeter_predictor
            if runtime != _NNMETER_RUNTIME:
                reason = f"nn-Meter predicts TFLite 2.1, not {runtime}"
            elif name in CPU_PREDICTORS:
                reason = f"no nn-Meter data in {predictor_dir(self.data_dir, name)}"
            else:
                reason = f"nn-Meter predictor '{name}' is not a CPU predictor"
            notes.append(f"{reason}: offline estimator")
            self._warn(f"{reason}: latencies come from the offline estimator")
        return LatencyPrediction(
            latency_ms=sum(per_kernel),
            latency_source=self.estimator.source_label(runtime, core, format_clock(clock)),
            threads=threads,
            core=core,
            clock_ghz=clock,
            runtime=runtime,
            uncertainty=self.estimator.uncertainty(core, runtime, threads, precision),
            note=_join(notes),
            kernels=self._breakdown(graph, per_kernel),
        )

    def _nnmeter(self, graph: KernelGraph, name: str, profile: Profile, threads: int, factors: Sequence[float],
                 level_note: Optional[str], precision: str = "fp32") -> LatencyPrediction:
        cluster = profile.fastest_cluster
        core, clock = cluster.core, cluster.clock_ghz
        runtime = _NNMETER_RUNTIME
        ref_core, ref_clock = CPU_PREDICTORS[name]
        base = self._nn_base(graph, name)
        works = self._work(graph)
        per_kernel: list[Optional[float]] = []
        for work, ms, factor in zip(works, base.ms, factors):
            if ms is None:
                per_kernel.append(None)
                continue
            ratio = self.estimator.transfer_ratio(work, core, clock, ref_core, ref_clock, runtime, threads, cluster.count)
            per_kernel.append(ms * ratio / factor)
        source = f"nn-meter:{name} {runtime}→{core}@{format_clock(clock)}GHz"
        covered = [m for m in per_kernel if m is not None]
        skipped_note = base.warning()
        if skipped_note:
            skipped = [(w, f) for w, m, f in zip(works, base.ms, factors) if m is None]
            est_ms = sum(self.estimator.latency_ms(w, core, clock, runtime, "fp32", threads, cluster.count) / f
                         for w, f in skipped)
            self._warn(f"{Path(graph.source).name}: {skipped_note}")
            skipped_note += f" (the estimator puts them at {est_ms:.1f} ms)"
        if not covered:
            return LatencyPrediction(None, source, threads, core, clock, runtime,
                                     note=f"no latency: {skipped_note or 'nn-Meter covers no kernel of this model'}")
        return LatencyPrediction(
            latency_ms=sum(covered),
            latency_source=source,
            threads=threads,
            core=core,
            clock_ghz=clock,
            runtime=runtime,
            uncertainty=(f"nn-Meter's own error on {ref_core}, then transfer "
                         f"{self.estimator.uncertainty(core, runtime, threads, precision)}"),
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
        if self._collected is not None and message not in self._collected:
            self._collected.append(message)  # kept with the cached prediction, replayed on a hit
        if message not in self.warnings:
            self.warnings.append(message)

    def _check_cpu_predictor(self, profile: Profile) -> None:
        name = profile.nnmeter_predictor
        if name not in CPU_PREDICTORS:
            raise InputError(
                f"profile '{profile.id}': nn-Meter predictor '{name}' does not model a phone CPU core; lodevem "
                f"can carry only {', '.join(CPU_PREDICTORS)} to a profile's core (use --predictor auto or estimator)"
            )

    def _predictor_set(self, profile: Profile) -> NnMeterPredictorSet:
        self._check_cpu_predictor(profile)
        return self.nnmeter.get(profile.nnmeter_predictor)

    def _rules_path(self, profile: Profile, use_nn: bool) -> Path:
        """The fusion rules a prediction uses, known without loading any regressor."""
        if not use_nn:
            return DEFAULT_RULES
        return predictor_dir(self.data_dir, profile.nnmeter_predictor) / "fusion_rules.json"

    def _set_identity(self, name: str) -> dict[str, Any]:
        """An nn-Meter predictor folder as the cache key sees it: every regressor file's name,
        size and modification time (hashing 500 MB of pickles per run would defeat the cache)."""
        if name not in self._set_identities:
            folder = predictor_dir(self.data_dir, name)
            files = []
            for path in sorted(folder.glob("*.pkl")):
                stat = path.stat()
                files.append([path.name, stat.st_size, stat.st_mtime_ns])
            self._set_identities[name] = {"name": name, "folder": str(folder), "files": files}
        return self._set_identities[name]

    def _file_digest(self, path: Path) -> str:
        key = Path(path).resolve()
        if key not in self._file_digests:
            self._file_digests[key] = file_digest(key)
        return self._file_digests[key]

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
