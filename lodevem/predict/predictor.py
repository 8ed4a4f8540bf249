"""``Predictor``: the one object that predicts latency, for ``start``, ``predict``, ``calibrate``
and the Python API (``lodevem.Predictor`` is this class).

Why one: the API object, the run's front door and the kinds' pool used to be three objects
stacked on each other, each forwarding to the next, and a model file went back and forth between
them. Now a model takes one walk through this object:

1. **exported** where it is safe (``exports.Graphs``: a model file in the sandbox session, a zoo
   model or the caller's own ``nn.Module`` in-process),
2. **predicted** by the ``latency`` wing's kinds (``latency.pool.PredictorPool``: the registry's
   kinds, ``--predictor auto``'s choice per cell, the cell cache; pure logic, no sandbox code),
   given the runtime's converted file on demand for kinds that run it,
3. **calibrated** with the profile's records (``latency.calibration.CalibrationSet``).

The runtime is an argument of every call (``runtime`` is the default one), so a run whose rows
are measured under several runtimes shares kinds, graphs and the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..errors import InputError, ModelFileError
from ..latency.calibration import CalibrationRecord, CalibrationSet, Measurement, now_iso
from ..latency.estimator import DEFAULT_RUNTIME, Estimator
from ..latency.kinds import ConvertedFile
from ..latency.pool import PredictorPool
from ..latency.records import LatencyPrediction, ModelGraph, ModelLatency
from ..profiles import Profile, load_profiles, select_profiles
from ..sandbox.session import Session
from ..store import ArtifactStore, user_cache_dir
from ..wire.registry import canonical
from .exports import Graphs

if TYPE_CHECKING:
    from ..sandbox.base import Backend
    from ..sandbox.usercode import ModelLoading

__all__ = ["Predictor", "model_loading"]

Convert = Callable[[], ConvertedFile]


def model_loading(code: "Sequence[Path | str] | Path | str" = (), arch: Optional[str] = None,
                  arch_kwargs: "Optional[dict[str, Any] | str]" = None,
                  given: "Optional[ModelLoading]" = None) -> "ModelLoading":
    """The API's ``code=`` / ``arch=`` / ``arch_kwargs=`` (and ``$LODEVEM_CODE``, as the CLI reads
    it) as the ``ModelLoading`` every sandbox request carries; validated like the CLI's options
    (one ``InputError`` each). ``given``: a ``loading=`` too is refused (say it once)."""
    import json
    import os

    from ..sandbox.usercode import ModelLoading

    if given is not None:
        raise InputError("Predictor: pass either loading= or code=/arch=/arch_kwargs=, not both")
    entries = [code] if isinstance(code, (str, Path)) else list(code)
    from_env = [p for p in os.environ.get("LODEVEM_CODE", "").split(os.pathsep) if p]
    try:  # a dict is checked as --arch-kwargs' JSON text is
        kwargs = json.dumps(arch_kwargs, allow_nan=False) if isinstance(arch_kwargs, dict) else arch_kwargs
    except (TypeError, ValueError) as exc:
        raise InputError(f"arch_kwargs: not a JSON object ({exc})") from None
    return ModelLoading.from_options([*entries, *from_env], arch, kwargs)


class Predictor:
    """Latency of models on device profiles; profiles, predictor data, exports and kernel graphs
    are loaded once and kept, so a loop over candidate models pays for each model's export and
    kernel extraction once and ~1 ms per prediction after.

    ``profile``: the default profile (an id or a ``Profile``) of ``predict``. ``predictor``:
    ``auto`` or a kind's name (``latency.pool.MODES``, as ``--predictor``). ``runtime``: the
    default runtime the latencies stand for (``--latency-runtime``). ``calibrations``: the
    calibrations folder (None: ``$LODEVEM_CALIBRATIONS``, else the user's config folder) or a
    ``CalibrationSet``; ``use_calibrations=False`` predicts uncalibrated. ``session``: the sandbox
    model files are exported in and its artifact store (default: one opened on the first model
    file, ``backend``, ``loading``, ``timeout_s``, stored under ``cache_dir``, default
    ``$XDG_CACHE_HOME/lodevem``; ``use_cache=False`` recomputes and refreshes what it keeps).
    ``keep_cells=False``: predicted cells are not kept on disk.
    ``breakdown=True`` keeps per-kernel figures.
    ``code`` / ``arch`` / ``arch_kwargs``: the CLI's ``--code`` / ``--arch`` / ``--arch-kwargs``
    for model files that need your code to load (a pickled module of your class, a state_dict):
    a package folder or ``.py`` file (or several), ``MODULE:CALLABLE`` or ``zoo:NAME``, and its
    keyword arguments (a dict or JSON text). ``$LODEVEM_CODE`` (``:``-separated) adds code as it
    does for the CLI. ``loading`` (a ``ModelLoading``) is the same, already built.
    """

    def __init__(self, profile: Optional[str | Profile] = None, *, threads: int = 1, runtime: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, predictor: str = "auto",
                 nnmeter_data: Optional[Path | str] = None, calibrations: Optional[Path | str | CalibrationSet] = None,
                 use_calibrations: bool = True, profiles_dir: Sequence[Path | str] = (),
                 backend: "str | Backend" = "auto", timeout_s: float = 600.0, cache_dir: Optional[Path | str] = None,
                 loading: "Optional[ModelLoading]" = None, session: Optional[Session] = None, keep_cells: bool = True,
                 use_cache: bool = True, estimator: Optional[Estimator] = None, breakdown: bool = False,
                 code: "Sequence[Path | str] | Path | str" = (), arch: Optional[str] = None,
                 arch_kwargs: "Optional[dict[str, Any] | str]" = None) -> None:
        if loading is None or code or arch or arch_kwargs is not None:
            loading = model_loading(code, arch, arch_kwargs, given=loading)
        if session is None:
            store = ArtifactStore(Path(cache_dir) if cache_dir is not None else user_cache_dir(), use_cache)
            session = Session(store, backend, loading=loading, timeout_s=timeout_s)
        self.session = session
        self.calibrations = (calibrations if isinstance(calibrations, CalibrationSet)
                             else CalibrationSet(calibrations, enabled=use_calibrations))
        # the kinds, auto's choice and the cell cache: kept in the store too, so a first call in a
        # new process on a model whose graph and prediction are there imports neither torch, onnx
        # nor nn-Meter
        self.pool = PredictorPool(predictor, nnmeter_data, estimator, breakdown,
                                  session.store.folder("latency") if keep_cells else None, session.store.use_cache,
                                  session.access())
        self.runtime = self.pool.check_runtime(runtime if runtime is not None else DEFAULT_RUNTIME)
        self.graphs = Graphs(session, self.pool.known_digest)
        self.threads = threads
        self.input_shape = tuple(input_shape) if input_shape else None
        self.profiles_dir = tuple(profiles_dir)
        self._profiles: Optional[dict[str, Profile]] = None
        self.default_profile = self.profile(profile) if profile is not None else None

    @property
    def warnings(self) -> list[str]:
        """Run-level messages, each once: what opening the sandbox said (``--backend process``:
        what it does not isolate), then the kinds' (fallbacks, kernels nn-Meter skipped)."""
        return list(dict.fromkeys([*self.session.warnings, *self.pool.warnings]))

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Delete the scratch folder of module exports (kept graphs stay usable in memory)."""
        self.graphs.close()

    def __enter__(self) -> "Predictor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close() still leaves no scratch folder behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- profiles and runtimes ----------------------------------------------------------------------

    def profile(self, profile: str | Profile) -> Profile:
        """A ``Profile`` as given, or the profile with that id (shipped, ``$LODEVEM_PROFILES`` or
        ``profiles_dir``); an unknown id is a ``ProfileError`` listing the known ones."""
        if isinstance(profile, Profile):
            return profile
        return self.profiles(ids=[profile])[0]

    def profiles(self, ids: Sequence[str] = (), tiers: Sequence[str] = ()) -> list[Profile]:
        if self._profiles is None:
            self._profiles = {p.id: p for p in load_profiles(self.profiles_dir)}
        return select_profiles(list(self._profiles.values()), ids=ids, tiers=tiers)

    def runtime_for(self, runtime: str) -> str:
        """The runtime cells of rows measured under ``runtime`` stand for: itself, or, where the
        chosen ``--predictor`` cannot serve it (nn-Meter predicts TFLite only), the default
        runtime, with a warning."""
        if canonical(runtime) == self.runtime:
            return self.runtime
        try:
            return self.pool.check_runtime(runtime)
        except InputError as exc:
            self.pool.warn(f"rows measured under {runtime}: latency for {self.runtime} ({exc})")
            return self.runtime

    def require(self, profiles: Sequence[Profile], load: bool = True, runtime: Optional[str] = None) -> None:
        """Fail fast, before any benchmark runs (see ``PredictorPool.require``)."""
        self.pool.require(profiles, self.pool.check_runtime(runtime) if runtime else self.runtime, load)

    # -- cells: one exported model on many profiles -------------------------------------------------

    def prepare(self, onnx_path: Optional[Path | str], profiles: Sequence[Profile], threads: int = 1,
                level: Optional[str] = None, convert: Optional[Convert] = None, runtime: Optional[str] = None) -> None:
        """Start the slow part of these cells now (``PredictorPool.prepare``: armsim's conversion
        and emulation), thread-safe, so a run can prepare its models in parallel and then walk
        them in order with ``cells``."""
        if onnx_path is not None:
            self.pool.prepare(onnx_path, profiles, threads, level, runtime or self.runtime, convert)

    def cells(self, onnx_path: Optional[Path | str], profiles: Sequence[Profile], threads: int = 1,
              level: Optional[str] = None, convert: Optional[Convert] = None, export_error: str = "",
              calibrated: bool = True, runtime: Optional[str] = None) -> dict[str, LatencyPrediction]:
        """Latency of one exported model on every profile, keyed by profile id: predicted, then
        calibrated (each profile's records; ``calibrated=False``: the kinds' own figures).
        ``level``: the compression variant the file is (``lodevem.levels``); ``convert``: the
        runtime's own file on demand, for kinds that run it. ``onnx_path`` None: the export failed
        (``export_error`` says why), every cell says so and has no number."""
        runtime = runtime or self.runtime
        if onnx_path is None:
            return {p.id: LatencyPrediction.unavailable(p, f"no ONNX export: {export_error}", threads, runtime)
                    for p in profiles}
        predicted = self.pool.predict(onnx_path, profiles, threads, level, runtime, convert)
        if not calibrated:
            return predicted
        by_id = {p.id: p for p in profiles}
        return {pid: self.calibrations.apply(cell, by_id[pid], self.pool.estimator, runtime)
                for pid, cell in predicted.items()}

    def describe(self, runtime: Optional[str] = None) -> dict[str, Any]:
        """What the run used, for the manifest."""
        return self.pool.describe(runtime or self.runtime)

    # -- models: the Python API -------------------------------------------------------------------

    def graph(self, model: Any, input_shape: Optional[Sequence[int]] = None) -> ModelGraph:
        """The ONNX export of ``model`` (a path, a zoo name, an ``nn.Module`` or a ``ModelGraph``),
        made where it is safe (``exports``). Files and zoo models are cached. A file that needs the
        user's code says how to give it in both faces (``--code``, ``code=``)."""
        try:
            return self.graphs.graph(model, tuple(input_shape) if input_shape else self.input_shape)
        except ModelFileError as exc:
            if "--code" not in str(exc) or "code=" in str(exc):
                raise
            raise ModelFileError(str(exc).replace("--code", "--code (Python API: code=)", 1)) from None

    def predict(self, model: Any, profile: Optional[str | Profile] = None, *,
                input_shape: Optional[Sequence[int]] = None, threads: Optional[int] = None,
                runtime: Optional[str] = None, level: Optional[str] = None,
                calibrated: bool = True) -> LatencyPrediction:
        """Latency of ``model`` on ``profile`` (default: the predictor's), calibrated when the
        profile has calibrations (``calibrated=False``: the predictor's own figure)."""
        chosen = self.profile(profile) if profile is not None else self.default_profile
        if chosen is None:
            raise InputError("no profile given: predict(model, profile) or Predictor(profile=...)")
        threads = threads if threads is not None else self.threads
        runtime = self.pool.check_runtime(runtime) if runtime is not None else self.runtime
        graph = self.graph(model, input_shape)
        return self.cells(graph.onnx_path, [chosen], threads, level, self.graphs.converter(graph, runtime),
                          export_error=graph.error, calibrated=calibrated, runtime=runtime)[chosen.id]

    def predict_all(self, models: Sequence[Any], profiles: Sequence[Profile], *, threads: Optional[int] = None,
                    runtime: Optional[str] = None) -> list[ModelLatency]:
        """Every (model, profile) pair, models exported first (a bad file stops before any work)."""
        self.require(profiles)
        graphs = [self.graph(m) for m in models]
        return [ModelLatency(g, p, self.predict(g, p, threads=threads, runtime=runtime))
                for g in graphs for p in profiles]

    def calibrate(self, profile: str | Profile, measurements: Sequence[Measurement], *, runtime: str,
                  threads: int, note: str = "", same_chipset: bool = False) -> list[tuple[Path, CalibrationRecord]]:
        """Store one calibration record per measurement of a model on ``profile``'s device
        (``same_chipset``: the records also calibrate profiles with its chipset and core).

        Every model is exported and predicted (uncalibrated) before anything is written, so a
        bad model leaves the folder as it was.
        """
        chosen = self.profile(profile)
        self.require([chosen], runtime=runtime)
        pending = []
        for item in measurements:
            graph = self.graph(item.model, item.input_shape)
            prediction = self.predict(graph, chosen, threads=threads, runtime=runtime, calibrated=False)
            if prediction.latency_ms is None or graph.onnx_path is None:
                raise InputError(f"{item.model}: cannot calibrate with it, lodevem has no prediction to compare "
                                 f"to ({prediction.note or graph.error})")
            share = prediction.compute_share  # the cost model's own split of this prediction
            pending.append(CalibrationRecord(
                profile_id=chosen.id, model_label=graph.label, model_sha256=graph.sha256,
                graph_sha256=prediction.graph_sha256 or "", measured_ms=item.ms, runtime=runtime, threads=threads,
                date=now_iso(), note=note, predicted_ms=prediction.latency_ms, compute_ms=prediction.latency_ms * share,
                memory_ms=prediction.latency_ms * (1 - share), predictor=prediction.latency_source,
                measured_by=item.measured_by, input_shape=tuple(graph.input_shape) if graph.input_shape else None,
                scope="same-chipset" if same_chipset else "profile", chipset=chosen.chipset, core=prediction.core))
        written = [(self.calibrations.store.add(record), record) for record in pending]
        self.calibrations.reload()
        return written
