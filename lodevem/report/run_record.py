"""The run's own description in its manifest, typed: ``RunDescription``, the ``extra`` block of
``benchmark_results.json``'s ``environment``.

What it holds: the options the run was given (``config``), the settings another run must share
to stand in one table (``settings``, ``report.combine``), how the user's files were loaded
(``model_code``), the predictor's and the calibrations' own descriptions, the data behind the
accuracy, int8 calibration and fine-tuning figures, and for a combined table the runs it joins.

Why typed: the report reads these back from a results file somebody else may have edited
(``lodevem report DIR``), so every field is read through ``safe_io.records.typed`` (type and
range checked; one ``BadRecord`` naming the file and the field otherwise) and written from the
same fields, the JSON keys as they always were (the block keeps its name ``extra``). Only the
predictor's description stays a JSON object: each predictor kind describes itself
(``latency.pool.describe``) and ``latency.paper`` reads it by kind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any, Optional

from ..safe_io.records import typed

__all__ = ["OPTION_ORDER", "CalibrationsUsed", "CombinedRun", "DataOptions", "LatencyOptions", "MeasureOptions",
           "ModelCode", "OutputOptions", "RunDescription", "RunOptions", "RunSettings"]

# The options in the order ``config`` lists them (``runner.config.RunConfig.flat``).
OPTION_ORDER = ("warmup", "runs", "output", "backend", "runtimes", "jobs", "threads", "predictor", "latency_runtime",
                "nnmeter_data", "input_shape", "timeout_s", "find_floor", "infer", "levels", "no_cache", "resume",
                "overwrite", "calibrations", "uncalibrated", "calibration_inputs", "slurm_partition", "slurm_account",
                "slurm_time", "slurm_workdir", "eval_data", "calib_data", "eval_limit", "finetune_data",
                "finetune_epochs", "device", "benchmark_binary")


def _json(value: Any) -> Any:
    """``value`` as JSON holds it (a tuple as a list), so a record's form equals the file's."""
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


def _form(record: Any) -> dict[str, Any]:
    return {k: _json(v) for k, v in asdict(record).items()}


@dataclass(frozen=True)
class MeasureOptions:
    """How the sandbox measured (None: a results file older than the option)."""

    warmup: Optional[int] = None
    runs: Optional[int] = None
    backend: Optional[str] = None
    runtimes: tuple[str, ...] = ()
    jobs: Optional[int] = None
    threads: Optional[int] = None
    input_shape: Optional[tuple[int, ...]] = None
    timeout_s: Optional[float] = None
    find_floor: Optional[bool] = None
    infer: Optional[bool] = None
    levels: tuple[str, ...] = ()
    slurm_partition: Optional[str] = None
    slurm_account: Optional[str] = None
    slurm_time: Optional[int] = None
    slurm_workdir: Optional[str] = None
    device: Optional[str] = None
    benchmark_binary: Optional[str] = None


@dataclass(frozen=True)
class LatencyOptions:
    """How the latency was predicted."""

    predictor: Optional[str] = None
    latency_runtime: Optional[str] = None
    nnmeter_data: Optional[str] = None
    calibrations: Optional[str] = None
    uncalibrated: Optional[bool] = None


@dataclass(frozen=True)
class DataOptions:
    """The data the run read besides the models (evaluation, calibration, fine-tuning)."""

    calibration_inputs: Optional[str] = None
    eval_data: Optional[str] = None
    calib_data: Optional[str] = None
    eval_limit: Optional[int] = None
    finetune_data: Optional[str] = None
    finetune_epochs: Optional[int] = None


@dataclass(frozen=True)
class OutputOptions:
    """Where the results went and what the run did with earlier ones."""

    output: Optional[str] = None
    no_cache: Optional[bool] = None
    resume: Optional[bool] = None
    overwrite: Optional[bool] = None


_OPTION_PARTS = {"measure": MeasureOptions, "latency": LatencyOptions, "data": DataOptions, "output": OutputOptions}


@dataclass(frozen=True)
class RunOptions:
    """The options the run was given (``config``: one flat JSON object, ``OPTION_ORDER``), in
    parts by concern."""

    measure: MeasureOptions = field(default_factory=MeasureOptions)
    latency: LatencyOptions = field(default_factory=LatencyOptions)
    data: DataOptions = field(default_factory=DataOptions)
    output: OutputOptions = field(default_factory=OutputOptions)

    def to_dict(self) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for part in _OPTION_PARTS:
            flat.update(_form(getattr(self, part)))
        return {k: flat[k] for k in OPTION_ORDER}

    @classmethod
    def from_dict(cls, data: Any, where: str, prefix: str = "") -> "RunOptions":
        """Each part read from the one flat object (type and range checked)."""
        return cls(**{name: typed(part, data, where, prefix=prefix) for name, part in _OPTION_PARTS.items()})


@dataclass(frozen=True)
class RunSettings:
    """What two runs must share to stand in one table (``runner.config.RunConfig.comparable``;
    ``report.combine`` names each that differs)."""

    profiles: tuple[str, ...] = ()
    warmup: Optional[int] = None
    runs: Optional[int] = None
    runtime: Optional[str] = None
    threads: Optional[int] = None
    predictor: Optional[str] = None
    latency_runtime: Optional[str] = None
    input_shape: Optional[tuple[int, ...]] = None
    backend: Optional[str] = None
    calibrations: Optional[str] = None
    calib_data: Optional[str] = None
    eval_data: Optional[str] = None
    code: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return _form(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "RunSettings":
        return typed(cls, data, where)


@dataclass(frozen=True)
class ModelCode:
    """How the sandbox loaded the user's files beyond their bytes (``--code``, ``--arch``)."""

    code: tuple[str, ...] = ()
    code_sha256: Optional[str] = None
    arch: Optional[str] = None
    arch_kwargs: Optional[dict[str, Any]] = None


@dataclass(frozen=True)
class CalibrationsUsed:
    """The calibration records folder, whether it was used, and the fit applied per profile."""

    folder: Optional[str] = None
    enabled: Optional[bool] = None
    applied: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CombinedRun:
    """One run a combined table joins: how to redo it (its command), when, and its models."""

    command: str
    created_utc: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class RunDescription:
    """The run's own description (the manifest's ``extra`` block; see the module docstring).
    A part None: a results file older than the part, or a manifest made outside ``start``."""

    config: Optional[RunOptions] = None
    settings: Optional[RunSettings] = None
    model_code: Optional[ModelCode] = None
    predictor: Optional[dict[str, Any]] = None
    calibrations: Optional[CalibrationsUsed] = None
    evaluation: Optional[str] = None
    int8_calibration: Optional[str] = None
    finetune: Optional[str] = None
    combined: tuple[CombinedRun, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``extra`` block; ``combined`` only for a combined table (as it always was)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "combined":
                if value:
                    out["combined"] = [_form(run) for run in value]
            elif isinstance(value, RunOptions):
                out[f.name] = value.to_dict()
            else:
                out[f.name] = _form(value) if is_dataclass(value) else _json(value)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str, prefix: str = "extra.") -> "RunDescription":
        """The block read back: every field typed and range-checked; ``BadRecord`` naming
        ``where`` (the file) and the field (``extra.settings.runs``) otherwise."""
        if data is None:
            return cls()
        values = dict(data) if isinstance(data, dict) else data
        config = values.pop("config", None) if isinstance(values, dict) else None
        record = typed(cls, values, where, prefix=prefix)
        if config is None:
            return record
        return replace(record, config=RunOptions.from_dict(config, where, prefix=f"{prefix}config."))
