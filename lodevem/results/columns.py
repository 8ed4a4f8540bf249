"""The one mapping between a row's typed parts and its CSV / JSON columns, both ways.

Why one home: the columns are what every results file already holds and every reader of one
parses (their names, order and values are pinned by tests/test_row_columns.py), while the row
record is grouped into parts (``results.row_parts``). Writing flattens the parts here
(``row_columns``); reading a file back (``lodevem report DIR``, a run state for --resume, combined
runs) builds the parts here (``row_parts``). The three columns that hold facts as text (the
memory fallback in ``memory_runtime``, the ``"; "``-joined ``latency_note`` / ``memory_note``) are
written from the facts and read back into them here, and nowhere else.
"""

from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass, replace
from enum import Enum
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Protocol

from ..errors import BadRecord
from ..runtimes.logs import OpTime
from .row_parts import (
    FALLBACK_MARK,
    LatencyBand,
    PhoneMeasurement,
    RowAccuracy,
    RowConverted,
    RowDevice,
    RowHost,
    RowLatency,
    RowMemory,
    RowModel,
)


class Row(Protocol):
    """The parts a row is flattened from (``results.pair.PairResult``, which imports this module)."""

    @property
    def model(self) -> RowModel: ...

    @property
    def device(self) -> RowDevice: ...

    @property
    def latency(self) -> RowLatency: ...

    @property
    def memory(self) -> RowMemory: ...

    @property
    def host(self) -> RowHost: ...

    @property
    def accuracy(self) -> RowAccuracy: ...

    @property
    def phone(self) -> Optional[PhoneMeasurement]: ...

__all__ = ["COLUMNS", "FACT_COLUMNS", "NOTE_SEPARATOR", "PART_COLUMNS", "REQUIRED_COLUMNS", "clauses", "map_text",
           "op_profile_text", "row_columns", "row_parts"]

NOTE_SEPARATOR = "; "  # between the clauses of one text cell (notes, calibrations, an op profile)

# Column -> attribute of its part, per part (the part's name in ``PairResult``; "latency.band":
# the band inside the latency part). Every column but the FACT_COLUMNS and the two computed ones.
PART_COLUMNS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "model": MappingProxyType({
        "model_label": "label", "model_path": "path", "model_sha256": "sha256", "level": "level",
        "model_format": "format", "model_file_mb": "file_mb", "params": "params", "model_class": "class_name",
        "precision": "precision", "quantization": "quantization", "variant_of": "variant_of",
        "input_shape": "input_shape", "input_shape_source": "input_shape_source", "sparsity": "sparsity",
        "zero_channels": "zero_channels"}),
    "device": MappingProxyType({
        "profile_id": "profile_id", "profile_label": "label", "tier": "tier", "chipset": "chipset",
        "ram_mb": "ram_mb", "core": "core", "clock_ghz": "clock_ghz", "threads": "threads",
        "app_budget_mb": "app_budget_mb", "power_w": "power_w", "power_source": "power_source"}),
    "latency": MappingProxyType({
        "latency_ms": "ms", "latency_source": "source", "latency_uncertainty": "uncertainty",
        "latency_kind": "kind", "latency_runtime": "runtime", "latency_calibrations": "calibrations",
        "latency_if_channels_removed_ms": "if_channels_removed_ms", "energy_mj": "energy_mj"}),
    "latency.band": MappingProxyType({
        "latency_low_ms": "low_ms", "latency_high_ms": "high_ms", "latency_held_out_pct": "held_out_pct",
        "latency_held_out_rows": "held_out_rows", "latency_held_out_socs": "held_out_socs",
        "latency_held_out_pool": "held_out_pool"}),
    "memory": MappingProxyType({
        "verdict": "verdict", "peak_rss_mb": "peak_rss_mb", "runtime_baseline_mb": "runtime_baseline_mb",
        "model_increment_mb": "model_increment_mb", "cgroup_peak_mb": "cgroup_peak_mb", "limit_mb": "limit_mb",
        "limit_enforcement": "limit_enforcement", "backend": "backend", "runtime": "runtime",
        "memory_error": "error", "memory_cached": "cached", "memory_inferred_from_mb": "inferred_from_mb",
        "headroom_mb": "headroom_mb", "min_ram_mb": "min_ram_mb"}),
    "memory.converted": MappingProxyType({
        "converted_mb": "mb", "converted_precision": "precision", "converted_scheme": "scheme",
        "conversion_s": "conversion_s"}),
    "host": MappingProxyType({
        "host_latency_mean_ms": "mean_ms", "host_latency_std_ms": "std_ms", "host_latency_p50_ms": "p50_ms",
        "host_latency_p95_ms": "p95_ms", "host_throughput_ips": "throughput_ips",
        "host_latency_unstable": "unstable"}),
    "accuracy": MappingProxyType({
        "accuracy_top1_pct": "top1_pct", "accuracy_top5_pct": "top5_pct", "accuracy_drop_pts": "drop_pts",
        "accuracy_samples": "samples", "accuracy_note": "note"}),
    "phone": MappingProxyType({
        "measured_on": "measured_on", "device_runs": "runs", "device_latency_min_ms": "latency_min_ms",
        "device_latency_max_ms": "latency_max_ms", "device_latency_std_ms": "latency_std_ms",
        "device_latency_p50_ms": "latency_p50_ms", "device_peak_mb": "peak_mb", "device_op_profile": "op_profile",
        "device_runtime_version": "runtime_version", "device_binary_sha256": "binary_sha256"}),
})
_CLASSES: Mapping[str, type] = MappingProxyType({
    "model": RowModel, "device": RowDevice, "latency": RowLatency, "latency.band": LatencyBand,
    "memory": RowMemory, "memory.converted": RowConverted, "host": RowHost, "accuracy": RowAccuracy,
    "phone": PhoneMeasurement})
