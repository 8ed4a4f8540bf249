"""``--predictor armsim|auto`` in a ``start`` run: the one hook the runner calls.

``armsim_cells`` takes the run's latency cells (the estimator's / nn-Meter's) and, for each
model whose latency runtime is tflite or ncnn, replaces the cells armsim can fill: it converts the
measured file with the run's ConvertCache (the very files ``--runtime tflite|ncnn`` measures),
profiles it per ISA (cached) and applies the cost model.

* ``armsim``: every covered cell is armsim's; a cell it cannot fill says why (``latency_ms``
  None), never falls back silently. Uncovered cores (no Arm build of the runtime for the ISA)
  keep the estimator's cell, with a run warning naming them.
* ``auto``: armsim where it gives a number, the estimator's cell everywhere else, and armsim is
  used only when its image is present and the cost model is installed (otherwise nothing here
  runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ...errors import LodevemError
from ...predict import LatencyPrediction
from ...profiles import Profile
from .predictor import ArmsimPredictor, default_cost_model
from .profiler import ArmsimProfiler

if TYPE_CHECKING:
    from ...measure import ConvertCache, ExportCache
    from ...sandbox.client import WorkerClient

PREDICTOR_CHOICES = ("armsim",)  # added to lodevem.predict.MODES' choices by the CLI
_RUNTIMES = ("tflite", "ncnn")


def armsim_usable(mode: str, client: "WorkerClient", warnings: list[str]) -> bool:
    """Whether this run uses armsim: asked for (``armsim``) or ``auto`` with the image and the
    cost model present. ``armsim`` without them is an error the user must see."""
    if mode not in ("armsim", "auto"):
        return False
    problem = ""
    if default_cost_model() is None:
        problem = "the armsim cost model (lodevem/latency/armsim/costmodel.py) is not installed"
    else:
        try:
            client.backend.identity_for("armsim")
        except LodevemError as exc:
            problem = str(exc)
        except Exception as exc:  # a backend without images (process, slurm): no armsim there
            problem = f"the {client.backend.name} backend cannot run the armsim image ({type(exc).__name__})"
        if client.backend.name != "docker" and not problem:
            problem = f"armsim runs only under the Docker backend, not {client.backend.name}"
    if problem and mode == "armsim":
        raise LodevemError(f"--predictor armsim: {problem}")
    return not problem


def armsim_cells(mode: str, profiler: ArmsimProfiler, converts: "ConvertCache", exports: "ExportCache",
                 runtime: str, measured_path: Path, measured_sha256: str, level: Optional[str],
                 profiles: Sequence[Profile], threads: int, input_shape: Optional[Sequence[int]],
                 cells: dict[str, LatencyPrediction], warnings: list[str]) -> dict[str, LatencyPrediction]:
    """The run's cells for one model with armsim's where it can answer (see the module doc)."""
    if runtime not in _RUNTIMES:
        return cells
    predictor = ArmsimPredictor(profiler, runtime)
    covered = [p for p in profiles if predictor.covers(p)]
    uncovered = sorted({p.fastest_cluster.core for p in profiles if p not in covered})
    if uncovered and mode == "armsim":
        note = f"--predictor armsim: no {runtime} profile for {', '.join(uncovered)}: those cells are the estimator's"
        if note not in warnings:
            warnings.append(note)
    if not covered:
        return cells
    shape = input_shape
    if shape is None:  # ncnn files do not record their input shape: the ONNX export's
        shape = exports.export(measured_path, measured_sha256, None).model.input_shape
    conversion = converts.convert(measured_path, measured_sha256, runtime, shape)
    out = dict(cells)
    for profile in covered:
        if conversion.path is None:
            cell = LatencyPrediction.unavailable(profile, f"{runtime} conversion failed: {conversion.error}",
                                                 threads, runtime)
        else:
            cell = predictor.predict_one(conversion.path, profile, threads, shape, level)
        if cell.latency_ms is not None or mode == "armsim":
            out[profile.id] = cell
    return out


def describe(profiler: Optional[ArmsimProfiler]) -> dict[str, Any]:
    from .profiler import describe as profiler_describe

    return profiler_describe(profiler)
