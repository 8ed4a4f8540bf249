"""Latency without a memory run: what ``lodevem predict``, ``lodevem calibrate`` and the Python
API (``lodevem.predict_latency``, ``lodevem.Predictor``) share.

A model reaches the predictor as an ONNX export, made where it is safe to make it:

* a **model file** (a path) is code: it is exported in the sandbox (``ExportCache`` through the
  ``WorkerClient``, as ``lodevem start`` does), never loaded in this process;
* a **zoo name** is lodevem's own code with seeded weights: built and exported here, cached
  under the cache folder by name, input shape and lodevem version;
* an **``nn.Module``** is the caller's own object, already in the caller's process: exported
  here, in-process (there is no file to unpickle). It is exported on every call, since a
  module (a NAS supernet with its active path, a pruned candidate) can change its structure
  between calls without changing identity; keep the ``ModelGraph`` that ``graph()`` returns to
  predict it again without a new export.

Then the run's front door, ``lodevem.predict.Predictor.cells``, predicts and applies the
profile's calibration (if any), exactly as ``start`` does; a model file also gets its runtime's
converted form on demand (the same ``ConvertCache`` as ``start``) for kinds that run it (armsim).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .. import __version__
from ..errors import InputError, LodevemError, ModelFileError
from ..latency.calibration import CalibrationRecord, CalibrationSet, Measurement, now_iso
from ..latency.estimator import DEFAULT_RUNTIME
from ..latency.kinds import ConvertedFile, SandboxAccess
from ..latency.records import LatencyPrediction, ModelGraph, ModelLatency
from ..profiles import Profile, load_profiles, select_profiles
from ..store import ArtifactStore, user_cache_dir
from ..store import file_digest as file_sha256
from ..worker.protocol import DEFAULT_INPUT_SHAPE
from ..worker.shapes import SOURCE_DEFAULT, SOURCE_REQUEST
from . import Predictor

__all__ = ["LatencyPredictor", "ModelGraph", "ModelLatency", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/lodevem`` (default ``~/.cache/lodevem``): exports of files and zoo models."""
    return user_cache_dir()


def _shape_source(given: Optional[tuple[int, ...]]) -> str:
    """Where the shape of a zoo model's or a module's export came from (a file's export says so itself)."""
    return SOURCE_REQUEST if given else SOURCE_DEFAULT


