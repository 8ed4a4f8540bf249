"""The host side of the worker protocol: the one module that builds ``WorkerRequest``s and reads
the worker's replies.

Why one owner: the worker (``lodevem.worker``) runs the user's model file, which is code, so its
stdout is untrusted text. Everything the host learns from a run passes through ``parse_reply``
here, which keeps only fields of the expected types and sizes and turns them into typed records
(``WorkerReply`` and its sections); the rest of lodevem never touches the raw JSON. The client
also checks that the sandbox speaks this lodevem's protocol: a reply with another
``schema_version`` or ``worker_version`` (an image built from other code) stops the run with a
``SandboxError`` that says to rebuild the image, instead of mixing results of two workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..errors import SandboxError
from ..safe_io import fields, printable
from ..worker.precision import FILE_PRECISIONS
from ..worker.protocol import (
    CONVERT_ACTIONS,
    ERROR_KINDS,
    SCHEMA_VERSION,
    UNUSABLE_FILE_KINDS,
    WORKER_VERSION,
    WorkerRequest,
)
from ..worker.verdict import Verdict
from .base import Backend, ProgressFn, RunOutcome, work_limit_mb
from .usercode import ModelLoading

if TYPE_CHECKING:
    from ..latency.armsim.profile import InstructionProfile

_MAX_TEXT = 2000  # longest string kept from a reply: a message, never a dump


def _text(value: Any, limit: int = _MAX_TEXT) -> Optional[str]:
    return fields.text(value, limit)


def _section(reply: dict[str, Any], name: str) -> dict[str, Any]:
    return fields.mapping(reply.get(name))




@dataclass(frozen=True)
class LayerSparsity:
    """One Conv/Linear layer's zeros."""

    name: str
    zero_fraction: float
    zero_channels: int
    channels: int


@dataclass(frozen=True)
class SparsitySection:
    """How much of a file's Conv/Linear weights is zero (``model.sparsity``): pruning that a dense
    runtime does not skip. ``channels_removed``: what removing the all-zero channels did."""

    zero_fraction: float
    zero_channels: int
    channels: int
    masked_layers: int
    layers: tuple[LayerSparsity, ...] = ()
    channels_removed: Optional[str] = None

    @classmethod
    def parse(cls, data: Any) -> Optional["SparsitySection"]:
        if not isinstance(data, dict):
            return None
        fraction = fields.number(data.get("zero_fraction"))
        if fraction is None or not 0 <= fraction <= 1:
            return None
        layers = []
        for item in fields.items(data.get("layers"))[:50]:
            if not isinstance(item, dict):
                continue
            name, zf = _text(item.get("name"), 200), fields.number(item.get("zero_fraction"))
            zc, ch = fields.integer(item.get("zero_channels")), fields.integer(item.get("channels"))
            if name is not None and zf is not None and zc is not None and ch is not None:
                layers.append(LayerSparsity(name, zf, zc, ch))
        return cls(zero_fraction=fraction, zero_channels=fields.integer(data.get("zero_channels")) or 0,
                   channels=fields.integer(data.get("channels")) or 0,
                   masked_layers=fields.integer(data.get("masked_layers")) or 0,
                   layers=tuple(layers), channels_removed=_text(data.get("channels_removed"), 300))

    @property
    def pruned(self) -> bool:
        """Zeros worth a word: at least 1 % of the weights, whole channels, or attached masks."""
        return self.zero_fraction >= 0.01 or self.zero_channels > 0 or self.masked_layers > 0


def _dims(value: Any) -> Optional[tuple[Optional[int], ...]]:
    """A shape from untrusted JSON: 1..8 dims, each a positive whole number or null (dynamic)."""
    if not isinstance(value, list) or not 1 <= len(value) <= 8:
        return None
    dims = [d if fields.integer(d) is not None and d > 0 else None for d in value]
    return tuple(dims) if all(d is None or fields.integer(d) is not None for d in value) else None


