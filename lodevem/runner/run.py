"""One run: what every stage shares, and what only the run owns.

Every stage reads the run (its config, the sandbox session, progress, warnings) and nothing else;
the run alone owns what outlives a stage: the inputs checked before any container starts
(``Run.begin``), the results folder's lock (``OutputClaim``), the state file an interrupted run
resumes from (``runner.state``) and the manifest, assembled once the models and the predictor
are known (``manifest``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ..accuracy.data import (
    MAX_FINETUNE_SAMPLES,
    EvalData,
    ImageDecoding,
    prepare_calibration_data,
    prepare_eval_data,
)
from ..derive import FineTune
from ..errors import InputError, LodevemError
from ..latency.calibration import CalibrationSet
from ..predict import Predictor
from ..progress import NullProgress, ProgressSink
from ..report.environment import collect_manifest
from ..report.files import CSV_NAME, JSON_NAME
from ..report.manifest import DataSetEntry, Manifest
from ..report.run_record import RunDescription
from ..results import ModelFile
from ..runtimes import FALLBACK
from ..sandbox.base import Backend
from ..sandbox.session import Session
from ..store import ArtifactStore, cache_root, run_store
from ..wire.shape_sources import SOURCE_EVAL_DATA, SOURCE_FINETUNE_DATA
from .config import RunConfig
from .state import STATE_FILE, RunState, load_state

__all__ = ["OutputClaim", "Run"]


class OutputClaim:
    """Exclusive use of a results folder for one run: checked writable, then locked.

    Why: two runs writing the same ``--output`` both used to finish with exit 0 while the last
    one silently replaced the other's rows, and a read-only or full folder was only found after
    every measurement. The lock is an ``flock`` on ``.lodevem.lock`` (released by the kernel
    even when lodevem is killed); a second run refuses at once, naming the folder. A run that
    fails before its first result removes the folder if the claim created it (a model the
    sandbox refuses must not leave an empty ``results/`` behind).
    """

    LOCK_NAME = ".lodevem.lock"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._fd: Optional[int] = None
        self.created = False  # the claim made the folder: a run that fails before any result removes it

    def __enter__(self) -> "OutputClaim":
        import fcntl

        try:
            self.created = not os.path.lexists(self.folder)
            self.folder.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=self.folder, prefix=".lodevem-probe-")
            probe.write(b"x" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
            probe.close()
            self._fd = os.open(self.folder / self.LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise InputError(f"--output {self.folder}: cannot write there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise InputError(f"--output {self.folder}: another lodevem run is writing there; wait for it to "
                             "finish or choose another --output") from None
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None
        if kind is not None and self.created and not any(os.path.lexists(self.folder / name)
                                                         for name in (CSV_NAME, JSON_NAME, STATE_FILE)):
            # a failed run leaves no folder it made: nothing in it was a result (only the lock,
            # the probe's leftovers and caches of this run)
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class Run:
    """What every stage of one run shares: settings, the sandbox session (its client, store and
    caches), the one predictor, progress, warnings, the user's checked samples."""

    config: RunConfig
    session: Session
    predictor: Predictor
    progress: ProgressSink
    warnings: list[str] = field(default_factory=list)
    eval_data: Optional[EvalData] = None
    calibration_data: Optional[EvalData] = None
    finetune_data: Optional[EvalData] = None  # --finetune-data's samples (their labels are checked)
    finetune: Optional[FineTune] = None  # --finetune-data for the pruned level
    derived: dict[tuple[Path, str], ModelFile] = field(default_factory=dict)  # (file, level): one derivation

    @classmethod
    def begin(cls, config: RunConfig, progress: Optional[ProgressSink] = None,
             backend: Optional[Backend] = None) -> "Run":
        """Check everything that can be checked before a container starts (the predictor's data
        and cores, calibration records: exit 2 for bad input), then open the sandbox (``backend``:
        one to use instead of opening ``--backend``), check the images the runtimes need, and read
        the user's samples (exit 2 for bad data, before any model runs: an ImageFolder tree's
        images are decoded in one sandbox run of their own)."""
        store = run_store(cache_root(config.results.output), use_cache=not config.results.no_cache)
        calibrations = CalibrationSet(config.latency.calibrations, enabled=not config.latency.uncalibrated)
        # the sandbox, opened below once the inputs are checked (kinds that run in it see it then)
        session = Session(store, backend if backend is not None else config.sandbox.backend,
                          loading=config.inputs.loading, timeout_s=config.memory.timeout_s, slurm=_slurm(config),
                          on_status=progress.working_on if progress is not None else None)
        predictor = Predictor(predictor=config.latency.predictor, nnmeter_data=config.latency.nnmeter_data,
                              runtime=config.latency.latency_runtime, calibrations=calibrations, session=session,
                              breakdown=True)  # per-kernel figures: layers.csv and report.html's breakdown
        # fail fast: --predictor nn-meter without data, unknown cores (regressors load on a cache miss)
        predictor.require(config.profiles, load=False)
        calibrations.check()  # and on a calibration record that does not read
        run = cls(config, session, predictor, progress if progress is not None else NullProgress())
        if config.data.finetune_data is not None and "pruned" not in config.inputs.levels:
            raise InputError("--finetune-data fine-tunes the derived pruned level: add --levels pruned (or all)")
        opened = session.backend  # opened now
        run.warnings.extend(session.warnings)
        opened.sweep_stale()
        run._default_runtime(opened)
        for runtime in run.config.runtimes:  # a missing runtime or converter image stops the run before any work
            opened.identity_for(runtime)
        predictor.require(config.profiles, load=False)  # and what needs the sandbox (--predictor armsim: its image)
        run._check_data(store)
        return run

    def _check_data(self, store: ArtifactStore) -> None:
        """``--eval-data``, ``--finetune-data`` and ``--calib-data`` validated and normalised into the
        store before any model container starts: bad data is exit 2. A file is read here; an
        ImageFolder tree is walked here and its images decoded in one sandbox run. The eval (else
        the fine-tuning) samples' shape is the shape the rows are measured with when none is given."""
        data = self.config.data
        trees = [p for p in (data.eval_data, data.finetune_data, data.calib_data) if p is not None and p.is_dir()]
        if data.preprocessing != type(data.preprocessing)() and not trees:  # an option that would not apply
            given = ", ".join(str(p) for p in (data.eval_data, data.finetune_data, data.calib_data) if p is not None)
            raise InputError("--preprocess applies to an ImageFolder tree given as --eval-data, --finetune-data or "
                             "--calib-data; " + (f"{given} holds ready inputs (.npz), which are used as they are"
                                                 if given else "this run has no data") + ": drop --preprocess")
        images = ImageDecoding(self.session.client, data.preprocessing, self.config.memory.timeout_s)
        if data.eval_data is not None:
            self.eval_data = prepare_eval_data(data.eval_data, data.eval_limit, store, images=images)
        if data.finetune_data is not None:
            samples = prepare_eval_data(data.finetune_data, MAX_FINETUNE_SAMPLES, store, option="--finetune-data",
                                        images=images)
            self.finetune_data = samples
            self.finetune = FineTune(samples.path, samples.sha256, data.finetune_epochs, samples.describe())
        shaped = self.eval_data or self.finetune_data
        if shaped is not None and self.config.inputs.input_shape is None:
            source = SOURCE_EVAL_DATA if shaped is self.eval_data else SOURCE_FINETUNE_DATA
            self.config = self.config.with_options(input_shape=shaped.input_shape, input_shape_source=source)
        if data.calib_data is not None:
            self.calibration_data = prepare_calibration_data(data.calib_data, store, images=images)
            self.config = self.config.with_options(calibration_inputs=self.calibration_data.path)

    def user_names(self) -> dict[str, str]:
        """The store's copy of each data file the rows may name -> the user's own file name."""
        data = self.calibration_data
        return {data.path.name: data.source.name} if data is not None else {}

    def _default_runtime(self, backend: Backend) -> None:
        """Measure under torch when no ``--runtime`` was given and the backend cannot measure the
        default (the latency runtime: its image is not built, or the process backend's python
        lacks it), with a warning that says why; a runtime the user named stops the run instead."""
        if self.config.memory.runtimes:
            return
        wanted = self.config.latency.latency_runtime
        try:
            backend.identity_for(wanted)
        except LodevemError as exc:
            self.warnings.append(f"peak RAM measured under {FALLBACK}, not {wanted} (the runtime the latencies "
                                 f"stand for, the default): {exc}")
            self.config = self.config.with_options(runtimes=(FALLBACK,))

    # -- what the run owns ------------------------------------------------------------------------

    @property
    def store(self) -> ArtifactStore:
        return self.session.store

    def warn(self, message: str) -> None:
        """A run-level message, once."""
        if message not in self.warnings:
            self.warnings.append(message)

    def state(self, planned: Sequence[ModelFile]) -> RunState:
        """The rows an interrupted run of the same inputs finished (``--resume``), else a fresh
        state; refuses another run's results unless ``--overwrite``."""
        config = self.config
        key = config.state_key(planned, self.predictor.calibrations.digest(),
                               self.eval_data.sha256 if self.eval_data else "")
        return load_state(config.results.output, key, config.results.resume, self.warnings,
                          pairs={(m.label, p.id) for m in planned for p in config.profiles},
                          overwrite=config.results.overwrite, settings=self.comparable())

    def comparable(self) -> dict[str, Any]:
        """The settings another run must share to add its rows to this run's table."""
        return self.config.comparable(self.predictor.calibrations.digest(),
                                      self.eval_data.sha256 if self.eval_data else "")

    def manifest(self, models: Sequence[ModelFile]) -> Manifest:
        """The run's environment and inputs, for the JSON and the paper kit."""
        config, backend = self.config, self.session.backend
        finetune = self.finetune
        described = {  # the run's own parts, as they describe themselves: read into typed records
            "config": config.flat(), "settings": self.comparable(), "model_code": config.inputs.loading.describe(),
            "predictor": self.predictor.describe(), "calibrations": self.predictor.calibrations.describe(),
            "evaluation": self.eval_data.describe() if self.eval_data is not None else None,
            "int8_calibration": (self.calibration_data.describe() if self.calibration_data is not None
                                 else "32 seeded synthetic inputs (no --calib-data)"),
            "finetune": (f"{finetune.epochs} epoch(s) on {finetune.describe}" if finetune is not None
                         and "pruned" in config.inputs.levels else None)}
        run = RunDescription.from_dict(described, "this run's manifest")
        return collect_manifest(
            list(config.results.command_line), config.profiles,
            [{"label": m.label, "path": str(m.path), "sha256": m.sha256, "level": m.level} for m in models],
            image_id=backend.identity, backend=backend.name,
            runtimes={r: backend.identity_for(r) for r in config.runtimes},
            images=backend.image_ids() if hasattr(backend, "image_ids") else None, run=run,
            datasets=[DataSetEntry.of(d) for d in (self.eval_data, self.finetune_data, self.calibration_data)
                      if d is not None])


def _slurm(config: RunConfig) -> Optional[Any]:
    """Where ``--backend slurm`` submits; ``--resume`` also reattaches to its still-running jobs."""
    sandbox = config.sandbox
    if sandbox.backend != "slurm":
        return None
    from ..sandbox.slurm_backend import SlurmSettings

    return SlurmSettings(workdir=sandbox.slurm_workdir or config.results.output / ".slurm",
                         partition=sandbox.slurm_partition, account=sandbox.slurm_account,
                         time_min=sandbox.slurm_time, reattach=config.results.resume)
