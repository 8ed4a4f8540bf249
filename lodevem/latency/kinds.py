"""The seam every latency predictor kind plugs into, and the estimator's own kind.

A **kind** is one way to get a latency cell: the offline estimator (this module), nn-Meter's
regressors carried to the profile's core (``latency.nnmeter.NnMeterKind``), the real runtime on
an emulated Arm core (``latency.armsim.kind.ArmsimKind``). ``--predictor NAME`` picks one;
``--predictor auto`` chooses per cell among the kinds the runtime registry names for the runtime
(``wire.registry``: ``RuntimeSpec.predictors``), by their own stored held-out errors
(``held_out``; see ``latency.pool.PredictorPool.kind_for``).

Adding a kind = a class with the ``PredictorKind`` methods in its own module, a factory entry in
``latency.pool.KINDS``, and its name in the registry's ``predictors`` of the runtimes it serves;
nothing else. It receives a ``PredictionJob`` (the ONNX export, the cached kernel-graph loader,
the profile, threads, level, and ``convert``: the runtime's own file from the run's conversion
cache, made on first call) and returns the same ``LatencyPrediction`` record as the others;
caching, auto's choice and notes, calibration and the reports need nothing else from it. A kind
that runs something in the sandbox gets it from ``KindSetup.sandbox`` (``SandboxAccess``): the
latency package itself imports no sandbox code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from ..errors import InputError
from ..profiles import Profile
from ..wire.precision import REDUCED_ARITHMETIC, cell_arithmetic, level_arithmetic
from ..wire.registry import DEFAULT_LATENCY_RUNTIME
from .arithmetic import declared, file_level
from .estimator import Estimate, Estimator
from .kernels import DEFAULT_RULES, KernelGraph
from .memory import resolve
from .paper import KindPaper, KindUse
from .papers import estimator_paper
from .records import KernelLatency, LatencyPrediction, format_clock, join_notes, uncertainty_band
from .selection import Availability, HeldOutError, HeldOutRow
from .statement import socs_of
from .work import graph_works

__all__ = ["ArithmeticPlan", "Availability", "ConvertedFile", "EstimatorKind", "HeldOutError", "KindSetup",
           "PredictionJob", "graph_arithmetic", "PredictorKind", "SandboxAccess", "plan_arithmetic"]

Warn = Callable[[str], None]


@dataclass(frozen=True)
class ConvertedFile:
    """The runtime's own file of a cell's model (``.tflite``, ncnn ``.param``) as the run's
    conversion cache made it, or why there is none (``path`` None, ``error`` one line), with the
    input shape it was converted at."""

    path: Optional[Path]
    error: str = ""
    input_shape: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class PredictionJob:
    """One (model, profile) cell to predict, as every kind receives it.

    ``graph(rules)``: the model's kernel graph under a fusion-rules file, extracted once per run
    (an ``InputError`` when the export cannot be read). ``convert()``: the runtime's own file
    from the run's conversion cache (made on the first call; None: the caller has no file to
    convert, e.g. an ``nn.Module`` of the Python API), for kinds that run the runtime.
    """

    onnx_path: Path
    profile: Profile
    threads: int
    level: Optional[str]
    runtime: str
    graph: Callable[[Path], "KernelGraph | InputError"]
    convert: Optional[Callable[[], ConvertedFile]] = None
    # the file's own arithmetic, from a cache that outlives the run (``PredictorPool``): a cached
    # rerun then ranks its kinds without reading the kernel graph (no nn-Meter import)
    file_arithmetic: Optional[Callable[[], str]] = None

    def arithmetic(self) -> str:
        """The arithmetic the cell is stated in (``wire.precision``): the level's, else the
        file's own (read from its kernel graph; fp32 when the graph does not read)."""
        if self.level is not None:
            return level_arithmetic(self.level)
        if self.file_arithmetic is not None:
            return self.file_arithmetic()
        return graph_arithmetic(self.graph(DEFAULT_RULES))


