"""The host side of the worker protocol: the one module that builds ``WorkerRequest``s and reads
the worker's replies.

Why one owner: the worker (``lodevem.worker``) runs the user's model file, which is code, so its
stdout is untrusted text. Everything the host learns from a run passes through ``parse_reply``
here, which keeps only fields of the expected types and sizes and turns them into typed records
(each action's reply record, ``wire.replies.REPLIES``, and its sections); the rest of lodevem
never touches the raw JSON. The client also checks that the sandbox speaks this lodevem's protocol: a reply with another
``schema_version`` or ``worker_version`` (an image built from other code) stops the run with a
``SandboxError`` that says to rebuild the image, instead of mixing results of two workers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, Optional, Sequence, TypeVar

from ..errors import SandboxError
from ..runtimes import adapter
from ..safe_io import printable
from ..wire import requests as wire
from ..wire.protocol import (
    SCHEMA_VERSION,
    UNUSABLE_FILE_KINDS,
    WORKER_VERSION,
)
from ..wire.registry import COMPARISON_RUNTIME
from ..wire.replies import (  # noqa: F401  (the reply's records, re-exported for the host's readers)
    MAX_TEXT,
    REPLIES,
    AccuracySection,
    ArmsimProfileReply,
    ConvertedSection,
    ConvertReply,
    DecodeImagesReply,
    DerivedSection,
    DeriveReply,
    EvaluateReply,
    ExportOnnxReply,
    HostTimings,
    LayerSparsity,
    MeasureReply,
    MemorySection,
    ModelSection,
    RuntimeSection,
    SparsitySection,
    WorkerFailure,
    WorkerReply,
    reply_object,
)
from ..wire.requests import WorkerRequest
from ..wire.verdict import Verdict
from .base import Backend, ProgressFn, RunOutcome, work_limit_mb
from .usercode import ModelLoading

R = TypeVar("R", bound=WorkerRequest)
Rep = TypeVar("Rep", bound=WorkerReply)

def parse_reply(stdout: str, host_paths: Optional[dict[str, str]] = None,
                record: type[Rep] = WorkerReply) -> Optional[Rep]:  # type: ignore[assignment]
    """The worker's result line as ``record``, the reply record of the action asked for
    (``wire.replies``: the records the worker writes; the envelope by default, which reads a reply
    as the record of the action it names), None when it printed none. Host concerns added here:
    paths the worker saw inside the sandbox (``/input/x.pt``) are replaced by the host paths the
    user typed, so an error message names the user's own file; the message (the model's own
    words, maybe with terminal escapes) is escaped where it enters the host."""
    data = reply_object(stdout)
    if data is None:
        return None
    reply = record.parse(data)
    assert isinstance(reply, record), type(reply)
    failure = reply.error
    if failure is not None:
        message = failure.message
        for inside, host in sorted((host_paths or {}).items(), key=lambda kv: -len(kv[0])):
            message = message.replace(inside, host)
        reply = replace(reply, error=WorkerFailure(failure.kind, printable(message, MAX_TEXT)))
    return reply


@dataclass(frozen=True)
class SandboxRun(Generic[Rep]):
    """One worker run: what the backend saw and the worker's reply, its action's record (None
    when it printed none)."""

    outcome: RunOutcome
    reply: Optional[Rep]

    @property
    def ok(self) -> bool:
        return self.reply is not None and self.reply.ok and not self.problem()

    @property
    def unusable_file(self) -> bool:
        """The worker refused the file itself (state_dict only, not a model, a bad shape...)."""
        failure = self.reply.error if self.reply is not None else None
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
        if self.reply.error is not None:
            return Verdict.ERROR, self.reply.error.message
        return None

    def failure_message(self, default: str = "the worker failed without a message") -> str:
        found = self.problem()
        return found[1] if found else default


@dataclass(frozen=True)
class MeasureSettings:
    """How a measurement run loads and drives the model; part of every measurement's cache key."""

    runtime: str = COMPARISON_RUNTIME
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
                    timeout_s: float, twin: bool = True,
                    channels_removed: Optional[Path] = None) -> SandboxRun[ExportOnnxReply]:
        """Export ``model`` to ``target`` (nn-Meter-ready ONNX) under the work limit, not a device's;
        ``twin=False``: the export as torch writes it (an int8/fp16 model's own ops, for onnxruntime);
        a file with all-zero output channels also gets that graph without them at ``channels_removed``."""
        request = self._loaded(wire.ExportOnnxRequest(
            model_path=str(model), input_shape=_shape(input_shape), onnx_path=str(target), twin=twin,
            channels_removed_path=str(channels_removed) if channels_removed else None))
        return self.run(request, self.work_limit_mb, timeout_s)

    def convert(self, model: Path, runtime: str, target: Path, input_shape: Optional[Sequence[int]],
                timeout_s: float, quantize: Optional[str] = None,
                calibration: Optional[Path] = None) -> SandboxRun[ConvertReply]:
        """Convert ``model`` for ``runtime`` (tflite, ncnn) to ``target`` under the work limit; an
        ncnn ``target`` is the ``.param``, its ``.bin`` is written beside it. ``quantize`` (a
        ``precision.CONVERT_QUANTIZE`` level): made by the runtime's own toolchain while converting;
        ``calibration``: an .npz of ``inputs`` calibrating int8 (else synthetic inputs)."""
        request = self._loaded(wire.ConvertRequest(
            action=adapter(runtime).convert_action, model_path=str(model), runtime=runtime,
            input_shape=_shape(input_shape), converted_path=str(target), quantize=quantize,
            calibration_path=str(calibration) if calibration else None))
        return self.run(request, self.work_limit_mb, timeout_s)

    def measure(self, model: Path, limit_mb: Optional[int], settings: MeasureSettings, timeout_s: float, *,
                onnx_path: Optional[Path] = None, reference_s: Optional[float] = None,
                converted_path: Optional[Path] = None) -> SandboxRun[MeasureReply]:
        """Run the model ``settings.runs`` times under ``limit_mb`` (None: unconstrained);
        ``converted_path``: the conversion a tflite/ncnn measurement runs."""
        request = self._loaded(wire.MeasureRequest(
            model_path=str(model), warmup=settings.warmup, runs=settings.runs, threads=settings.threads,
            runtime=settings.runtime, onnx_path=str(onnx_path) if onnx_path is not None else None,
            converted_path=str(converted_path) if converted_path is not None else None,
            input_shape=_shape(settings.input_shape)))
        return self.run(request, limit_mb, timeout_s, reference_s=reference_s)

    def derive(self, model: Path, level: str, out: Path, input_shape: Optional[Sequence[int]],
               timeout_s: float, finetune: Optional[tuple[Path, int]] = None) -> SandboxRun[DeriveReply]:
        """Derive the ``level`` variant of ``model`` and write it to ``out``, under the work limit;
        ``finetune`` (pruned only): (normalised samples .npz, epochs) to fine-tune it on."""
        request = self._loaded(wire.DeriveRequest(
            model_path=str(model), level=level, derive_out=str(out), input_shape=_shape(input_shape),
            data_path=str(finetune[0]) if finetune else None, finetune_epochs=finetune[1] if finetune else None))
        return self.run(request, self.work_limit_mb, timeout_s)

    def evaluate(self, model: Path, data: Path, settings: MeasureSettings, timeout_s: float, *,
                 onnx_path: Optional[Path] = None, converted_path: Optional[Path] = None,
                 on_progress: Optional[ProgressFn] = None) -> SandboxRun[EvaluateReply]:
        """Top-1/top-5 of ``model`` on the samples ``data`` (a normalised .npz) under
        ``settings.runtime``, in that runtime's image, under the work limit (no device is modelled)."""
        request = self._loaded(wire.EvaluateRequest(
            model_path=str(model), data_path=str(data), threads=settings.threads, runtime=settings.runtime,
            onnx_path=str(onnx_path) if onnx_path is not None else None,
            converted_path=str(converted_path) if converted_path is not None else None,
            input_shape=_shape(settings.input_shape)))
        return self.run(request, self.work_limit_mb, timeout_s, on_progress=on_progress)

    def decode_images(self, pack: Path, target: Path, preprocess: dict[str, Any],
                      timeout_s: float) -> SandboxRun[DecodeImagesReply]:
        """An ImageFolder tree's images (``pack``: the host's zip of their bytes) decoded with Pillow
        into the normalised samples ``target`` (an .npz), in the benchmark image under the work limit:
        the host never decodes an image (``worker.evaluate.images``)."""
        request = wire.DecodeImagesRequest(model_path=str(pack), derive_out=str(target), preprocess=dict(preprocess))
        return self.run(request, self.work_limit_mb, timeout_s)

    def armsim_profile(self, converted: Path, runtime: str, isa: str, precision: str, threads: int,
                       input_shape: Optional[Sequence[int]], timeout_s: float, *, uarch: Optional[str] = None,
                       warmup: int = 0, inferences: int = 1) -> SandboxRun[ArmsimProfileReply]:
        """Count one steady-state inference of ``converted`` (a .tflite or ncnn .param) under
        ``runtime``'s Arm build on an emulated ``isa`` core (lodevem-armsim image), under the
        work limit. ``warmup`` inferences run uncounted first (weight packing)."""
        request = wire.ArmsimProfileRequest(model_path=str(converted), runtime=runtime, converted_path=str(converted),
                                       isa=isa, precision=precision, uarch=uarch, threads=threads,
                                       input_shape=_shape(input_shape), warmup=warmup, runs=inferences)
        return self.run(request, self.work_limit_mb, timeout_s)

    @property
    def cache_key(self) -> str:
        """What the loading adds to cache keys of a file's exports, variants and measurements."""
        return self.loading.key

    def _loaded(self, request: R) -> R:
        """``request`` with how the model file is loaded (``--code``, ``--arch``)."""
        loading = self.loading
        return replace(request, code_paths=[str(p) for p in loading.code], arch=loading.arch,
                       arch_kwargs=loading.arch_kwargs)

    def run(self, request: WorkerRequest, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Optional[ProgressFn] = None) -> SandboxRun[Any]:
        outcome = self.backend.run(request, limit_mb, timeout_s, reference_s=reference_s, on_progress=on_progress)
        # read as the record of the action asked for, whatever the reply says it is
        reply = parse_reply(outcome.stdout, outcome.host_paths, REPLIES.get(request.action, WorkerReply))
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
