"""Per-profile latency for the pipeline: the one front door of a prediction.

One ``Predictor`` per run: ``start`` (``runner``), ``predict``, ``calibrate`` and the Python API
(``lodevem.Predictor`` = ``predict.api.LatencyPredictor``, built on this class) all walk a model
the same way:

1. **exported** where it is safe (a model file in the sandbox through ``sandbox.artifacts.ExportCache``;
   the API also exports zoo models and the caller's own ``nn.Module`` in-process),
2. **predicted** by the ``latency`` wing (pure logic: ``latency.pool.PredictorPool`` and its
   predictor kinds), given the runtime's converted file on demand (``converted_file``) for
   kinds that run it,
3. **calibrated** (``latency.calibration.CalibrationSet.apply``) — ``Predictor.cells``.

It predicts, for each profile, the single-thread (or ``--threads N``) latency on the profile's
fastest cluster, for one named runtime (``--latency-runtime``: ``tflite`` = TFLite + XNNPACK, or
``ncnn``). The work is done by one pool behind it, shared by every runtime a run needs
(``serving``): kinds, kernel graphs and the cache are loaded once.

**The seam for predictor kinds** (``latency.kinds.PredictorKind``): a kind takes a
``PredictionJob`` (ONNX export, the runtime's converted file when there is one, profile, threads,
level) and returns a ``LatencyPrediction``. Today's kinds:

* ``nn-meter`` (``latency.nnmeter.NnMeterKind``): nn-Meter's regressors on their Pixel 4 A76,
  each kernel carried to the profile's core with the estimator's ratio; TFLite by construction,
  so the registry lets it serve ``tflite`` only (``auto`` takes the estimator for ncnn,
  ``nn-meter`` refuses);
* ``estimator`` (``latency.kinds.EstimatorKind``): the calibrated cost model alone;
* ``armsim`` (``latency.armsim.kind.ArmsimKind``): the runtime's own Arm build counted on an
  emulated core (needs the sandbox: ``sandbox`` below, and the converted file).

A new kind is a class with the same methods in its own module, an entry in ``latency.pool.KINDS``
(which also makes it a ``--predictor`` value) and its name in the registry's
``RuntimeSpec.predictors`` of the runtimes it serves: nothing here or in the runner changes.

``mode="auto"`` chooses per cell by the kinds' own held-out errors (``PredictorPool.candidates``),
saying in the note why; a named mode refuses to run without its data (``InputError`` naming the
folder). A latency that cannot be predicted is ``None`` with the reason, never a made-up number.
Every ``latency_source`` names the runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..errors import InputError
from ..latency.calibration import CalibrationSet
from ..latency.estimator import DEFAULT_RUNTIME, Estimator
from ..latency.kinds import ConvertedFile, SandboxAccess
from ..latency.pool import MODES, PredictorPool
from ..latency.records import KernelLatency, LatencyPrediction, ModelGraph, ModelLatency, format_clock
from ..profiles import Profile
from ..worker.precision import LEVEL_FILE_PRECISION
from ..worker.registry import canonical

if TYPE_CHECKING:
    from ..results import ModelFile
    from ..sandbox.artifacts import ConvertCache

__all__ = ["MODES", "ConvertedFile", "KernelLatency", "LatencyPrediction", "ModelGraph", "ModelLatency", "Predictor",
           "SandboxAccess", "converted_file", "format_clock"]


class Predictor:
    """Latency cells of one run for its default runtime (``runtime``) and, through ``serving``,
    for any other with a latency model, all from one pool.

    ``mode``: ``auto`` | ``nn-meter`` | ``estimator`` (``MODES``). ``data_dir``: the nn-Meter data
    folder (``--nnmeter-data``; None: ``$LODEVEM_NNMETER_DATA``, else nn-Meter's own).
    ``breakdown=True`` keeps per-kernel figures. ``cache_dir``: where finished cells are kept
    (``<output>/.cache/latency``); ``use_cache=False`` recomputes (and refreshes the cache).
    ``pool``: share another Predictor's pool (``serving`` does). ``calibrations``: the records
    ``cells`` applies (None: none). ``sandbox``: the sandbox kinds that run something may use
    (``latency.kinds.SandboxAccess``; armsim).
    """

    def __init__(self, mode: str = "auto", data_dir: Optional[Path | str] = None,
                 estimator: Optional[Estimator] = None, breakdown: bool = False, runtime: str = DEFAULT_RUNTIME,
                 cache_dir: Optional[Path | str] = None, use_cache: bool = True,
                 pool: Optional[PredictorPool] = None, calibrations: Optional[CalibrationSet] = None,
                 sandbox: Optional[SandboxAccess] = None) -> None:
        self.pool = pool if pool is not None else PredictorPool(mode, data_dir, estimator, breakdown, cache_dir,
                                                                use_cache, sandbox)
        self.runtime = self.pool.check_runtime(runtime)
        self.calibrations = calibrations

    @property
    def mode(self) -> str:
        return self.pool.mode

    @property
    def estimator(self) -> Estimator:
        return self.pool.estimator

    @property
    def data_dir(self) -> Path:
        return self.pool.data_dir

    @property
    def warnings(self) -> list[str]:
        """Run-level messages of the whole pool (every runtime), each once."""
        return self.pool.warnings

    @property
    def cache_hits(self) -> int:
        return self.pool.cache_hits

    @property
    def cache_misses(self) -> int:
        return self.pool.cache_misses

    def serving(self, runtime: str) -> "Predictor":
        """The pool's Predictor for ``runtime`` (a row measured under it); when the run's
        ``--predictor`` cannot serve it (nn-meter predicts TFLite only), this one, with a warning."""
        try:
            return self if canonical(runtime) == self.runtime else Predictor(runtime=runtime, pool=self.pool,
                                                                              calibrations=self.calibrations)
        except InputError as exc:
            self.pool.warn(f"rows measured under {runtime}: latency for {self.runtime} ({exc})")
            return self

    def serving_exactly(self, runtime: str) -> "Predictor":
        """The pool's Predictor for ``runtime``; ``InputError`` when the run's ``--predictor`` or
        the registry cannot serve it (the Python API and ``calibrate`` name the runtime)."""
        name = canonical(runtime)
        return self if name == self.runtime else Predictor(runtime=runtime, pool=self.pool,
                                                           calibrations=self.calibrations)

    def require(self, profiles: Sequence[Profile], load: bool = True) -> None:
        """Fail fast, before any benchmark runs (see ``PredictorPool.require``)."""
        self.pool.require(profiles, self.runtime, load)

    def predict(self, onnx_path: Path | str, profiles: Sequence[Profile], threads: int = 1,
                level: Optional[str] = None, convert: Optional[Callable[[], ConvertedFile]] = None
                ) -> dict[str, LatencyPrediction]:
        """Latency of one exported model on every profile, keyed by profile id (uncalibrated).
        ``level``: the compression variant the file is (``lodevem.levels``); ``convert``: the
        runtime's own file on demand (``converted_file``), for kinds that run it."""
        return self.pool.predict(onnx_path, profiles, threads, level, self.runtime, convert)

    def prepare(self, onnx_path: Optional[Path | str], profiles: Sequence[Profile], threads: int = 1,
                level: Optional[str] = None, convert: Optional[Callable[[], ConvertedFile]] = None) -> None:
        """Start the slow part of these cells now (``PredictorPool.prepare``: armsim's conversion
        and emulation), thread-safe, so a run can prepare its models in parallel and then walk
        them in order with ``cells``."""
        if onnx_path is not None:
            self.pool.prepare(onnx_path, profiles, threads, level, self.runtime, convert)

    def cells(self, onnx_path: Optional[Path | str], profiles: Sequence[Profile], threads: int = 1,
              level: Optional[str] = None, convert: Optional[Callable[[], ConvertedFile]] = None,
              export_error: str = "", calibrated: bool = True) -> dict[str, LatencyPrediction]:
        """The walk's last two steps for one exported model: predicted, then calibrated (each
        profile's records, when ``calibrations`` holds any). ``onnx_path`` None: the export
        failed (``export_error`` says why), every cell says so and has no number."""
        if onnx_path is None:
            return {p.id: LatencyPrediction.unavailable(p, f"no ONNX export: {export_error}", threads, self.runtime)
                    for p in profiles}
        predicted = self.predict(onnx_path, profiles, threads, level, convert)
        if not calibrated or self.calibrations is None:
            return predicted
        by_id = {p.id: p for p in profiles}
        return {pid: self.calibrations.apply(cell, by_id[pid], self.estimator, self.runtime)
                for pid, cell in predicted.items()}

    def describe(self) -> dict[str, Any]:
        """What the run used, for the manifest."""
        return self.pool.describe(self.runtime)


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
