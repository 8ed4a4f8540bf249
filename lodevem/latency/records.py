"""The latency cell every predictor kind returns: ``LatencyPrediction``, and its per-kernel parts.

Why one record for all kinds: the runner, the calibration step, the cache and the reports read
one shape whichever predictor made the number (the estimator, nn-Meter, the emulated core), so a
new kind needs no change downstream. The record carries the number's own evidence: its source,
the runtime it stands for, the uncertainty as text *and* as a numeric band, and the compute- and
memory-bound parts a calibration scales separately.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional, Sequence

from ..profiles import Profile

__all__ = ["KernelLatency", "LatencyPrediction", "ModelGraph", "ModelLatency", "format_clock", "join_notes",
           "uncertainty_band"]


def format_clock(clock_ghz: float) -> str:
    """``2.0`` -> ``2.0``, ``2.42`` -> ``2.42``: one decimal at least, no float noise."""
    text = f"{clock_ghz:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def join_notes(notes: Sequence[Optional[str]]) -> Optional[str]:
    """The non-empty notes joined with "; " (None when there is none)."""
    text = "; ".join(n for n in notes if n)
    return text or None


def uncertainty_band(latency_ms: Optional[float], mape_pct: Optional[float]) -> tuple[Optional[float], Optional[float]]:
    """(low, high) ms: the prediction ± the MAPE of its kind, the same band the ``±N%`` text
    states (low floored at 0). (None, None) without a number or without a figure."""
    if latency_ms is None or mape_pct is None:
        return None, None
    spread = latency_ms * mape_pct / 100.0
    return max(latency_ms - spread, 0.0), latency_ms + spread


@dataclass(frozen=True)
class KernelLatency:
    """One kernel's share of a prediction (``ms`` None: nn-Meter has no predictor for it)."""

    name: str
    nnmeter_type: str
    category: str
    ms: Optional[float]
    dram_ms: Optional[float] = None  # the part of ms the SoC's DRAM took (estimator cells; None: not priced)


@dataclass(frozen=True)
class LatencyPrediction:
    """The latency cell of one (model, profile) pair, with where the number comes from.

    ``latency_low_ms`` / ``latency_high_ms``: the band ``uncertainty`` states (the LODO error
    figure of the cell's own kind: core x threads x arithmetic x runtime, or the pooled fallback
    the text names); None when there is no number or no figure. ``compute_ms`` / ``memory_ms``:
    the cost model's split of ``latency_ms`` (what a calibration with three or more records
    scales separately). ``graph_sha256``: the kernel graph the number was predicted from.
    """

    latency_ms: Optional[float]
    latency_source: str
    threads: int
    core: str
    clock_ghz: float
    runtime: str = ""  # the runtime the number stands for (tflite, ncnn); "" when there is none
    uncertainty: Optional[str] = None
    note: Optional[str] = None
    kernels: tuple[KernelLatency, ...] = ()
    # What scaled this number after prediction, one line each (e.g. a one-shot calibration on
    # the real device); empty when nothing did. The paper kit lists them.
    calibrations: tuple[str, ...] = ()
    latency_low_ms: Optional[float] = None
    latency_high_ms: Optional[float] = None
    compute_ms: Optional[float] = None
    memory_ms: Optional[float] = None
    graph_sha256: Optional[str] = None
    uncertainty_pct: Optional[float] = None  # the MAPE the band is made of
    # what that figure rests on (``latency.statement``): held-out rows, their SoCs (None: not
    # recorded), and the pool ("Cortex-A53": the core's own rows; "all cores": pooled)
    held_out_rows: Optional[int] = None
    held_out_socs: Optional[int] = None
    held_out_pool: Optional[str] = None
    # The predictor kind that made the number (``latency.pool.KINDS``: estimator, nn-meter, armsim),
    # stamped by the pool on every cell with a number: the reports read it, never ``latency_source``
    kind: str = ""

    @property
    def compute_share(self) -> float:
        """The compute-bound fraction of the number (0 when the parts are unknown)."""
        if self.compute_ms is None or self.memory_ms is None or self.compute_ms + self.memory_ms <= 0:
            return 0.0
        return self.compute_ms / (self.compute_ms + self.memory_ms)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (the latency cache stores it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LatencyPrediction":
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["kernels"] = tuple(KernelLatency(**k) for k in values.get("kernels") or ())
        values["calibrations"] = tuple(values.get("calibrations") or ())
        return cls(**values)

    @classmethod
    def unavailable(cls, profile: Profile, reason: str, threads: int = 1, runtime: str = "") -> "LatencyPrediction":
        """A cell with no number and the reason (e.g. the model could not be exported)."""
        cluster = profile.fastest_cluster
        return cls(None, "unavailable", threads, cluster.core, cluster.clock_ghz, runtime, note=f"no latency: {reason}")


@dataclass(frozen=True)
class ModelGraph:
    """A model as the predictor sees it: its ONNX export (``onnx_path`` None: the export failed,
    ``error`` says why). ``kind``: ``file`` | ``zoo`` | ``module``. ``sha256``: the file's
    content for a file, the export's for a zoo model or a module."""

    label: str
    kind: str
    sha256: str
    onnx_path: Optional[Path]
    input_shape: Optional[tuple[int, ...]]
    error: str = ""
    input_shape_source: Optional[str] = None  # --input-shape, recorded in the file, default: as predict prints it


@dataclass(frozen=True)
class ModelLatency:
    """One (model, profile) latency, as ``lodevem predict`` prints it (``report.console``)."""

    model: ModelGraph
    profile: Profile
    latency: LatencyPrediction

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``lodevem predict --json`` prints: one flat object per (model, profile)."""
        latency = self.latency
        return {
            "model": self.model.label, "model_kind": self.model.kind, "model_sha256": self.model.sha256,
            "input_shape": list(self.model.input_shape) if self.model.input_shape else None,
            "input_shape_source": self.model.input_shape_source,
            "profile_id": self.profile.id, "profile_label": self.profile.label, "tier": self.profile.tier,
            "latency_ms": latency.latency_ms, "latency_kind": latency.kind or None,
            "latency_source": latency.latency_source, "latency_held_out_pct": latency.uncertainty_pct,
            "latency_held_out_rows": latency.held_out_rows, "latency_held_out_socs": latency.held_out_socs,
            "latency_held_out_pool": latency.held_out_pool,
            "latency_uncertainty": latency.uncertainty, "latency_low_ms": latency.latency_low_ms,
            "latency_high_ms": latency.latency_high_ms, "latency_note": latency.note,
            "latency_calibrations": list(latency.calibrations),
            "runtime": latency.runtime or None, "threads": latency.threads, "core": latency.core,
            "clock_ghz": latency.clock_ghz,
        }