# The columns that write a fact as text: column -> the facts (part.attribute) it is written from.
FACT_COLUMNS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "latency_note": ("latency.notes",), "memory_runtime": ("memory.runtime", "memory.fallback"),
    "memory_note": ("memory.notes",)})

# Every column, in the order the CSV and each JSON row have always had them (then the row's own
# ``fits`` and ``failure_reason``, which ``PairResult.to_dict`` adds).
COLUMNS: tuple[str, ...] = (
    "model_label", "model_path", "model_sha256", "level", "model_format", "model_file_mb", "params", "profile_id",
    "profile_label", "tier", "chipset", "ram_mb", "core", "clock_ghz", "threads", "latency_ms", "latency_source",
    "latency_uncertainty", "latency_note", "verdict", "peak_rss_mb", "runtime_baseline_mb", "model_increment_mb",
    "cgroup_peak_mb", "limit_mb", "limit_enforcement", "backend", "runtime", "memory_error", "memory_cached",
    "host_latency_mean_ms", "host_latency_std_ms", "host_latency_p50_ms", "host_latency_p95_ms",
    "host_throughput_ips", "host_latency_unstable", "power_w", "energy_mj", "min_ram_mb", "model_class", "sparsity",
    "zero_channels", "latency_if_channels_removed_ms", "precision", "quantization", "variant_of",
    "latency_calibrations", "app_budget_mb", "headroom_mb", "input_shape", "input_shape_source", "latency_low_ms",
    "latency_high_ms", "latency_kind", "latency_runtime", "latency_held_out_pct", "latency_held_out_rows",
    "latency_held_out_socs", "latency_held_out_pool", "memory_inferred_from_mb", "memory_runtime", "memory_note",
    "converted_mb", "converted_precision", "converted_scheme", "conversion_s", "accuracy_top1_pct",
    "accuracy_top5_pct", "accuracy_drop_pts", "accuracy_samples", "accuracy_note", "power_source", "measured_on",
    "device_runs", "device_latency_min_ms", "device_latency_max_ms", "device_latency_std_ms",
    "device_latency_p50_ms", "device_peak_mb", "device_op_profile", "device_runtime_version",
    "device_binary_sha256")
# The columns a row read back must have (every results file has had them): BadRecord otherwise.
REQUIRED_COLUMNS = COLUMNS[:COLUMNS.index("memory_cached") + 1]


def _joined(notes: tuple[str, ...]) -> Optional[str]:
    return NOTE_SEPARATOR.join(notes) or None


