"""The one predictor pool of a run: every latency runtime, every predictor kind, one cache.

Why one pool: ``start`` (rows measured under several runtimes), ``predict`` and the Python API
all need cells for more than one runtime; a pool per caller loaded nn-Meter's regressors, the
kernel graphs and the cache index once per runtime. Here the kinds (``latency.kinds``) are made
once, graphs are extracted once per (file, fusion rules), and the runtime is an argument of each
prediction, checked against the runtime registry and the chosen ``--predictor``.

Finished cells are kept as JSON (``<output>/.cache/latency``) keyed by everything that
determines them (``cache_identity``), so a rerun of unchanged inputs needs neither nn-Meter nor
onnx; nn-Meter's regressors are loaded only when a cell is not in the cache.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .. import __version__
from ..errors import InputError
from ..profiles import Cluster, Profile
from ..worker.precision import LEVELS
from .cache import JsonCache, digest, file_digest
from .estimator import Estimator, canonical_runtime
from .kernels import Kernel, KernelGraph, extract_kernels
from .kinds import EstimatorKind, KindSetup, PredictionJob, PredictorKind, rules_digest
from .nnmeter import NnMeterCache, NnMeterKind, default_data_dir
from .records import KernelLatency, LatencyPrediction, join_notes

__all__ = ["KINDS", "MODES", "PredictorPool"]

# The predictor kinds, in --predictor auto's order of preference (the estimator, always able, last).
KINDS: dict[str, Callable[[KindSetup], PredictorKind]] = {"nn-meter": NnMeterKind, "estimator": EstimatorKind}
MODES: tuple[str, ...] = ("auto", *KINDS)


def _prediction_sources() -> list[Path]:
    """The source files a prediction's number comes from: the facade, the latency wing, and the
    vocabulary and registry it reads (an edited cost model must not be served from the cache)."""
    package = Path(__file__).resolve().parent.parent
    return [package / "predict.py", *sorted((package / "latency").rglob("*.py")),
            package / "worker" / "precision.py", package / "worker" / "registry.py"]


class PredictorPool:
    """Latency cells for any runtime with a latency model; see the module docstring.

    ``mode``: ``auto`` or a kind's name (``MODES``). ``data_dir``: nn-Meter's data folder (None:
    ``$LODEVEM_NNMETER_DATA``, else nn-Meter's own). ``breakdown``: keep per-kernel figures.
    ``warnings``: run-level messages (fallbacks, kernels nn-Meter skipped), each once.
    """

    def __init__(self, mode: str = "auto", data_dir: Optional[Path | str] = None,
                 estimator: Optional[Estimator] = None, breakdown: bool = False,
                 cache_dir: Optional[Path | str] = None, use_cache: bool = True) -> None:
        if mode not in MODES:
            raise InputError(f"unknown latency predictor '{mode}', expected one of {', '.join(MODES)}")
        self.mode = mode
        folder = default_data_dir(data_dir)
        self.setup = KindSetup(estimator if estimator is not None else Estimator.load(), folder,
                               NnMeterCache(folder), breakdown)
        self.kinds: dict[str, PredictorKind] = {name: make(self.setup) for name, make in KINDS.items()}
        self.cache = JsonCache(Path(cache_dir) if cache_dir is not None else None, enabled=use_cache)
        self.warnings: list[str] = []
        self.cache_hits = self.cache_misses = 0
        self._graphs: dict[tuple[str, str], KernelGraph | InputError] = {}
        self._file_digests: dict[Path, str] = {}
        self._collected: Optional[list[str]] = None
        self._params_digest = digest(self.estimator.params)
        self._code_digest = digest([p.read_text() for p in _prediction_sources()])

    @property
    def estimator(self) -> Estimator:
        return self.setup.estimator

    @property
    def data_dir(self) -> Path:
        return self.setup.data_dir

    def check_runtime(self, runtime: str) -> str:
        """The registry name of ``runtime``; ``InputError`` when it has no latency model, the
        estimator no parameters for it, or the chosen ``--predictor`` does not serve it."""
        name = canonical_runtime(runtime)
        self.estimator.runtime(name)
        if self.mode != "auto":
            self.kinds[self.mode].check_runtime(name)
        return name

    def kind_for(self, profile: Profile, runtime: str) -> tuple[PredictorKind, list[str]]:
        """The kind that predicts ``profile`` for ``runtime``, and why auto passed over the others."""
        if self.mode != "auto":
            return self.kinds[self.mode], []
        reasons = []
        for kind in self.kinds.values():
            why = kind.unavailable(profile, runtime)
            if why is None:
                return kind, reasons
            reasons.append(why)
        raise InputError(f"profile '{profile.id}': no latency predictor for {runtime} ({'; '.join(reasons)})")

    def require(self, profiles: Sequence[Profile], runtime: str, load: bool = True) -> None:
        """Fail fast, before any benchmark runs: a profile's core without estimator parameters,
        ``--predictor nn-meter`` without data. ``load=True`` also loads what the kinds read (a
        refused regressor file is reported here); ``load=False`` (the runner) leaves loading to
        the first cell the cache does not hold, so a fully cached rerun reads no pickle."""
        for profile in profiles:
            self._cluster(profile)
            self.kind_for(profile, runtime)[0].require(profile, load)

    def cache_identity(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str], runtime: str,
                       kind: PredictorKind, reasons: Sequence[str]) -> dict[str, Any]:
        """Everything one cached cell depends on. Whoever adds an input to a prediction must add
        it here: the record layouts are part of the key (their field names), and so are the
        params, the code and the lodevem version, so a change never serves a stale number."""
        return {
            "lodevem": __version__,
            "records": [[f.name for f in fields(c)] for c in (LatencyPrediction, KernelLatency, Kernel)],
            "onnx_sha256": self._file_digest(onnx_path),
            "profile": profile.model_dump(mode="json", exclude={"path", "sha256"}),
            "threads": threads, "level": level, "mode": self.mode, "runtime": runtime, "kind": kind.name,
            "kind_identity": kind.identity(profile), "passed_over": list(reasons),
            "code_sha256": self._code_digest, "breakdown": self.setup.breakdown,
            "estimator_params_sha256": self._params_digest,
        }

    def predict(self, onnx_path: Path | str, profiles: Sequence[Profile], threads: int, level: Optional[str],
                runtime: str, converted_path: Optional[Path] = None) -> dict[str, LatencyPrediction]:
        """Cells of one exported model on every profile, keyed by profile id. ``level``: the
        compression variant the file is (``worker.precision.LEVELS``): predicted from the fp32
        graph with each kernel at the level's arithmetic."""
        if threads < 1:
            raise InputError(f"--threads must be >= 1, got {threads}")
        if level is not None and level not in LEVELS:
            raise InputError(f"no latency model for level '{level}'")
        runtime = self.check_runtime(runtime)
        return {p.id: self._predict_one(Path(onnx_path), p, threads, level, runtime, converted_path)
                for p in profiles}

    def _predict_one(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str], runtime: str,
                     converted_path: Optional[Path]) -> LatencyPrediction:
        self._cluster(profile)
        kind, reasons = self.kind_for(profile, runtime)
        key = (digest(self.cache_identity(onnx_path, profile, threads, level, runtime, kind, reasons))
               if self.cache.dir else None)
        entry = self.cache.get(key) if key else None
        if entry is not None:
            try:
                cached: Optional[LatencyPrediction] = LatencyPrediction.from_dict(entry["prediction"])
            except (KeyError, TypeError, ValueError):
                cached = None
            if cached is not None:
                self.cache_hits += 1
                for message in entry.get("warnings") or ():
                    self.warn(str(message))
                kind.replay(profile, entry.get("evidence"))
                return cached
        self.cache_misses += 1
        self._collected = []
        try:
            job = PredictionJob(onnx_path, profile, threads, level, runtime, lambda rules: self._graph(onnx_path, rules),
                                converted_path)
            prediction = kind.predict(job, self.warn)
            if reasons and prediction.latency_ms is not None:
                reason = "; ".join(reasons)
                prediction = replace(prediction, note=join_notes([prediction.note, f"{reason}: {kind.title}"]))
                self.warn(f"{reason}: latencies come from the {kind.title}")
            collected = list(self._collected)
        finally:
            self._collected = None
        evidence = kind.evidence(profile)
        if key:
            self.cache.put(key, {"prediction": prediction.to_dict(), "warnings": collected, "evidence": evidence})
        return prediction

    def describe(self, runtime: str) -> dict[str, Any]:
        """What the run used, for the manifest (and the paper kit: ``report.methodology``)."""
        described: dict[str, Any] = {"mode": self.mode, "latency_runtime": runtime}
        for kind in self.kinds.values():
            described.update(kind.describe())
        described["estimator"] = {**described.get("estimator", {}), "runtime": runtime}
        described["latency_cache"] = {"hits": self.cache_hits, "misses": self.cache_misses}
        return described

    def _cluster(self, profile: Profile) -> Cluster:
        """The fastest cluster, after checking the estimator knows every core of the profile
        (a clear ``InputError``, whichever kind runs: nn-Meter's transfer needs the estimator too)."""
        for cluster in profile.cpu:
            try:
                self.estimator.core(cluster.core)
            except InputError as exc:
                raise InputError(f"profile '{profile.id}': {exc}") from None
        return profile.fastest_cluster

    def warn(self, message: str) -> None:
        """Add a run-level message (once)."""
        if self._collected is not None and message not in self._collected:
            self._collected.append(message)  # kept with the cached cell, replayed on a hit
        if message not in self.warnings:
            self.warnings.append(message)

    def known_digest(self, path: Path, sha256: str) -> None:
        """The digest of ``path`` as the artifact store recorded it at publication (its sidecar):
        not hashed again (resnet50's 100 MB graph: 0.24 s of a first ``predict``)."""
        self._file_digests[Path(path).resolve()] = sha256

    def _file_digest(self, path: Path) -> str:
        key = Path(path).resolve()
        if key not in self._file_digests:
            self._file_digests[key] = file_digest(key)
        return self._file_digests[key]

    def _graph(self, onnx_path: Path, rules: Path) -> KernelGraph | InputError:
        key = (str(onnx_path.resolve()), rules_digest(rules))
        if key not in self._graphs:
            try:
                self._graphs[key] = extract_kernels(onnx_path, rules)
            except InputError as exc:
                self._graphs[key] = exc
        return self._graphs[key]