def graph_arithmetic(graph: "KernelGraph | InputError") -> str:
    """A file's own arithmetic from its kernel graph (fp32 when the graph does not read)."""
    # (the cell's arithmetic is the file's, whatever the runtime: any runtime with a latency model reads it)
    return "fp32" if isinstance(graph, InputError) else plan_arithmetic(graph, None, DEFAULT_LATENCY_RUNTIME).cell


class PredictorKind(Protocol):
    """What a predictor kind provides (see the module docstring)."""

    name: str  # the --predictor value
    title: str  # how the auto fallback note and the legends name it ("offline estimator")
    # EVERY_INSTALL: the default may use it (its data ship in the package); OPTIONAL: opt-in only
    availability: Availability
    mark: str  # the footnote mark its numbers carry in every table ("*"; latency.paper)

    @staticmethod
    def paper(use: KindUse) -> KindPaper:
        """Its methods sentence, limitation and references for one run (``latency.paper``)."""

    def check_runtime(self, runtime: str) -> None:
        """``--predictor NAME`` for a runtime it does not serve: ``InputError`` saying what to use."""

    def unavailable(self, profile: Profile, runtime: str) -> Optional[str]:
        """None when it can predict ``profile`` for ``runtime`` now; else why not (auto's note)."""

    def require(self, profile: Profile, load: bool) -> None:
        """``--predictor NAME``: ``InputError`` now when it cannot predict ``profile`` (data missing)."""

    def held_out(self, profile: Profile, runtime: str, threads: int, arithmetic: str) -> Optional[HeldOutError]:
        """Its own stored held-out (leave-one-SoC-out) error for this kind of cell (None: it
        states none), the band of its cells when it is named (``--predictor NAME``)."""

    def held_out_rows(self) -> tuple[HeldOutRow, ...]:
        """Its nested leave-one-SoC-out rows, what the default's pick and band are computed from
        (``latency.selection``); empty: it states none and is never picked over a kind that does."""

    def identity(self, profile: Profile) -> dict[str, Any]:
        """What of this kind a cached prediction of ``profile`` depends on (data files, rules)."""

    def predict(self, job: PredictionJob, warn: Warn) -> LatencyPrediction:
        """The cell (``latency_ms`` None with the reason when it has no number)."""

    def evidence(self, profile: Profile) -> Any:
        """JSON-able facts kept with a cached cell (e.g. legacy pickles read), replayed on a hit."""

    def replay(self, profile: Profile, evidence: Any) -> None:
        """Take back ``evidence`` of a cached cell, so ``describe`` is the same on a hit."""

    def describe(self) -> dict[str, Any]:
        """What it used this run, for the manifest."""


@dataclass(frozen=True)
class SandboxAccess:
    """The sandbox as a kind may use it, handed in by the face that opened it (the latency
    package imports no sandbox code). ``client()``: the ``sandbox.client.WorkerClient`` (None:
    no sandbox is open yet, e.g. ``start`` before its backend opens, the Python API before its
    first model file); ``folder(name)``: the artifact store's folder for a kind's own cache
    (``<output>/.cache/<name>``)."""

    client: Callable[[], Any]
    folder: Callable[[str], Optional[Path]]
    timeout_s: float = 600.0
    use_cache: bool = True


@dataclass(frozen=True)
class KindSetup:
    """What the kinds of one pool share: the cost model, nn-Meter's data folder and its loaded
    regressors (``nnmeter.NnMeterCache``), whether cells keep per-kernel figures, and the
    sandbox when the face has one (``SandboxAccess``)."""

    estimator: Estimator
    data_dir: Path
    nnmeter: Any  # nnmeter.NnMeterCache (nnmeter imports this module: its kind plugs in here)
    breakdown: bool
    sandbox: Optional[SandboxAccess] = None


