"""``PairResult``: one (model file x device profile) row, flat so that the CSV, the JSON and the
LaTeX table carry the same fields, and the written mapping from each record to its columns.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..runtimes.logs import OpTime
from ..wire.registry import only_runtime_predicted_by
from ..wire.verdict import Verdict
from .failures import failure_reason
from .measurements import Accuracy, MemoryMeasurement
from .model_file import ModelFile
from .notes import joined, quantization_note, sparsity_note, unstable

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
    """One row of the results: a model file on one device profile."""

    # The model
    model_label: str
    model_path: str
    model_sha256: str
    level: Optional[str]
    model_format: Optional[str]
    model_file_mb: float
    params: Optional[int]
    # The device
    profile_id: str
    profile_label: str
    tier: str
    chipset: str
    ram_mb: int
    core: str
    clock_ghz: float
    threads: int
    # Latency: predicted for the device's CPU, never measured on it
    latency_ms: Optional[float]
    latency_source: str
    latency_uncertainty: Optional[str]
    latency_note: Optional[str]
    # Memory: measured for real under the device's RAM limit
    verdict: Verdict
    peak_rss_mb: Optional[float]
    runtime_baseline_mb: Optional[float]
    model_increment_mb: Optional[float]
    cgroup_peak_mb: Optional[float]
    limit_mb: int
    limit_enforcement: str
    backend: str
    runtime: str
    memory_error: Optional[str]
    memory_cached: bool
    # Host-CPU timings of the measurement run: informational, not the device's latency
    host_latency_mean_ms: Optional[float] = None
    host_latency_std_ms: Optional[float] = None
    host_latency_p50_ms: Optional[float] = None
    host_latency_p95_ms: Optional[float] = None
    host_throughput_ips: Optional[float] = None
    host_latency_unstable: Optional[str] = None
    # Derived: the energy proxy, predicted latency x the profile's power_w (a published figure,
    # power_source cites it or says why there is none): a proxy, not a measurement
    power_w: Optional[float] = None
    energy_mj: Optional[float] = None
    min_ram_mb: Optional[float] = None
    # What the file is (detected in the sandbox): zeros left by pruning, and the latency of the same
    # graph with its all-zero output channels physically removed
    model_class: Optional[str] = None
    sparsity: Optional[float] = None
    zero_channels: Optional[int] = None
    latency_if_channels_removed_ms: Optional[float] = None
    # What the file computes in, detected in the sandbox (a --levels variant: its level's)
    precision: Optional[str] = None
    quantization: Optional[str] = None
    # A compressed file of the user's (int8, fp16, pruned: its own row, no levels derived from it):
    # the label of the float file of the same network the run also had (``model_file.with_levels``)
    variant_of: Optional[str] = None
    # What scaled the predicted latency afterwards (e.g. a calibration against one measurement
    # on the real device), one description each; empty: the prediction as the predictor made it.
    # The paper kit (report.methodology) names every one used.
    latency_calibrations: tuple[str, ...] = ()
    # The device's app memory budget (profile app_budget_mb) and what the peak leaves of it
    # (budget - peak; negative: over budget); None without a budget or a peak.
    app_budget_mb: Optional[int] = None
    headroom_mb: Optional[float] = None
    # The input the model was exported, measured and predicted with ("1x3x224x224") and where
    # that shape came from (wire.shape_sources: "given", "evaluation data", "recorded in the file", "default").
    input_shape: Optional[str] = None
    input_shape_source: Optional[str] = None
    # The band latency_uncertainty states, as numbers: latency_ms minus / plus the LODO error
    # figure (MAPE) of the cell's own kind for the row's own runtime (the calibrated figure's
    # one-shot error when calibrated); None when latency_ms is None or no figure exists.
    latency_low_ms: Optional[float] = None
    latency_high_ms: Optional[float] = None
    # Which predictor kind made latency_ms (``latency.pool.KINDS``: estimator, nn-meter, armsim; ""
    # when there is no number), the runtime the number stands for, and the held-out error (%) of
    # the cell's kind the band is made of: latency_low_ms / latency_high_ms = latency_ms -/+ it.
    # The reports read these fields, never latency_source (its text is for people).
    latency_kind: Optional[str] = None
    latency_runtime: Optional[str] = None
    latency_held_out_pct: Optional[float] = None
    # the basis of that figure (latency.statement): held-out rows, SoCs, the pool it was taken over
    latency_held_out_rows: Optional[int] = None
    latency_held_out_socs: Optional[int] = None
    latency_held_out_pool: Optional[str] = None
    # Memory figures not measured at this limit but inferred from the run at this larger one
    # (its peak far below this limit: memory.planning); None: measured at this limit
    memory_inferred_from_mb: Optional[int] = None
    # The runtime the memory figure is for: the row's runtime (tflite, ncnn, torch, onnxruntime), or
    # "torch (fallback)" when its converter could not take the file (memory_note says why)
    memory_runtime: Optional[str] = None
    memory_note: Optional[str] = None
    # What a tflite/ncnn row measured: its converted file's size, precision and quantization scheme
    converted_mb: Optional[float] = None
    converted_precision: Optional[str] = None
    converted_scheme: Optional[str] = None
    conversion_s: Optional[float] = None  # seconds the conversion took in this run; empty: served from the cache
    # Accuracy on --eval-data (lodevem.accuracy), evaluated in the sandbox under this row's
    # runtime on the file this row measures: top-1 / top-5 in % of ``accuracy_samples``, the drop
    # in points against the fp32 row of the same file and runtime, and why a cell is empty (or
    # what qualifies it: a pruned variant not fine-tuned). All None without --eval-data.
    accuracy_top1_pct: Optional[float] = None
    accuracy_top5_pct: Optional[float] = None
    accuracy_drop_pts: Optional[float] = None
    accuracy_samples: Optional[int] = None
    accuracy_note: Optional[str] = None
    power_source: Optional[str] = None  # the profile's: where power_w comes from, or why it is empty
    # Measured on a phone over adb (start --device, lodevem.device.rows): "<model> (<SoC>)", the
    # benchmark binary's own statistics (latency_ms is its mean), its peak footprint, per-operator
    # profile (one OpTime per node type), the runtime version it printed and its sha256.
    measured_on: Optional[str] = None
    device_runs: Optional[int] = None
    device_latency_min_ms: Optional[float] = None
    device_latency_max_ms: Optional[float] = None
    device_latency_std_ms: Optional[float] = None
    device_latency_p50_ms: Optional[float] = None
    device_peak_mb: Optional[float] = None
    device_op_profile: tuple[OpTime, ...] = ()
    device_runtime_version: Optional[str] = None
    device_binary_sha256: Optional[str] = None

    @classmethod
    def from_records(cls, model: ModelFile, profile: "Profile", latency: "LatencyPrediction",
                     memory: MemoryMeasurement, *, threads: int, floor_mb: Optional[int] = None,
                     channels_removed_ms: Optional[float] = None, accuracy: Optional[Accuracy] = None
                     ) -> "PairResult":
        """One row from the records it shows: each row field either copied from the record field
        ``ROW_SOURCES`` names, or computed here from several (``COMPUTED_ROW_FIELDS``; the accuracy
        cells from ``accuracy``, the --eval-data record of this file and runtime)."""
        values: dict[str, Any] = {row: source_value(record, name)
                                  for record, mapping in zip((model, profile, latency, memory), ROW_SOURCES.values())
                                  for row, name in mapping.items()}
        energy = (latency.latency_ms * profile.power_w
                  if latency.latency_ms is not None and profile.power_w is not None else None)
        found = model.sparsity
        values.update(
            model_path=str(model.path), model_file_mb=round(model.size_bytes / 2**20, 3), threads=threads,
            # the measured file's own figures win (a variant's, not its original's)
            model_format=memory.model.format or model.format,
            params=memory.model.params if memory.model.params is not None else model.params,
            core=latency.core or profile.fastest_cluster.core,
            clock_ghz=latency.clock_ghz or profile.fastest_cluster.clock_ghz,
            latency_note=joined(latency.note, sparsity_note(found, model.channels_removed_graph is not None),
                                quantization_note(model.precision, model.precision_by_class)),
            # the measurement is shared by every profile with this RAM; the budget is the profile's own
            verdict=budget_verdict(memory.verdict, memory.peak.rss_mb, profile.app_budget_mb),
            headroom_mb=(round(profile.app_budget_mb - memory.peak.rss_mb, 1)
                         if profile.app_budget_mb is not None and memory.peak.rss_mb is not None
                         and memory.verdict == Verdict.FITS else None),
            input_shape="x".join(map(str, model.input_shape)) if model.input_shape else None,
            host_latency_unstable=unstable(memory.host.mean_ms, memory.host.std_ms),
            energy_mj=energy, min_ram_mb=floor_mb, model_class=model.class_name,
            memory_runtime=f"{memory.runtime} (fallback)" if memory.fallback else memory.runtime,
            memory_note=joined(memory.fallback.text if memory.fallback else None, memory.note) or None,
            converted_mb=(round(memory.converted.size_bytes / 2**20, 3)
                          if memory.converted is not None and memory.converted.size_bytes is not None else None),
            sparsity=found.zero_fraction if found else None, zero_channels=found.zero_channels if found else None,
            latency_if_channels_removed_ms=channels_removed_ms)
        accuracy = accuracy if accuracy is not None else Accuracy()
        values.update(accuracy_top1_pct=accuracy.top1_pct, accuracy_top5_pct=accuracy.top5_pct,
                      accuracy_drop_pts=accuracy.drop_pts, accuracy_samples=accuracy.samples,
                      accuracy_note=accuracy.note)
        return cls(**values)

    def __post_init__(self) -> None:  # a row read back from the CSV/JSON holds the text: the member again
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def fits(self) -> Optional[bool]:
        """True when it ran within the app budget; False when over it (tight) or when it did not
        complete under the RAM limit; None when it could not run (``Verdict.fits``)."""
        return self.verdict.fits

    @property
    def ran(self) -> bool:
        """True when the model completed under the RAM limit (fits or tight): its peak is a figure."""
        return self.verdict.ran

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_label, self.profile_id)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["fits"] = self.fits
        data["failure_reason"] = failure_reason(self) or None
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "a results row", prefix: str = "") -> "PairResult":
        """A row read back (a results file, a run state): every field typed and range-checked
        (``safe_io.records.typed``); ``BadRecord`` names ``where`` and the field otherwise."""
        from ..safe_io.records import BadRecord, typed

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
        return typed(cls, values, where, prefix=prefix)


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


# The row fields from_records computes from several records (every other field is in ROW_SOURCES).
COMPUTED_ROW_FIELDS = frozenset({
    "model_path", "model_file_mb", "threads", "model_format", "params", "core", "clock_ghz", "latency_note",
    "verdict", "headroom_mb", "input_shape", "host_latency_unstable", "energy_mj", "min_ram_mb", "model_class",
    "sparsity", "zero_channels", "latency_if_channels_removed_ms", "memory_runtime", "memory_note", "converted_mb",
    "accuracy_top1_pct", "accuracy_top5_pct", "accuracy_drop_pts", "accuracy_samples", "accuracy_note"})
# The row fields only a phone measurement fills (lodevem.device.rows), after from_records.
DEVICE_ROW_FIELDS = frozenset({
    "measured_on", "device_runs", "device_latency_min_ms", "device_latency_max_ms", "device_latency_std_ms",
    "device_latency_p50_ms", "device_peak_mb", "device_op_profile", "device_runtime_version",
    "device_binary_sha256"})


pair_result = PairResult.from_records
