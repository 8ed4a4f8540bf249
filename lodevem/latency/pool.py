"""The one predictor pool of a run: every latency runtime, every predictor kind, one cache.

Why one pool: ``start`` (rows measured under several runtimes), ``predict`` and the Python API
all need cells for more than one runtime; a pool per caller loaded nn-Meter's regressors, the
kernel graphs and the cache index once per runtime. Here the kinds (``latency.kinds``) are made
once, graphs are extracted once per (file, fusion rules), and the runtime is an argument of each
prediction, checked against the runtime registry and the chosen ``--predictor``.

``KINDS`` is the one registry of predictor kinds (with the runtime registry's
``RuntimeSpec.predictors`` saying which runtimes each serves). ``--predictor auto`` (the default)
is ``latency.selection``'s rule, applied here: among the kinds every install has
(``Availability.EVERY_INSTALL``) that serve the runtime, the one with the lowest nested held-out
error for the profile's core family and the runtime; so a missing image or missing nn-Meter data
never changes a default cell, and every level of a model on a device is priced by one kind. Its
cells state the nested default's held-out (leave-one-SoC-out) error. A named ``--predictor``
uses that kind; cells it cannot serve are the estimator's, said in ONE run warning.

Finished cells are kept as JSON (``<output>/.cache/latency``) keyed by everything that
determines them (``cache_identity``), so a rerun of unchanged inputs needs neither nn-Meter nor
onnx; nn-Meter's regressors are loaded only when a cell is not in the cache.
"""

from __future__ import annotations

import threading
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..errors import InputError
from ..profiles import Cluster, Profile
from ..version import __version__
from ..wire.precision import ARITHMETIC, LEVELS
from .arithmetic import cell_arithmetic_executed
from .armsim.kind import ArmsimKind
from .cache import JsonCache, digest, file_digest, prediction_sources
from .estimator import Estimator, canonical_runtime
from .kernels import DEFAULT_RULES, Kernel, KernelGraph, extract_kernels
from .kinds import (
    ConvertedFile,
    EstimatorKind,
    KindSetup,
    PredictionJob,
    PredictorKind,
    SandboxAccess,
    graph_arithmetic,
    made_once,
    rules_digest,
)
from .nnmeter import NnMeterCache, NnMeterKind, default_data_dir
from .records import KernelLatency, LatencyPrediction, join_notes
from .selection import Availability, CellKind, DefaultSelection, family_of
from .statement import OPT_IN_REASON, not_default, statement, with_figure

__all__ = ["FALLBACK", "KINDS", "MODES", "PredictorPool", "modes"]

# The one registry of predictor kinds; its order breaks ties of the default's pick (module doc).
KINDS: dict[str, Callable[[KindSetup], PredictorKind]] = {
    "estimator": EstimatorKind, "nn-meter": NnMeterKind, "armsim": ArmsimKind}
# The kind that can always answer: a named kind's uncovered cells are its (with a warning).
FALLBACK = "estimator"
MODES: tuple[str, ...] = ("auto", *KINDS)


def modes() -> tuple[str, ...]:
    """The ``--predictor`` values now (``KINDS`` as registered at this moment)."""
    return ("auto", *KINDS)


