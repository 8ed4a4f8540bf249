"""A row's fields come from the records by an explicit mapping (results.ROW_SOURCES): renaming a
field on a record or on the row must fail here, not silently empty a column (issue 29)."""

from __future__ import annotations

import typing
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest

from lodevem.latency.records import LatencyPrediction
from lodevem.profiles import Profile, load_profiles
from lodevem.results import (
    COMPUTED_ROW_FIELDS,
    DEVICE_ROW_FIELDS,
    ROW_SOURCES,
    ConvertedFile,
    HostTimings,
    MeasuredModel,
    MemoryMeasurement,
    ModelFile,
    PairResult,
    PeakMemory,
    SandboxFacts,
)
from lodevem.results.columns import COLUMNS
from lodevem.results.pair import source_value

RECORDS = {"ModelFile": ModelFile, "Profile": Profile, "LatencyPrediction": LatencyPrediction,
           "MemoryMeasurement": MemoryMeasurement}


def _names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)} if hasattr(cls, "__dataclass_fields__") else set(cls.model_fields)


def _is_field(cls: type, name: str) -> bool:
    """Whether ``name`` (``part.field`` for a field of a record's part) is a field of ``cls``."""
    head, _, rest = name.partition(".")
    if head not in _names(cls):
        return False
    if not rest:
        return True
    hint = typing.get_type_hints(cls)[head]
    part = next((a for a in typing.get_args(hint) if a is not type(None)), hint)  # Optional[Part]: the part
    return is_dataclass(part) and _is_field(part, rest)


def _covered(sources: dict[str, dict[str, str]]) -> list[str]:
    return ([row for mapping in sources.values() for row in mapping] + sorted(COMPUTED_ROW_FIELDS)
            + sorted(DEVICE_ROW_FIELDS))  # the phone's own figures (lodevem.device.rows)


def _problems(sources: dict[str, dict[str, str]], row_fields: set[str]) -> list[str]:
    found = [f"{cls}.{name} (for {row}) is not a field" for cls, mapping in sources.items()
             for row, name in mapping.items() if not _is_field(RECORDS[cls], name)]
    covered = _covered(sources)
    found += [f"{row} is filled twice" for row in sorted({r for r in covered if covered.count(r) > 1})]
    found += [f"{row} is not a row field" for row in sorted(set(covered) - row_fields)]
    found += [f"{row} is filled by nothing" for row in sorted(row_fields - set(covered))]
    return found


def test_every_row_field_has_exactly_one_source_and_every_source_exists() -> None:
    assert list(ROW_SOURCES) == list(RECORDS)  # from_records zips the records in this order
    assert _problems({k: dict(v) for k, v in ROW_SOURCES.items()}, set(COLUMNS)) == []


def test_a_renamed_field_on_either_side_is_caught() -> None:
    sources = {k: dict(v) for k, v in ROW_SOURCES.items()}
    renamed_record = {**sources, "LatencyPrediction": {**sources["LatencyPrediction"],
                                                       "latency_uncertainty": "uncertainty_text"}}
    assert _problems(renamed_record, set(COLUMNS)) == [
        "LatencyPrediction.uncertainty_text (for latency_uncertainty) is not a field"]
    renamed_part = {**sources, "MemoryMeasurement": {**sources["MemoryMeasurement"], "peak_rss_mb": "peak.hwm_mb"}}
    assert _problems(renamed_part, set(COLUMNS)) == ["MemoryMeasurement.peak.hwm_mb (for peak_rss_mb) is not a field"]
    row_fields = (set(COLUMNS) - {"memory_error"}) | {"memory_message"}
    assert _problems(sources, row_fields) == ["memory_error is not a row field", "memory_message is filled by nothing"]


def test_a_row_carries_each_record_value_to_its_column(tmp_path: Path) -> None:
    model_path = tmp_path / "m.onnx"
    model_path.write_bytes(b"not read here")
    model = replace(ModelFile.from_path(model_path, "m.onnx"), level="int8-static", precision="int8")
    profile = next(p for p in load_profiles() if p.id == "jiophone2")
    latency = LatencyPrediction(latency_ms=12.5, latency_source="estimator:v1", threads=1,
                                uncertainty="±20%", note="a note", core="Cortex-A53", clock_ghz=1.3,
                                calibrations=("x1.1",), latency_low_ms=10.0, latency_high_ms=15.0)
    memory = MemoryMeasurement(verdict="fits", limit_mb=512, runtime="torch", threads=1, error="memory says",
                               peak=PeakMemory(100.0, 60.0, 40.0, cgroup_mb=101.0), host=HostTimings(mean_ms=3.0),
                               sandbox=SandboxFacts(backend="docker", limit_enforcement="cgroup", image_id="img",
                                                    worker_version="w", wall_s=1.0),
                               model=MeasuredModel("0" * 64), converted=ConvertedFile(precision="int8", seconds=2.5),
                               cached=True, inferred_from_mb=1024)
    row = PairResult.from_records(model, profile, latency, memory, threads=1)
    for record in (model, profile, latency, memory):
        for column, name in ROW_SOURCES[type(record).__name__].items():
            assert row.to_dict()[column] == source_value(record, name), column
    assert (row.latency.uncertainty, row.memory.error, row.memory.cached) == ("±20%", "memory says", True)
    written = row.to_dict()
    assert (written["peak_rss_mb"], written["cgroup_peak_mb"], written["host_latency_mean_ms"], written["backend"]) == (
        100.0, 101.0, 3.0, "docker")
    assert (written["converted_precision"], written["conversion_s"], written["converted_scheme"]) == ("int8", 2.5, None)
    unconverted = PairResult.from_records(model, profile, latency, replace(memory, converted=None), threads=1).to_dict()
    assert (unconverted["converted_precision"], unconverted["conversion_s"], unconverted["converted_mb"]) == (
        None, None, None)


@pytest.mark.parametrize("cls", list(RECORDS.values()))
def test_the_records_are_typed_records(cls: type) -> None:
    assert _names(cls)
