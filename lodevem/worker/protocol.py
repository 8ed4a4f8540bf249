"""The wire protocol: versions, names, the request/result JSON and the one-line error.

Everything here is what host code needs to talk to the worker; ``lodevem.worker`` re-exports it.
"""

from __future__ import annotations

import hashlib
import json
import re
import reprlib
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from . import registry as _registry
from .error_kinds import ERROR_KINDS, UNUSABLE_FILE_KINDS  # noqa: F401  (the protocol's vocabulary, re-exported)
from .file_sections import DerivedFile, ModelSection, OnnxSection, VariantSection
from .precision import ARITHMETIC, CONVERT_QUANTIZE, INT8_LEVELS, LEVELS
from .profile_section import InstructionProfile
from .registry import CONVERT_ACTIONS
from .sections import AccuracySection, ConvertedSection, HostTimings, MemorySection, RuntimeSection, WorkerFailure

SCHEMA_VERSION = 1
WORKER_RELEASE = "2"  # bump when measurement semantics change, for people reading cached results


def _source_digest() -> str:
    """A digest of this package's own source files.

    Why: the host keys its caches on the worker version the worker reports, and a worker edit
    without a manual bump of ``WORKER_RELEASE`` would otherwise reuse results made by the old
    code. Host and sandbox run this same function over their copy of the package, so an image
    built from other code reports another version and the host refuses it.
    """
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


WORKER_VERSION = f"{WORKER_RELEASE}+{_source_digest()}"
EXIT_OK, EXIT_ERROR = 0, 3
ACTIONS = ("measure", "export-onnx", "inspect", "derive", *CONVERT_ACTIONS.values(), "armsim-profile", "evaluate",
           "decode-images")
# The runtimes (and the action that makes each converted runtime's file) and the compression
# levels are the registry's and the precision vocabulary's: one home each (lodevem.levels reads
# the same names).
RUNTIMES: tuple[str, ...] = tuple(_registry.RUNTIMES)
# state_dict: weights (a state_dict or a training checkpoint) loaded into the module --arch built.
FORMATS = ("pickled_module", "torchscript", "exported_program", "onnx", "state_dict")
DEFAULT_INPUT_SHAPE = [1, 3, 224, 224]
PROGRESS_PREFIX = "lodevem-worker: "
# armsim-profile (docs/armsim.md): the emulated ISAs and the precision paths one can ask for
# (auto: what the runtime does by default on that ISA).
ARMSIM_ISAS = ("armv7", "armv8.0", "armv8.2")
ARMSIM_PRECISIONS = ("auto", *(a for a in ARITHMETIC if a != "int8"))  # int8 is the file's, not a switch


class WorkerError(Exception):
    """A failure the worker can explain in one line; becomes ``error: {kind, message}``, exit 3."""

    def __init__(self, kind: str, message: str) -> None:
        assert kind in ERROR_KINDS, kind
        super().__init__(message)
        self.kind, self.message = kind, " ".join(message.split())


