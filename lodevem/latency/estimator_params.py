"""The estimator's parameters file (``data/estimator_params.json``) read into typed, checked records.

Why apart from the cost model (``latency.estimator``): this is the one reader of a file written
by ``scripts/fit_estimator.py``, the seam between the fit and the maths. It knows the file's
keys, its older shapes (no DRAM term before issue 44; folds by board state no held-out figures)
and its ranges, and turns every problem into one ``EstimatorError`` naming the file; the model
then reads only typed records and stays a short formula over them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from ..errors import EstimatorError
from ..safe_io import fields
from .selection import HeldOutRow
from .work import COMPUTE_TERMS, TERMS

__all__ = ["CoreParams", "EstimatorParams", "FitAccuracy", "FitProvenance", "Fp16Params", "Int8Params",
           "RuntimeParams", "held_out_rows", "read_params"]


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

    @classmethod
    def parse(cls, name: str, c: dict[str, Any]) -> "CoreParams":
        return cls(name, float(c["compute_scale"]), float(c["memory_scale"]), float(c["parallel_fraction_compute"]),
                   float(c["parallel_fraction_memory"]), str(c["source"]), bool(c["derived"]),
                   tuple(c["measured_runtimes"]))

    @property
    def in_range(self) -> bool:
        return (self.compute_scale > 0 and self.memory_scale > 0 and 0 <= self.parallel_compute <= 1
                and 0 <= self.parallel_memory <= 1)


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

    @classmethod
    def parse(cls, name: str, r: dict[str, Any]) -> "RuntimeParams":
        i8 = r["int8"]
        return cls(name, float(r["compute_factor"]), float(r["memory_factor"]),
                   {str(k): str(v) for k, v in r.get("term_map", {}).items()}, tuple(r["measured_precisions"]),
                   str(r["source"]), Int8Params({str(g): float(v) for g, v in i8["compute_speedup"].items()},
                                                float(i8["memory_speedup"]), str(i8["source"]), bool(i8["measured"])))

    @property
    def in_range(self) -> bool:
        """Positive factors and divisors, and a term map from compute terms to compute terms (or
        "": work this runtime does not do)."""
        return (self.compute_factor > 0 and self.memory_factor > 0 and self.int8.memory_speedup > 0
                and min(self.int8.compute_speedup.values(), default=0) > 0
                and all(a in COMPUTE_TERMS and b in COMPUTE_TERMS + ("",) for a, b in self.term_map.items()))


@dataclass(frozen=True)
class Fp16Params:
    """ARMv8.2 FP16 arithmetic (shared by every core that has it): divisors of the dense and the
    depthwise compute, each in [1, 2] (8 fp16 lanes per 128-bit NEON op instead of 4), and of the
    bytes (fp16 tensors are half the size)."""

    compute_speedup: float
    depthwise_speedup: float
    memory_speedup: float
    source: str

    @classmethod
    def parse(cls, fp16: dict[str, Any]) -> "Fp16Params":
        return cls(float(fp16["compute_speedup"]), float(fp16["depthwise_speedup"]), float(fp16["memory_speedup"]),
                   str(fp16["source"]))


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
class EstimatorParams:
    """Everything the cost model reads from one parameters file: the version and reference core,
    ``theta`` (cycles per unit of each work term), the cores and runtimes, the DRAM term (0: a
    file from before issue 44), fp16, and the fit's held-out figures (none from a file whose folds
    were by board: they state optimistic errors)."""

    version: str
    reference_core: str
    theta: tuple[float, ...]
    cores: dict[str, CoreParams]
    runtimes: dict[str, RuntimeParams]
    dram_inverse_efficiency: float
    dram_parallel: float
    fp16: Fp16Params
    lodo_mape_pct: Optional[float]
    held_out_rows: tuple[HeldOutRow, ...]
    spread_note: str
    accuracy: FitAccuracy
    provenance: FitProvenance

    @classmethod
    def parse(cls, params: dict[str, Any], path: Optional[Path] = None) -> "EstimatorParams":
        """The records of ``params`` (a parameters file's JSON); ``EstimatorError`` naming ``path``
        for a missing or mistyped key or a value out of its range."""
        where = path or "estimator parameters"
        try:
            dram = params.get("dram") or {}  # a params file from before issue 44: no DRAM term
            unc = params.get("uncertainty", {})
            found = cls(
                str(params["version"]), str(params["reference_core"]),
                tuple(float(params["terms"][t]["cycles_per_unit"]) for t in TERMS),
                {n: CoreParams.parse(n, c) for n, c in params["cores"].items()},
                {n: RuntimeParams.parse(n, r) for n, r in params["runtimes"].items()},
                float(dram.get("inverse_efficiency", 0.0)), float(dram.get("parallel_fraction", 0.0)),
                Fp16Params.parse(params["precision"]["fp16"]),
                float(unc["lodo_mape_pct"]) if "lodo_mape_pct" in unc else None,
                held_out_rows(unc) if unc.get("folds") == "soc" else (),
                str(unc.get("same_core_spread", "")), FitAccuracy.from_dict(unc),
                FitProvenance.from_dict(params.get("provenance")))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise EstimatorError(f"{where}: malformed estimator parameters ({type(exc).__name__}: {exc})") from None
        if not found.in_range:
            raise EstimatorError(f"{where}: negative or out-of-range parameters")
        return found

    @property
    def in_range(self) -> bool:
        fp16 = self.fp16
        return (all(t >= 0 for t in self.theta) and self.dram_inverse_efficiency >= 0
                and 0 <= self.dram_parallel <= 1 and all(c.in_range for c in self.cores.values())
                and all(r.in_range for r in self.runtimes.values())
                and min(fp16.compute_speedup, fp16.depthwise_speedup, fp16.memory_speedup) > 0)


def read_params(path: Path) -> Any:
    """The JSON of a parameters file (``EstimatorParams.parse`` checks its shape); ``EstimatorError``
    when it cannot be read or is not JSON."""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise EstimatorError(f"{path}: cannot read estimator parameters ({exc.strerror}); "
                             "reinstall lodevem") from None
    except json.JSONDecodeError as exc:
        raise EstimatorError(f"{path}: estimator parameters are not valid JSON ({exc})") from None