def _is_module(model: Any) -> bool:
    """An ``nn.Module`` without importing torch: if torch is not imported, it is not one."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


class LatencyPredictor:
    """Reusable latency predictions (the ``lodevem.Predictor`` of the API): profiles, predictor
    data, exports and kernel graphs are loaded once and kept, so a loop over candidate models
    pays for each model's export and kernel extraction once and ~1 ms per prediction after.

    ``profile``: the default profile (an id or a ``Profile``) for ``predict``. ``predictor``:
    ``auto`` | ``nn-meter`` | ``estimator`` (as ``lodevem start --predictor``). ``calibrations``:
    the calibrations folder (None: ``$LODEVEM_CALIBRATIONS``, else the user's config folder);
    ``use_calibrations=False`` predicts uncalibrated. ``backend``: the sandbox model *files* are
    exported in (``auto``/``docker``/``process``), opened on the first file; ``loading``: how the
    sandbox loads them (``sandbox.usercode.ModelLoading``: ``--code``, ``--arch``).
    """

    def __init__(self, profile: Optional[str | Profile] = None, *, threads: int = 1, runtime: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, predictor: str = "auto",
                 nnmeter_data: Optional[Path | str] = None, calibrations: Optional[Path | str] = None,
                 use_calibrations: bool = True, profiles_dir: Sequence[Path | str] = (), backend: str = "auto",
                 timeout_s: float = 600.0, cache_dir: Optional[Path | str] = None, loading: Any = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.store = ArtifactStore(self.cache_dir)
        # the run's front door (lodevem.predict.Predictor, one pool: every runtime asked for, one
        # cache of graphs); its predictions are kept in the store too, so a first call in a new
        # process on a model whose graph and prediction are there imports neither torch, onnx nor nn-Meter
        self.calibrations = CalibrationSet(calibrations, enabled=use_calibrations)
        self.door = Predictor(mode=predictor, data_dir=nnmeter_data, cache_dir=self.store.folder("latency"),
                              runtime=runtime if runtime is not None else DEFAULT_RUNTIME,  # a bad one: InputError now
                              calibrations=self.calibrations,
                              sandbox=SandboxAccess(self._open_client, self.store.folder, timeout_s))
        self.core = self.door.pool
        self.threads, self.runtime = threads, runtime
        self.input_shape = tuple(input_shape) if input_shape else None
        self.profiles_dir = tuple(profiles_dir)
        self.backend_name, self.timeout_s = backend, timeout_s
        self.loading = loading  # sandbox.usercode.ModelLoading (--code, --arch) for model files
        self.warnings: list[str] = []
        self._profiles: Optional[dict[str, Profile]] = None
        self._exports: Any = None  # sandbox.artifacts.ExportCache, opened on the first model file
        self._converts: Any = None  # sandbox.artifacts.ConvertCache, beside it
        self._files: dict[Path, tuple[Path, str]] = {}  # export -> (model file, sha256): what converts
        self._graphs: dict[tuple[Any, ...], ModelGraph] = {}
        self._scratch: Optional[Path] = None
        self._module_exports = 0
        self.default_profile = self.profile(profile) if profile is not None else None

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Delete the scratch folder of module exports (kept graphs stay usable in memory)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def __enter__(self) -> "LatencyPredictor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close() still leaves no scratch folder behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- profiles -----------------------------------------------------------------------------------

    def profile(self, profile: str | Profile) -> Profile:
        """A ``Profile`` as given, or the profile with that id (shipped, ``$LODEVEM_PROFILES`` or
        ``profiles_dir``); an unknown id is a ``ProfileError`` listing the known ones."""
        if isinstance(profile, Profile):
            return profile
        if self._profiles is None:
            self._profiles = {p.id: p for p in load_profiles(self.profiles_dir)}
        return select_profiles(list(self._profiles.values()), ids=[profile])[0]

    def profiles(self, ids: Sequence[str] = (), tiers: Sequence[str] = ()) -> list[Profile]:
        if self._profiles is None:
            self._profiles = {p.id: p for p in load_profiles(self.profiles_dir)}
        return select_profiles(list(self._profiles.values()), ids=ids, tiers=tiers)

    # -- models -------------------------------------------------------------------------------------

    def graph(self, model: Any, input_shape: Optional[Sequence[int]] = None) -> ModelGraph:
        """The ONNX export of ``model`` (a path, a zoo name, an ``nn.Module`` or a ``ModelGraph``),
        made where it is safe (see the module docstring). Files and zoo models are cached."""
        if isinstance(model, ModelGraph):
            return model
        shape = tuple(input_shape) if input_shape else self.input_shape
        if _is_module(model):
            return self._export_module(model, shape)
        if not isinstance(model, (str, Path)):
            raise InputError(f"model must be a file path, a zoo model name or a torch.nn.Module, got "
                             f"{type(model).__name__}")
        path = Path(model)
        if path.is_file():
            return self._export_file(path, shape)
        if isinstance(model, str):
            kept = self._zoo_graph(model, shape)  # in the store: no need to import the zoo (and torch)
            if kept is not None:
                return kept
        from .. import zoo

        if isinstance(model, str) and model in zoo.ZOO:
            return self._export_zoo(model, shape)
        if path.exists():
            raise InputError(f"{path}: not a file (expected a model file such as model.pt)")
        raise InputError(f"{model}: no such model file, and not a zoo model name (expected a file path or one of "
                         f"{', '.join(zoo.names())})")

    def _export_file(self, path: Path, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        sha = file_sha256(str(path))  # by content: a file rewritten in place is another model (issue 38)
        key = ("file", sha, shape)
        if key in self._graphs:
            return self._graphs[key]
        export = self._export_cache().export(path, sha, shape)
        if export.unusable:
            raise ModelFileError(export.error)
        graph = ModelGraph(path.name, "file", sha, export.path, export.model.input_shape or shape,
                           export.error if export.path is None else "", export.model.input_shape_source)
        if export.path is not None:
            self._files[Path(export.path)] = (path, sha)
        self._graphs[key] = graph
        return graph

    def _export_cache(self) -> Any:
        if self._exports is None:
            from ..sandbox import open_backend
            from ..sandbox.artifacts import ConvertCache, ExportCache
            from ..sandbox.client import WorkerClient

            backend, warning = open_backend(self.backend_name)
            if warning:
                self.warnings.append(warning)
            client = WorkerClient(backend, loading=self.loading)
            self._exports = ExportCache(client, self.store, self.timeout_s)
            self._converts = ConvertCache(client, self.store, self.timeout_s)
        return self._exports

    def _open_client(self) -> Any:
        """The sandbox's client once a model file opened it (None before: kinds that need the
        sandbox, armsim, have nothing to run without a file)."""
        return self._exports.client if self._exports is not None else None

    def _converter(self, graph: ModelGraph, runtime: str) -> Optional[Callable[[], ConvertedFile]]:
        """The model file behind ``graph`` in ``runtime``'s own form, made on demand by the
        sandbox's conversion cache (zoo models and modules: None, no file to convert)."""
        source = self._files.get(Path(graph.onnx_path)) if graph.onnx_path is not None else None
        if source is None or self._converts is None:
            return None
        path, sha = source
        converts, shape = self._converts, graph.input_shape

        def convert() -> ConvertedFile:
            result = converts.convert(path, sha, runtime, shape)
            return ConvertedFile(result.path, result.error or "", shape)

        return convert

    def _zoo_graph(self, name: str, shape: Optional[tuple[int, ...]]) -> Optional[ModelGraph]:
        """The stored graph of zoo model ``name``, if a run of this lodevem version made it."""
        given, shape = shape, shape or tuple(DEFAULT_INPUT_SHAPE)
        key = ("zoo", name, shape, _shape_source(given))
        if key not in self._graphs:
            kept = self.store.lookup("zoo", [f"{name}-{'x'.join(map(str, shape))}-{__version__}.onnx"],
                                     {"zoo": name, "input_shape": list(shape), "lodevem": __version__})
            if kept is None:
                return None
            self._graphs[key] = ModelGraph(name, "zoo", self.store.file_sha256(kept.path), kept.path, shape,
                                           input_shape_source=_shape_source(given))
            self.core.known_digest(kept.path, self._graphs[key].sha256)
        return self._graphs[key]

    def _export_zoo(self, name: str, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        """One graph per zoo name, shape and lodevem version in the store: a first call in a new
        process reads it (and its digest, from the sidecar) instead of building and tracing."""
        kept = self._zoo_graph(name, shape)
        if kept is not None:
            return kept
        from .. import zoo

        given, shape = shape, shape or tuple(DEFAULT_INPUT_SHAPE)
        maker = {"zoo": name, "input_shape": list(shape), "lodevem": __version__}
        self.store.publish_local("zoo", f"{name}-{'x'.join(map(str, shape))}-{__version__}.onnx", maker,
                                 lambda path: self._export_in_process(zoo.build(name), shape, path))
        graph = self._zoo_graph(name, given)
        assert graph is not None
        return graph

    def _export_module(self, module: Any, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        given, shape = shape, shape or tuple(DEFAULT_INPUT_SHAPE)
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="lodevem-modules-"))
        self._module_exports += 1  # a fresh name each time: the predictor caches graphs by path
        target = self._scratch / f"module-{self._module_exports}.onnx"
        self._export_in_process(module, shape, target)
        return ModelGraph(type(module).__name__, "module", file_sha256(str(target)), target, shape,
                          input_shape_source=_shape_source(given))

    @staticmethod
    def _export_in_process(module: Any, shape: tuple[int, ...], target: Path) -> None:
        """Export lodevem's own zoo code or the caller's own module object in this process."""
        import torch

        from ..worker.onnx_export import export_module
        from ..worker.protocol import WorkerError

        first = next(iter(module.parameters()), None)
        example = torch.zeros(shape, dtype=first.dtype if first is not None else torch.float32)
        # The trace runs one real forward pass, and torch's intra-op threads spin against each
        # other on a busy machine: mobilenet_v2's export took 7.6 s with 2 threads and 1.35 s
        # with 1 on this 2-core host under load (benchmarks/predict_api.py). The setting is the
        # process's, so the caller's own value is restored afterwards.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            export_module(module, example, str(target))
        except WorkerError as exc:
            raise LodevemError(f"{type(module).__name__}: ONNX export failed: {exc}") from None
        finally:
            torch.set_num_threads(threads)

    # -- predictions --------------------------------------------------------------------------------

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
        runtime = runtime if runtime is not None else self.runtime
        graph = self.graph(model, input_shape)
        door = self.door.serving_exactly(runtime) if runtime is not None else self.door
        return door.cells(graph.onnx_path, [chosen], threads, level, self._converter(graph, door.runtime),
                          export_error=graph.error, calibrated=calibrated)[chosen.id]

    def predict_all(self, models: Sequence[Any], profiles: Sequence[Profile], *, threads: Optional[int] = None,
                    runtime: Optional[str] = None) -> list[ModelLatency]:
        """Every (model, profile) pair, models exported first (a bad file stops before any work)."""
        self.door.require(profiles)
        graphs = [self.graph(m) for m in models]
        return [ModelLatency(g, p, self.predict(g, p, threads=threads, runtime=runtime))
                for g in graphs for p in profiles]

    # -- calibration --------------------------------------------------------------------------------

    def calibrate(self, profile: str | Profile, measurements: Sequence[Measurement], *, runtime: str,
                  threads: int, note: str = "", same_chipset: bool = False) -> list[tuple[Path, CalibrationRecord]]:
        """Store one calibration record per measurement of a model on ``profile``'s device
        (``same_chipset``: the records also calibrate profiles with its chipset and core).

        Every model is exported and predicted (uncalibrated) before anything is written, so a
        bad model leaves the folder as it was.
        """
        chosen = self.profile(profile)
        self.door.serving_exactly(runtime).require([chosen])
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
