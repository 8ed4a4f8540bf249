"""The manifest's run description is a typed record (issue 48): what ``lodevem start`` writes
under ``environment.extra`` reads back into the same ``RunDescription`` (``report.run_record``),
its JSON keys and values are the ones the options and settings of the run give, and a results
file whose description holds a wrong type is refused naming the file and the field."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from fakes import FakeBackend

from lodevem.errors import BadRecord
from lodevem.profiles import load_profiles, select_profiles
from lodevem.report.combine import combine_folders, merged_manifest, settings_of
from lodevem.report.manifest import Manifest
from lodevem.report.run_record import OPTION_ORDER, RunDescription, RunOptions, RunSettings
from lodevem.reporter import write_all
from lodevem.runner import RunConfig, run_benchmark

PROFILES = ("nokia_8110_4g", "nokia_c1")


def _run(tmp_path: Path, name: str, out: Path, **kw):
    model = tmp_path / "models" / name
    model.parent.mkdir(exist_ok=True)
    model.write_bytes(name.encode())
    profiles = tuple(select_profiles(load_profiles(), ids=PROFILES))
    config = RunConfig.of(models=(model,), profiles=profiles, output=out, jobs=1, runtimes=("torch",), **kw)
    outcome = run_benchmark(config, backend=FakeBackend(250.0))
    write_all(outcome.rows, profiles, outcome.manifest, out, plots=False)
    return config, outcome


def test_the_manifest_round_trips_through_its_typed_record(tmp_path: Path) -> None:
    config, outcome = _run(tmp_path, "net.pt", tmp_path / "out", threads=2, input_shape=(1, 3, 32, 32))
    written = json.loads((tmp_path / "out" / "benchmark_results.json").read_text())["environment"]
    extra = written["extra"]
    # the keys and values the outside world has always read, from the typed record
    assert list(extra) == ["config", "settings", "model_code", "predictor", "calibrations", "evaluation",
                           "int8_calibration", "finetune"]
    form = json.loads(json.dumps(outcome.manifest.to_dict()))
    assert form["extra"]["config"] == json.loads(json.dumps(config.flat()))  # every option, in its order
    assert list(extra["config"]) == list(OPTION_ORDER) and extra["config"]["output"] == "."  # the file: no path
    assert extra["settings"] == json.loads(json.dumps(outcome.manifest.run.settings.to_dict()))
    assert extra["settings"]["threads"] == 2 and extra["settings"]["input_shape"] == [1, 3, 32, 32]
    assert extra["model_code"] == {"code": [], "code_sha256": None, "arch": None, "arch_kwargs": None}
    # read back: the same typed record, whole, and written again the same
    assert Manifest.from_dict(form) == outcome.manifest
    again = Manifest.from_dict(written, "benchmark_results.json")
    assert json.loads(json.dumps(again.to_dict())) == written
    run = again.run
    assert run.config is not None and run.config.measure.threads == 2 and run.config.latency.predictor == "auto"
    assert run.settings is not None and run.settings.input_shape == (1, 3, 32, 32)
    assert settings_of(again)["threads"] == 2 and run.int8_calibration and run.combined == ()


def test_every_option_of_a_run_has_one_typed_field() -> None:
    """A new option of ``RunConfig`` must get its field here, or it would vanish from the manifest."""
    names = [f.name for part in fields(RunOptions) for f in fields(getattr(RunOptions(), part.name))]
    assert sorted(names) == sorted(OPTION_ORDER) and len(names) == len(set(names))
    flat = RunConfig.of(models=(), profiles=()).flat()
    assert list(flat) == list(OPTION_ORDER)
    assert RunOptions.from_dict(json.loads(json.dumps(flat)), "t").to_dict() == json.loads(json.dumps(flat))
    comparable = json.loads(json.dumps(RunConfig.of(models=(), profiles=(), input_shape=(1, 8)).comparable("c", "e")))
    assert RunSettings.from_dict(comparable, "t").to_dict() == comparable  # every setting, no other


def test_combined_runs_are_typed_records(tmp_path: Path) -> None:
    _run(tmp_path, "a.pt", tmp_path / "a")
    _run(tmp_path, "b.pt", tmp_path / "b")
    _, manifest = combine_folders([tmp_path / "a", tmp_path / "b"])
    assert [run.models for run in manifest.run.combined] == [("a.pt",), ("b.pt",)]
    merged = merged_manifest([manifest, manifest])  # the same runs again: no duplicates
    assert [run.models for run in merged.run.combined] == [("a.pt",), ("b.pt",)]
    assert Manifest.from_dict(json.loads(json.dumps(merged.to_dict()))) == merged


def test_an_older_manifest_without_settings_compares_by_its_config() -> None:
    stored = json.loads((Path(__file__).parent / "data" / "report_run" / "benchmark_results.json").read_text())
    env = Manifest.from_dict(stored["environment"], "stored")
    assert env.run.settings is None and env.run.config is not None
    found = settings_of(env)
    assert (found["warmup"], found["runs"], found["threads"], found["latency_runtime"]) == (5, 50, 1, "tflite")


@pytest.mark.parametrize("extra,field", [
    ({"config": {"runs": "many"}}, "environment.extra.config.runs"),
    ({"settings": {"profiles": "tier2"}}, "environment.extra.settings.profiles"),
    ({"calibrations": {"enabled": "yes"}}, "environment.extra.calibrations.enabled"),
    ({"finetune": 3}, "environment.extra.finetune"),
])
def test_a_wrong_typed_field_is_refused_naming_the_file(extra: dict, field: str) -> None:
    with pytest.raises(BadRecord) as caught:
        Manifest.from_dict({"extra": extra}, "run/benchmark_results.json", prefix="environment.")
    message = str(caught.value)
    assert message.startswith("run/benchmark_results.json: ") and f"field '{field}'" in message, message
    assert "\n" not in message
    assert RunDescription.from_dict(None, "x") == RunDescription()  # no block at all: an empty description


def test_the_records_of_the_measurement_and_the_manifest_are_small() -> None:
    """Issue 48: no record over 30 fields (the options of a run: four parts, not one of 32)."""
    import inspect
    from dataclasses import is_dataclass

    from lodevem.report import manifest, run_record
    from lodevem.results import measurements

    records = [obj for module in (measurements, manifest, run_record) for _, obj in inspect.getmembers(module)
               if inspect.isclass(obj) and is_dataclass(obj) and obj.__module__ == module.__name__]
    assert len(records) >= 15
    assert [(r.__name__, len(fields(r))) for r in records if len(fields(r)) > 30] == []
