"""Per-profile latency for the pipeline: the face of the ``latency`` wing.

One ``Predictor`` per run (``start``, ``predict`` and the Python API share it): it predicts, for
each profile, the single-thread (or ``--threads N``) latency on the profile's fastest cluster, for
one named runtime (``--latency-runtime``: ``tflite`` = TFLite + XNNPACK, or ``ncnn``). The work is
done by one ``latency.pool.PredictorPool`` behind it, shared by every runtime a run needs
(``serving``): kinds, kernel graphs and the cache are loaded once.

**The seam for predictor kinds** (``latency.kinds.PredictorKind``): a kind takes a
``PredictionJob`` (ONNX export, the runtime's converted file when there is one, profile, threads,
level) and returns a ``LatencyPrediction``. Today's kinds:

* ``nn-meter`` (``latency.nnmeter.NnMeterKind``): nn-Meter's regressors on their Pixel 4 A76,
  each kernel carried to the profile's core with the estimator's ratio; TFLite by construction,
  so the registry lets it serve ``tflite`` only (``auto`` takes the estimator for ncnn,
  ``nn-meter`` refuses);
* ``estimator`` (``latency.kinds.EstimatorKind``): the calibrated cost model alone.

A third kind (the emulated Arm core, ``latency.armsim``) is a class with the same methods, an
entry in ``latency.pool.KINDS`` (which also makes it a ``--predictor`` value: ``MODES``) and its
name in the registry's ``RuntimeSpec.predictors`` of the runtimes it serves.

``mode="auto"`` takes the first kind in ``KINDS`` order that can predict the profile now, saying
in the note and the warnings why it passed over the others; a named mode refuses to run without
its data (``InputError`` naming the folder). A latency that cannot be predicted is ``None`` with
the reason, never a made-up number. Every ``latency_source`` names the runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .errors import InputError
from .latency.estimator import DEFAULT_RUNTIME, Estimator
from .latency.pool import MODES, PredictorPool
from .latency.records import KernelLatency, LatencyPrediction, format_clock
from .profiles import Profile
from .worker.registry import canonical

__all__ = ["MODES", "KernelLatency", "LatencyPrediction", "Predictor", "format_clock"]


class Predictor:
    """Latency cells of one run for its default runtime (``runtime``) and, through ``serving``,
    for any other with a latency model, all from one pool.

    ``mode``: ``auto`` | ``nn-meter`` | ``estimator`` (``MODES``). ``data_dir``: the nn-Meter data
    folder (``--nnmeter-data``; None: ``$LODEVEM_NNMETER_DATA``, else nn-Meter's own).
    ``breakdown=True`` keeps per-kernel figures. ``cache_dir``: where finished cells are kept
    (``<output>/.cache/latency``); ``use_cache=False`` recomputes (and refreshes the cache).
    ``pool``: share another Predictor's pool (``serving`` does).
    """

    def __init__(self, mode: str = "auto", data_dir: Optional[Path | str] = None,
                 estimator: Optional[Estimator] = None, breakdown: bool = False, runtime: str = DEFAULT_RUNTIME,
                 cache_dir: Optional[Path | str] = None, use_cache: bool = True,
                 pool: Optional[PredictorPool] = None) -> None:
        self.pool = pool if pool is not None else PredictorPool(mode, data_dir, estimator, breakdown, cache_dir,
                                                                use_cache)
        self.runtime = self.pool.check_runtime(runtime)

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
            return self if canonical(runtime) == self.runtime else Predictor(runtime=runtime, pool=self.pool)
        except InputError as exc:
            self.pool.warn(f"rows measured under {runtime}: latency for {self.runtime} ({exc})")
            return self

    def require(self, profiles: Sequence[Profile], load: bool = True) -> None:
        """Fail fast, before any benchmark runs (see ``PredictorPool.require``)."""
        self.pool.require(profiles, self.runtime, load)

    def predict(self, onnx_path: Path | str, profiles: Sequence[Profile], threads: int = 1,
                level: Optional[str] = None, converted_path: Optional[Path] = None) -> dict[str, LatencyPrediction]:
        """Latency of one exported model on every profile, keyed by profile id. ``level``: the
        compression variant the file is (``lodevem.levels``); ``converted_path``: the runtime's
        own file, for kinds that run it."""
        return self.pool.predict(onnx_path, profiles, threads, level, self.runtime, converted_path)

    def describe(self) -> dict[str, Any]:
        """What the run used, for the manifest."""
        return self.pool.describe(self.runtime)