@dataclass
class WorkerRequest:
    """One job for the worker. Field names and defaults are the wire format."""

    action: str
    model_path: str
    schema_version: int = SCHEMA_VERSION
    input_shape: Optional[list[int]] = None
    warmup: int = 5
    runs: int = 50
    threads: int = 1
    runtime: str = "torch"
    onnx_path: Optional[str] = None
    level: Optional[str] = None
    derive_out: Optional[str] = None
    converted_path: Optional[str] = None  # a .tflite or ncnn .param (its .bin beside it): see artifact_files
    # The user's code (--code: package folders and .py scripts, paths as the worker sees them) and,
    # for weights-only files, the architecture to build (--arch MODULE:CALLABLE or zoo:NAME).
    code_paths: list[str] = field(default_factory=list)
    # export-onnx of a file with all-zero output channels: where to write its graph with those
    # channels removed (the latency the user's pruning would buy once physical).
    channels_removed_path: Optional[str] = None
    arch: Optional[str] = None
    arch_kwargs: Optional[dict[str, Any]] = None
    twin: bool = True  # export-onnx: the float twin of an int8/fp16 model (for prediction) or the plain export
    # armsim-profile: the emulated ISA, the precision path, the core whose /proc/cpuinfo the guest
    # sees (None: the ISA's default core); ``runs`` counted inferences after ``warmup`` ones.
    isa: Optional[str] = None
    precision: Optional[str] = None
    uarch: Optional[str] = None
    # export-tflite / export-ncnn: the level the runtime's own toolchain quantizes the (float)
    # model to while converting (precision.CONVERT_QUANTIZE; null: fp32), and for the calibrated
    # int8 levels an .npz whose ``inputs`` (N x input shape, float32) calibrate the activation
    # ranges (null: seeded synthetic inputs, convert.SYNTHETIC_CALIBRATION_INPUTS).
    quantize: Optional[str] = None
    calibration_path: Optional[str] = None
    # evaluate: the labelled samples, an uncompressed .npz the host wrote after validating the
    # user's data (inputs float32 N x C x H x W, labels int64 N; see worker.samples)
    data_path: Optional[str] = None
    # derive of level pruned with data_path: fine-tune the pruned module this many epochs
    # (worker.finetune states the recipe)
    finetune_epochs: Optional[int] = None
    # decode-images: model_path is the host's pack of an ImageFolder tree's images, derive_out the
    # normalised .npz to write, preprocess the worker.images.Preprocessing (as its to_dict)
    preprocess: Optional[dict[str, Any]] = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: "str | dict[str, Any]") -> "WorkerRequest":
        """Parse and validate; every problem is a ``bad_request`` WorkerError, never a traceback."""
        try:
            obj = json.loads(data) if isinstance(data, str) else data
        except ValueError as exc:
            raise WorkerError("bad_request", f"request is not valid JSON: {first_line(exc)}") from None
        except RecursionError:  # the C decoder's answer to [[[[...]]]] nested a thousand deep
            raise WorkerError("bad_request", "request is not valid JSON: nested too deeply") from None
        if not isinstance(obj, dict):
            raise WorkerError("bad_request", "request must be a JSON object")
        names = {f.name for f in fields(cls)}
        unknown = sorted({first_line(k if isinstance(k, str) else repr(k), 80) for k in obj if k not in names})
        if unknown:
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise WorkerError("bad_request", f"unknown request field(s): {', '.join(unknown[:5])}{more}")
        missing = [k for k in ("action", "model_path") if k not in obj]
        if missing:
            raise WorkerError("bad_request", f"missing request field(s): {', '.join(missing)}")
        request = cls(**obj)
        request.validate()
        return request

    def validate(self) -> None:
        """Raise a ``bad_request`` WorkerError for the first invalid field.

        Not run at construction: the host builds requests freely (e.g. with a compression level
        this worker does not know yet) and gets the refusal back as a normal worker result.
        """
        def is_int(v: Any, low: int) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= low

        checks = [
            (is_int(self.schema_version, 0) and self.schema_version == SCHEMA_VERSION,
             f"schema_version must be {SCHEMA_VERSION}"),
            (self.action in ACTIONS, f"action must be one of {', '.join(ACTIONS)}"),
            (self.runtime in RUNTIMES, f"runtime must be one of {', '.join(RUNTIMES)}"),
            (isinstance(self.model_path, str) and bool(self.model_path), "model_path must be a non-empty string"),
            (self.onnx_path is None or isinstance(self.onnx_path, str), "onnx_path must be a string or null"),
            (self.input_shape is None or (isinstance(self.input_shape, list) and bool(self.input_shape)
                                          and all(is_int(d, 1) for d in self.input_shape)),
             "input_shape must be a non-empty list of positive integers or null"),
            (is_int(self.warmup, 0), "warmup must be an integer >= 0"),
            (is_int(self.runs, 1), "runs must be an integer >= 1"),
            (is_int(self.threads, 1), "threads must be an integer >= 1"),
            (self.level is None or self.level in LEVELS, f"level must be null or one of {', '.join(LEVELS)}"),
            (self.derive_out is None or (isinstance(self.derive_out, str) and bool(self.derive_out)),
             "derive_out must be a non-empty string or null"),
            (isinstance(self.twin, bool), "twin must be true or false"),
            (self.action in ("derive", "decode-images") or self.derive_out is None,
             "derive_out is only for actions derive and decode-images"),
            (self.action != "decode-images" or self.derive_out is not None,
             "decode-images needs derive_out (where to write the samples)"),
            (self.preprocess is None or (self.action == "decode-images" and isinstance(self.preprocess, dict)),
             "preprocess must be null or an object, and only for decode-images"),
            (self.action == "derive" or self.level in (None, "fp32"),
             "level is only for action derive: measure or export the variant file derive writes"),
            (self.action != "derive" or self.derive_out is not None, "derive needs derive_out (where to write)"),
            (self.action != "derive" or self.level not in (None, "fp32"),
             "derive needs a level other than fp32 (fp32 is the file as given: nothing to derive)"),
            (self.action != "derive" or self.runtime == "torch", "derive runs with runtime torch"),
            (self.converted_path is None or (isinstance(self.converted_path, str) and bool(self.converted_path)),
             "converted_path must be a non-empty string or null"),
            (self.converted_path is None or self.action in CONVERT_ACTIONS.values()
             or (self.action in ("measure", "armsim-profile", "evaluate") and self.runtime in CONVERT_ACTIONS),
             "converted_path is only for export-tflite, export-ncnn, and measure, evaluate and armsim-profile with "
             "runtime tflite or ncnn"),
            (self.data_path is None or ((self.action == "evaluate" or (self.action == "derive"
                                                                       and self.level == "pruned"))
                                        and isinstance(self.data_path, str) and bool(self.data_path)),
             "data_path must be null or a non-empty string, and only for evaluate and derive of level pruned"),
            ((self.finetune_epochs is None) == (self.action != "derive" or self.data_path is None)
             and (self.finetune_epochs is None or is_int(self.finetune_epochs, 1)),
             "finetune_epochs (an integer >= 1) goes with derive of level pruned with data_path, and only there"),
            (self.action != "evaluate" or self.data_path is not None, "evaluate needs data_path (the samples)"),
            (self.action != "armsim-profile" or (self.runtime in CONVERT_ACTIONS and self.converted_path is not None
                                                 and self.isa in ARMSIM_ISAS
                                                 and self.precision in ARMSIM_PRECISIONS),
             f"armsim-profile needs runtime tflite or ncnn, converted_path, isa ({', '.join(ARMSIM_ISAS)}) and "
             f"precision ({', '.join(ARMSIM_PRECISIONS)})"),
            (self.quantize is None or (self.quantize in CONVERT_QUANTIZE and self.action in CONVERT_ACTIONS.values()),
             f"quantize must be null or one of {', '.join(CONVERT_QUANTIZE)}, and only for "
             f"{', '.join(CONVERT_ACTIONS.values())}"),
            (self.calibration_path is None or (isinstance(self.calibration_path, str) and bool(self.calibration_path)
                                               and self.action in CONVERT_ACTIONS.values()
                                               and self.quantize in INT8_LEVELS),
             "calibration_path must be null or a non-empty string, and only for a conversion with quantize int8 "
             "or int8-static"),
            (self.action == "armsim-profile" or (self.isa is None and self.precision is None and self.uarch is None),
             "isa, precision and uarch are only for armsim-profile"),
            (self.uarch is None
             or (isinstance(self.uarch, str) and re.fullmatch(r"cortex-a\d+", self.uarch) is not None),
             "uarch must be null or cortex-aNN"),
            (self.action not in CONVERT_ACTIONS.values() or self.converted_path is not None,
             f"{self.action} needs converted_path (where to write)"),
            (self.channels_removed_path is None or (self.action == "export-onnx"
                                                    and isinstance(self.channels_removed_path, str)),
             "channels_removed_path must be null or a string, and only for action export-onnx"),
            (isinstance(self.code_paths, list) and all(isinstance(p, str) and p for p in self.code_paths),
             "code_paths must be a list of non-empty strings"),
            (self.arch is None or (isinstance(self.arch, str) and (
                self.arch.startswith("zoo:") or re.fullmatch(r"[\w.]+:[\w.]+", self.arch) is not None)),
             "arch must be null, MODULE:CALLABLE or zoo:NAME"),
            (self.arch_kwargs is None or (isinstance(self.arch_kwargs, dict)
                                          and all(isinstance(k, str) for k in self.arch_kwargs)),
             "arch_kwargs must be null or a JSON object"),
        ]
        for ok, message in checks:
            if not ok:
                raise WorkerError("bad_request", f"{message} (request: {self._quoted()})")

    def _quoted(self, limit: int = 500) -> str:
        """The request as JSON for an error message, cut to ``limit``: the request may be hostile
        (a huge or deeply nested value, or a value JSON cannot encode when given as a dict)."""
        try:
            text = json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, default=repr)
        except (ValueError, TypeError, RecursionError):  # circular, unencodable key, too deep
            text = reprlib.repr(self)
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class WorkerResult:
    """The one JSON object printed on stdout. Sections stay ``None`` when not applicable
    (``action`` too, when the request itself could not be read)."""

    action: Optional[str] = None
    ok: bool = False
    schema_version: int = SCHEMA_VERSION
    worker_version: str = WORKER_VERSION
    error: Optional[WorkerFailure] = None
    model: Optional[ModelSection] = None
    latency: Optional[HostTimings] = None
    memory: Optional[MemorySection] = None
    onnx: Optional[OnnxSection] = None
    runtime: Optional[RuntimeSection] = None
    variant: Optional[VariantSection] = None
    derived: Optional[DerivedFile] = None
    converted: Optional[ConvertedSection] = None  # export-tflite / export-ncnn: what was written
    profile: Optional[InstructionProfile] = None  # armsim-profile: the instruction counts of one inference
    accuracy: Optional[AccuracySection] = None  # evaluate: samples, top1_correct, top5_correct, classes
    timings_s: dict[str, Optional[float]] = field(
        default_factory=lambda: {"import": None, "load": None, "derive": None, "warmup": None, "measure": None,
                                 "export": None})

    def to_json(self) -> str:
        """The result line; a typed section is written by its own ``to_dict`` (``worker.sections``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in data.items():
            if hasattr(value, "to_dict"):
                data[name] = value.to_dict()
        return json.dumps(data, separators=(",", ":"))


def artifact_files(converted_path: str) -> list[str]:
    """Every file of a converted model: a ``.tflite`` is one file; an ncnn model is its
    ``.param`` (the graph, named by ``converted_path``) and the ``.bin`` beside it (the weights).
    The host and the sandbox both move and mount exactly these."""
    if converted_path.endswith(".param"):
        return [converted_path, converted_path[: -len(".param")] + ".bin"]
    return [converted_path]


def progress(message: str) -> None:
    """Progress goes to stderr so the host can show liveness without touching the result line."""
    sys.stderr.write(PROGRESS_PREFIX + message + "\n")
    sys.stderr.flush()


def first_line(exc: "BaseException | str", limit: int = 300) -> str:
    """The first non-empty line of an exception message, trimmed: enough to quote, never a dump."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        lines = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception): ", ln)][-1:] or lines  # the real cause
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
