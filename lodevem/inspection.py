"""``lodevem inspect``: what a model file is, before anything is benchmarked.

The first thing a user runs on a file lodevem did not write. The file is loaded and exported in
the sandbox like every load (the ONNX export the latency stage uses); the host reads only what
the worker replied and the exported ONNX graph (nn-Meter's kernel detector, no code runs).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .errors import InputError, ModelFileError, SandboxError
from .latency.kernels import DEFAULT_RULES, KernelGraph, extract_kernels
from .results import ModelFile
from .sandbox.artifacts import ExportCache
from .sandbox.client import ModelSection, WorkerClient
from .sandbox.session import Session
from .sandbox.usercode import ModelLoading, with_code_hint
from .store import ArtifactStore

__all__ = ["InspectionFailure", "InspectionReport", "ModelInspection", "inspect_files", "inspect_models"]


@dataclass(frozen=True)
class ModelInspection:
    """One file as the sandbox found it, plus its kernel graph as nn-Meter's detector reads it."""

    path: Path
    sha256: str
    size_bytes: int
    model: ModelSection
    macs: Optional[int] = None
    kernels: tuple[tuple[str, int], ...] = ()  # (nn-Meter kernel type, count), most frequent first
    precision_by_class: tuple[tuple[str, str, int], ...] = ()  # (kernel class, precision, count)
    graph_error: Optional[str] = None

    @property
    def kernel_count(self) -> int:
        return sum(n for _, n in self.kernels)

    def to_dict(self) -> dict[str, Any]:
        """For ``--json``: plain values only."""
        model = dataclasses.asdict(self.model)
        return {
            "path": str(self.path), "sha256": self.sha256, "size_bytes": self.size_bytes, **model,
            "input_shape": list(self.model.input_shape) if self.model.input_shape else None,
            "macs": self.macs, "kernel_count": self.kernel_count if self.kernels else None,
            "kernels": dict(self.kernels),
            "precision_by_kernel_class": [{"kernel_class": c, "precision": p, "kernels": n}
                                          for c, p, n in self.precision_by_class],
            "graph_error": self.graph_error,
        }


def _summarise(graph: KernelGraph) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, str, int], ...]]:
    types = Counter(k.nnmeter_type for k in graph.kernels)
    classes = Counter((k.category, getattr(k, "precision", "fp32")) for k in graph.kernels)
    return (tuple(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
            tuple((c, p, n) for (c, p), n in sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))))


@dataclass(frozen=True)
class InspectionFailure:
    """A file ``inspect`` could not describe, and the one-line reason: recorded instead of
    raised, so one bad file among many does not hide what the others are."""

    path: Path
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "error": self.error}


@dataclass(frozen=True)
class InspectionReport:
    """``lodevem inspect``'s answer: each file's inspection or failure, in order, and the
    ``--eval-data`` samples checked against them (None without it)."""

    found: tuple[ModelInspection | InspectionFailure, ...]
    data: Any = None  # accuracy.data.EvalData

    def data_line(self, item: ModelInspection) -> str:
        """The samples against ``item``'s input: what they are, and whether the model takes them."""
        from .accuracy.data import check_model_shape

        mismatch = check_model_shape(self.data, item.model.input_shape)
        return f"{self.data.describe()}: " + (mismatch or "the model's input shape")

    @property
    def failure(self) -> Optional[InputError]:
        failed = [item for item in self.found if isinstance(item, InspectionFailure)]
        if not failed:
            return None
        return InputError(f"{len(failed)} of {len(self.found)} file(s) could not be inspected: "
                          f"{', '.join(str(f.path) for f in failed)}")


def inspect_files(paths: Sequence[Path], *, backend: str = "auto", loading: Optional[ModelLoading] = None,
                  input_shape: Optional[Sequence[int]] = None, timeout_s: float = 600.0,
                  eval_data: Optional[Path] = None,
                  on_warning: Callable[[str], None] = lambda _: None) -> InspectionReport:
    """``lodevem inspect``: ``--eval-data`` read and validated on the host first (bad data is exit 2
    before any container; its shape is the input shape when none is given), then each file
    inspected in the sandbox (``inspect_in_sandbox``)."""
    data = _eval_data(eval_data) if eval_data is not None else None
    if data is not None and input_shape is None:
        input_shape = data.input_shape
    found = inspect_in_sandbox(paths, backend=backend, loading=loading, input_shape=input_shape, timeout_s=timeout_s,
                               on_warning=on_warning)
    return InspectionReport(tuple(found), data)


def _eval_data(path: Path) -> Any:
    """``--eval-data`` validated through the same reader as ``start`` (its normalised copy goes to a
    throw-away store: inspect keeps no cache)."""
    from .accuracy.data import DEFAULT_EVAL_LIMIT, prepare_eval_data

    with tempfile.TemporaryDirectory(prefix="lodevem-inspect-") as scratch:
        return prepare_eval_data(path, DEFAULT_EVAL_LIMIT, ArtifactStore(Path(scratch)))


def inspect_in_sandbox(paths: Sequence[Path], *, backend: str = "auto", loading: Optional[ModelLoading] = None,
                       input_shape: Optional[Sequence[int]] = None, timeout_s: float = 600.0,
                       on_warning: Callable[[str], None] = lambda _: None) -> list[ModelInspection | InspectionFailure]:
    """``lodevem inspect``: open the sandbox ``backend`` names (its warning, if any, goes to
    ``on_warning`` before any work) and inspect each file there (``inspect_models``)."""
    with Session.scratch(backend, loading=loading, timeout_s=timeout_s) as session:
        session.connect()
        for warning in session.warnings:
            on_warning(warning)
        return _inspect_all(paths, session.exports, input_shape)


def inspect_models(paths: Sequence[Path], client: WorkerClient, *, input_shape: Optional[Sequence[int]] = None,
                   timeout_s: float = 600.0) -> list[ModelInspection | InspectionFailure]:
    """Inspect each file in the sandbox, in order; a file that is missing or that the worker
    refuses becomes an ``InspectionFailure`` naming it and the next file is inspected. Errors that
    are not about one file (no Docker engine, Ctrl-C) still raise."""
    with Session.scratch(client, timeout_s=timeout_s) as session:
        return _inspect_all(paths, session.exports, input_shape)


def _inspect_all(paths: Sequence[Path], exports: ExportCache,
                 input_shape: Optional[Sequence[int]]) -> list[ModelInspection | InspectionFailure]:
    found: list[ModelInspection | InspectionFailure] = []
    for path in paths:
        try:
            found.append(_inspect_one(path, exports, input_shape))
        except (InputError, SandboxError) as exc:
            found.append(InspectionFailure(path, str(exc)))
    return found


def _inspect_one(path: Path, exports: ExportCache, input_shape: Optional[Sequence[int]]) -> ModelInspection:
    if not path.is_file():
        raise InputError(f"{path}: model file not found" if not path.exists()
                         else f"{path}: not a file (expected a model file such as model.pt)")
    record = ModelFile.from_path(path, path.name)
    export = exports.export(path, record.sha256, input_shape)
    if export.unusable:
        raise ModelFileError(with_code_hint(export.error, path))
    inspection = ModelInspection(path, record.sha256, record.size_bytes, export.model,
                                 graph_error=export.error or None)
    if export.path is not None:
        try:
            graph = extract_kernels(export.path, DEFAULT_RULES)
            kernels, precision = _summarise(graph)
            inspection = dataclasses.replace(inspection, macs=graph.macs, kernels=kernels,
                                             precision_by_class=precision)
        except InputError as exc:
            inspection = dataclasses.replace(inspection, graph_error=str(exc))
    return inspection
