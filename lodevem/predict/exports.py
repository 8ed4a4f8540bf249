"""A model as the predictor sees it: its ONNX export, made where it is safe to make it.

* a **model file** (a path) is code: it is exported in the sandbox (the session's export cache,
  as ``lodevem start`` does), never loaded in this process;
* a **zoo name** is lodevem's own code with seeded weights: built and exported here, cached in
  the artifact store by name, input shape and lodevem version;
* an **``nn.Module``** is the caller's own object, already in the caller's process: exported
  here, in-process (there is no file to unpickle). It is exported on every call, since a
  module (a NAS supernet with its active path, a pruned candidate) can change its structure
  between calls without changing identity; keep the ``ModelGraph`` that ``graph()`` returns to
  predict it again without a new export.

A model file's export also remembers its file, so a kind that runs the runtime (armsim) gets the
file's converted form on demand (``converter``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..errors import InputError, LodevemError, ModelFileError
from ..latency.kinds import ConvertedFile
from ..latency.records import ModelGraph
from ..sandbox.session import Session
from ..store import file_digest
from ..version import __version__
from ..wire.protocol import DEFAULT_INPUT_SHAPE
from ..wire.shape_sources import SOURCE_DEFAULT, SOURCE_GIVEN, host_shape_source

__all__ = ["Graphs", "is_module"]


def _shape_source(given: Optional[tuple[int, ...]]) -> str:
    """Where the shape of a zoo model's or a module's export came from (a file's export says so itself)."""
    return SOURCE_GIVEN if given else SOURCE_DEFAULT


def is_module(model: Any) -> bool:
    """An ``nn.Module`` without importing torch: if torch is not imported, it is not one."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


class Graphs:
    """The exports of one predictor's models, kept by content and shape (see the module
    docstring). ``on_stored``: told (path, digest) of a stored zoo graph, whose digest the
    artifact store already recorded (not hashed again)."""

    def __init__(self, session: Session, on_stored: Callable[[Path, str], None] = lambda path, sha: None) -> None:
        self.session, self.store = session, session.store
        self._on_stored = on_stored
        self._files: dict[Path, tuple[Path, str]] = {}  # export -> (model file, sha256): what converts
        self._graphs: dict[tuple[Any, ...], ModelGraph] = {}
        self._scratch: Optional[Path] = None
        self._module_exports = 0

    def close(self) -> None:
        """Delete the scratch folder of module exports (kept graphs stay usable in memory)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def graph(self, model: Any, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        """The ONNX export of ``model`` (a path, a zoo name, an ``nn.Module`` or a ``ModelGraph``)."""
        if isinstance(model, ModelGraph):
            return model
        if is_module(model):
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

    def converter(self, graph: ModelGraph, runtime: str) -> Optional[Callable[[], ConvertedFile]]:
        """The model file behind ``graph`` in ``runtime``'s own form, made on demand by the
        session's conversion cache (zoo models and modules: None, no file to convert)."""
        source = self._files.get(Path(graph.onnx_path)) if graph.onnx_path is not None else None
        if source is None:
            return None
        path, sha = source
        converts, shape = self.session.converts, graph.input_shape

        def convert() -> ConvertedFile:
            result = converts.convert(path, sha, runtime, shape)
            return ConvertedFile(result.path, result.error or "", shape)

        return convert

    def _export_file(self, path: Path, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        sha = file_digest(str(path))  # by content: a file rewritten in place is another model (issue 38)
        key = ("file", sha, shape)
        if key in self._graphs:
            return self._graphs[key]
        export = self.session.exports.export(path, sha, shape)
        if export.unusable:
            raise ModelFileError(export.error)
        graph = ModelGraph(path.name, "file", sha, export.path, export.model.input_shape or shape,
                           export.error if export.path is None else "",
                           host_shape_source(export.model.input_shape_source, None))
        if export.path is not None:
            self._files[Path(export.path)] = (path, sha)
        self._graphs[key] = graph
        return graph

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
            self._on_stored(kept.path, self._graphs[key].sha256)
        return self._graphs[key]

    def _export_zoo(self, name: str, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        """One graph per zoo name, shape and lodevem version in the store: a first call in a new
        process reads it (and its digest, from the sidecar) instead of building and tracing."""
        from .. import zoo

        given, shape = shape, shape or tuple(DEFAULT_INPUT_SHAPE)
        maker = {"zoo": name, "input_shape": list(shape), "lodevem": __version__}
        self.store.publish_local("zoo", f"{name}-{'x'.join(map(str, shape))}-{__version__}.onnx", maker,
                                 lambda path: _export_in_process(zoo.build(name), shape, path))
        graph = self._zoo_graph(name, given)
        assert graph is not None
        return graph

    def _export_module(self, module: Any, shape: Optional[tuple[int, ...]]) -> ModelGraph:
        given, shape = shape, shape or tuple(DEFAULT_INPUT_SHAPE)
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="lodevem-modules-"))
        self._module_exports += 1  # a fresh name each time: the predictor caches graphs by path
        target = self._scratch / f"module-{self._module_exports}.onnx"
        _export_in_process(module, shape, target)
        return ModelGraph(type(module).__name__, "module", file_digest(str(target)), target, shape,
                          input_shape_source=_shape_source(given))


def _export_in_process(module: Any, shape: Sequence[int], target: Path) -> None:
    """Export lodevem's own zoo code or the caller's own module object in this process."""
    import torch

    from ..wire.protocol import WorkerError
    from ..worker.export.onnx_export import export_module

    first = next(iter(module.parameters()), None)
    example = torch.zeros(tuple(shape), dtype=first.dtype if first is not None else torch.float32)
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
