"""The adapter every runtime's folder fills in (``lodevem.runtimes``): what the host asks of a runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..wire.registry import RUNTIMES, RuntimeSpec
from .logs import BenchmarkRun, ParsedLog

__all__ = ["NUMPY_PIN", "Citation", "LogReader", "OwnImage", "RunReader", "Runtime"]

# The numpy of every image (the worker's passes feed numpy arrays to each runtime), pinned once:
# the images a runtime's folder describes install it beside the runtime (``OwnImage``).
NUMPY_PIN = "numpy==2.4.6"

LogReader = Callable[[Sequence[str], str], Optional[ParsedLog]]
RunReader = Callable[[Sequence[str]], Optional[BenchmarkRun]]


@dataclass(frozen=True)
class Citation:
    """How the methods text names a thing and the BibTeX key it cites (``report.bibliography``)."""

    name: str
    key: str


@dataclass(frozen=True)
class OwnImage:
    """The image a runtime measures in when it has one of its own (its registry entry's ``image``
    names it; ``sandbox.image`` builds it from the shared ``Dockerfile``): the repository of its
    tag, its pinned requirements (the runtime alone beside numpy, as in an app that ships it, so
    the measured baseline is that runtime's), what ``lodevem check`` says it holds and what its
    build's prewarm imports."""

    repo: str
    requirements: tuple[str, ...]
    description: str
    warm_imports: str


class Runtime:
    """What the host asks of one runtime. Subclasses (one per folder) set what differs:

    ``runs_onnx_export``: a run loads the model's ONNX export (made once, unconstrained) instead of
    a PyTorch file; ``converted_suffix``: the name ending of the runtime's own file when its
    converter makes one (``.tflite``, ``.ncnn.param``: an ncnn model is that ``.param`` and the
    ``.bin`` beside it); ``read_log``: the reader of its device benchmark's log (None: no phone
    app ships it, nothing to calibrate with)."""

    name = ""
    runs_onnx_export = False
    converted_suffix: Optional[str] = None
    read_log: Optional[LogReader] = None
    # The reader of one run of its device benchmark binary on a phone (``lodevem.device``), and
    # that binary's name and where a user gets it (None: nothing to measure on a phone with).
    read_run: Optional[RunReader] = None
    benchmark_tool: Optional[str] = None
    benchmark_source: str = ""
    # The dynamic-range int8 level (``--levels int8``): which kernel categories it makes int8 (None:
    # every kernel) and what they then compute in (``latency.arithmetic``): torch's dynamic
    # quantization makes only its Linear layers int8.
    dynamic_int8: tuple[Optional[tuple[str, ...]], str] = (("fc",), "int8")
    # The methods text's facts: how it names the runtime; what its latency model's kernels are
    # (None: it has no latency model) and the prefix of the dev-data sources measured with them.
    cited = Citation("", "")
    kernels_cited: Optional[Citation] = None
    data_source_prefix: Optional[str] = None
    # Its image pins: the image it measures in when it has its own (None: the shared bench image,
    # torch + onnxruntime), and what its conversion needs in the converter image besides its
    # converter (``sandbox.image_specs`` builds the catalogue from these; ``tests/test_pins.py``
    # holds the ``runtimes`` extra to them).
    own_image: Optional[OwnImage] = None
    convert_requirements: tuple[str, ...] = ()

    def executes(self, arithmetic: str, fp16_core: bool) -> str:
        """What it computes a kernel holding ``arithmetic`` in, on a core with (``fp16_core``) or
        without ARMv8.2 FP16 arithmetic: what the latency model prices (``latency.arithmetic``)."""
        return arithmetic

    @property
    def spec(self) -> RuntimeSpec:
        """Its registry entry: package, converter, image, the kinds that predict it."""
        return RUNTIMES[self.name]

    @property
    def converts(self) -> bool:
        """A run loads the runtime's own file, made from the model by its converter."""
        return self.spec.converter is not None

    @property
    def converter_pin(self) -> Optional[str]:
        """``package==version`` of its converter (part of every key of a file it made), or None."""
        converter = self.spec.converter
        return f"{converter.package}=={converter.version}" if converter is not None else None

    @property
    def converter(self) -> tuple[str, str]:
        """(package, version) of its converter; ``InputError`` for a runtime that converts nothing."""
        found = self.spec.converter
        if found is None:
            from ..errors import InputError

            raise InputError(f"runtime {self.name} has no converter: it runs the model file (or its export) as is")
        return found.package, found.version

    @property
    def convert_action(self) -> str:
        """The worker action that makes its file."""
        found = self.spec.converter
        assert found is not None, self.name
        return found.action

    @property
    def makes_files(self) -> bool:
        """A run of it needs a file made from the model first (its conversion or the ONNX export)."""
        return self.converts or self.runs_onnx_export

    @property
    def images(self) -> tuple[str, ...]:
        """The images it needs (``sandbox.image.IMAGES`` names): the one that measures it, then
        the converter's."""
        spec = self.spec
        return tuple(dict.fromkeys((spec.image, *((spec.converter.image,) if spec.converter else ()))))