@dataclass(frozen=True)
class ModelSection:
    """What the worker found the file to be (``model`` section)."""

    format: Optional[str] = None
    params: Optional[int] = None
    class_name: Optional[str] = None
    sparsity: Optional[SparsitySection] = None
    input_shape: Optional[tuple[int, ...]] = None
    input_dtype: Optional[str] = None
    param_bytes: Optional[int] = None
    precision: Optional[str] = None  # fp32 | fp16 | int8-dynamic | int8-static | mixed
    quantization: Optional[str] = None  # "scheme, backend"
    input_shape_source: Optional[str] = None  # "--input-shape" | "recorded in the file" | "default"
    input_shape_warning: Optional[str] = None  # the default shape contradicted by the first layers
    output_shape: Optional[tuple[Optional[int], ...]] = None  # the (first) output's, e.g. (1, 10); None: dynamic

    @property
    def classes(self) -> Optional[int]:
        """The model's number of outputs (the last dimension of its first output): what labels and
        an ImageFolder tree's class folders are checked against; None when the export did not say."""
        shape = self.output_shape
        return shape[-1] if shape and len(shape) >= 2 and shape[-1] else None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "ModelSection":
        shape = data.get("input_shape")
        dims = tuple(d for d in shape if fields.integer(d) is not None and d > 0) if isinstance(shape, list) else ()
        precision = _text(data.get("precision"), 20)
        quant = fields.mapping(data.get("quantization"))
        scheme, backend = _text(quant.get("scheme"), 40), _text(quant.get("backend"), 80)
        if isinstance(data.get("quantization"), str):  # a record lodevem wrote from this section
            scheme, _, backend = (_text(data["quantization"], 122) or "").partition(", ")
        return cls(format=_text(data.get("format"), 40), params=fields.integer(data.get("params")),
                   class_name=_text(data.get("class_name"), 200), sparsity=SparsitySection.parse(data.get("sparsity")),
                   input_shape=dims if dims and isinstance(shape, list) and len(dims) == len(shape) <= 8 else None,
                   input_dtype=_text(data.get("input_dtype"), 20), param_bytes=fields.integer(data.get("param_bytes")),
                   precision=precision if precision in FILE_PRECISIONS else None,
                   quantization=f"{scheme}, {backend}" if scheme and backend else None,
                   input_shape_source=_text(data.get("input_shape_source"), 40),
                   input_shape_warning=_text(data.get("input_shape_warning"), 300),
                   output_shape=_dims(data.get("output_shape")))


@dataclass(frozen=True)
class ConvertedSection:
    """What a conversion (export-tflite / export-ncnn) wrote: its converter, the time it took,
    and what the worker read back from the file's bytes: its precision (``FILE_PRECISIONS``),
    a one-line quantization scheme and what calibrated it (None: nothing did). The file itself
    is what the host took from the sandbox; ``size_bytes`` here is the worker's count."""

    format: str
    converter: str
    converter_version: str
    seconds: Optional[float]
    size_bytes: Optional[int] = None
    precision: Optional[str] = None
    scheme: Optional[str] = None
    calibration: Optional[str] = None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Optional["ConvertedSection"]:
        if not data:
            return None
        precision = _text(data.get("precision"), 20)
        return cls(format=_text(data.get("format"), 20) or "", converter=_text(data.get("converter"), 40) or "",
                   converter_version=_text(data.get("converter_version"), 40) or "",
                   seconds=fields.number(data.get("seconds")), size_bytes=fields.integer(data.get("size_bytes")),
                   precision=precision if precision in FILE_PRECISIONS else None,
                   scheme=_text(data.get("scheme"), 400), calibration=_text(data.get("calibration"), 200))


