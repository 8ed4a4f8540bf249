"""``PairResult``: one (model file x device profile) row in typed parts, and the written mapping
from each record to its columns (the parts' own mapping to the CSV / JSON: ``results.columns``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..wire.registry import only_runtime_predicted_by
from ..wire.verdict import Verdict
from .columns import PART_COLUMNS, clauses, row_columns, row_parts
from .failures import failure_reason
from .measurements import Accuracy, MemoryMeasurement
from .model_file import ModelFile
from .notes import quantization_note, sparsity_note, unstable
from .row_parts import (
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

if TYPE_CHECKING:
    from ..latency.records import LatencyPrediction
    from ..profiles import Profile


def budget_verdict(measured: Verdict, peak_mb: Optional[float], app_budget_mb: Optional[int]) -> Verdict:
    """The row's verdict from the measurement's (shared by every profile with the same RAM) and
    the profile's app budget: a run that fit the RAM limit with a peak above the budget is
    ``tight``. Without a budget (a user's profile without one) the measurement's verdict stands."""
    if measured == Verdict.FITS and peak_mb is not None and app_budget_mb is not None and peak_mb > app_budget_mb:
        return Verdict.TIGHT
    return Verdict(measured)


@dataclass(frozen=True)
class PairResult:
    """One row of the results: a model file on one device profile, in typed parts
    (``results.row_parts``); ``to_dict`` / ``from_dict`` are its CSV / JSON columns (``results.columns``)."""

    model: RowModel
    device: RowDevice
    latency: RowLatency  # predicted for the device's CPU, never measured on it (but ``phone``)
    memory: RowMemory  # measured for real under the device's RAM limit
    host: RowHost = field(default_factory=RowHost)
    accuracy: RowAccuracy = field(default_factory=RowAccuracy)
    phone: Optional[PhoneMeasurement] = None  # measured on a phone over adb (lodevem.device.rows)

    @classmethod
    def from_records(cls, model: ModelFile, profile: "Profile", latency: "LatencyPrediction",
                     memory: MemoryMeasurement, *, threads: int, floor_mb: Optional[int] = None,
                     channels_removed_ms: Optional[float] = None, accuracy: Optional[Accuracy] = None
                     ) -> "PairResult":
        """One row from the records it shows: each column either copied from the record field
        ``ROW_SOURCES`` names, or computed here from several (``COMPUTED_ROW_FIELDS``; the accuracy
        cells from ``accuracy``, the --eval-data record of this file and runtime)."""
        values: dict[str, Any] = {row: source_value(record, name)
                                  for record, mapping in zip((model, profile, latency, memory), ROW_SOURCES.values())
                                  for row, name in mapping.items()}
        energy = (latency.latency_ms * profile.power_w
                  if latency.latency_ms is not None and profile.power_w is not None else None)
        found = model.sparsity
        accuracy = accuracy if accuracy is not None else Accuracy()
        values.update(
            model_path=str(model.path), model_file_mb=round(model.size_bytes / 2**20, 3), threads=threads,
            # the measured file's own figures win (a variant's, not its original's)
            model_format=memory.model.format or model.format,
            params=memory.model.params if memory.model.params is not None else model.params,
            core=latency.core or profile.fastest_cluster.core,
            clock_ghz=latency.clock_ghz or profile.fastest_cluster.clock_ghz,
            # the measurement is shared by every profile with this RAM; the budget is the profile's own
            verdict=budget_verdict(memory.verdict, memory.peak.rss_mb, profile.app_budget_mb),
            headroom_mb=(round(profile.app_budget_mb - memory.peak.rss_mb, 1)
                         if profile.app_budget_mb is not None and memory.peak.rss_mb is not None
                         and memory.verdict == Verdict.FITS else None),
            input_shape="x".join(map(str, model.input_shape)) if model.input_shape else None,
            host_latency_unstable=unstable(memory.host.mean_ms, memory.host.std_ms),
            energy_mj=energy, min_ram_mb=floor_mb, model_class=model.class_name,
            converted_mb=(round(memory.converted.size_bytes / 2**20, 3)
                          if memory.converted is not None and memory.converted.size_bytes is not None else None),
            sparsity=found.zero_fraction if found else None, zero_channels=found.zero_channels if found else None,
            latency_if_channels_removed_ms=channels_removed_ms,
            accuracy_top1_pct=accuracy.top1_pct, accuracy_top5_pct=accuracy.top5_pct,
            accuracy_drop_pts=accuracy.drop_pts, accuracy_samples=accuracy.samples, accuracy_note=accuracy.note)
        parts = {part: {attr: values[column] for column, attr in mapping.items() if column in values}
                 for part, mapping in PART_COLUMNS.items()}
        band = LatencyBand(**parts["latency.band"])
        notes = clauses(latency.note, sparsity_note(found, model.channels_removed_graph is not None),
                        quantization_note(model.precision, model.precision_by_class))
        fallback = memory.fallback.text if memory.fallback else None
        return cls(
            model=RowModel(**parts["model"]), device=RowDevice(**parts["device"]),
            latency=RowLatency(**parts["latency"], band=band, notes=notes),
            memory=RowMemory(**parts["memory"], converted=RowConverted(**parts["memory.converted"]),
                             fallback=bool(memory.fallback), notes=clauses(fallback, memory.note)),
            host=RowHost(**parts["host"]), accuracy=RowAccuracy(**parts["accuracy"]))

    @property
    def verdict(self) -> Verdict:
        """The memory verdict against the device's app budget (``RowMemory.verdict``)."""
        return self.memory.verdict

    @property
    def fits(self) -> Optional[bool]:
        """True when it ran within the app budget; False when over it (tight) or when it did not
        complete under the RAM limit; None when it could not run (``Verdict.fits``)."""
        return self.memory.verdict.fits

    @property
    def ran(self) -> bool:
        """True when the model completed under the RAM limit (fits or tight): its peak is a figure."""
        return self.memory.verdict.ran

    @property
    def key(self) -> tuple[str, str]:
        return (self.model.label, self.device.profile_id)

    def to_dict(self) -> dict[str, Any]:
        """The row's columns (``results.columns``), then ``fits`` and ``failure_reason``."""
        data = row_columns(self)
        data["fits"] = self.fits
        data["failure_reason"] = failure_reason(self) or None
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "a results row", prefix: str = "") -> "PairResult":
        """A row read back (a results file, a run state): every column typed and range-checked
        (``results.columns.row_parts``); ``BadRecord`` names ``where`` and the column otherwise."""
        from ..safe_io.records import BadRecord

        if not isinstance(data, dict):
            raise BadRecord(where, prefix.rstrip("."), "expected an object")
        values = dict(data)
        if "latency_kind" not in data:  # a results file written before rows carried their kind
            values.update(_legacy_latency_fields(data))
        if isinstance(values.get("latency_calibrations"), str):  # the CSV's "; "-joined text
            values["latency_calibrations"] = values["latency_calibrations"].split("; ")
        elif values.get("latency_calibrations") is None:
            values.pop("latency_calibrations", None)
        # device_op_profile: JSON holds one object per node type (OpTime, checked field by field);
        # the CSV's text form is not read back.
        if isinstance(values.get("device_op_profile"), str):
            values.pop("device_op_profile")
        return cls(**row_parts(values, where, prefix))


