"""Accuracy beside latency and RAM (``--eval-data``): top-1 / top-5 of every row's model, evaluated
in the sandbox under the runtime the row was measured with.

Why the row's runtime: an int8 ``.tflite`` computes with LiteRT's kernels and its own
quantization, so its accuracy can differ from its torch twin's, and the app ships the former. So
each (model, runtime) is evaluated on the very file its memory is measured on: the model (or its
``--levels`` variant) under torch, its ONNX export under onnxruntime, the conversion the
measurement runs under LiteRT / ncnn (``measure.MeasurePlan.files`` picks them for both, so the
two cannot drift apart). The run schedules one ``EvaluationJob`` per row (``runner.stages``).
Each row also gets its drop against the fp32 row of the same file and runtime.

Results are cached in the artifact store (kind ``accuracy``) by (the evaluated artifact's digest,
the data's digest, the runtime and the image), like every other measurement. A failure (a label
outside the model's outputs, a shape the model does not take, a conversion that failed) empties
the row's accuracy cells and says why in ``accuracy_note``; the row's latency and RAM stand. A
file whose tflite/ncnn conversion fails but which torch runs as it is is evaluated under torch
instead, as it is measured (``measure.MeasurePlan.measure``), and its note says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..measure import MeasurePlan
from ..results import Accuracy, ModelFile
from ..runtimes import FALLBACK, adapter
from ..safe_io.sniff import content_suffix
from ..sandbox.artifacts import loading_sha256
from ..sandbox.client import MeasureSettings
from ..store import ArtifactStore, digest
from ..wire.registry import measured_under
from ..worker.derive.finetune import NOT_FINETUNED
from .data import IMAGEFOLDER, EvalData, check_model_shape

KIND = "accuracy"
NOTE_NOT_FINETUNED = "pruned without fine-tuning"
NOTE_FINETUNED = "pruned and fine-tuned (--finetune-data)"


def finetuned(model: ModelFile) -> bool:
    """A derived pruned variant whose derivation fine-tuned it (its notes say so: worker.derive.finetune)."""
    note = model.note or ""
    return "fine-tuned" in note and NOT_FINETUNED not in note


def finetune_failure(model: ModelFile) -> Optional[str]:
    """``not fine-tuned: <reason>`` of a pruned variant whose fine-tuning failed (worker.derive.finetune),
    else None: the row keeps its figures and its accuracy note says why it is not fine-tuned."""
    return next((part for part in (model.note or "").split("; ") if part.startswith(f"{NOT_FINETUNED}: ")), None)


def with_drops(models: Sequence[ModelFile], found: dict[str, Accuracy]) -> dict[str, Accuracy]:
    """Each row's drop against the fp32 row of the same file under the same runtime (when the run
    has that row and both have a top-1); a pruned row without fine-tuning says so."""
    base = {(m.path, m.runtime): found[m.label] for m in models if m.level is None}
    # a compressed file of the user's is compared with the fp32 row of its float sibling (variant_of)
    sibling = {_file_label(m): m.path for m in models if m.variant_of is None}
    result = {}
    for m in models:
        acc = found[m.label]
        ref = base.get((sibling.get(m.variant_of, m.path) if m.variant_of else m.path, m.runtime))
        if acc.top1_pct is not None and ref is not None and ref.top1_pct is not None:
            acc = dataclasses.replace(acc, drop_pts=round(ref.top1_pct - acc.top1_pct, 2))
        if m.level == "pruned":
            say = NOTE_FINETUNED if finetuned(m) else finetune_failure(m) or NOTE_NOT_FINETUNED
            acc = dataclasses.replace(acc, note="; ".join(n for n in (say, acc.note) if n))
        result[m.label] = acc
    return result


def _file_label(model: ModelFile) -> str:
    """The label of the user's file a row's model comes from: without its `` [runtime]`` and
    ``@level`` suffixes (``runner.models.per_runtime``, ``results.model_file.with_levels``)."""
    label = model.label.removesuffix(f" [{model.runtime}]")
    return label.removesuffix(f"@{model.level or 'fp32'}")


@dataclass(frozen=True)
class EvaluationJob:
    """One row's model to evaluate: under ``settings.runtime`` (the runtime that measures the row,
    ``wire.registry.measured_under``) on ``data``, with the shape of its samples."""

    model: ModelFile
    settings: MeasureSettings
    data: EvalData


def evaluate_model(job: EvaluationJob, plan: MeasurePlan, store: ArtifactStore,
                   progress: Callable[[str], None] = lambda _: None) -> Accuracy:
    """The accuracy of ``job``'s model on the files ``plan`` measures it on (``MeasurePlan.files``:
    the model itself, its ONNX export, its conversion), from the store when an identical
    evaluation was kept; ``progress`` hears the worker's "evaluated N/M" lines."""
    model, data, settings = job.model, job.data, job.settings
    if model.unusable is not None:
        return Accuracy.unavailable(f"not evaluated: {model.unusable}")
    mismatch = check_model_shape(data, model.input_shape)
    if data.fmt == IMAGEFOLDER:  # class folders the model does not have: its figure would be meaningless
        mismatch = mismatch or data.labels_problem(model.classes, model.path.name)
    if mismatch:
        return Accuracy.unavailable(f"not evaluated: {mismatch}")
    client = plan.client
    files = plan.files(model, settings)
    if files.error and adapter(settings.runtime).converts and model.runs_as_is:
        instead = dataclasses.replace(settings, runtime=measured_under(FALLBACK, content_suffix(model.measured_path)))
        found = evaluate_model(EvaluationJob(model, instead, data), plan, store, progress)
        return dataclasses.replace(found, note="; ".join(n for n in (
            f"evaluated under {instead.runtime} (fallback): {files.error}", found.note) if n))
    if files.error:
        return Accuracy.unavailable(f"not evaluated: {files.error}")
    converted = files.conversion.path if files.conversion is not None else None
    made = files.onnx_path or converted  # the file the runtime runs, when not the model's own
    artifact = store.file_sha256(made) if made is not None else loading_sha256(model.measured_sha256,
                                                                               client.cache_key)
    runtime = settings.runtime
    key = digest([artifact, data.sha256, runtime, plan.identity_of(runtime), client.worker_version, settings.threads])
    kept = store.get_record(KIND, key, Accuracy.from_record)  # a bad record (top-1 250 %) is set aside, evaluated again
    if kept is not None:
        return kept
    progress(f"evaluating {model.label} under {runtime}")

    def heard(line: str) -> None:  # the worker's "evaluated 100/1000" lines: the progress bar's text
        if "evaluated " in line:
            progress(f"{model.label} under {runtime}: {line[line.index('evaluated '):]} samples")

    run = client.evaluate(model.measured_path, data.path, settings, plan.timeout_s, onnx_path=files.onnx_path,
                          converted_path=converted, on_progress=heard)
    counted = run.reply.accuracy if run.reply is not None else None
    if not run.ok or counted is None:
        return Accuracy.unavailable(f"not evaluated: {run.failure_message('the evaluation returned no figures')}")
    result = Accuracy(round(100.0 * counted.top1_correct / counted.samples, 2),
                      round(100.0 * counted.top5_correct / counted.samples, 2) if counted.top5_correct is not None
                      else None, counted.samples, seconds=counted.seconds)
    store.put_record(KIND, key, result.to_record())
    return result