@dataclass(frozen=True)
class MemorySection:
    """The worker's RSS figures (KiB, from /proc/self/status) and its cgroup's peak (bytes)."""

    hwm_kb: Optional[float] = None
    runtime_baseline_kb: Optional[float] = None
    model_increment_kb: Optional[float] = None
    major_faults: Optional[int] = None
    cgroup_peak_bytes: Optional[float] = None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Optional["MemorySection"]:
        if not data:
            return None
        cgroup = fields.mapping(data.get("cgroup"))
        return cls(hwm_kb=fields.number(data.get("hwm_kb")),
                   runtime_baseline_kb=fields.number(data.get("runtime_baseline_kb")),
                   model_increment_kb=fields.number(data.get("model_increment_kb")),
                   major_faults=fields.integer(data.get("major_faults")),
                   cgroup_peak_bytes=fields.number(cgroup.get("peak_bytes")))


@dataclass(frozen=True)
class HostTimings:
    """Timed passes on the HOST CPU (informational: not the device's latency)."""

    mean_ms: Optional[float] = None
    std_ms: Optional[float] = None
    p50_ms: Optional[float] = None
    p95_ms: Optional[float] = None
    throughput_ips: Optional[float] = None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "HostTimings":
        return cls(**{name: fields.number(data.get(name)) for name in ("mean_ms", "std_ms", "p50_ms", "p95_ms",
                                                                  "throughput_ips")})


@dataclass(frozen=True)
class DerivedSection:
    """A variant the worker wrote (action ``derive``): its format, parameters and what was done.
    Its size is read from the file the host took, not from the reply."""

    format: str
    params_after: Optional[int]
    notes: tuple[str, ...]

    @classmethod
    def parse(cls, derived: dict[str, Any], variant: dict[str, Any]) -> Optional["DerivedSection"]:
        if not derived:
            return None
        raw_notes = fields.items(variant.get("notes"))
        notes = [n for n in (_text(x, 500) for x in raw_notes) if n]
        reason = _text(derived.get("format_reason"), 500)
        if reason:
            notes.append(reason)
        return cls(format=_text(derived.get("format"), 40) or "",
                   params_after=fields.integer(variant.get("params_after")),
                   notes=tuple(notes))


@dataclass(frozen=True)
class AccuracySection:
    """What an ``evaluate`` run counted: samples, correct top-1 / top-5 (None with <= 5 classes),
    the model's number of outputs, and the evaluation's own seconds."""

    samples: int
    top1_correct: int
    top5_correct: Optional[int]
    classes: Optional[int]
    seconds: Optional[float]

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Optional["AccuracySection"]:
        samples, top1 = fields.integer(data.get("samples")), fields.integer(data.get("top1_correct"))
        top5 = fields.integer(data.get("top5_correct"))
        if samples is None or top1 is None or samples < 1 or not 0 <= top1 <= samples:
            return None
        if top5 is not None and not top1 <= top5 <= samples:
            return None
        return cls(samples, top1, top5, fields.integer(data.get("classes")), fields.number(data.get("seconds")))


@dataclass(frozen=True)
class WorkerFailure:
    """The worker's own one-line explanation (``error`` section)."""

    kind: str
    message: str


@dataclass(frozen=True)
class WorkerReply:
    """The worker's result line, typed; sections the action does not fill stay empty."""

    ok: bool
    schema_version: Optional[int]
    worker_version: Optional[str]
    failure: Optional[WorkerFailure]
    model: ModelSection
    memory: Optional[MemorySection]
    timings: HostTimings
    derived: Optional[DerivedSection]
    converted: Optional[ConvertedSection] = None
    runtime_version: Optional[str] = None  # the runtime section's version (e.g. "ai-edge-litert 2.3.0")
    profile: Optional["InstructionProfile"] = None  # armsim-profile: one inference's instruction counts
    accuracy: Optional[AccuracySection] = None  # evaluate: what was counted


