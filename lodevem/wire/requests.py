"""The requests: one typed record per worker action, defined once and used on both sides.

Why one class per action: a single request record with every action's fields let the host send a
level with a measurement or a calibration file with an export, and each handler had to trust
checks made elsewhere. Now the host builds the action's own record (``sandbox.client``), the
worker reads the JSON back into the same class (``WorkerRequest.from_json``: a field another
action owns is refused, naming the actions that take it), and each handler is typed for its
action's record, so mypy sees a handler read a field its action does not send. The JSON is flat
(``action`` plus the fields; ``schema_version`` versions it, as pyperf versions its records).

The sandbox backends only move files: they read and rewrite a request's files by role
(``files`` / ``moved``: a ``RequestFiles``), whatever its action.
"""

from __future__ import annotations

import json
import re
import reprlib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping, Optional, TypeVar

from .precision import CONVERT_QUANTIZE, INT8_LEVELS, LEVELS
from .protocol import (
    ACTIONS,
    ARMSIM_ISAS,
    ARMSIM_PRECISIONS,
    RUNTIMES,
    SCHEMA_VERSION,
    WorkerError,
    first_line,
)
from .registry import COMPARISON_RUNTIME, CONVERT_ACTIONS, Live

__all__ = ["ArmsimProfileRequest", "ConvertRequest", "DecodeImagesRequest", "DeriveRequest", "EvaluateRequest",
           "ExportOnnxRequest", "InspectRequest", "MeasureRequest", "REQUESTS", "RequestFiles", "WorkerRequest"]

Check = tuple[bool, str]
R = TypeVar("R", bound="WorkerRequest")