def _legacy_latency_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The kind and runtime of a row read from a results file older than those fields: the one
    place the ``latency_source`` text is read, and only for such files (``estimator:v2 tflite
    (...)``, ``armsim:v2 ncnn armv8.2 (...)``, ``nn-meter:<name> tflite...``)."""
    source = str(data.get("latency_source") or "")
    kind, _, rest = source.partition(":")
    if data.get("latency_ms") in (None, "") or not rest:
        return {}
    words = rest.split()
    runtime = words[1] if kind in ("estimator", "armsim") and len(words) > 1 and not words[1].startswith("(") \
        else only_runtime_predicted_by(kind)
    return {"latency_kind": kind, "latency_runtime": runtime}


# The row fields each record fills, row field -> record field, written out: a field renamed on
# either side fails tests/test_results_mapping.py instead of silently emptying a column (rows
# used to be filled by matching names). Keyed by the record's class name, in from_records' order.
ROW_SOURCES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "ModelFile": MappingProxyType({
        "model_label": "label", "model_sha256": "sha256", "level": "level", "precision": "precision",
        "quantization": "quantization", "input_shape_source": "input_shape_source",
        "variant_of": "variant_of"}),
    "Profile": MappingProxyType({
        "profile_id": "id", "profile_label": "label", "tier": "tier", "chipset": "chipset", "ram_mb": "ram_mb",
        "app_budget_mb": "app_budget_mb", "power_w": "power_w", "power_source": "power_source"}),
    "LatencyPrediction": MappingProxyType({
        "latency_ms": "latency_ms", "latency_source": "latency_source", "latency_uncertainty": "uncertainty",
        "latency_calibrations": "calibrations", "latency_low_ms": "latency_low_ms",
        "latency_high_ms": "latency_high_ms", "latency_kind": "kind", "latency_runtime": "runtime",
        "latency_held_out_pct": "uncertainty_pct", "latency_held_out_rows": "held_out_rows",
        "latency_held_out_socs": "held_out_socs", "latency_held_out_pool": "held_out_pool"}),
    "MemoryMeasurement": MappingProxyType({  # a dotted name: a field of one of its parts (None if absent)
        "limit_mb": "limit_mb", "peak_rss_mb": "peak.rss_mb", "runtime_baseline_mb": "peak.runtime_baseline_mb",
        "model_increment_mb": "peak.model_increment_mb", "cgroup_peak_mb": "peak.cgroup_mb", "memory_error": "error",
        "backend": "sandbox.backend", "limit_enforcement": "sandbox.limit_enforcement", "runtime": "runtime",
        "host_latency_mean_ms": "host.mean_ms", "host_latency_std_ms": "host.std_ms",
        "host_latency_p50_ms": "host.p50_ms", "host_latency_p95_ms": "host.p95_ms",
        "host_throughput_ips": "host.throughput_ips", "memory_cached": "cached",
        "memory_inferred_from_mb": "inferred_from_mb", "converted_precision": "converted.precision",
        "converted_scheme": "converted.scheme", "conversion_s": "converted.seconds"}),
})


def source_value(record: Any, name: str) -> Any:
    """The value ``ROW_SOURCES`` names on ``record``: a field, or ``part.field`` of one of its
    parts (None when the part is: a measurement without a converted file has no precision)."""
    for part in name.split("."):
        record = getattr(record, part) if record is not None else None
    return record


# The columns from_records computes from several records (every other column is in ROW_SOURCES;
# latency_note, memory_runtime and memory_note are written from the facts it computes:
# RowLatency.notes, RowMemory.fallback and RowMemory.notes, results.columns.FACT_COLUMNS).
COMPUTED_ROW_FIELDS = frozenset({
    "model_path", "model_file_mb", "threads", "model_format", "params", "core", "clock_ghz", "latency_note",
    "verdict", "headroom_mb", "input_shape", "host_latency_unstable", "energy_mj", "min_ram_mb", "model_class",
    "sparsity", "zero_channels", "latency_if_channels_removed_ms", "memory_runtime", "memory_note", "converted_mb",
    "accuracy_top1_pct", "accuracy_top5_pct", "accuracy_drop_pts", "accuracy_samples", "accuracy_note"})
# The columns only a phone measurement fills (lodevem.device.rows: the PhoneMeasurement part).
DEVICE_ROW_FIELDS = frozenset({
    "measured_on", "device_runs", "device_latency_min_ms", "device_latency_max_ms", "device_latency_std_ms",
    "device_latency_p50_ms", "device_peak_mb", "device_op_profile", "device_runtime_version",
    "device_binary_sha256"})


pair_result = PairResult.from_records