class PredictorPool:
    """Latency cells for any runtime with a latency model; see the module docstring.

    ``mode``: ``auto`` or a kind's name (``MODES``). ``data_dir``: nn-Meter's data folder (None:
    ``$LODEVEM_NNMETER_DATA``, else nn-Meter's own). ``breakdown``: keep per-kernel figures.
    ``warnings``: run-level messages (fallbacks, kernels nn-Meter skipped), each once.
    """

    def __init__(self, mode: str = "auto", data_dir: Optional[Path | str] = None,
                 estimator: Optional[Estimator] = None, breakdown: bool = False,
                 cache_dir: Optional[Path | str] = None, use_cache: bool = True,
                 sandbox: Optional[SandboxAccess] = None) -> None:
        if mode not in modes():
            raise InputError(f"unknown latency predictor '{mode}', expected one of {', '.join(modes())}")
        self.mode = mode
        folder = default_data_dir(data_dir)
        self.setup = KindSetup(estimator if estimator is not None else Estimator.load(), folder,
                               NnMeterCache(folder), breakdown, sandbox)
        self.kinds: dict[str, PredictorKind] = {name: make(self.setup) for name, make in KINDS.items()}
        self.cache = JsonCache(Path(cache_dir) if cache_dir is not None else None, enabled=use_cache)
        self.warnings: list[str] = []
        self.choices: dict[str, None] = {}  # auto's comparisons of held-out errors, in order, once each
        self._selections: dict[tuple[str, ...], DefaultSelection] = {}
        self._fallbacks: dict[str, dict[str, None]] = {}  # a named kind's uncovered cells: reason -> cells
        self._fallback_line = ""
        self.cache_hits = self.cache_misses = 0
        self._graphs: dict[tuple[str, str], KernelGraph | InputError] = {}
        self._file_digests: dict[Path, str] = {}
        self._collected: Optional[list[str]] = None
        self._quiet = threading.local()  # set while ``prepare`` runs in a worker thread: no warnings
        self._params_digest = digest(self.estimator.params)
        self._code_digest = digest([p.read_text() for p in prediction_sources()])

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

    def _unavailable(self, kind: PredictorKind, profile: Profile, runtime: str) -> Optional[str]:
        """Why ``kind`` cannot predict ``profile`` for ``runtime`` now: its own reason, or that the
        runtime registry does not name it for the runtime (``RuntimeSpec.predictors``)."""
        from ..wire.registry import RUNTIMES

        why = kind.unavailable(profile, runtime)
        if why is None and (runtime not in RUNTIMES or kind.name not in RUNTIMES[runtime].predictors):
            why = f"{kind.title} does not predict {runtime}"
        return why

    def candidates(self, job: PredictionJob) -> tuple[list[PredictorKind], list[str]]:
        """The kinds that may predict ``job``'s cell, best first, and the notes saying why
        (kinds passed over, auto's comparison of held-out errors). See the module docstring."""
        profile, runtime = job.profile, job.runtime
        if self.mode != "auto":
            kind = self.kinds[self.mode]
            kind.require(profile, load=False)  # a named kind without its data or image: its error, no fallback
            why = kind.unavailable(profile, runtime)
            if why is None or kind.name == FALLBACK:
                return [kind], []
            self._fell_back(kind, why, profile)
            return [self.kinds[FALLBACK]], [why]
        eligible = self._eligible(profile, runtime)
        if not eligible:
            raise InputError(f"profile '{profile.id}': no latency predictor every install has serves {runtime}")
        selection = self.selection(tuple(k.name for k in eligible))
        core = profile.fastest_cluster.core
        best = self.kinds[selection.kind_for(core, runtime)]
        ranked = [best, *(k for k in eligible if k is not best)]
        figures = selection.errors(family_of(core), runtime)
        rivals = [k for k in ranked[1:] if figures[k.name] is not None]
        best_fig = figures[best.name]
        if best_fig is None or not rivals:
            return ranked, []
        others = ", ".join(f"{k.name} {statement(figures[k.name])}" for k in rivals)  # type: ignore[arg-type]
        choice = f"auto chose {best.name} {statement(best_fig)} over {others} for {runtime} on {core}"
        self.choices.setdefault(choice, None)
        # in the cell's note where the comparison overrode the registry's order (the manifest's
        # predictor.auto_choices lists every comparison)
        return ranked, [choice] if best is not eligible[0] else []

    def _eligible(self, profile: Profile, runtime: str) -> list[PredictorKind]:
        """The kinds the default may use for ``profile``: every install has them and they serve it."""
        return [k for k in self.kinds.values() if k.availability is Availability.EVERY_INSTALL
                and self._unavailable(k, profile, runtime) is None]

    def selection(self, order: tuple[str, ...]) -> DefaultSelection:
        """The default's rule over the eligible kinds ``order`` (``latency.selection``), made once."""
        if order not in self._selections:
            self._selections[order] = DefaultSelection(order, {n: self.kinds[n].held_out_rows() for n in order})
        return self._selections[order]

    def _fell_back(self, kind: PredictorKind, why: str, profile: Profile) -> None:
        """Record a named kind's cell served by the fallback: ONE run warning lists them all."""
        if getattr(self._quiet, "on", False):
            return
        self._fallbacks.setdefault(why, {}).setdefault(profile.id, None)
        line = (f"--predictor {kind.name}: cells fell back to the {self.kinds[FALLBACK].title}: "
                + "; ".join(f"{', '.join(cells)} ({reason})" for reason, cells in self._fallbacks.items()))
        where = self.warnings.index(self._fallback_line) if self._fallback_line in self.warnings else len(self.warnings)
        self.warnings[where:where + 1], self._fallback_line = [line], line

    def _default_band(self, job: PredictionJob, prediction: LatencyPrediction, used: PredictorKind
                      ) -> LatencyPrediction:
        """An auto cell states the nested default's held-out error for its kind (the same as the
        kind's own when one kind is eligible)."""
        order = tuple(k.name for k in self._eligible(job.profile, job.runtime))
        core = job.profile.fastest_cluster.core
        arithmetic = cell_arithmetic_executed(job.runtime, core, job.arithmetic())
        cell = CellKind(core, job.threads, arithmetic, job.runtime)
        if self.mode != "auto" and prediction.latency_ms is not None and used.availability is Availability.OPTIONAL:
            # a named opt-in kind (--predictor armsim): its own figure, and why it is not the default
            default = self.selection(order).band(cell) if order else None
            return with_figure(prediction, used.held_out(job.profile, job.runtime, job.threads, arithmetic),
                               not_default(used.title, OPT_IN_REASON, default))
        if self.mode != "auto" or prediction.latency_ms is None or used.name not in order:
            return prediction
        return with_figure(prediction, self.selection(order).band(cell))

    def kind_for(self, profile: Profile, runtime: str) -> tuple[PredictorKind, list[str]]:
        """The first kind that may predict ``profile`` for ``runtime`` (auto: one every install has)."""
        if self.mode != "auto":
            return self.kinds[self.mode], []
        reasons: list[str] = []
        for kind in self.kinds.values():
            why = self._unavailable(kind, profile, runtime)
            if why is None and kind.availability is Availability.EVERY_INSTALL:
                return kind, reasons
            reasons.append(why or f"{kind.title} is opt-in (--predictor {kind.name})")
        raise InputError(f"profile '{profile.id}': no latency predictor for {runtime} ({'; '.join(reasons)})")

    def require(self, profiles: Sequence[Profile], runtime: str, load: bool = True) -> None:
        """Fail fast, before any benchmark runs: a profile's core without estimator parameters,
        ``--predictor nn-meter`` without data, ``--predictor armsim`` without its image. ``load=True``
        also loads what the kinds read (a refused regressor file is reported here); ``load=False``
        (the runner) leaves loading to the first cell the cache does not hold, so a fully cached
        rerun reads no pickle."""
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
                runtime: str, convert: Optional[Callable[[], ConvertedFile]] = None) -> dict[str, LatencyPrediction]:
        """Cells of one exported model on every profile, keyed by profile id. ``level``: the
        compression variant the file is (``wire.precision.LEVELS``): predicted from the fp32
        graph with each kernel at the level's arithmetic. ``convert``: the runtime's own file
        from the caller's conversion cache, for kinds that run it (made once, on first use)."""
        if threads < 1:
            raise InputError(f"--threads must be >= 1, got {threads}")
        if level is not None and level not in LEVELS:
            raise InputError(f"no latency model for level '{level}'")
        runtime = self.check_runtime(runtime)
        convert = made_once(convert) if convert is not None else None
        return {p.id: self._predict_one(Path(onnx_path), p, threads, level, runtime, convert)
                for p in profiles}

    def prepare(self, onnx_path: Path | str, profiles: Sequence[Profile], threads: int, level: Optional[str],
                runtime: str, convert: Optional[Callable[[], ConvertedFile]] = None) -> None:
        """Let the kinds that would predict these cells start their slow work now (a kind with a
        ``prepare(job)`` method: armsim converts and emulates), so a caller can prepare several
        models in parallel threads before ``predict`` walks them in order. Cells the cache holds
        are skipped; warnings wait for ``predict`` (their order stays the run's order). Safe to
        call from several threads at once for different models."""
        runtime = self.check_runtime(runtime)
        convert = made_once(convert) if convert is not None else None
        self._quiet.on = True
        try:
            for profile in profiles:
                job = PredictionJob(Path(onnx_path), profile, threads, level, runtime,
                                    lambda rules: self._graph(Path(onnx_path), rules), convert,
                                    lambda: self._file_arithmetic(Path(onnx_path)))
                ranked, reasons = self.candidates(job)
                prepare = getattr(ranked[0], "prepare", None)
                if prepare is None:
                    continue
                key = (digest(self.cache_identity(Path(onnx_path), profile, threads, level, runtime, ranked[0],
                                                  reasons)) if self.cache.dir else None)
                if key is None or self.cache.get(key) is None:
                    prepare(job)
        finally:
            self._quiet.on = False

    def _predict_one(self, onnx_path: Path, profile: Profile, threads: int, level: Optional[str], runtime: str,
                     convert: Optional[Callable[[], ConvertedFile]]) -> LatencyPrediction:
        self._cluster(profile)
        job = PredictionJob(onnx_path, profile, threads, level, runtime, lambda rules: self._graph(onnx_path, rules),
                            convert, lambda: self._file_arithmetic(onnx_path))
        ranked, reasons = self.candidates(job)
        kind = ranked[0]
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
            prediction, used, failed = kind.predict(job, self.warn), kind, []
            for other in ranked[1:]:  # auto: a chosen kind without a number hands the cell on
                if prediction.latency_ms is not None:
                    break
                failed.append(f"{used.name}: {prediction.note or 'no number'}")
                prediction, used = other.predict(job, self.warn), other
            passed = [r for r in reasons if not r.startswith("auto chose")]
            chose = [r for r in reasons if r.startswith("auto chose")]
            if (passed or failed) and prediction.latency_ms is not None:
                reason = "; ".join(passed + failed)
                prediction = replace(prediction, note=join_notes([prediction.note, f"{reason}: {used.title}"]))
                # one warning per cause, each once a run: a kind passed over is not used (whichever
                # kind then takes each cell); a kind that failed a cell says whose the cell is
                for why in passed:
                    self.warn(f"{why}: not used")
                for why in failed:
                    self.warn(f"{why}: those cells are the {used.title}'s")
            if chose and prediction.latency_ms is not None and used is kind:
                prediction = replace(prediction, note=join_notes([prediction.note, *chose]))
            prediction = self._default_band(job, prediction, used)
            if prediction.latency_ms is not None:
                prediction = replace(prediction, kind=used.name)  # the reports read the kind, not the source
            collected = list(self._collected)
        finally:
            self._collected = None
        evidence = used.evidence(profile)
        # a kind's cell without a number (an armsim conversion that failed) is tried again next run
        if key and not failed and (prediction.latency_ms is not None or used.name == FALLBACK):
            self.cache.put(key, {"prediction": prediction.to_dict(), "warnings": collected, "evidence": evidence})
        return prediction

    def describe(self, runtime: str) -> dict[str, Any]:
        """What the run used, for the manifest (and the paper kit: ``report.methodology``)."""
        described: dict[str, Any] = {"mode": self.mode, "latency_runtime": runtime}
        for kind in self.kinds.values():
            described.update(kind.describe())
        described["estimator"] = {**described.get("estimator", {}), "runtime": runtime}
        described["latency_cache"] = {"hits": self.cache_hits, "misses": self.cache_misses}
        if self.choices:
            described["auto_choices"] = list(self.choices)
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
        if getattr(self._quiet, "on", False):
            return  # ``prepare``: the same message comes again, in order, when the cell is predicted
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

    def _file_arithmetic(self, onnx_path: Path) -> str:
        """The file's own arithmetic (auto ranks kinds by their error at it), kept in the latency
        cache by the file's digest and the rules and code it was read with: a rerun whose cells are
        all cached decides the same ranking without extracting kernels."""
        key = digest({"file_arithmetic": self._file_digest(onnx_path), "rules": rules_digest(DEFAULT_RULES),
                      "code_sha256": self._code_digest}) if self.cache.dir else None
        entry = self.cache.get(key) if key else None
        if entry is not None and entry.get("arithmetic") in ARITHMETIC:
            return str(entry["arithmetic"])
        found = graph_arithmetic(self._graph(onnx_path, DEFAULT_RULES))
        if key:
            self.cache.put(key, {"arithmetic": found})
        return found

    def _graph(self, onnx_path: Path, rules: Path) -> KernelGraph | InputError:
        key = (str(onnx_path.resolve()), rules_digest(rules))
        if key not in self._graphs:
            try:
                self._graphs[key] = extract_kernels(onnx_path, rules)
            except InputError as exc:
                self._graphs[key] = exc
        return self._graphs[key]