@dataclass(frozen=True)
class ArithmeticPlan:
    """What each kernel of a graph holds under a level (or the file as given) for a runtime
    (``latency.arithmetic.declared``; the estimator prices what the runtime executes of it), the
    cell's level-ish arithmetic (``cell``), the arithmetic whose assumptions the notes state, and
    the note's prefix (None for an fp32 cell)."""

    per_kernel: tuple[str, ...]
    cell: str
    noted: tuple[str, ...]
    prefix: Optional[str]
    file_note: bool  # the note is "<prefix>: <parts>" (a quantized file) rather than "<prefix>; <notes>"

    def note(self, estimate: Estimate) -> Optional[str]:
        if self.file_note:
            return f"{self.prefix}: " + "; ".join(self.counts() + list(estimate.notes))
        return join_notes([self.prefix, *estimate.notes])

    def counts(self) -> list[str]:
        n = len(self.per_kernel)
        return [f"{c}/{n} kernels hold {p}" for p in (*REDUCED_ARITHMETIC, "int8-dynamic")
                if (c := self.per_kernel.count(p))]


def plan_arithmetic(graph: KernelGraph, level: Optional[str], runtime: str) -> ArithmeticPlan:
    """Per-kernel arithmetic of ``graph`` under ``level`` for ``runtime``. A file whose overall
    precision is a level's (fp16, int8-dynamic, int8-static) is read with that level's rule, so a
    user's file and its ``--levels`` twin get the same figure; a mixed file keeps each kernel's own."""
    own = tuple(k.precision for k in graph.kernels)
    rule = level if level is not None else file_level(graph.precision)
    per_kernel = tuple(declared(rule, k.category, k.precision, runtime) for k in graph.kernels)
    noted = tuple(dict.fromkeys(p for p in per_kernel if p != "fp32"))
    if level is None and any(p != "fp32" for p in own):
        scheme = f" ({graph.quantization})" if graph.quantization else ""
        return ArithmeticPlan(per_kernel, cell_arithmetic(rule, own), noted, f"{graph.precision} file{scheme}", True)
    prefix = f"{level} variant" if level is not None and level_arithmetic(level) != "fp32" else None
    return ArithmeticPlan(per_kernel, cell_arithmetic(level, own), noted, prefix, False)


def estimate_graph(estimator: Estimator, graph: KernelGraph, plan: ArithmeticPlan, job: PredictionJob,
                   runtime: str) -> Estimate:
    """The cost model's ``Estimate`` of ``graph`` on the job's profile (fastest cluster)."""
    cluster = job.profile.fastest_cluster
    memory = resolve(job.profile.soc_name, cluster.core)
    est = estimator.estimate(graph_works(graph.kernels, memory), plan.per_kernel, cluster.core,
                             cluster.clock_ghz, runtime, job.threads, cluster.count, plan.noted)
    note = memory.note()
    return replace(est, notes=est.notes + (note,)) if note and estimator.dram_inverse_efficiency > 0 else est


def breakdown(graph: KernelGraph, per_kernel: Any, keep: bool, dram: Any = None) -> tuple[KernelLatency, ...]:
    """Per-kernel figures of a cell, when the run keeps them (``--breakdown``, ``--layers``);
    ``dram``: each kernel's DRAM ms where the estimator priced them."""
    if not keep:
        return ()
    drams = list(dram) if dram is not None else [None] * len(graph.kernels)
    return tuple(KernelLatency(k.name, k.nnmeter_type, k.category, ms, d)
                 for k, ms, d in zip(graph.kernels, per_kernel, drams))


