"""What a run depends on, in typed parts: one per stage or concern, each of a few fields.

Why parts: a flat record of 35 fields let every stage read every setting, and nothing said which
stage a setting belongs to. Here the measurement stage reads ``memory``, the prediction stage
``latency``, the evaluation ``data``, the sandbox ``sandbox``, the run's bookkeeping ``results``;
``inputs`` is what every stage needs to know about the models. ``RunConfig.of`` takes the flat
options (``lodevem start``'s, a library caller's) and sorts them into the parts by their field
names: the one place that knows where an option goes. ``flat()`` gives them back in the order the
manifest has always listed them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional, Sequence

from ..accuracy.data import DEFAULT_EVAL_LIMIT, DEFAULT_FINETUNE_EPOCHS
from ..errors import InputError
from ..latency.estimator import DEFAULT_RUNTIME
from ..profiles import Profile, choose_profiles
from ..report.run_record import OPTION_ORDER
from ..results import ModelFile
from ..sandbox.client import MeasureSettings
from ..sandbox.usercode import ModelLoading
from ..store import digest, file_digest
from ..wire.registry import RUNTIMES, canonical
from ..worker.evaluate.images import Preprocessing

__all__ = ["DataOptions", "InputOptions", "LatencyOptions", "MemoryOptions", "ResultsOptions", "RunConfig",
           "SandboxOptions"]


@dataclass(frozen=True)
class InputOptions:
    """How every stage sees the models: their input shape, the levels derived, how they load."""

    input_shape: Optional[tuple[int, ...]] = None
    # where input_shape came from when the user did not give it (wire.shape_sources: the evaluation or
    # fine-tuning data's sample shape); None: given, or none
    input_shape_source: Optional[str] = None
    levels: tuple[str, ...] = ()
    loading: ModelLoading = field(default_factory=ModelLoading)  # --code, --arch


@dataclass(frozen=True)
class MemoryOptions:
    """The measurement stage: passes, the runtimes that measure (one row each; empty: the runtime
    latencies are predicted for, ``RunConfig.runtimes``), parallel runs, threads, each run's time
    limit, ``--find-floor`` and whether limits far above the reference's peak are inferred."""

    warmup: int = 5
    runs: int = 50
    runtimes: tuple[str, ...] = ()
    jobs: Optional[int] = None
    threads: int = 1
    timeout_s: float = 600.0
    find_floor: bool = False
    infer: bool = True  # False (--no-infer): measure every RAM limit, none inferred (memory.planning)

    def __post_init__(self) -> None:
        names = self.runtimes.split(",") if isinstance(self.runtimes, str) else list(self.runtimes)
        names = [canonical(n) or str(n).strip().lower() for n in names if str(n).strip()]
        unknown = [n for n in names if n not in RUNTIMES]
        if unknown:
            raise InputError(f"runtime {', '.join(unknown)}: expected one of {', '.join(RUNTIMES)}")
        object.__setattr__(self, "runtimes", tuple(dict.fromkeys(names)))


@dataclass(frozen=True)
class LatencyOptions:
    """The prediction stage: the kind (``--predictor``), the runtime latencies stand for, nn-Meter's
    data and the calibration records."""

    predictor: str = "auto"
    latency_runtime: str = DEFAULT_RUNTIME
    nnmeter_data: Optional[Path] = None
    calibrations: Optional[Path] = None
    uncalibrated: bool = False


@dataclass(frozen=True)
class DataOptions:
    """The user's samples: ``--eval-data`` (accuracy of every row), ``--calib-data`` (validated and
    normalised into ``calibration_inputs``, the .npz calibrating int8 conversions; None: synthetic
    inputs, and those rows say so), ``--finetune-data`` (the derived pruned level fine-tuned)."""

    eval_data: Optional[Path] = None
    eval_limit: int = DEFAULT_EVAL_LIMIT
    calib_data: Optional[Path] = None
    calibration_inputs: Optional[Path] = None
    finetune_data: Optional[Path] = None
    finetune_epochs: int = DEFAULT_FINETUNE_EPOCHS
    # --preprocess: how the images of an ImageFolder tree given as data become inputs (worker.evaluate.images)
    preprocessing: Preprocessing = field(default_factory=Preprocessing)


@dataclass(frozen=True)
class ResultsOptions:
    """Where the run writes and what it reuses: the folder, the caches (``no_cache``), an
    interrupted run's rows (``resume``), another run's results (``overwrite``), and the command
    line the manifest records."""

    output: Path = Path("results")
    no_cache: bool = False
    resume: bool = False
    overwrite: bool = False  # else refuse another run's results (runner.state.refuse_other_run)
    command_line: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxOptions:
    """Where model files run: ``--backend``, and for ``slurm`` where jobs go (the workdir defaults to
    ``<output>/.slurm``; ``sandbox.slurm_backend.SlurmSettings``)."""

    backend: str = "auto"
    slurm_partition: Optional[str] = None
    slurm_account: Optional[str] = None
    slurm_time: Optional[int] = None
    slurm_workdir: Optional[Path] = None
    # --device adb:SERIAL: also measure every model on that phone with the runtime's own benchmark
    # binary (--benchmark-binary), one measured row each (lodevem.device; docs/device.md)
    device: Optional[str] = None
    benchmark_binary: Optional[Path] = None


