"""Accuracy beside latency and RAM (``--eval-data``): top-1 / top-5 of every row's model, evaluated
in the sandbox under the runtime the row was measured with.

Why the row's runtime: an int8 ``.tflite`` computes with LiteRT's kernels and its own
quantization, so its accuracy can differ from its torch twin's, and the app ships the former. So
each (model, runtime) is evaluated on the very file its memory is measured on: the model (or its
``--levels`` variant) under torch, its ONNX export under onnxruntime, the conversion the
measurement runs under LiteRT / ncnn (the same ``measure`` plan picks it, so the two cannot
drift apart). Each row also gets its drop against the fp32 row of the same file and runtime.

Results are cached in the artifact store (kind ``accuracy``) by (the evaluated artifact's digest,
the data's digest, the runtime and the image), like every other measurement. A failure (a label
outside the model's outputs, a shape the model does not take, a conversion that failed) empties
the row's accuracy cells and says why in ``accuracy_note``; the row's latency and RAM stand.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional, Sequence

from .. import measure
from ..results import Accuracy, ModelFile
from ..sandbox.artifacts import loading_sha256
from ..sandbox.image import CONVERTERS
from ..store import digest
from ..worker.finetune import NOT_FINETUNED
from ..worker.registry import measured_under
from .data import IMAGEFOLDER, EvalData, check_model_shape

KIND = "accuracy"
NOTE_NOT_FINETUNED = "pruned without fine-tuning"
NOTE_FINETUNED = "pruned and fine-tuned (--finetune-data)"


def finetuned(model: ModelFile) -> bool:
    """A derived pruned variant whose derivation fine-tuned it (its notes say so: worker.finetune)."""
    note = model.note or ""
    return "fine-tuned" in note and NOT_FINETUNED not in note


def finetune_failure(model: ModelFile) -> Optional[str]:
    """``not fine-tuned: <reason>`` of a pruned variant whose fine-tuning failed (worker.finetune),
    else None: the row keeps its figures and its accuracy note says why it is not fine-tuned."""
    return next((part for part in (model.note or "").split("; ") if part.startswith(f"{NOT_FINETUNED}: ")), None)


def evaluate_models(ctx: Any, models: Sequence[ModelFile], data: EvalData) -> dict[str, Accuracy]:
    """Every model's accuracy (by row label), evaluated ``--jobs`` at a time, with its drop."""
    ctx.progress.stage(f"evaluating accuracy on {data.samples} samples of {data.source.name} (in the sandbox)")
    jobs = max(1, min(len(models), ctx.config.jobs or 1))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {m.label: pool.submit(_evaluate, ctx, m, data) for m in models}
        found = {label: future.result() for label, future in futures.items()}
    return with_drops(models, found)


def with_drops(models: Sequence[ModelFile], found: dict[str, Accuracy]) -> dict[str, Accuracy]:
    """Each row's drop against the fp32 row of the same file under the same runtime (when the run
    has that row and both have a top-1); a pruned row without fine-tuning says so."""
    base = {(m.path, m.runtime): found[m.label] for m in models if m.level is None}
    result = {}
    for m in models:
        acc = found[m.label]
        ref = base.get((m.path, m.runtime))
        if acc.top1_pct is not None and ref is not None and ref.top1_pct is not None:
            acc = dataclasses.replace(acc, drop_pts=round(ref.top1_pct - acc.top1_pct, 2))
        if m.level == "pruned":
            say = NOTE_FINETUNED if finetuned(m) else finetune_failure(m) or NOTE_NOT_FINETUNED
            acc = dataclasses.replace(acc, note="; ".join(n for n in (say, acc.note) if n))
        result[m.label] = acc
    return result


def _evaluate(ctx: Any, model: ModelFile, data: EvalData) -> Accuracy:
    if model.unusable is not None:
        return Accuracy.unavailable(f"not evaluated: {model.unusable}")
    mismatch = check_model_shape(data, model.input_shape)
    if data.fmt == IMAGEFOLDER:  # class folders the model does not have: its figure would be meaningless
        mismatch = mismatch or data.labels_problem(model.classes, model.path.name)
    if mismatch:
        return Accuracy.unavailable(f"not evaluated: {mismatch}")
    runtime = measured_under(model.runtime or ctx.config.runtimes[0], model.path.suffix)  # as runner._runtime
    return _evaluate_under(ctx, model, data, runtime)


def _evaluate_under(ctx: Any, model: ModelFile, data: EvalData, runtime: str) -> Accuracy:
    """``model``'s accuracy under ``runtime``; where a tflite/ncnn converter cannot take a file torch
    runs as it is, under torch instead (as its memory: ``measure._Plan.measure``), saying why."""
    config = ctx.config
    settings = dataclasses.replace(config.settings(runtime), input_shape=data.input_shape)
    plan = measure._plan(ctx.client, settings, config.timeout_s, None, not config.no_cache, ctx.exports,
                         ctx.converts, ctx.store)
    onnx_path: Optional[Path] = None
    converted: Optional[Path] = None
    artifact = loading_sha256(model.measured_sha256, ctx.client.cache_key)
    if runtime == "onnxruntime" and model.measured_path.suffix.lower() != ".onnx":
        export = ctx.exports.runtime_export(model.measured_path, model.measured_sha256, data.input_shape)
        if export.path is None:
            return Accuracy.unavailable(f"not evaluated: ONNX export failed: {export.error}")
        onnx_path = export.path
        artifact = ctx.store.file_sha256(onnx_path)
    elif runtime in CONVERTERS:
        conversion, error = plan.converted(model)
        if (conversion is None or conversion.path is None) and model.runs_as_is:
            fallback = _evaluate_under(ctx, model, data, measured_under("torch", model.measured_path.suffix))
            return dataclasses.replace(fallback, note="; ".join(n for n in (
                f"evaluated under {measured_under('torch', model.measured_path.suffix)} (fallback): {error}",
                fallback.note) if n))
        if conversion is None or conversion.path is None:
            return Accuracy.unavailable(f"not evaluated: {error}")
        converted = conversion.path
        artifact = ctx.store.file_sha256(converted)
    key = digest([artifact, data.sha256, runtime, plan.identity, ctx.client.worker_version, settings.threads])
    record = ctx.store.get_record(KIND, key)
    kept = Accuracy.from_record(record) if record is not None else None
    if kept is not None:
        return kept
    ctx.progress.working_on(f"evaluating {model.label} under {runtime}")
    def progress(line: str) -> None:  # the worker's "evaluated 100/1000" lines: the progress bar's text
        if "evaluated " in line:
            ctx.progress.working_on(f"{model.label} under {runtime}: {line[line.index('evaluated '):]} samples")

    run = ctx.client.evaluate(model.measured_path, data.path, settings, config.timeout_s, onnx_path=onnx_path,
                              converted_path=converted, on_progress=progress)
    counted = run.reply.accuracy if run.reply is not None else None
    if not run.ok or counted is None:
        return Accuracy.unavailable(f"not evaluated: {run.failure_message('the evaluation returned no figures')}")
    result = Accuracy(round(100.0 * counted.top1_correct / counted.samples, 2),
                      round(100.0 * counted.top5_correct / counted.samples, 2) if counted.top5_correct is not None
                      else None, counted.samples, seconds=counted.seconds)
    ctx.store.put_record(KIND, key, result.to_record())
    return result
