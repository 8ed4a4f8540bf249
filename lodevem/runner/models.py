"""The models of a run, made ready for the stages: one record per (file, level, runtime).

One ``ModelFile`` per model travels from the command line to its CSV rows, filled in as the run
learns about it: labelled per runtime (``per_runtime``), its ``--levels`` variant made
(``derive``: converted by the runtime's own toolchain, or derived once in the sandbox), its ONNX
export and facts read (``with_graph``). The user's files are exported first (``export_sources``),
so a file the worker refuses stops the run before any other work.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Sequence

from ..accuracy.data import EvalData, check_model_shape
from ..derive import derive_cached
from ..errors import InputError, LodevemError, ModelFileError
from ..results import ExportResult, ModelFile
from ..results.notes import kernel_precisions
from ..runtimes import adapter
from ..safe_io.sniff import content_suffix
from ..sandbox.client import ModelSection
from ..sandbox.usercode import with_code_hint
from ..wire.precision import LEVEL_FILE_PRECISION, PARTLY_QUANTIZED
from ..wire.registry import measured_under, predicted_for
from ..wire.shape_sources import SOURCE_REQUEST, host_shape_source
from .run import Run

__all__ = ["converted_level", "latency_runtime", "measured_runtime", "per_runtime", "prepare_models"]

# what a derivation fills in (the rest of a row's model record is its own: label, runtime)
_DERIVED_FIELDS = ("variant_path", "variant_sha256", "size_bytes", "format", "params", "note", "unusable")


def per_runtime(model: ModelFile, runtimes: Sequence[str]) -> list[ModelFile]:
    """One model per runtime: with several, each gets its own rows, labelled ``<label> [<runtime>]``."""
    if len(runtimes) == 1:
        return [dataclasses.replace(model, runtime=runtimes[0])]
    return [dataclasses.replace(model, label=f"{model.label} [{r}]", runtime=r) for r in runtimes]


def measured_runtime(run: Run, model: ModelFile) -> str:
    """What measures ``model``: its runtime; an .onnx file has no torch form, so under ``torch``
    it is run by onnxruntime (its rows say so)."""
    return measured_under(model.runtime or run.config.runtimes[0], content_suffix(model.path))  # bytes, not name


def latency_runtime(measurement_runtime: str, default: str) -> str:
    """The runtime a row measured under ``measurement_runtime`` has its latency predicted for:
    the registry's rule (``wire.registry.predicted_for``): its own when it has a latency
    model, else ``--latency-runtime`` (``default``)."""
    return predicted_for(measurement_runtime, default)


def converted_level(runtime: str, level: Optional[str]) -> Optional[str]:
    """The level a ``runtime`` row makes while converting the fp32 source with the runtime's own
    toolchain (tflite, ncnn: fp16, int8, int8-static), or None: the row measures its file as it is
    (the user's file, or the derived variant: torch and onnxruntime rows, and pruned everywhere,
    pruning being a smaller fp32 model that is then converted)."""
    return level if adapter(runtime).converts and level in LEVEL_FILE_PRECISION else None


def export(run: Run, path: Path, sha256: str) -> ExportResult:
    """ONNX export of a file in the sandbox (never in this process), cached by content + shape;
    raises ``ModelFileError`` when the worker refuses the file itself."""
    run.progress.working_on(f"exporting {path.name}")
    done = run.session.exports.export(path, sha256, run.config.inputs.input_shape)
    if done.unusable:
        raise ModelFileError(with_code_hint(done.error, path))
    return done


def export_sources(run: Run, models: Sequence[ModelFile]) -> dict[Path, ModelSection]:
    """Every distinct file the user named, exported first: a bad one stops the run here. Returns
    what each export found the file to be (its precision, input and output), by path."""
    run.progress.stage("exporting models to ONNX (in the sandbox)")
    found: dict[Path, ModelSection] = {}
    for model in {m.path: m for m in models}.values():
        done = export(run, model.path, model.sha256)
        found[model.path] = done.model
        tuning = run.finetune_data
        problem = tuning.labels_problem(done.model.classes, model.path.name) if tuning is not None else None
        if problem:  # the data alone shows it cannot fine-tune this model (issue 38): refused, exit 2
            raise InputError(problem)
        problem = data_problem(run.eval_data, done.model, model.path.name)
        if problem:  # nor evaluate it (issue 46): refused in seconds, before any memory run
            raise InputError(problem)
    return found


def data_problem(data: Optional[EvalData], found: ModelSection, name: str) -> Optional[str]:
    """Why ``--eval-data`` cannot work for a file whose export found its input and outputs
    (``found``): samples of another shape, class folders or labels the outputs do not have."""
    if data is None:
        return None
    mismatch = check_model_shape(data, found.input_shape)
    if mismatch:
        return f"{mismatch} ({name}); give --input-shape the samples' shape, or samples of the model's input"
    return data.labels_problem(found.classes, name)


def prepare_models(run: Run, models: Sequence[ModelFile]) -> list[ModelFile]:
    """The run's rows' models: one per runtime, each level made, each export read."""
    labelled = [m for base in models for m in per_runtime(base, run.config.runtimes)]
    derived = [derive(run, m) for m in labelled]  # every derivation first, then every export
    return [with_graph(run, m) for m in derived]


def derive(run: Run, model: ModelFile) -> ModelFile:
    """For a ``--levels`` variant, the file its rows measure: under tflite/ncnn the fp32 source,
    converted at the level (``converted_level``); else the file derived once in the sandbox
    without a limit (one derivation per file and level, shared by every runtime's rows).

    Measuring the derived file, not a derivation inside the measured run, keeps the original's
    load and the quantization/pruning machinery out of the variant's peak RAM (+110 MB for
    int8-static on mobilenet_v2, see ``derive.derive_cached``).
    """
    if model.level is None:
        return model
    level = converted_level(measured_runtime(run, model), model.level)
    if level is not None:
        return dataclasses.replace(model, convert_level=level)
    key = (model.path, model.level)
    if key not in run.derived:
        run.progress.working_on(f"deriving {model.label} in the sandbox")
        try:
            run.derived[key] = derive_cached(model, run.store, run.session.client, run.config.inputs.input_shape,
                                             run.config.memory.timeout_s, run.finetune)
        except LodevemError as exc:
            run.derived[key] = dataclasses.replace(model, unusable=f"could not derive {model.level}: {exc}")
    derived = run.derived[key]
    return dataclasses.replace(model, **{f: getattr(derived, f) for f in _DERIVED_FIELDS})


def with_graph(run: Run, model: ModelFile) -> ModelFile:
    """The ONNX graph the model's latency is predicted from, and the measured file's figures.

    fp16 and int8 levels are predicted from the original's fp32 graph (the predictor applies the
    level's factor), so they share the original's export; a pruned variant is a smaller dense
    model and is predicted from its own derived file.
    """
    if model.unusable is not None:
        return dataclasses.replace(model, graph_error=model.unusable)
    shape = run.config.inputs.input_shape
    pruned = model.level == "pruned"
    done = export(run, model.measured_path, model.measured_sha256) if pruned else export(run, model.path, model.sha256)
    model = dataclasses.replace(model, graph_path=done.path, graph_error=done.error, classes=done.model.classes,
                                input_shape=done.model.input_shape or shape,
                                input_shape_source=host_shape_source(
                                    done.model.input_shape_source or (SOURCE_REQUEST if shape else None),
                                    run.config.inputs.input_shape_source),
                                # the kernel graph is read only for the partial-quantization note:
                                # a cached rerun of any other file imports no ONNX or nn-Meter
                                precision_by_class=(kernel_precisions(done.path)
                                                    if done.model.precision in PARTLY_QUANTIZED else ()))
    warning = done.model.input_shape_warning
    if warning:
        run.warn(f"{model.path.name}: {warning}")
    if model.level is None:  # a variant's format and params come from its derivation
        model = dataclasses.replace(model, format=done.model.format, params=done.model.params,
                                    class_name=done.model.class_name, sparsity=done.model.sparsity,
                                    channels_removed_graph=done.channels_removed_path,
                                    precision=done.model.precision, quantization=done.model.quantization)
    else:  # a variant computes in its level's precision (predicted from the original's graph)
        model = dataclasses.replace(model, precision=LEVEL_FILE_PRECISION.get(model.level, done.model.precision))
    return model
