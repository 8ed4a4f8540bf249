"""lodevem: Low-resource Device Virtual Emulator.

The Python API predicts latency without a memory run::

    import lodevem
    lodevem.predict_latency("mobilenet_v2", "jiophone2").latency_ms        # a zoo model
    lodevem.predict_latency(my_module, "jiophone2", input_shape=(1, 3, 160, 160))

    predictor = lodevem.Predictor("jiophone2")          # reusable: keeps profiles and kernel graphs
    for candidate in search_space:
        ms = predictor.predict(candidate).latency_ms

``import lodevem`` stays light: torch, nn-Meter and the sandbox are imported on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from .version import __version__

__all__ = ["LatencyPrediction", "Predictor", "__version__", "predict_latency"]

if TYPE_CHECKING:
    from .predict import LatencyPrediction, Predictor
    from .profiles import Profile


def predict_latency(model: Any, profile: "str | Profile", input_shape: Optional[Sequence[int]] = None,
                    threads: int = 1, runtime: Optional[str] = None, *, predictor: str = "auto",
                    calibrations: Optional[Path | str] = None, use_calibrations: bool = True,
                    profiles_dir: Sequence[Path | str] = (), backend: str = "auto", level: Optional[str] = None,
                    code: "Sequence[Path | str] | Path | str" = (), arch: Optional[str] = None,
                    arch_kwargs: "Optional[dict[str, Any] | str]" = None) -> "LatencyPrediction":
    """Predicted latency of ``model`` on ``profile`` (an id or a ``Profile``).

    ``model``: an ``nn.Module`` of this process (exported here: it is your object, not a file to
    unpickle), a zoo model name, or a model file path (exported in the sandbox, ``backend``).
    ``runtime`` (``ncnn``/``tflite``) selects matching calibrations of the profile. ``level``:
    price the model as that compression level (``fp16``, ``int8``, ``int8-static``) of itself.
    ``code`` / ``arch`` / ``arch_kwargs``: the CLI's ``--code`` / ``--arch`` / ``--arch-kwargs``
    for a file that needs your code to load (``$LODEVEM_CODE`` adds code too). For loops, make one
    ``Predictor`` and call its ``predict``: this function builds a new one each call (the first
    call of a process, which starts the sandbox and exports, takes seconds).
    """
    from .predict import Predictor

    with Predictor(predictor=predictor, calibrations=calibrations, use_calibrations=use_calibrations,
                   profiles_dir=profiles_dir, backend=backend, code=code, arch=arch,
                   arch_kwargs=arch_kwargs) as session:
        return session.predict(model, profile, input_shape=input_shape, threads=threads, runtime=runtime,
                               level=level)


def __getattr__(name: str) -> Any:
    """``lodevem.Predictor`` and ``lodevem.LatencyPrediction``, imported on first use (PEP 562)."""
    if name == "Predictor":
        from .predict import Predictor

        return Predictor
    if name == "LatencyPrediction":
        from .predict import LatencyPrediction

        return LatencyPrediction
    raise AttributeError(f"module 'lodevem' has no attribute {name!r}")
