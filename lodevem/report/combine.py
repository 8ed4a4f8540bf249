"""Runs combined into one table: a second ``start`` into a results folder, or ``lodevem report
DIR...`` over several folders.

Why: a researcher benchmarks the float file today and their own int8 file tomorrow, or splits
the models of a paper over two machines; the paper wants one table. Rows of runs can stand in
one table only when everything that shapes a figure is the same: the device profiles, the passes,
the runtimes, threads, the predictor, the input, the backend, the calibration records, the
calibration and evaluation data (``RunConfig.comparable``, kept in the state file and in the
manifest's ``extra.settings``, ``run_record.RunSettings``). When they differ, one line names each
difference (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError, LodevemError
from ..results import PairResult
from .files import JSON_NAME, read_json
from .manifest import Manifest, ManifestLike
from .run_record import CombinedRun

__all__ = ["SETTING_NAMES", "combine_folders", "differences", "merged_manifest", "merged_rows", "previous_manifest",
           "settings_of"]

# The settings two runs must share, in the words of the options that set them.
SETTING_NAMES: Mapping[str, str] = {
    "profiles": "device profiles", "warmup": "--warmup", "runs": "--runs", "runtime": "--runtime",
    "threads": "--threads", "predictor": "--predictor", "latency_runtime": "--latency-runtime",
    "input_shape": "input shape", "backend": "--backend", "calibrations": "calibration records",
    "calib_data": "--calib-data", "eval_data": "--eval-data", "code": "model code (--code/--arch)"}
# What a results file written before the manifest kept ``settings`` says of them (extra.config).
_FROM_CONFIG = {"warmup": "warmup", "runs": "runs", "threads": "threads", "predictor": "predictor",
                "latency_runtime": "latency_runtime", "backend": "backend"}


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "none"
    text = str(value)
    if text.startswith("["):  # the model code's key: its digest first
        text = text.strip('["').split('"')[0]
    return text[:12] if len(text) >= 32 and all(c in "0123456789abcdef" for c in text) else text  # a digest


def differences(here: Mapping[str, Any], there: Mapping[str, Any]) -> list[str]:
    """``--runs 3 here, 50 there`` for each setting that differs (``SETTING_NAMES`` order)."""
    return [f"{name} {_shown(here.get(key))} here, {_shown(there.get(key))} there"
            for key, name in SETTING_NAMES.items() if key in here and key in there and here[key] != there[key]]


def settings_of(manifest: ManifestLike) -> dict[str, Any]:
    """The settings a results file's manifest records (``extra.settings``; for a file written
    before it kept them, what its ``extra.config`` and profile list say)."""
    env = Manifest.coerce(manifest)
    if env.run.settings is not None:
        return env.run.settings.to_dict()
    config = env.run.config.to_dict() if env.run.config is not None else {}
    found: dict[str, Any] = {key: config[name] for key, name in _FROM_CONFIG.items() if config.get(name) is not None}
    found["profiles"] = sorted(p.id for p in env.profiles)
    return found


def merged_rows(runs: Sequence[Sequence[PairResult]]) -> list[PairResult]:
    """The rows of several runs as one table: models in the order first seen; a (model, device)
    pair in two runs is the later run's (the newer measurement of that file)."""
    by_key: dict[tuple[str, str], PairResult] = {}
    for rows in runs:
        for row in rows:
            by_key.pop(row.key, None)
            by_key[row.key] = row
    order = list(dict.fromkeys(row.model.label for rows in runs for row in rows))
    return sorted(by_key.values(), key=lambda r: order.index(r.model.label))


def merged_manifest(manifests: Sequence[ManifestLike]) -> Manifest:
    """One manifest for combined runs: the latest run's environment, every run's models (by label,
    the latest's entry for a label in two) and data sets, and each run's command and date in
    ``extra.combined`` (how to redo each part)."""
    envs = [Manifest.coerce(m) for m in manifests]
    last = envs[-1]
    models: dict[str, Mapping[str, Any]] = {}
    for env in envs:
        for model in env.models:
            models[str(model.get("label"))] = model
    datasets = {(d.option, d.samples_sha256): d for env in envs for d in env.datasets}
    runs: dict[tuple[str, tuple[str, ...]], CombinedRun] = {}  # the same run again is its latest
    for env in envs:
        for run in env.run.combined or (CombinedRun(env.command, env.created_utc,
                                                    tuple(str(m.get("label")) for m in env.models)),):
            runs.pop((run.command, run.models), None)
            runs[(run.command, run.models)] = run
    return replace(last, models=tuple(models.values()), datasets=tuple(datasets.values()),
                   run=replace(last.run, combined=tuple(runs.values())))


def combine_folders(folders: Sequence[Path]) -> tuple[list[PairResult], Manifest]:
    """The rows and manifest of several results folders (their ``benchmark_results.json``) as one
    run; ``InputError`` naming the folder and each setting that differs from the first's."""
    read: list[tuple[Path, list[PairResult], Manifest]] = []
    for folder in folders:
        source = Path(folder) / JSON_NAME
        if not source.is_file():
            raise InputError(f"{folder}: no {JSON_NAME} (expected the --output folder of a `lodevem start` run)")
        rows, environment = read_json(source)
        read.append((Path(folder), rows, Manifest.coerce(environment)))
    first = settings_of(read[0][2])
    for folder, _, env in read[1:]:
        differ = differences(settings_of(env), first)
        if differ:
            raise InputError(f"{folder}: other settings than {read[0][0]} ({'; '.join(differ)}); only runs with the "
                             "same settings share a table")
    return merged_rows([rows for _, rows, _ in read]), merged_manifest([env for _, _, env in read])


def previous_manifest(folder: Path) -> Optional[Manifest]:
    """The manifest of the results already in ``folder`` (None when it has none that reads)."""
    try:
        return Manifest.coerce(read_json(Path(folder) / JSON_NAME)[1])
    except (OSError, ValueError, LodevemError):
        return None

