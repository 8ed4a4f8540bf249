"""The estimator's typed parameters and answers: what ``data/estimator_params.json`` holds, read once.

Why apart from the maths (``latency.estimator``): the records are read by the calibration step,
the paper kit and the fit script too; the cost model itself stays a short formula over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..safe_io import fields
from .selection import HeldOutError, HeldOutRow

__all__ = ["CoreParams", "Estimate", "FitAccuracy", "FitProvenance", "Fp16Params", "Int8Params", "KernelEstimate",
           "RuntimeParams", "held_out_rows"]


@dataclass(frozen=True)
class CoreParams:
    """One core type's fitted parameters, with where they came from.

    ``compute_scale`` / ``memory_scale``: cycles relative to the reference Cortex-A53 (< 1: faster
    per clock), bounded by the per-clock order of the cores in every fit (``fit_options`` of the
    params). ``parallel_compute`` / ``parallel_memory``: Amdahl parallel fractions, in [0, 1].
    ``measured_runtimes``: the runtimes with rows of this core in the fit (empty: ``derived``).
    """

    core: str
    compute_scale: float
    memory_scale: float
    parallel_compute: float
    parallel_memory: float
    source: str
    derived: bool
    measured_runtimes: tuple[str, ...]


@dataclass(frozen=True)
class Int8Params:
    """A runtime's int8 kernels: a compute divisor per int8 ISA group (``armv7``, ``armv8.0``,
    ``armv8.2`` with dot product), a bytes divisor, and where each comes from (fit or prior)."""

    compute_speedup: Mapping[str, float]
    memory_speedup: float
    source: str
    measured: bool  # the fit had int8 rows of this runtime (else a bounded prior: the cell's note says so)


@dataclass(frozen=True)
class RuntimeParams:
    """One runtime's efficiency relative to ncnn, the MAC terms it charges elsewhere, its int8."""

    name: str
    compute_factor: float
    memory_factor: float
    term_map: dict[str, str]
    measured_precisions: tuple[str, ...]
    source: str
    int8: Int8Params


@dataclass(frozen=True)
class Fp16Params:
    """ARMv8.2 FP16 arithmetic (shared by every core that has it): divisors of the dense and the
    depthwise compute, each in [1, 2] (8 fp16 lanes per 128-bit NEON op instead of 4), and of the
    bytes (fp16 tensors are half the size)."""

    compute_speedup: float
    depthwise_speedup: float
    memory_speedup: float
    source: str


def held_out_rows(unc: Mapping[str, Any]) -> tuple[HeldOutRow, ...]:
    """The nested leave-one-SoC-out rows a params file stores (``held_out_columns`` names the fields)."""
    columns = list(unc.get("held_out_columns") or ())
    out = []
    for raw in unc.get("held_out_rows") or ():
        row = dict(zip(columns, raw))
        out.append(HeldOutRow(str(row["device"]), str(row["soc"]), str(row["core"]), int(row["threads"]),
                              str(row["arithmetic"]), str(row["runtime"]), str(row["model"]), float(row["error"])))
    return tuple(out)


@dataclass(frozen=True)
class FitAccuracy:
    """The fit's published error figures (``uncertainty`` in the parameters file), typed: the
    held-out (leave-one-SoC-out) MAPE of 1-thread fp32 rows and hit rates, the FLOPs baseline's,
    and the one-shot calibration MAPE a calibrated prediction states. None: no such figure."""

    lodo_mape_pct: Optional[float] = None
    lodo_within_10_pct: Optional[float] = None
    lodo_within_25_pct: Optional[float] = None
    lodo_rows: Optional[int] = None
    baseline_lodo_mape_pct: Optional[float] = None
    oneshot_mape_pct: Optional[float] = None
    same_core_spread: str = ""

    @classmethod
    def from_dict(cls, data: Any) -> "FitAccuracy":
        if not isinstance(data, dict):
            return cls()
        return cls(fields.number(data.get("lodo_mape_pct")), fields.number(data.get("lodo_within_10_pct")),
                   fields.number(data.get("lodo_within_25_pct")), fields.integer(data.get("lodo_rows")),
                   fields.number(data.get("baseline_lodo_mape_pct")), fields.number(data.get("oneshot_mape_pct")),
                   str(data.get("same_core_spread") or ""))


@dataclass(frozen=True)
class FitProvenance:
    """Where the fit came from (``provenance`` in the parameters file), typed: when, from which
    data (its sources and sha256), how many rows, and ``model_map`` (benchmark names -> zoo
    models and inputs, what ``calibrate --from-log`` pairs a benchncnn log with)."""

    fit_date: Optional[str] = None
    data_sources: tuple[str, ...] = ()
    data_sha256: Optional[str] = None
    rows_used: Optional[int] = None
    model_map: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> "FitProvenance":
        if not isinstance(data, dict):
            return cls()
        sources = data.get("data_sources")
        model_map = data.get("model_map")
        return cls(str(data["fit_date"]) if data.get("fit_date") else None,
                   tuple(str(s) for s in sources) if isinstance(sources, list) else (),
                   str(data["data_sha256"]) if data.get("data_sha256") else None, fields.integer(data.get("rows_used")),
                   dict(model_map) if isinstance(model_map, dict) else {})


@dataclass(frozen=True)
class KernelEstimate:
    """One kernel's time at the arithmetic its runtime executes it in, split into its compute- and
    memory-bound parts (threads and clock applied to each part, as ``latency_ms`` does)."""

    arithmetic: str
    compute_ms: float
    memory_ms: float  # cache-side and DRAM time together
    dram_ms: float = 0.0  # the part of memory_ms spent streaming from DRAM (the SoC's bandwidth)

    @property
    def ms(self) -> float:
        return self.compute_ms + self.memory_ms


@dataclass(frozen=True)
class Estimate:
    """The cost model's whole answer for one graph on one core, clock, runtime and thread count.

    Why one record: the predictor, the nn-Meter transfer and the calibration step all need the
    same per-kernel figures; computing them once keeps them equal by construction. ``arithmetic``:
    what the cell is stated in (the kind of its held-out error: what the runtime executes);
    ``notes``: what was assumed where the data is silent; ``figure``: the held-out error of the
    kind (None: no rows of it or of any pooled kind) and ``uncertainty`` its one-line statement.
    """

    core: str
    clock_ghz: float
    runtime: str
    threads: int
    arithmetic: str
    kernels: tuple[KernelEstimate, ...]
    notes: tuple[str, ...]
    figure: Optional[HeldOutError]
    uncertainty: str

    @property
    def ms(self) -> float:
        return sum(k.ms for k in self.kernels)

    @property
    def compute_ms(self) -> float:
        return sum(k.compute_ms for k in self.kernels)

    @property
    def memory_ms(self) -> float:
        return sum(k.memory_ms for k in self.kernels)