def parse_reply(stdout: str, host_paths: Optional[dict[str, str]] = None) -> Optional[WorkerReply]:
    """The last stdout line that is a JSON object, as a ``WorkerReply``; None when there is none.

    Paths the worker saw inside the sandbox (``/input/x.pt``) are replaced by the host paths the
    user typed, so an error message names the user's own file.
    """
    for line in reversed(stdout.strip().splitlines()[-50:]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return _typed(data, host_paths or {})
    return None


def _typed(data: dict[str, Any], host_paths: dict[str, str]) -> WorkerReply:
    error = _section(data, "error")
    failure = None
    if error or data.get("ok") is not True:
        message = _text(error.get("message")) or "the worker failed without a message"
        for inside, host in sorted(host_paths.items(), key=lambda kv: -len(kv[0])):
            message = message.replace(inside, host)
        # the model's own words, maybe with terminal escapes: escaped here, where they enter the host
        kind = _text(error.get("kind"), 40)
        failure = WorkerFailure(kind if kind in ERROR_KINDS else "internal", printable(message, _MAX_TEXT))
    return WorkerReply(
        ok=data.get("ok") is True and failure is None,
        schema_version=fields.integer(data.get("schema_version")),
        worker_version=_text(data.get("worker_version"), 80),
        failure=failure,
        model=ModelSection.parse(_section(data, "model")),
        memory=MemorySection.parse(_section(data, "memory")),
        timings=HostTimings.parse(_section(data, "latency")),
        derived=DerivedSection.parse(_section(data, "derived"), _section(data, "variant")),
        converted=ConvertedSection.parse(_section(data, "converted")),
        runtime_version=_text(_section(data, "runtime").get("version"), 80),
        profile=_profile(data),
        accuracy=AccuracySection.parse(_section(data, "accuracy")),
    )


def _profile(data: dict[str, Any]) -> Optional["InstructionProfile"]:
    """The armsim-profile section, typed and bounded (None for every other action)."""
    if not isinstance(data.get("profile"), dict):
        return None
    from ..latency.armsim.profile import InstructionProfile

    runtime = _section(data, "runtime")
    return InstructionProfile.parse(data["profile"], runtime=_text(runtime.get("name"), 20) or "",
                                    runtime_version=_text(runtime.get("version"), 80) or "")


@dataclass(frozen=True)
class SandboxRun:
    """One worker run: what the backend saw and the worker's reply (None when it printed none)."""

    outcome: RunOutcome
    reply: Optional[WorkerReply]

    @property
    def ok(self) -> bool:
        return self.reply is not None and self.reply.ok and not self.problem()

    @property
    def unusable_file(self) -> bool:
        """The worker refused the file itself (state_dict only, not a model, a bad shape...)."""
        failure = self.reply.failure if self.reply is not None else None
        return failure is not None and failure.kind in UNUSABLE_FILE_KINDS

    def problem(self) -> Optional[tuple[Verdict, str]]:
        """``(kind, one-line explanation)`` when the run did not succeed, else None.

        Kinds: ``thrashing``, ``timeout``, ``oom`` (killed by the kernel), ``error`` (the
        worker's own message, or how it died when it said nothing).
        """
        out = self.outcome
        if out.limit_breach:
            return Verdict.ERROR, out.limit_breach
        if out.thrashing:
            return Verdict.THRASHING, f"stopped as thrashing after {out.wall_s:.0f} s: {out.thrash_evidence}"
        if out.timed_out:
            return Verdict.TIMEOUT, f"no result within the {out.wall_s:.0f} s wall-clock timeout"
        if out.oom_killed:
            return Verdict.OOM, f"out of memory at {out.limit_mb} MB ({out.limit_enforcement})"
        if self.reply is None:
            last = printable((out.stderr_tail.strip().splitlines() or ["no output"])[-1], 200)
            return Verdict.ERROR, f"worker died with exit code {out.exit_code} and no result: {last}"
        if self.reply.failure is not None:
            return Verdict.ERROR, self.reply.failure.message
        return None

    def failure_message(self, default: str = "the worker failed without a message") -> str:
        found = self.problem()
        return found[1] if found else default


@dataclass(frozen=True)
class MeasureSettings:
    """How a measurement run loads and drives the model; part of every measurement's cache key."""

    runtime: str = "torch"
    warmup: int = 5
    runs: int = 50
    threads: int = 1
    input_shape: Optional[tuple[int, ...]] = None


def _shape(input_shape: Optional[Sequence[int]]) -> Optional[list[int]]:
    return list(input_shape) if input_shape else None


class WorkerClient:
    """Speaks to the worker through one isolation backend; see the module docstring."""

    def __init__(self, backend: Backend, expected_version: str = WORKER_VERSION,
                 work_limit: Optional[int] = None, loading: Optional[ModelLoading] = None) -> None:
        self.backend = backend
        self.worker_version = expected_version
        # --code / --arch: sent with every request, part of every cache key (``cache_key``).
        self.loading = loading or ModelLoading()
        # Exports and derivations model no device, but still run under a memory limit.
        self.work_limit_mb = work_limit if work_limit is not None else work_limit_mb()

    def export_onnx(self, model: Path, target: Path, input_shape: Optional[Sequence[int]],
                    timeout_s: float, twin: bool = True, channels_removed: Optional[Path] = None) -> SandboxRun:
        """Export ``model`` to ``target`` (nn-Meter-ready ONNX) under the work limit, not a device's;
        ``twin=False``: the export as torch writes it (an int8/fp16 model's own ops, for onnxruntime);
        a file with all-zero output channels also gets that graph without them at ``channels_removed``."""
        request = self._request(action="export-onnx", model_path=str(model), input_shape=_shape(input_shape),
                                onnx_path=str(target), warmup=0, runs=1, twin=twin,
                                channels_removed_path=str(channels_removed) if channels_removed else None)
        return self.run(request, self.work_limit_mb, timeout_s)

    def convert(self, model: Path, runtime: str, target: Path, input_shape: Optional[Sequence[int]],
                timeout_s: float, quantize: Optional[str] = None, calibration: Optional[Path] = None) -> SandboxRun:
        """Convert ``model`` for ``runtime`` (tflite, ncnn) to ``target`` under the work limit; an
        ncnn ``target`` is the ``.param``, its ``.bin`` is written beside it. ``quantize`` (a
        ``precision.CONVERT_QUANTIZE`` level): made by the runtime's own toolchain while converting;
        ``calibration``: an .npz of ``inputs`` calibrating int8 (else synthetic inputs)."""
        request = self._request(action=CONVERT_ACTIONS[runtime], model_path=str(model), runtime=runtime,
                                input_shape=_shape(input_shape), converted_path=str(target), warmup=0, runs=1,
                                quantize=quantize, calibration_path=str(calibration) if calibration else None)
        return self.run(request, self.work_limit_mb, timeout_s)

    def measure(self, model: Path, limit_mb: Optional[int], settings: MeasureSettings, timeout_s: float, *,
                onnx_path: Optional[Path] = None, reference_s: Optional[float] = None,
                converted_path: Optional[Path] = None) -> SandboxRun:
        """Run the model ``settings.runs`` times under ``limit_mb`` (None: unconstrained);
        ``converted_path``: the conversion a tflite/ncnn measurement runs."""
        request = self._request(action="measure", model_path=str(model), warmup=settings.warmup, runs=settings.runs,
                                threads=settings.threads, runtime=settings.runtime,
                                onnx_path=str(onnx_path) if onnx_path is not None else None,
                                converted_path=str(converted_path) if converted_path is not None else None,
                                input_shape=_shape(settings.input_shape))
        return self.run(request, limit_mb, timeout_s, reference_s=reference_s)

    def derive(self, model: Path, level: str, out: Path, input_shape: Optional[Sequence[int]],
               timeout_s: float, finetune: Optional[tuple[Path, int]] = None) -> SandboxRun:
        """Derive the ``level`` variant of ``model`` and write it to ``out``, under the work limit;
        ``finetune`` (pruned only): (normalised samples .npz, epochs) to fine-tune it on."""
        request = self._request(action="derive", model_path=str(model), level=level, derive_out=str(out),
                                input_shape=_shape(input_shape),
                                data_path=str(finetune[0]) if finetune else None,
                                finetune_epochs=finetune[1] if finetune else None)
        return self.run(request, self.work_limit_mb, timeout_s)

    def evaluate(self, model: Path, data: Path, settings: MeasureSettings, timeout_s: float, *,
                 onnx_path: Optional[Path] = None, converted_path: Optional[Path] = None,
                 on_progress: Optional[ProgressFn] = None) -> SandboxRun:
        """Top-1/top-5 of ``model`` on the samples ``data`` (a normalised .npz) under
        ``settings.runtime``, in that runtime's image, under the work limit (no device is modelled)."""
        request = self._request(action="evaluate", model_path=str(model), data_path=str(data), warmup=0, runs=1,
                                threads=settings.threads, runtime=settings.runtime,
                                onnx_path=str(onnx_path) if onnx_path is not None else None,
                                converted_path=str(converted_path) if converted_path is not None else None,
                                input_shape=_shape(settings.input_shape))
        return self.run(request, self.work_limit_mb, timeout_s, on_progress=on_progress)

    def decode_images(self, pack: Path, target: Path, preprocess: dict[str, Any], timeout_s: float) -> SandboxRun:
        """An ImageFolder tree's images (``pack``: the host's zip of their bytes) decoded with Pillow
        into the normalised samples ``target`` (an .npz), in the benchmark image under the work limit:
        the host never decodes an image (``worker.images``)."""
        request = WorkerRequest(action="decode-images", model_path=str(pack), derive_out=str(target), warmup=0,
                                runs=1, preprocess=dict(preprocess))
        return self.run(request, self.work_limit_mb, timeout_s)

    def armsim_profile(self, converted: Path, runtime: str, isa: str, precision: str, threads: int,
                       input_shape: Optional[Sequence[int]], timeout_s: float, *, uarch: Optional[str] = None,
                       warmup: int = 0, inferences: int = 1) -> SandboxRun:
        """Count one steady-state inference of ``converted`` (a .tflite or ncnn .param) under
        ``runtime``'s Arm build on an emulated ``isa`` core (lodevem-armsim image), under the
        work limit. ``warmup`` inferences run uncounted first (weight packing)."""
        request = WorkerRequest(action="armsim-profile", model_path=str(converted), runtime=runtime,
                                converted_path=str(converted), isa=isa, precision=precision, uarch=uarch,
                                threads=threads, input_shape=_shape(input_shape), warmup=warmup, runs=inferences)
        return self.run(request, self.work_limit_mb, timeout_s)

    @property
    def cache_key(self) -> str:
        """What the loading adds to cache keys of a file's exports, variants and measurements."""
        return self.loading.key

    def _request(self, **fields: Any) -> WorkerRequest:
        loading = self.loading
        return WorkerRequest(**fields, code_paths=[str(p) for p in loading.code], arch=loading.arch,
                             arch_kwargs=loading.arch_kwargs)

    def run(self, request: WorkerRequest, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Optional[ProgressFn] = None) -> SandboxRun:
        outcome = self.backend.run(request, limit_mb, timeout_s, reference_s=reference_s, on_progress=on_progress)
        reply = parse_reply(outcome.stdout, outcome.host_paths)
        if reply is not None:
            self._check_version(reply)
        return SandboxRun(outcome, reply)

    def _check_version(self, reply: WorkerReply) -> None:
        if reply.schema_version == SCHEMA_VERSION and reply.worker_version == self.worker_version:
            return
        raise SandboxError(
            f"the {self.backend.name} sandbox runs worker {reply.worker_version} (protocol schema "
            f"{reply.schema_version}), this lodevem expects worker {self.worker_version} (schema {SCHEMA_VERSION}): "
            "rebuild the image with `lodevem build-image --force`")
