"""The typed parts of a results row: the model file, the device, the latency with its band, the
memory measurement with its converted file, the host's timings, the accuracy and a phone's own
measurement. ``PairResult`` (``results.pair``) holds one of each.

Why parts and not one flat record: each part says what it holds in its own words (``row.latency.ms``,
``row.memory.fallback``), a fact is a typed value (the memory fallback a bool beside the runtime,
notes a tuple of clauses) and no reader parses a row's text. The CSV and JSON columns are the
flattening of these parts, owned by ``results.columns`` alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from ..runtimes.logs import OpTime
from ..wire.verdict import Verdict

FALLBACK_MARK = " (fallback)"  # after the runtime of a row measured under torch because a converter refused
NOT_EVALUATED = "not evaluated: "  # lodevem.accuracy's note for a row --eval-data could not evaluate
DERIVED_CORE = "not measured: derived"  # latency.statement's words for a core derived from published figures
_RUNTIME_SUFFIX = re.compile(r" \[[a-z0-9]+\]$")  # runner.models: "net.pt [tflite]"
_LIMIT = re.compile(r"=\d+\s*MB")  # the sandbox's "<mechanism>=<limit>MB"

__all__ = ["FALLBACK_MARK", "RowConverted", "RowHost", "LatencyBand", "PhoneMeasurement", "RowAccuracy",
           "RowDevice", "RowLatency", "RowMemory", "RowModel"]


@dataclass(frozen=True)
class RowModel:
    """The model file the row measured and predicted, and what the sandbox found in it."""

    label: str
    path: str
    sha256: str
    level: Optional[str]
    format: Optional[str]
    file_mb: float
    params: Optional[int]
    class_name: Optional[str] = None  # the Python class of a pickled module
    # What the file computes in, detected in the sandbox (a --levels variant: its level's)
    precision: Optional[str] = None
    quantization: Optional[str] = None
    # A compressed file of the user's (int8, fp16, pruned: its own row, no levels derived from it):
    # the label of the float file of the same network the run also had (``model_file.with_levels``)
    variant_of: Optional[str] = None
    # The input the model was exported, measured and predicted with ("1x3x224x224") and where
    # that shape came from (wire.shape_sources: "given", "evaluation data", "recorded in the file", "default").
    input_shape: Optional[str] = None
    input_shape_source: Optional[str] = None
    # Zeros left by pruning: the fraction of zero weights and the all-zero output channels
    sparsity: Optional[float] = None
    zero_channels: Optional[int] = None

    @property
    def base_label(self) -> str:
        """The label without its `` [runtime]`` suffix (several --runtime values: one file, one row
        per runtime; ``runner.models``)."""
        return _RUNTIME_SUFFIX.sub("", self.label)


@dataclass(frozen=True)
class RowDevice:
    """The device profile the row is for, and the threads the run used on it."""

    profile_id: str
    label: str
    tier: str
    chipset: str
    ram_mb: int
    core: str  # the core the latency stands for (the fastest cluster's, or the prediction's own)
    clock_ghz: float
    threads: int
    app_budget_mb: Optional[int] = None  # what one app may use before the low-memory killer stops it
    # the energy proxy's power figure (a published one) and its source, or why there is none
    power_w: Optional[float] = None
    power_source: Optional[str] = None

    @property
    def tier_short(self) -> str:
        """"2" for tier2: the tier as a narrow table column shows it."""
        return self.tier.removeprefix("tier")


@dataclass(frozen=True)
class LatencyBand:
    """The band ``RowLatency.uncertainty`` states, as numbers: the latency minus / plus the held-out
    error figure (MAPE, %) of the cell's own kind for the row's own runtime (the calibrated
    figure's one-shot error when calibrated), and what that figure rests on (``latency.statement``):
    held-out rows, their SoCs, the pool it was taken over. None when there is no number or figure."""

    low_ms: Optional[float] = None
    high_ms: Optional[float] = None
    held_out_pct: Optional[float] = None
    held_out_rows: Optional[int] = None
    held_out_socs: Optional[int] = None
    held_out_pool: Optional[str] = None


@dataclass(frozen=True)
class RowLatency:
    """The device's latency: predicted for its CPU (or measured on the phone: ``kind`` measured)."""

    ms: Optional[float]
    source: str  # where the number comes from, for people (the reports read kind and runtime)
    uncertainty: Optional[str]
    # how the cell was predicted or why it has no number, one clause each (the first says why
    # when ``ms`` is None)
    notes: tuple[str, ...]
    # Which predictor kind made ``ms`` (``latency.pool.KINDS``; "" when there is no number) and the
    # runtime the number stands for
    kind: Optional[str] = None
    runtime: Optional[str] = None
    band: LatencyBand = field(default_factory=LatencyBand)
    # What scaled the predicted latency afterwards (e.g. a calibration against one measurement on
    # the real device), one description each; empty: the prediction as the predictor made it.
    calibrations: tuple[str, ...] = ()
    # the same graph with its all-zero output channels physically removed (a pruned file)
    if_channels_removed_ms: Optional[float] = None
    # the energy proxy: latency x the profile's power_w, a proxy, not a measurement
    energy_mj: Optional[float] = None

    @property
    def note(self) -> Optional[str]:
        """The notes on one line, "; " between them (the CSV's ``latency_note``); None without."""
        return "; ".join(self.notes) or None

    @property
    def for_derived_core(self) -> bool:
        """A number for a core without data of its own, its speed derived from published per-clock
        figures (``latency.statement`` says so in the uncertainty: the one place that text is read)."""
        return self.ms is not None and DERIVED_CORE in (self.uncertainty or "")


@dataclass(frozen=True)
class RowConverted:
    """What a tflite/ncnn row loaded: its converted file's size, precision and quantization scheme,
    and the seconds the conversion took in this run (None: served from the cache). All None
    under a runtime that loads the file as it is."""

    mb: Optional[float] = None
    precision: Optional[str] = None
    scheme: Optional[str] = None
    conversion_s: Optional[float] = None

    @property
    def scheme_alone(self) -> Optional[str]:
        """The quantization scheme as a paper states it: without the converter's internals (its
        weight-tensor counts by dtype, after "; ", stay in the CSV's ``converted_scheme``) nor the
        calibration data (", calibrated on ..." inside the scheme's closing parenthesis: the memory
        notes say that once). The runtimes' converters write that text; it is read here only."""
        return scheme_alone(self.scheme) if self.scheme else None


def scheme_alone(scheme: str) -> str:
    """``RowConverted.scheme_alone`` of a converter's scheme text."""
    head = scheme.split("; ")[0]
    cut = head.find(", calibrated on ")  # inside the scheme's closing parenthesis, to its end
    return head[:cut] + ")" if cut >= 0 and head.endswith(")") else head


@dataclass(frozen=True)
class RowMemory:
    """Peak RAM measured for real under the device's RAM limit, and the verdict against its budget."""

    verdict: Verdict
    peak_rss_mb: Optional[float]
    runtime_baseline_mb: Optional[float]
    model_increment_mb: Optional[float]
    cgroup_peak_mb: Optional[float]
    limit_mb: int
    limit_enforcement: str
    backend: str
    runtime: str  # the runtime the figure was measured under
    error: Optional[str]
    cached: bool
    # True: measured under ``runtime`` (torch) because the row's own runtime's converter refused
    # the file (the first note says why); None: not recorded (a results file older than the fact)
    fallback: Optional[bool] = False
    notes: tuple[str, ...] = ()  # how the measured file was made, one clause each
    # not measured at this limit but inferred from the run at this larger one (memory.planning)
    inferred_from_mb: Optional[int] = None
    headroom_mb: Optional[float] = None  # app budget - peak (negative: over budget)
    min_ram_mb: Optional[float] = None  # the smallest RAM it completes in (--find-min-ram)
    converted: RowConverted = field(default_factory=RowConverted)

    def __post_init__(self) -> None:  # a part read back from the CSV/JSON holds the text: the member again
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def note(self) -> Optional[str]:
        """The notes on one line, "; " between them (the CSV's ``memory_note``); None without."""
        return "; ".join(self.notes) or None

    @property
    def enforcement(self) -> str:
        """How the limit was enforced, without the limit itself (``docker cgroup v2 memory+swap``):
        the same for every RAM size, so a run names it once. Read from the sandbox's
        ``limit_enforcement`` text (``<mechanism>=<limit>MB``) here only."""
        return _LIMIT.sub("", self.limit_enforcement)

    @property
    def runtime_shown(self) -> str:
        """The runtime as the tables name it: ``torch (fallback)`` for a fallback (the CSV's
        ``memory_runtime``), else the runtime."""
        return f"{self.runtime}{FALLBACK_MARK}" if self.fallback else self.runtime


@dataclass(frozen=True)
class RowHost:
    """Host-CPU timings of the measurement run: informational, never the device's latency."""

    mean_ms: Optional[float] = None
    std_ms: Optional[float] = None
    p50_ms: Optional[float] = None
    p95_ms: Optional[float] = None
    throughput_ips: Optional[float] = None
    unstable: Optional[str] = None  # why they are too noisy to read (std >= 10 % of the mean), or None


@dataclass(frozen=True)
class RowAccuracy:
    """Accuracy on --eval-data (lodevem.accuracy), evaluated in the sandbox under this row's runtime
    on the file this row measures: top-1 / top-5 in % of ``samples``, the drop in points against
    the fp32 row of the same file and runtime, and why a cell is empty (or what qualifies it).
    All None without --eval-data."""

    top1_pct: Optional[float] = None
    top5_pct: Optional[float] = None
    drop_pts: Optional[float] = None
    samples: Optional[int] = None
    note: Optional[str] = None

    @property
    def not_evaluated(self) -> Optional[str]:
        """Why --eval-data gave this row no figure (the note's ``not evaluated: <why>`` clause,
        lodevem.accuracy's words), or None."""
        why = [part for part in (self.note or "").split("; ") if part.startswith(NOT_EVALUATED)]
        return why[0].removeprefix(NOT_EVALUATED) if why else None

    @property
    def not_finetuned(self) -> bool:
        """A pruned variant derived without fine-tuning, or whose fine-tuning failed (the note says
        ``pruned without fine-tuning`` / ``not fine-tuned: <why>``: lodevem.accuracy, worker.derive)."""
        note = self.note or ""
        return "without fine-tuning" in note or "not fine-tuned: " in note


@dataclass(frozen=True)
class PhoneMeasurement:
    """Measured on a phone over adb (start --device, lodevem.device.rows): "<model> (<SoC>)", the
    benchmark binary's own statistics (the row's latency is its mean), its peak footprint,
    per-operator profile (one OpTime per node type), the runtime version it printed and its sha256."""

    measured_on: Optional[str] = None
    runs: Optional[int] = None
    latency_min_ms: Optional[float] = None
    latency_max_ms: Optional[float] = None
    latency_std_ms: Optional[float] = None
    latency_p50_ms: Optional[float] = None
    peak_mb: Optional[float] = None
    op_profile: tuple[OpTime, ...] = ()
    runtime_version: Optional[str] = None
    binary_sha256: Optional[str] = None
