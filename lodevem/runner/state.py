"""What a run keeps so that an interrupt loses nothing: the state file (``RunState``: finished
rows and the key they belong to) and the ``Recorder`` that turns each finished measurement into
rows and saves state, CSV and JSON atomically after each fresh one; ``--resume`` reads the state
back (``load_state``) and measures only what is missing."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..errors import InputError
from ..report.combine import differences
from ..report.files import CSV_NAME, JSON_NAME, write_csv, write_json, write_json_file
from ..results import RESULTS_SCHEMA_VERSION, Accuracy, MemoryMeasurement, ModelFile, PairResult
from ..safe_io import RESULTS_FILE, UnsafeInput, read_bytes
from ..safe_io.records import BadRecord, parse_json

if TYPE_CHECKING:
    from ..latency.records import LatencyPrediction
    from ..profiles import Profile
    from ..progress import ProgressSink
    from ..report.manifest import Manifest

__all__ = ["STATE_FILE", "Recorder", "RunState", "interrupted_note", "load_state"]

STATE_FILE = ".lodevem-state.json"


@dataclass
class RunState:
    """What an interrupted run has finished, written atomically after every pair."""

    config_key: str
    rows: list[PairResult] = field(default_factory=list)
    # the settings rows must share to stand in one table (RunConfig.comparable): a later run of
    # other models with the same settings adds its rows to these (report.combine)
    settings: dict[str, Any] = field(default_factory=dict)

    def done(self) -> set[tuple[str, str]]:
        return {r.key for r in self.rows}

    def save(self, path: Path) -> None:
        payload = {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "config_key": self.config_key,
            "settings": self.settings,
            "rows": [r.to_dict() for r in self.rows],
        }
        write_json_file(path, payload, indent=1)

    @classmethod
    def load(cls, path: Path) -> Optional["RunState"]:
        """The saved state; None when there is none. A file that is not a state lodevem wrote
        (garbage, another schema, a row missing fields) raises ``InputError`` saying what."""
        if not os.path.lexists(path):
            return None
        try:  # a regular file in the folder (a link is refused, never followed), size-capped
            data = read_bytes(path, RESULTS_FILE, follow=False)
        except UnsafeInput as exc:
            raise InputError(f"{path}: unreadable run state ({exc.detail})") from None
        where = str(path)
        try:
            payload = parse_json(data, where)  # bounded depth, no NaN: BadRecord names the field
            if not isinstance(payload, dict) or payload.get("schema_version") != RESULTS_SCHEMA_VERSION:
                raise BadRecord(where, "schema_version", f"not a schema {RESULTS_SCHEMA_VERSION} run state")
            rows, key = payload.get("rows"), payload.get("config_key")
            if not isinstance(key, str):
                raise BadRecord(where, "config_key", "expected text")
            if not isinstance(rows, list):
                raise BadRecord(where, "rows", "expected a list")
            settings = payload.get("settings")
            return cls(key, [PairResult.from_dict(r, where, prefix=f"rows[{i}].") for i, r in enumerate(rows)],
                       dict(settings) if isinstance(settings, dict) else {})
        except BadRecord as exc:
            field = f"field '{exc.field}': " if exc.field else ""
            raise InputError(f"{exc.where}: not a run state lodevem wrote ({field}{exc.problem})") from None



def interrupted_note(output: Path, started: float) -> str:
    """What an interrupted ``start`` kept: the pairs saved in this run's state file (one written
    since ``started``), and how to go on."""
    from ..errors import LodevemError

    state_path = output / STATE_FILE
    try:
        state = RunState.load(state_path) if state_path.stat().st_mtime >= started else None
    except (OSError, LodevemError):
        state = None
    if state is None or not state.rows:
        return "No pair had finished: nothing was saved; run the same command again to start over."
    return (f"{len(state.rows)} pair(s) finished and saved in {output}; continue with the same command and "
            "--resume.")


def load_state(output: Path, key: str, resume: bool, warnings: list[str],
               pairs: Optional[set[tuple[str, str]]] = None, overwrite: bool = False,
               settings: Optional[dict[str, Any]] = None) -> RunState:
    """The finished rows to keep: those of an interrupted run with the same key under --resume,
    and the rows of other models a run with the same ``settings`` left in the folder (this run's
    rows join them in one table: ``report.combine``).

    A folder holding a run with other settings refuses, naming each difference, unless
    ``overwrite`` (``refuse_other_run``); a state file lodevem cannot read is set aside under a
    new name under ``--resume``, with a warning, and the run starts afresh. ``pairs``: the
    (model, profile) pairs of this run.
    """
    settings = settings or {}
    if not resume:
        kept = refuse_other_run(Path(output), key, pairs, overwrite, settings) if pairs is not None else []
        return RunState(key, kept, settings)
    path = Path(output) / STATE_FILE
    try:
        state = RunState.load(path)
    except InputError as exc:
        aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
        path.rename(aside)
        warnings.append(f"--resume: {exc}; kept it as {aside.name} and started afresh")
        return RunState(key, settings=settings)
    if state is None:
        return RunState(key, settings=settings)
    if state.config_key == key:
        state.settings = state.settings or settings
        return state
    if state.settings and settings and not differences(settings, state.settings):
        return RunState(key, _other_models(state, pairs), settings)
    raise InputError(f"--resume: {output} holds an interrupted run "
                     + (f"with other settings ({'; '.join(differences(settings, state.settings))})"
                        if state.settings and settings else "of other models or options")
                     + "; resume it with the same command, run without --resume to start afresh, or choose "
                     "another --output")


def _other_models(state: RunState, pairs: Optional[set[tuple[str, str]]]) -> list[PairResult]:
    """The rows of ``state`` of models this run does not have (its own are measured again, most
    from the cache)."""
    labels = {label for label, _ in pairs or ()}
    return [r for r in state.rows if r.model.label not in labels]


def refuse_other_run(output: Path, key: str, pairs: set[tuple[str, str]], overwrite: bool = False,
                     settings: Optional[dict[str, Any]] = None) -> list[PairResult]:
    """The rows of other models to keep from the run already in ``output``: none when it is empty,
    the same run again, or ``overwrite``; its rows of other models when its settings are this
    run's (a second ``start`` adds its models to the table). A run with other settings refuses,
    naming each difference: its rows would be replaced silently (a second ``start`` once turned
    an 8-row CSV into a 4-row one without a word), or stand beside rows they cannot be compared with.
    """
    present = [name for name in (CSV_NAME, JSON_NAME, STATE_FILE) if os.path.lexists(output / name)]
    if overwrite or not present:
        return []
    try:
        state = RunState.load(output / STATE_FILE)
    except InputError:
        state = None
    if state is not None and state.config_key == key and state.done() <= pairs:
        return []
    if state is not None and state.settings and settings:
        differ = differences(settings, state.settings)
        if not differ:
            return _other_models(state, pairs)
        raise InputError(f"--output {output} holds a run with other settings ({'; '.join(differ)}); add models to "
                         "it with the same settings, choose a new --output, or pass --overwrite to replace it")
    held = f"{len(state.rows)} rows" if state is not None else ", ".join(present)
    raise InputError(f"--output {output} holds the results of another run ({held}); continue it with --resume, "
                     "choose a new --output, or pass --overwrite to replace them")


def in_user_words(memory: MemoryMeasurement, names: dict[str, str]) -> MemoryMeasurement:
    """``memory`` with every store file name in its note and scheme replaced by the user's name."""

    def user_words(text: Optional[str]) -> Optional[str]:
        for stored, user in names.items():
            text = text.replace(stored, user) if text else text
        return text

    converted = memory.converted
    if converted is not None and user_words(converted.scheme) != converted.scheme:
        converted = dataclasses.replace(converted, scheme=user_words(converted.scheme))
    note = user_words(memory.note)
    if converted is memory.converted and note == memory.note:
        return memory
    return dataclasses.replace(memory, converted=converted, note=note)


