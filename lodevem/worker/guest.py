"""The container half of a runtime, as the worker asks it: ``Guest``, which each runtime's folder
fills in (``lodevem/runtimes/<name>/guest.py``), and ``guest(name)``, the one dispatch table.

Why the table is built from the registry's names: a runtime is one folder, its host adapter and
this half side by side, so the worker chooses no runtime's code by comparing names (a fifth
converting runtime would otherwise be measured and converted by another's code). The halves
import the worker's machinery (memory phases, timed passes, loading); the worker finds them by
name, as plug-ins are found, and imports none of them by hand. Stdlib only at module level:
each half imports its runtime (numpy, LiteRT, ncnn, torch...) inside its methods.
"""

from __future__ import annotations

import importlib
import os
from importlib import metadata
from typing import Any, Callable, Optional

from ..wire.protocol import CONVERT_ACTIONS, WorkerError, artifact_files, progress
from ..wire.registry import RUNTIMES
from ..wire.replies import ConvertReply, EvaluateReply, MeasureReply, WorkerReply
from ..wire.requests import ConvertRequest, EvaluateRequest, MeasureRequest
from ..wire.sections import RuntimeSection
from .memory import MemoryPhases

Late = Optional[Callable[[], None]]  # runs after the memory summary was taken (see main)
Predict = Callable[[Any], Any]  # one C x H x W float32 sample -> the output scores, 1-D float


class Guest:
    """What the worker asks of one runtime inside the container. ``name``: its registry name."""

    name = ""

    def measure(self, req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, kind: str) -> Late:
        """Load the request's file under this runtime and time it (``res.latency``, memory phases)."""
        raise WorkerError("bad_request", f"runtime {self.name} cannot measure here")

    def predictor(self, req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
                  shape: list[int]) -> Predict:
        """The evaluation's one-sample inference under this runtime."""
        raise WorkerError("bad_request", f"runtime {self.name} cannot evaluate here")

    def convert(self, req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str) -> None:
        """Make this runtime's own file from the model (``res.converted``)."""
        raise WorkerError("bad_request", f"runtime {self.name} has no converter: it runs the model file as is")


def guest(name: str) -> Guest:
    """The container half of registry runtime ``name``: ``lodevem.runtimes.<name>.guest.GUEST``."""
    if name not in RUNTIMES:
        raise WorkerError("bad_request", f"unknown runtime {name!r}")
    package = __name__.rpartition(".")[0].rpartition(".")[0]  # lodevem
    found = importlib.import_module(f"{package}.runtimes.{name}.guest").GUEST
    assert isinstance(found, Guest) and found.name == name, name
    return found


def converter_guest(action: str) -> Guest:
    """The runtime whose converter the action ``export-<x>`` runs (the registry's ``CONVERT_ACTIONS``)."""
    for name, made_by in CONVERT_ACTIONS.items():
        if made_by == action:
            return guest(name)
    raise WorkerError("bad_request", f"action {action} converts to no runtime")


# -- what the converted runtimes' halves share ---------------------------------------------------

def converted_file(req: "MeasureRequest | EvaluateRequest") -> str:
    """The request's converted file, which must exist (with an ncnn ``.bin`` beside its ``.param``)."""
    path = req.converted_path
    if path is None or not all(os.path.isfile(p) for p in artifact_files(path)):
        action = CONVERT_ACTIONS.get(req.runtime, "its conversion")
        raise WorkerError("bad_request", f"runtime '{req.runtime}' needs converted_path of an existing conversion "
                                         f"(run action {action} first); got {path!r}")
    return path


def package_version(distribution: str) -> str:
    """The installed version of ``distribution`` ("unknown" when it is not installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def imported(res: WorkerReply, mem: MemoryPhases, name: str, version: str) -> None:
    """Record that the runtime was imported: the after_import phase and its section."""
    mem.mark("after_import")
    res.runtime = RuntimeSection.here(name, version)
    progress(f"imported {name} {version}")


def random_input(np: Any, shape: list[int], dtype: Any) -> Any:
    """The seeded input every measured pass feeds (zeros for an integer input)."""
    return (np.random.default_rng(0).standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f"
            else np.zeros(shape, dtype=dtype))
