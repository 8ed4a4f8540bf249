"""armsim as a predictor kind (``--predictor armsim``: opt-in, never the default).

The kind gets what it needs through the seam like the others: the job's ``convert()`` gives the
runtime's own file from the run's conversion cache (the very ``.tflite`` / ncnn files
``--runtime tflite|ncnn`` measures; an int8-static level under tflite is the float model
quantized while converting, see ``lodevem.predict.converted_file``), the profile, threads and
level; ``KindSetup.sandbox`` gives the worker client its profiles run through (the lodevem-armsim
image, Docker backend only) and the store folder they are cached in. No runner code knows it.

* ``--predictor armsim``: every covered cell is armsim's; a cell it cannot fill says why
  (``latency_ms`` None). Cores it does not cover (no Arm build of the runtime for the ISA) get
  the estimator's cell, with a run warning naming them (the pool's named-mode fallback).
* ``auto`` never uses it: the default is chosen only among the kinds every install has
  (``latency.selection.Availability``), so a missing armsim image never changes a default cell.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

from ...errors import LodevemError
from ...profiles import Profile
from ..cache import digest
from ..kinds import KindSetup, PredictionJob, Warn
from ..paper import KindPaper, KindUse
from ..records import LatencyPrediction
from ..selection import Availability, HeldOutError, HeldOutRow
from . import predictor as armsim_predictor
from .isa import covered
from .paper import armsim_paper, cost_model_facts
from .profiler import ArmsimProfiler, describe, pinned_versions, sources_digest

__all__ = ["ArmsimKind"]


class ArmsimKind:
    """The runtime's own Arm instructions, counted on an emulated core (``latency.armsim``)."""

    name = "armsim"
    title = "armsim emulated core"
    # needs the optional lodevem-armsim image and minutes of emulation per model and level:
    # opt-in (--predictor armsim), never the default
    availability = Availability.OPTIONAL
    mark = "\u2021"
    # why ``lodevem predict`` refuses it: it emulates the runtime's converted file, which a run makes
    start_only = "only `lodevem start` profiles on emulated cores (it converts the file and runs the armsim image)"

    @staticmethod
    def paper(use: KindUse) -> KindPaper:
        """Its methods sentence, limitation and references (``latency.paper``)."""
        return armsim_paper(use)

    def __init__(self, setup: KindSetup) -> None:
        self.setup = setup
        self._profiler: Optional[ArmsimProfiler] = None
        self._lock = threading.Lock()
        self._sandbox_problem: Optional[tuple[Any, str]] = None  # (client, problem) checked once per client

    # -- what it serves ---------------------------------------------------------------------------

    @staticmethod
    def _serves(runtime: str) -> bool:
        from ...wire.registry import RUNTIMES

        return runtime in RUNTIMES and "armsim" in RUNTIMES[runtime].predictors

    def check_runtime(self, runtime: str) -> None:
        if not self._serves(runtime):
            from ...errors import InputError

            raise InputError(f"--predictor armsim runs converted tflite / ncnn files, not {runtime}: use "
                             "--latency-runtime tflite or ncnn, or --predictor estimator / auto")

    def _client(self) -> Any:
        sandbox = self.setup.sandbox
        return sandbox.client() if sandbox is not None else None

    def _setup_problem(self) -> str:
        """Why armsim cannot run at all here ("" when it can): cost model, sandbox, image."""
        if armsim_predictor.default_cost_model() is None:
            return "the armsim cost model (lodevem/latency/armsim/costmodel.py) is not installed"
        client = self._client()
        if client is None:
            return "no sandbox to emulate in (armsim profiles a model file's converted form)"
        if self._sandbox_problem is not None and self._sandbox_problem[0] is client:
            return self._sandbox_problem[1]
        backend = client.backend
        problem = ""
        if backend.name != "docker":
            problem = f"armsim runs only under the Docker backend, not {backend.name}"
        else:
            try:
                backend.identity_for("armsim")
            except LodevemError as exc:
                problem = str(exc)
            except Exception as exc:  # noqa: BLE001 - a backend without images: no armsim there
                problem = f"the {backend.name} backend cannot run the armsim image ({type(exc).__name__})"
        self._sandbox_problem = (client, problem)
        return problem

    def unavailable(self, profile: Profile, runtime: str) -> Optional[str]:
        if not self._serves(runtime):
            return f"armsim does not run {runtime}"
        core = profile.fastest_cluster.core
        if not covered(runtime, core):
            return f"armsim has no {runtime} build for {core}"
        return self._setup_problem() or None

    def require(self, profile: Profile, load: bool) -> None:
        """``--predictor armsim`` without its cost model, the Docker backend or its image is an
        error the user must see (checked again once the run's sandbox is open)."""
        if armsim_predictor.default_cost_model() is None or self._client() is not None:
            problem = self._setup_problem()
            if problem:
                raise LodevemError(f"--predictor armsim: {problem}")

    def held_out(self, profile: Profile, runtime: str, threads: int, arithmetic: str) -> Optional[HeldOutError]:
        """The fit's own LODO figure for this kind of cell (``costmodel.CostModel.kind_figure``),
        None when the cost model is absent or states none."""
        try:
            from .costmodel import load

            fig = load().kind_figure(profile.fastest_cluster.core, threads, arithmetic, runtime)
        except (ImportError, LookupError, LodevemError, ValueError):
            return None
        if fig is None:
            return None
        return HeldOutError(float(fig.mape_pct), int(fig.rows),
                            fig.core or ("all cores" if fig.runtime else "all cores and runtimes"))

    def held_out_rows(self) -> tuple[HeldOutRow, ...]:
        return ()  # opt-in only: the default is chosen among the kinds every install has

    # -- one cell -------------------------------------------------------------------------------

    def identity(self, profile: Profile) -> dict[str, Any]:
        """The fitted parameters, the profiler's sources and pins: a refit or a new plugin is
        another cell (the converted file follows from the export, level and converter pin)."""
        from .costmodel import DEFAULT_PARAMS

        params = DEFAULT_PARAMS.read_text() if DEFAULT_PARAMS.is_file() else None
        client = self._client()
        return {"armsim_params_sha256": digest(params), "sources_sha256": sources_digest(),
                "pins": pinned_versions(), "worker": getattr(client, "worker_version", None)}

    def evidence(self, profile: Profile) -> Any:
        return None

    def replay(self, profile: Profile, evidence: Any) -> None:
        return None

    def predict(self, job: PredictionJob, warn: Warn) -> LatencyPrediction:
        threads = min(job.threads, job.profile.fastest_cluster.count)
        if job.convert is None:
            return LatencyPrediction.unavailable(job.profile, f"no {job.runtime} file to profile (armsim needs a "
                                                 "model file, converted in the sandbox)", threads, job.runtime)
        conversion = job.convert()
        if conversion.path is None:
            return LatencyPrediction.unavailable(job.profile, f"{job.runtime} conversion failed: {conversion.error}",
                                                 threads, job.runtime)
        predictor = armsim_predictor.ArmsimPredictor(self.profiler(), job.runtime,
                                                     armsim_predictor.default_cost_model())
        return predictor.predict_one(Path(conversion.path), job.profile, job.threads, conversion.input_shape,
                                     job.level)

    def prepare(self, job: PredictionJob) -> None:
        """Convert and emulate now (the pool's ``prepare``: the runner runs several models at once);
        the conversion and the profile are kept in memory, so ``predict`` of the cell is instant.
        Thread-safe: the profiler makes one profile once, the conversion cache one file once."""
        self.predict(job, lambda message: None)

    def profiler(self) -> ArmsimProfiler:
        """The run's one profiler (profiles cached in the store's ``armsim`` folder)."""
        with self._lock:
            if self._profiler is None:
                sandbox = self.setup.sandbox
                if sandbox is None or sandbox.client() is None:
                    raise LodevemError("armsim: no sandbox to emulate in")
                self._profiler = ArmsimProfiler(sandbox.client(), sandbox.folder("armsim"), sandbox.timeout_s,
                                                use_cache=sandbox.use_cache)
            return self._profiler

    def describe(self) -> dict[str, Any]:
        """The manifest's ``armsim`` entry: the cost model (its cells may all come from the cache),
        and the profiles made and read from the cache this run, with their cost."""
        return {"armsim": {**cost_model_facts(), **describe(self._profiler)}}