def _is_int(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _optional_path(value: Any) -> bool:
    return value is None or (isinstance(value, str) and bool(value))


@dataclass(frozen=True)
class RequestFiles:
    """The files a request names besides the model and the user's code, by role: what a sandbox
    backend mounts or copies, whatever the action (None: none, or not a field of this action)."""

    onnx_path: Optional[str] = None
    converted_path: Optional[str] = None
    calibration_path: Optional[str] = None
    derive_out: Optional[str] = None
    channels_removed_path: Optional[str] = None
    data_path: Optional[str] = None


@dataclass
class WorkerRequest:
    """The fields every action takes: the model file, its input shape, the threads and runtime,
    and the user's code (``--code``, paths as the worker sees them) with, for weights-only files,
    the architecture to build (``--arch MODULE:CALLABLE`` or ``zoo:NAME``). Each action's record
    adds its own fields; this class itself is never sent."""

    model_path: str
    action: str = ""
    schema_version: int = SCHEMA_VERSION
    input_shape: Optional[list[int]] = None
    threads: int = 1
    runtime: str = COMPARISON_RUNTIME
    code_paths: list[str] = field(default_factory=list)
    arch: Optional[str] = None
    arch_kwargs: Optional[dict[str, Any]] = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def files(self) -> RequestFiles:
        """The files this request names, by role."""
        return RequestFiles(**{f.name: getattr(self, f.name, None) for f in fields(RequestFiles)})

    def moved(self: R, model_path: str, code_paths: list[str], files: RequestFiles) -> R:
        """This request with its files named as a backend's sandbox sees them (a role this action
        does not have stays None)."""
        own = {f.name for f in fields(self)}
        changes: dict[str, Any] = {f.name: getattr(files, f.name) for f in fields(files)}
        assert all(value is None or role in own for role, value in changes.items()), changes
        return replace(self, model_path=model_path, code_paths=code_paths,
                       **{role: value for role, value in changes.items() if role in own})

    @classmethod
    def from_json(cls, data: "str | dict[str, Any]") -> "WorkerRequest":
        """The action's record, parsed and validated; every problem is a ``bad_request``
        WorkerError, never a traceback."""
        try:
            obj = json.loads(data) if isinstance(data, str) else data
        except ValueError as exc:
            raise WorkerError("bad_request", f"request is not valid JSON: {first_line(exc)}") from None
        except RecursionError:  # the C decoder's answer to [[[[...]]]] nested a thousand deep
            raise WorkerError("bad_request", "request is not valid JSON: nested too deeply") from None
        if not isinstance(obj, dict):
            raise WorkerError("bad_request", "request must be a JSON object")
        known = {name for record in set(REQUESTS.values()) for name in _field_names(record)}
        unknown = sorted({first_line(k if isinstance(k, str) else repr(k), 80) for k in obj if k not in known})
        if unknown:
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise WorkerError("bad_request", f"unknown request field(s): {', '.join(unknown[:5])}{more}")
        missing = [k for k in ("action", "model_path") if k not in obj]
        if missing:
            raise WorkerError("bad_request", f"missing request field(s): {', '.join(missing)}")
        action = obj["action"]
        record = REQUESTS.get(action) if isinstance(action, str) else None
        if record is None:
            raise WorkerError("bad_request", f"action must be one of {', '.join(ACTIONS)} "
                                             f"(request: {_quoted(obj)})")
        own = _field_names(record)
        for name in sorted(k for k in obj if k not in own):
            takers = sorted({a for a, r in REQUESTS.items() if name in _field_names(r)})
            raise WorkerError("bad_request", f"{name} is only for action{'s' if len(takers) > 1 else ''} "
                                             f"{', '.join(takers)} (request: {_quoted(obj)})")
        request = record(**obj)
        request.validate()
        return request

    def validate(self) -> None:
        """Raise a ``bad_request`` WorkerError for the first invalid field.

        Not run at construction: the host builds requests freely (e.g. with a compression level
        this worker does not know yet) and gets the refusal back as a normal worker result.
        """
        for ok, message in self.checks():
            if not ok:
                raise WorkerError("bad_request", f"{message} (request: {_quoted(self)})")

    def checks(self) -> list[Check]:
        """(valid, what is expected) of every field; an action's record adds its own."""
        return [
            (_is_int(self.schema_version, 0) and self.schema_version == SCHEMA_VERSION,
             f"schema_version must be {SCHEMA_VERSION}"),
            (REQUESTS.get(self.action) is type(self), f"action must be one of {', '.join(ACTIONS)}"),
            (self.runtime in RUNTIMES, f"runtime must be one of {', '.join(RUNTIMES)}"),
            (isinstance(self.model_path, str) and bool(self.model_path), "model_path must be a non-empty string"),
            (self.input_shape is None or (isinstance(self.input_shape, list) and bool(self.input_shape)
                                          and all(_is_int(d, 1) for d in self.input_shape)),
             "input_shape must be a non-empty list of positive integers or null"),
            (_is_int(self.threads, 1), "threads must be an integer >= 1"),
            (isinstance(self.code_paths, list) and all(isinstance(p, str) and p for p in self.code_paths),
             "code_paths must be a list of non-empty strings"),
            (self.arch is None or (isinstance(self.arch, str) and (
                self.arch.startswith("zoo:") or re.fullmatch(r"[\w.]+:[\w.]+", self.arch) is not None)),
             "arch must be null, MODULE:CALLABLE or zoo:NAME"),
            (self.arch_kwargs is None or (isinstance(self.arch_kwargs, dict)
                                          and all(isinstance(k, str) for k in self.arch_kwargs)),
             "arch_kwargs must be null or a JSON object"),
        ]

    def _runs_checks(self, warmup: Any, runs: Any) -> list[Check]:
        return [(_is_int(warmup, 0), "warmup must be an integer >= 0"),
                (_is_int(runs, 1), "runs must be an integer >= 1")]

    def _converted_checks(self, converted_path: Any) -> list[Check]:
        """A converted file (a .tflite, or an ncnn .param with its .bin beside it) is what a
        measurement or an evaluation runs under a converted runtime, and only there."""
        return [(_optional_path(converted_path), "converted_path must be a non-empty string or null"),
                (converted_path is None or self.runtime in CONVERT_ACTIONS,
                 f"converted_path is only for runtime {', '.join(CONVERT_ACTIONS)}")]


@dataclass
class InspectRequest(WorkerRequest):
    """What the file is: format, parameters, input; nothing is run but the load."""

    action: str = "inspect"


@dataclass
class MeasureRequest(WorkerRequest):
    """Time ``runs`` passes after ``warmup`` ones and record memory. ``onnx_path``: the export
    onnxruntime runs (of a PyTorch file); ``converted_path``: the file tflite / ncnn run."""

    action: str = "measure"
    warmup: int = 5
    runs: int = 50
    onnx_path: Optional[str] = None
    converted_path: Optional[str] = None

    def checks(self) -> list[Check]:
        return [*super().checks(), *self._runs_checks(self.warmup, self.runs),
                (_optional_path(self.onnx_path), "onnx_path must be a non-empty string or null"),
                *self._converted_checks(self.converted_path)]


@dataclass
class ExportOnnxRequest(WorkerRequest):
    """Export to ``onnx_path`` (an existing file is a cache hit). ``twin``: the float twin of an
    int8/fp16 model (for prediction), else the plain export; ``channels_removed_path``: where to
    write the graph without a pruned file's all-zero channels (what the pruning would buy)."""

    action: str = "export-onnx"
    onnx_path: Optional[str] = None
    channels_removed_path: Optional[str] = None
    twin: bool = True

    def checks(self) -> list[Check]:
        return [*super().checks(), (_optional_path(self.onnx_path), "onnx_path must be a non-empty string or null"),
                (_optional_path(self.channels_removed_path),
                 "channels_removed_path must be a non-empty string or null"),
                (isinstance(self.twin, bool), "twin must be true or false")]


@dataclass
class DeriveRequest(WorkerRequest):
    """Write the ``level`` variant to ``derive_out``; with ``data_path`` (level pruned), fine-tune
    it ``finetune_epochs`` epochs on those samples (``worker.derive.finetune`` states the recipe)."""

    action: str = "derive"
    level: Optional[str] = None
    derive_out: Optional[str] = None
    data_path: Optional[str] = None
    finetune_epochs: Optional[int] = None

    def checks(self) -> list[Check]:
        return [*super().checks(),
                (self.level is None or self.level in LEVELS, f"level must be null or one of {', '.join(LEVELS)}"),
                (_optional_path(self.derive_out), "derive_out must be a non-empty string or null"),
                (self.derive_out is not None, "derive needs derive_out (where to write)"),
                (self.level not in (None, "fp32"),
                 "derive needs a level other than fp32 (fp32 is the file as given: nothing to derive)"),
                (self.runtime == COMPARISON_RUNTIME, f"derive runs with runtime {COMPARISON_RUNTIME}"),
                (self.data_path is None or (self.level == "pruned" and _optional_path(self.data_path)),
                 "data_path must be null or a non-empty string, and only for level pruned"),
                ((self.finetune_epochs is None) == (self.data_path is None)
                 and (self.finetune_epochs is None or _is_int(self.finetune_epochs, 1)),
                 "finetune_epochs (an integer >= 1) goes with data_path (level pruned), and only there")]


@dataclass
class ConvertRequest(WorkerRequest):
    """Convert to a runtime's own format (``action``: the runtime's ``convert_action``) at
    ``converted_path``; ``quantize``: the level its toolchain quantizes the float model to while
    converting (``precision.CONVERT_QUANTIZE``; null: fp32); ``calibration_path``: for the int8
    levels, an .npz whose ``inputs`` (N x input shape, float32) calibrate the activation ranges
    (null: seeded synthetic inputs, ``convert.SYNTHETIC_CALIBRATION_INPUTS``)."""

    converted_path: Optional[str] = None
    quantize: Optional[str] = None
    calibration_path: Optional[str] = None

    def checks(self) -> list[Check]:
        return [*super().checks(),
                (_optional_path(self.converted_path) and self.converted_path is not None,
                 f"{self.action} needs converted_path (where to write)"),
                (self.quantize is None or self.quantize in CONVERT_QUANTIZE,
                 f"quantize must be null or one of {', '.join(CONVERT_QUANTIZE)}"),
                (self.calibration_path is None or (_optional_path(self.calibration_path)
                                                   and self.quantize in INT8_LEVELS),
                 "calibration_path must be null or a non-empty string, and only with quantize int8 or int8-static")]


@dataclass
class ArmsimProfileRequest(WorkerRequest):
    """Count ``runs`` inferences (after ``warmup`` uncounted ones) of ``converted_path`` under the
    runtime's Arm build on an emulated ``isa`` core (docs/armsim.md); ``precision``: the path to
    ask for (auto: the runtime's default on that ISA); ``uarch``: the core whose /proc/cpuinfo the
    guest sees (None: the ISA's default core)."""

    action: str = "armsim-profile"
    converted_path: Optional[str] = None
    isa: Optional[str] = None
    precision: Optional[str] = None
    uarch: Optional[str] = None
    warmup: int = 0
    runs: int = 1

    def checks(self) -> list[Check]:
        return [*super().checks(), *self._runs_checks(self.warmup, self.runs),
                (self.runtime in CONVERT_ACTIONS and _optional_path(self.converted_path)
                 and self.converted_path is not None and self.isa in ARMSIM_ISAS
                 and self.precision in ARMSIM_PRECISIONS,
                 f"armsim-profile needs runtime tflite or ncnn, converted_path, isa ({', '.join(ARMSIM_ISAS)}) and "
                 f"precision ({', '.join(ARMSIM_PRECISIONS)})"),
                (self.uarch is None
                 or (isinstance(self.uarch, str) and re.fullmatch(r"cortex-a\d+", self.uarch) is not None),
                 "uarch must be null or cortex-aNN")]


@dataclass
class EvaluateRequest(WorkerRequest):
    """Top-1/top-5 on ``data_path``: labelled samples, an uncompressed .npz the host wrote after
    validating the user's data (inputs float32 N x C x H x W, labels int64 N; ``worker.evaluate.samples``),
    under ``runtime`` (its ``onnx_path`` or ``converted_path`` as for a measurement)."""

    action: str = "evaluate"
    data_path: Optional[str] = None
    onnx_path: Optional[str] = None
    converted_path: Optional[str] = None

    def checks(self) -> list[Check]:
        return [*super().checks(),
                (_optional_path(self.data_path) and self.data_path is not None,
                 "evaluate needs data_path (the samples)"),
                (_optional_path(self.onnx_path), "onnx_path must be a non-empty string or null"),
                *self._converted_checks(self.converted_path)]


@dataclass
class DecodeImagesRequest(WorkerRequest):
    """Decode an ImageFolder tree's images: ``model_path`` is the host's pack of their bytes,
    ``derive_out`` the normalised .npz to write, ``preprocess`` the ``worker.evaluate.images.Preprocessing``
    (as its ``to_dict``)."""

    action: str = "decode-images"
    derive_out: Optional[str] = None
    preprocess: Optional[dict[str, Any]] = None

    def checks(self) -> list[Check]:
        return [*super().checks(),
                (_optional_path(self.derive_out) and self.derive_out is not None,
                 "decode-images needs derive_out (where to write the samples)"),
                (self.preprocess is None or isinstance(self.preprocess, dict), "preprocess must be null or an object")]


# Every action's record: the one table the worker parses by and the host builds from.
# (Made at each use from the registry: a runtime registered later has its conversion's record.)
REQUESTS: Mapping[str, type[WorkerRequest]] = Live(lambda: {
    "measure": MeasureRequest, "export-onnx": ExportOnnxRequest, "inspect": InspectRequest, "derive": DeriveRequest,
    **{action: ConvertRequest for action in CONVERT_ACTIONS.values()}, "armsim-profile": ArmsimProfileRequest,
    "evaluate": EvaluateRequest, "decode-images": DecodeImagesRequest})
assert tuple(REQUESTS) == tuple(ACTIONS), "every action has its request record"


def _field_names(record: type[WorkerRequest]) -> frozenset[str]:
    return frozenset(f.name for f in fields(record))


def _quoted(request: Any, limit: int = 500) -> str:
    """The request as JSON for an error message, cut to ``limit``: the request may be hostile (a
    huge or deeply nested value, or a value JSON cannot encode when given as a dict)."""
    data = request if isinstance(request, dict) else {f.name: getattr(request, f.name) for f in fields(request)}
    try:
        text = json.dumps(data, default=repr)
    except (ValueError, TypeError, RecursionError):  # circular, unencodable key, too deep
        text = reprlib.repr(data)
    return text if len(text) <= limit else text[: limit - 3] + "..."