PARTS = ("inputs", "memory", "latency", "data", "results", "sandbox")
# The flat options in the order the manifest's ``config`` has listed them since 0.1 (one home:
# the typed record that writes and reads them, ``report.run_record``).
FLAT_ORDER = OPTION_ORDER


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on: the models, the profiles, and one typed part per concern."""

    models: tuple[Path, ...]
    profiles: tuple[Profile, ...]
    inputs: InputOptions = InputOptions()
    memory: MemoryOptions = MemoryOptions()
    latency: LatencyOptions = LatencyOptions()
    data: DataOptions = DataOptions()
    results: ResultsOptions = ResultsOptions()
    sandbox: SandboxOptions = SandboxOptions()

    @classmethod
    def of(cls, models: Sequence[Path], profiles: Sequence[Profile], runtime: Optional[str] = None,
           **options: Any) -> "RunConfig":
        """A config from flat options (``warmup=1, backend="process", ...``), each put in its part;
        an unknown option is a ``TypeError`` naming it. ``runtime``: lodevem 0.1's comma form
        (``"torch,tflite"``), read into ``runtimes``."""
        if runtime:
            given = options.get("runtimes", ())
            options["runtimes"] = (*(given.split(",") if isinstance(given, str) else given), *runtime.split(","))
        parts: dict[str, Any] = {}
        for part in PARTS:
            kind = _PART_TYPES[part]
            names = {f.name for f in fields(kind)}
            parts[part] = kind(**{k: options.pop(k) for k in list(options) if k in names})
        if options:
            raise TypeError(f"RunConfig: unknown option(s) {', '.join(sorted(options))}")
        return cls(models=tuple(models), profiles=tuple(profiles), **parts)

    @classmethod
    def from_options(cls, paths: Sequence[Path], profile_ids: Sequence[str], tiers: Sequence[str],
                     profiles_dirs: Sequence[Path], command_line: Sequence[str], **options: Any) -> "RunConfig":
        """``lodevem start``'s options as a config: the profiles chosen by id and tier from the
        shipped ones, ``$LODEVEM_PROFILES`` and ``profiles_dirs``."""
        profiles = choose_profiles(profiles_dirs, ids=profile_ids, tiers=tiers)
        return cls.of(paths, profiles, command_line=tuple(command_line), **options)

    def with_options(self, **options: Any) -> "RunConfig":
        """This config with some flat options changed (``resume=True``, ``input_shape=...``)."""
        parts = {}
        for part in PARTS:
            current = getattr(self, part)
            changed = {k: options.pop(k) for k in list(options) if k in {f.name for f in fields(current)}}
            parts[part] = dataclasses.replace(current, **changed) if changed else current
        if options:
            raise TypeError(f"RunConfig: unknown option(s) {', '.join(sorted(options))}")
        return dataclasses.replace(self, **parts)

    def flat(self) -> dict[str, Any]:
        """The options as one mapping (paths as text), in the manifest's order."""
        values = {f.name: getattr(getattr(self, part), f.name) for part in PARTS
                  for f in fields(getattr(self, part)) if f.name not in ("loading", "command_line")}
        return {k: (str(values[k]) if isinstance(values[k], Path) else values[k]) for k in FLAT_ORDER}

    @property
    def runtimes(self) -> tuple[str, ...]:
        """The runtimes measured: those given, else the latency runtime."""
        return self.memory.runtimes or (self.latency.latency_runtime,)

    resolved_runtimes = runtimes  # the name of 0.1's library callers

    def state_key(self, models: Sequence[ModelFile], calibrations: str = "", evaluation: str = "") -> str:
        """What must match for ``--resume`` to reuse finished rows (not the profile set).
        ``calibrations``: the digest of the calibration records in force (they change latencies);
        ``evaluation``: the digest of the --eval-data samples (they fill the accuracy cells)."""
        memory, latency = self.memory, self.latency
        key = {
            "calibrations": calibrations,
            "models": [(m.label, m.sha256, m.level) for m in models],
            "warmup": memory.warmup, "runs": memory.runs, "runtime": ",".join(self.runtimes),
            "threads": memory.threads,
            "predictor": latency.predictor, "latency_runtime": latency.latency_runtime,
            "input_shape": self.inputs.input_shape, "backend": self.sandbox.backend, "loading": self.inputs.loading.key,
        }
        if self.data.calibration_inputs is not None:  # only then: other runs keep their keys
            key["calibration_inputs"] = file_digest(str(self.data.calibration_inputs))
        if evaluation:  # only then: the keys of runs without --eval-data stay as they were
            key["evaluation"] = evaluation
        return digest(key)[:16]

    def comparable(self, calibrations: str = "", evaluation: str = "") -> dict[str, Any]:
        """What two runs must share for their rows to stand in one table (``report.combine``):
        everything ``state_key`` holds but the models, and the device profiles. JSON-able; kept in
        the state file and the manifest, so a second run into the folder (or ``lodevem report
        DIR...``) can name what differs."""
        memory, latency = self.memory, self.latency
        return {"profiles": sorted(p.id for p in self.profiles), "warmup": memory.warmup, "runs": memory.runs,
                "runtime": ",".join(self.runtimes), "threads": memory.threads, "predictor": latency.predictor,
                "latency_runtime": latency.latency_runtime,
                "input_shape": list(self.inputs.input_shape) if self.inputs.input_shape else None,
                "backend": self.sandbox.backend, "calibrations": calibrations,
                "calib_data": (file_digest(str(self.data.calibration_inputs))
                               if self.data.calibration_inputs is not None else None),
                "eval_data": evaluation or None, "code": self.inputs.loading.key or None}

    def settings(self, runtime: Optional[str] = None) -> MeasureSettings:
        """How one run of the worker measures under ``runtime`` (default: the first measured)."""
        memory = self.memory
        return MeasureSettings(runtime=runtime or self.runtimes[0], warmup=memory.warmup, runs=memory.runs,
                               threads=memory.threads, input_shape=self.inputs.input_shape)


_PART_TYPES: dict[str, type] = {"inputs": InputOptions, "memory": MemoryOptions, "latency": LatencyOptions,
                                "data": DataOptions, "results": ResultsOptions, "sandbox": SandboxOptions}