class Recorder:
    """Turns each finished measurement into rows for every profile with that RAM limit, then saves
    the state and rewrites the CSV and JSON atomically, before reporting progress: an interrupt
    loses nothing and leaves a valid partial table."""

    def __init__(self, output: Path, profiles: Sequence["Profile"], threads: int, progress: "ProgressSink",
                 models: Sequence[ModelFile], latencies: dict[str, dict[str, "LatencyPrediction"]],
                 floors: dict[str, Optional[int]], state: RunState, manifest: "Manifest",
                 channels_removed: Optional[dict[str, dict[str, Optional[float]]]] = None,
                 accuracies: Optional[dict[str, Accuracy]] = None, user_names: Optional[dict[str, str]] = None
                 ) -> None:
        # the store's file name -> the user's (a --calib-data copy is "<digest>-256-calibration.npz"
        # in the store; a row says "calib.npz", the name the user knows)
        self.user_names = dict(user_names or {})
        self.output, self.profiles, self.threads, self.progress = Path(output), tuple(profiles), threads, progress
        self.accuracies = accuracies or {}  # by model label (--eval-data; lodevem.accuracy)
        self.latencies, self.floors, self.state, self.manifest = latencies, floors, state, manifest
        self.channels_removed = channels_removed or {}
        self.models = {m.label: m for m in models}
        self.done = state.done()
        self.by_limit: dict[int, list[Profile]] = {}
        for profile in self.profiles:
            self.by_limit.setdefault(profile.ram_mb, []).append(profile)
        self._unsaved = False
        self._order = {p.id: i for i, p in enumerate(self.profiles)}
        self._model_order = {m.label: i for i, m in enumerate(models)}

    def pending(self, label: str) -> list[Profile]:
        return [p for p in self.profiles if (label, p.id) not in self.done]

    def rows(self) -> list[PairResult]:
        """The table: the rows of other models an earlier run with the same settings left (first,
        as they were), then this run's in (model, profile) order; rows of other profiles in the
        state are left out."""
        kept = [r for r in self.state.rows
                if r.device.profile_id in self._order and r.model.label not in self._model_order]
        return kept + sorted((r for r in self.state.rows
                              if r.device.profile_id in self._order and r.model.label in self._model_order),
                             key=lambda r: (self._model_order[r.model.label], self._order[r.device.profile_id]))

    @property
    def combined(self) -> bool:
        """Whether the table holds rows of an earlier run (``rows``)."""
        return any(r.model.label not in self._model_order for r in self.state.rows)

    def __call__(self, label: str, limit_mb: int, memory: MemoryMeasurement) -> None:
        finished = [p for p in self.by_limit[limit_mb] if (label, p.id) not in self.done]
        memory = in_user_words(memory, self.user_names)
        for profile in finished:
            self.state.rows.append(PairResult.from_records(
                self.models[label], profile, self.latencies[label][profile.id], memory,
                threads=self.threads, floor_mb=self.floors.get(label),
                channels_removed_ms=self.channels_removed.get(label, {}).get(profile.id),
                accuracy=self.accuracies.get(label)))
            self.done.add((label, profile.id))
        # A measurement served from the cache is not lost by an interrupt (the cache has it), so
        # its rows are written with the next fresh one or by ``flush``: a fully cached rerun writes
        # the files once instead of once per measurement.
        self._unsaved = True
        if not memory.cached:
            self.flush()
        for profile in finished:
            self.progress.pair_done(label, profile.label)

    def flush(self) -> None:
        """Save the state and rewrite the CSV and JSON, if a row was added since the last save."""
        if not self._unsaved:
            return
        rows = self.rows()
        # kept in the table's order (rows of other profiles after): a later run of other models
        # that joins this table keeps these rows in this order (report.combine)
        shown = {r.key for r in rows}
        self.state.rows = rows + [r for r in self.state.rows if r.key not in shown]
        self.state.save(self.output / STATE_FILE)
        write_csv(rows, self.output / CSV_NAME)
        write_json(rows, self.manifest, self.output / JSON_NAME)
        self._unsaved = False


