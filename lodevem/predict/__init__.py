"""Per-profile latency for the pipeline: the predict stage's face.

One class predicts: ``Predictor`` (``predictor.py``; ``lodevem.Predictor`` is the same class).
``start`` (``runner``), ``predict``, ``calibrate`` and the Python API all walk a model the same
way: **exported** where it is safe (``exports.Graphs``: a model file in the sandbox session, a zoo
model or the caller's own ``nn.Module`` in-process), **predicted** by the ``latency`` wing (pure
logic: ``latency.pool.PredictorPool`` and its predictor kinds), given the runtime's converted file
on demand (``converted_file``) for kinds that run it, then **calibrated**
(``latency.calibration.CalibrationSet.apply``) — ``Predictor.cells``.

It predicts, for each profile, the single-thread (or ``--threads N``) latency on the profile's
fastest cluster, for one named runtime (``--latency-runtime``: ``tflite`` = TFLite + XNNPACK, or
``ncnn``); the runtime is an argument of each call, so one predictor serves every runtime a run
measures under (``Predictor.runtime_for``): kinds, kernel graphs and the cache are loaded once.

**The seam for predictor kinds** (``latency.kinds.PredictorKind``): a kind takes a
``PredictionJob`` (ONNX export, the runtime's converted file when there is one, profile, threads,
level) and returns a ``LatencyPrediction``. A new kind is a class with the kind's methods in its
own module, an entry in ``latency.pool.KINDS`` (which also makes it a ``--predictor`` value) and
its name in the registry's ``RuntimeSpec.predictors`` of the runtimes it serves: nothing here or
in the runner changes (``tests/test_predictor_registry.py``).

``--predictor auto`` chooses per cell (``latency.pool``), saying in the note why; a named kind
refuses to run without its data (``InputError`` naming the folder). A latency that cannot be
predicted is ``None`` with the reason, never a made-up number. Every ``latency_source`` names
the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..latency.kinds import ConvertedFile, SandboxAccess
from ..latency.pool import MODES
from ..latency.records import KernelLatency, LatencyPrediction, ModelGraph, ModelLatency, format_clock
from ..wire.precision import LEVEL_FILE_PRECISION
from .predictor import Predictor

if TYPE_CHECKING:
    from ..results import ModelFile
    from ..sandbox.artifacts import ConvertCache

__all__ = ["MODES", "ConvertedFile", "KernelLatency", "LatencyPrediction", "ModelGraph", "ModelLatency", "Predictor",
           "SandboxAccess", "converted_file", "format_clock"]


def converted_file(converts: "ConvertCache", model: "ModelFile", runtime: str) -> Callable[[], ConvertedFile]:
    """``model`` in ``runtime``'s own form from the run's conversion cache, made when first asked
    (a kind that runs the runtime asks; the others never convert). The file ``--runtime`` measures
    (a level's variant), except a level the runtime's own converter makes (fp16, int8,
    int8-static): the ORIGINAL float model converted at that level, what a tflite/ncnn row of the
    level measures and what the phone runs (for int8-static under tflite, XNNPACK's int8 kernels)."""
    shape = tuple(model.input_shape) if model.input_shape else None

    def convert() -> ConvertedFile:
        if model.level in LEVEL_FILE_PRECISION:
            result = converts.convert(model.path, model.sha256, runtime, shape, quantize=model.level)
        else:
            result = converts.convert(model.measured_path, model.measured_sha256, runtime, shape)
        return ConvertedFile(result.path, result.error or "", shape)

    return convert