def clauses(*notes: Optional[str]) -> tuple[str, ...]:
    """Notes as the clauses a cell holds, one each: what a text cell splits into when read back,
    so a row made in this run and one read from its file hold the same notes."""
    text = NOTE_SEPARATOR.join(n for n in notes if n)
    return tuple(part for part in text.split(NOTE_SEPARATOR) if part) if text else ()


def row_columns(row: Row) -> dict[str, Any]:
    """The row's columns in ``COLUMNS`` order: each part's attributes under their column names,
    the facts written as the text those columns have always held. ``device_op_profile`` holds one
    mapping per node type (the JSON's form; the CSV writes each as its text)."""
    parts: dict[str, Any] = {"model": row.model, "device": row.device, "latency": row.latency,
                             "latency.band": row.latency.band, "memory": row.memory,
                             "memory.converted": row.memory.converted, "host": row.host, "accuracy": row.accuracy,
                             "phone": row.phone or PhoneMeasurement()}
    values = {column: getattr(parts[part], attr) for part, mapping in PART_COLUMNS.items()
              for column, attr in mapping.items()}
    memory = row.memory
    values.update(
        latency_note=_joined(row.latency.notes), memory_note=_joined(memory.notes),
        memory_runtime=memory.runtime_shown if memory.fallback is not None else None,
        device_op_profile=tuple(asdict(op) for op in values["device_op_profile"]))
    return {column: values[column] for column in COLUMNS}


def map_text(part: Any, change: Callable[[Any], Any]) -> Any:
    """``part`` (the row or one of its parts) with ``change`` applied to every text and tuple of
    text in it, part by part (a shared file's scrubbing, the methods' inert strings); enums and
    figures as they are."""
    changes = {}
    for f in fields(part):
        value = getattr(part, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            changes[f.name] = map_text(value, change)
        elif isinstance(value, (str, tuple)) and not isinstance(value, Enum):
            changes[f.name] = change(value)
    return replace(part, **changes)


def _checked(part: str, values: Mapping[str, Any], where: str, prefix: str, extra: Mapping[str, Any] = {}) -> Any:
    """The part read from its columns (``safe_io.records.typed``): a bad value is named by its column."""
    from ..safe_io.records import typed

    mapping = PART_COLUMNS[part]
    data = {attr: values[column] for column, attr in mapping.items() if column in values}
    try:
        return typed(_CLASSES[part], data, where, prefix=prefix, extra=extra)
    except BadRecord as exc:
        column = next((c for c, attr in mapping.items() if prefix + attr == exc.field), exc.field[len(prefix):])
        raise BadRecord(where, prefix + column, exc.problem) from None


def row_parts(values: Mapping[str, Any], where: str = "a results row", prefix: str = "") -> dict[str, Any]:
    """``PairResult``'s parts from a row's columns read back (every value typed and range-checked:
    ``BadRecord`` names ``where`` and the column); unknown columns are ignored (another version's)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in values]
    if missing:
        raise BadRecord(where, prefix + missing[0], "missing")
    text = {c: values.get(c) for c in FACT_COLUMNS}
    for column, value in text.items():
        if value is not None and not isinstance(value, str):
            raise BadRecord(where, prefix + column, "expected text or null")
    runtime = text["memory_runtime"]
    fallback = None if runtime is None else runtime.endswith(FALLBACK_MARK)
    latency = _checked("latency", values, where, prefix, extra={
        "band": _checked("latency.band", values, where, prefix), "notes": clauses(text["latency_note"])})
    memory = _checked("memory", values, where, prefix, extra={
        "converted": _checked("memory.converted", values, where, prefix), "fallback": fallback,
        "notes": clauses(text["memory_note"])})
    phone_columns = {c: values[c] for c in PART_COLUMNS["phone"] if values.get(c) not in (None, [], ())}
    phone: Optional[PhoneMeasurement] = (_checked("phone", phone_columns, where, prefix) if phone_columns
                                         else None)
    return {"model": _checked("model", values, where, prefix), "device": _checked("device", values, where, prefix),
            "latency": latency, "memory": memory, "host": _checked("host", values, where, prefix),
            "accuracy": _checked("accuracy", values, where, prefix), "phone": phone}


def op_profile_text(profile: tuple[OpTime, ...]) -> tuple[str, ...]:
    """The CSV's ``device_op_profile``: one "CONV_2D x36 20.42 ms (71.2%)" per node type."""
    return tuple(map(str, profile))
