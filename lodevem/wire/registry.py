"""The one runtime registry: for each runtime, what measures it, what converts to it, what
predicts its latency, and what else it is called.

Why in the worker package: the worker validates a request's runtime and its conversion action,
and it imports no other lodevem code (the images bake only the worker package). Everything on
the host that needs a runtime rule reads it here: the CLI's choices (``--runtime``,
``--latency-runtime``), the image selection and converter pins (``sandbox.image``), the runtime
a row's latency stands for (``runner.models.latency_runtime``), the predictor kinds that can serve a
runtime (``latency.kinds``) and the runtimes a device measurement can be made with
(``latency.calibration``). Stdlib only, no I/O.

A new runtime is one ``RuntimeSpec`` below; a new latency predictor kind for a runtime adds its
name to that runtime's ``predictors`` (and its factory to ``latency.pool.KINDS``, nothing else).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Converter:
    """What turns a PyTorch model into a runtime's own file: the pinned package (part of the
    conversion cache key and of the manifest), the worker action that runs it, and its image."""

    package: str
    version: str
    action: str
    image: str = "convert"


@dataclass(frozen=True)
class RuntimeSpec:
    """One runtime.

    ``image``: the image (``sandbox.image.IMAGES`` name) its measurements run in.
    ``converter``: how its file is made (None: it runs the exported model as is).
    ``predictors``: the latency predictor kinds that predict for it (``--predictor auto`` chooses
    among them per cell, ``latency.pool.PredictorPool.kind_for``; empty: no latency model, and a
    row measured under it shows the latency of ``--latency-runtime``). ``aliases``: other names users write for it.
    ``on_device``: a phone app ships it, so a device benchmark may be measured with it.
    """

    name: str
    description: str
    image: str
    package: str  # the distribution that runs it (its version is the manifest's)
    converter: Optional[Converter] = None
    predictors: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    on_device: bool = False
    onnx_files_under: Optional[str] = None  # who measures an .onnx file asked for under it (no torch form)

    @property
    def has_latency_model(self) -> bool:
        return bool(self.predictors)


RUNTIMES: dict[str, RuntimeSpec] = {spec.name: spec for spec in (
    RuntimeSpec("torch", "PyTorch eager (what the model file is)", "bench", "torch", onnx_files_under="onnxruntime"),
    RuntimeSpec("onnxruntime", "onnxruntime CPU (the ONNX export)", "bench", "onnxruntime"),
    # TFLite means TFLite with its XNNPACK CPU delegate (the default CPU path of TFLite >= 2.3 and
    # of LiteRT); nn-Meter's CPU predictors are TFLite 2.1, so nn-Meter serves tflite only.
    RuntimeSpec("tflite", "LiteRT / TFLite with XNNPACK", "litert", "ai-edge-litert",
                Converter("litert-torch", "0.10.0", "export-tflite"), predictors=("nn-meter", "estimator", "armsim"),
                aliases=("tflite-xnnpack", "xnnpack", "litert"), on_device=True),
    RuntimeSpec("ncnn", "ncnn (Tencent)", "ncnn", "ncnn", Converter("pnnx", "20261020", "export-ncnn"),
                predictors=("estimator", "armsim"), on_device=True),
)}
# The runtime latencies are predicted for unless --latency-runtime says otherwise (the one a phone
# app ships by default), and the comparison runtime: the model file as it is, no phone app ships
# it; what a request runs under when it names none, and what loads a PyTorch file for any action.
DEFAULT_LATENCY_RUNTIME = "tflite"
COMPARISON_RUNTIME = "torch"
# The emulated Arm guests' runtimes (docs/armsim.md): the Arm builds of the same runtimes, at the
# newest versions with aarch64 / armv7l wheels (ncnn's aarch64 wheels stop at 1.0.20250503).
# Listed whole, installed --no-deps: ncnn's wheel metadata pulls opencv, which it never imports.
# Here, not in ``sandbox.image`` (which builds the image from them), because the armsim predictor
# (``latency.armsim``: which ISAs have a build, its profile cache key) reads them too and the
# latency package imports no sandbox code.
ARMSIM_AARCH64_REQUIREMENTS: tuple[str, ...] = (
    "ai-edge-litert==2.3.0", "ncnn==1.0.20250503", "numpy==2.4.6", "flatbuffers==25.12.19", "protobuf==7.36.2",
    "ml_dtypes==0.7.0", "tqdm==4.70.1", "backports.strenum==1.2.8", "typing_extensions==4.16.0")
ARMSIM_ARMV7L_REQUIREMENTS: tuple[str, ...] = ("ncnn==1.0.20261020",)
# The wheels of the emulated Arm guest of each armsim ISA (docs/armsim.md), in the protocol's ISA order.
ARMSIM_GUEST_WHEELS: dict[str, tuple[str, ...]] = {
    "armv7": ARMSIM_ARMV7L_REQUIREMENTS, "armv8.0": ARMSIM_AARCH64_REQUIREMENTS, "armv8.2": ARMSIM_AARCH64_REQUIREMENTS}


class Live(Mapping[str, V]):
    """A table derived from ``RUNTIMES``, made again at each use: a runtime registered after this
    module was imported (a plug-in's one line, ``tests/test_runtime_plugin.py``) is seen by every
    table built from the registry, and no table is a second list to keep in step."""

    def __init__(self, make: Callable[[], dict[str, V]]) -> None:
        self._make = make

    def __getitem__(self, key: str) -> V:
        try:
            return self._make()[key]
        except TypeError:  # an unhashable key (a request's field of the wrong type) is just not here
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._make())

    def __len__(self) -> int:
        return len(self._make())

    def __repr__(self) -> str:
        return f"Live({self._make()!r})"


# The worker action that makes each converted runtime's file.
CONVERT_ACTIONS: Mapping[str, str] = Live(lambda: {name: spec.converter.action for name, spec in RUNTIMES.items()
                                                    if spec.converter})


def canonical(name: str) -> Optional[str]:
    """The registry name of ``name`` or one of its aliases (case and spaces ignored); None if unknown."""
    key = str(name).strip().lower()
    for spec in RUNTIMES.values():
        if key == spec.name or key in spec.aliases:
            return spec.name
    return None


def latency_runtimes() -> tuple[str, ...]:
    """The runtimes with a latency model (the choices of ``--latency-runtime``)."""
    return tuple(name for name, spec in RUNTIMES.items() if spec.has_latency_model)


def only_runtime_predicted_by(kind: str) -> Optional[str]:
    """The one runtime the latency predictor ``kind`` predicts for, None when it predicts for
    several or none (nn-Meter's CPU predictors are TFLite 2.1's: it serves tflite only)."""
    serving = [name for name, spec in RUNTIMES.items() if kind in spec.predictors]
    return serving[0] if len(serving) == 1 else None


def on_device_runtimes() -> tuple[str, ...]:
    """The runtimes a phone app ships (a device measurement can be made with them)."""
    return tuple(name for name, spec in RUNTIMES.items() if spec.on_device)


def measured_under(runtime: str, file_suffix: str) -> str:
    """The runtime that measures a file asked for under ``runtime``: an ``.onnx`` file has no
    torch form, so under ``torch`` onnxruntime runs it (its rows say so)."""
    spec = RUNTIMES.get(runtime)
    if spec is not None and spec.onnx_files_under and file_suffix.lower() == ".onnx":
        return spec.onnx_files_under
    return runtime


def predicted_for(measured_under: str, default: str) -> str:
    """The runtime a row measured under ``measured_under`` has its latency predicted for: its
    own when it has a latency model (tflite, ncnn), else ``default`` (``--latency-runtime``):
    torch and onnxruntime are what no phone app ships."""
    spec = RUNTIMES.get(measured_under)
    return measured_under if spec is not None and spec.has_latency_model else default


def armsim_isas(runtime: str) -> tuple[str, ...]:
    """The ISAs the armsim image has ``runtime``'s Arm build for: where its package is among that
    guest's wheels (LiteRT publishes no armv7 wheel). Only a converted file is profiled."""
    spec = RUNTIMES.get(runtime)
    if spec is None or spec.converter is None:
        return ()
    return tuple(isa for isa, wheels in ARMSIM_GUEST_WHEELS.items()
                 if any(r.partition("==")[0] == spec.package for r in wheels))