class EstimatorKind:
    """lodevem's offline cost model (``latency.estimator``), for every runtime it has parameters of."""

    name = "estimator"
    title = "offline estimator"
    availability = Availability.EVERY_INSTALL  # its parameters ship in the package
    mark = "*"

    @staticmethod
    def paper(use: KindUse) -> KindPaper:
        """Its methods sentence, limitation and references (``latency.paper``)."""
        return estimator_paper(use)

    def __init__(self, setup: KindSetup) -> None:
        self.setup, self.estimator = setup, setup.estimator

    def check_runtime(self, runtime: str) -> None:
        self.estimator.runtime(runtime)  # a runtime the params do not cover: InputError

    def unavailable(self, profile: Profile, runtime: str) -> Optional[str]:
        return None

    def require(self, profile: Profile, load: bool) -> None:
        return None

    def held_out(self, profile: Profile, runtime: str, threads: int, arithmetic: str) -> Optional[HeldOutError]:
        return self.estimator.uncertainty_figure(profile.fastest_cluster.core, runtime, threads, arithmetic)

    def held_out_rows(self) -> tuple[HeldOutRow, ...]:
        return self.estimator.held_out_rows

    def identity(self, profile: Profile) -> dict[str, Any]:
        return {"rules_sha256": rules_digest(DEFAULT_RULES)}

    def evidence(self, profile: Profile) -> Any:
        return None

    def replay(self, profile: Profile, evidence: Any) -> None:
        return None

    def predict(self, job: PredictionJob, warn: Warn) -> LatencyPrediction:
        cluster = job.profile.fastest_cluster
        core, clock = cluster.core, cluster.clock_ghz
        graph = job.graph(DEFAULT_RULES)
        if isinstance(graph, InputError):
            return LatencyPrediction(None, f"{self.estimator.label} {job.runtime}", job.threads, core, clock,
                                     job.runtime, note=f"no latency: {graph}")
        plan = plan_arithmetic(graph, job.level, job.runtime)
        est = estimate_graph(self.estimator, graph, plan, job, job.runtime)
        ms = est.ms
        low, high = uncertainty_band(ms, est.figure.mape_pct if est.figure else None)
        return LatencyPrediction(
            latency_ms=ms, latency_source=self.estimator.source_label(job.runtime, core, format_clock(clock)),
            threads=job.threads, core=core, clock_ghz=clock, runtime=job.runtime, uncertainty=est.uncertainty,
            note=plan.note(est), kernels=breakdown(graph, [k.ms for k in est.kernels], self.setup.breakdown,
                                                  [k.dram_ms for k in est.kernels]),
            latency_low_ms=low, latency_high_ms=high, compute_ms=est.compute_ms, memory_ms=est.memory_ms,
            graph_sha256=graph.sha256, uncertainty_pct=est.figure.mape_pct if est.figure else None,
            held_out_rows=est.figure.rows if est.figure else None,
            held_out_socs=socs_of(est.figure) if est.figure else None,
            held_out_pool=est.figure.scope if est.figure else None)

    def describe(self) -> dict[str, Any]:
        est = self.estimator
        params = est.params.get("provenance", {})
        unc = est.params.get("uncertainty", {})
        # nested under "estimator": the pool merges every kind's keys, and the paper kit reads this block
        return {"estimator": {"version": est.version, "params": str(est.path), "params_sha256": _digest(est.params),
                "fit_date": params.get("fit_date"), "lodo_mape_pct": est.lodo_mape_pct,
                "lodo_within_10_pct": unc.get("lodo_within_10_pct"),
                "lodo_within_25_pct": unc.get("lodo_within_25_pct"), "lodo_rows": unc.get("lodo_rows"),
                "baseline_lodo_mape_pct": unc.get("baseline_lodo_mape_pct"),
                "data_sources": list(params.get("data_sources") or ()), "data_sha256": params.get("data_sha256"),
                "rows_used": params.get("rows_used"), "same_core_spread": unc.get("same_core_spread"),
                "oneshot_mape_pct": unc.get("oneshot_mape_pct"), "nested": unc.get("nested", True),
                "dram": bool(est.dram_inverse_efficiency)}}


def _digest(value: Any) -> str:
    from .cache import digest

    return digest(value)


def rules_digest(rules: Path) -> str:
    """A fusion-rules file's sha256, of its content every time (a few KB: identical rules share
    one kernel extraction, and rules rewritten in place are never taken for the old ones)."""
    from .cache import file_digest

    return file_digest(rules)


def made_once(convert: Callable[[], ConvertedFile]) -> Callable[[], ConvertedFile]:
    """``convert`` made at most once (every profile of a model shares the converted file)."""
    made: list[ConvertedFile] = []

    def converted() -> ConvertedFile:
        if not made:
            made.append(convert())
        return made[0]

    return converted
