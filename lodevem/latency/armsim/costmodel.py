"""armsim's per-core cost model: instruction counts of one inference -> milliseconds on a core.

Why counts and not FLOPs: the runtime itself chose its kernels (Winograd or GEMM, packing, im2col,
fp16 or int8 paths, dot-product instructions) and the emulator counted what they executed, so the
cost model only has to say what an instruction of each class costs on a core:

    cycles_1t = v[version, precision] * p[int8, isa] * sum_g N_g(profile) * cpi[core][g]   g in GROUPS
    ms        = cycles_1t * A(q[core], n) / (clock_GHz * 1e6),  A(q, n) = (1 - q) + q / n

* Three instruction groups, three cycles-per-instruction figures per core, each bounded below by
  the core's issue width (an in-order dual-issue Cortex-A53 cannot retire more than 2
  instructions a cycle, so no group may cost less than 1/2 cycle; memory instructions no less than
  one per load/store pipe) and above by ``CPI_MAX``. The bounds and their sources are in
  ``data/armsim_params.json`` beside the fitted figures.
* Threads: Amdahl per core (``q``), fitted on the multi-thread rows of boards that measured 1 and N
  threads. A profile counted at N threads is still charged as its 1-thread total: the busiest
  thread's share is what Amdahl's q stands for, and the dev rows fit q, not per-thread counts.
* Runtime versions: ``v`` is a cycles factor per (runtime version, precision), fitted where a
  core has dev rows costed with two versions (1 elsewhere, said in the note): newer kernels can run
  at another IPC on the same core, which instruction counts alone cannot see.
* Precision: ``p`` is a cycles factor per int8 ISA group (ARMv7 NEON, ARMv8.0, ARMv8.2 SDOT): int8
  kernels run another instruction mix at another IPC than the float kernels the CPIs are fitted on.
* No cache model (the profiler counts no misses): memory stalls are folded into the memory
  group's CPI, which is why it is fitted per core and not fixed at the pipe limit.
* Uncertainty: a cell states the leave-one-device-out MAPE of its own kind (core x 1/multi thread
  x precision x runtime), falling back to pooled kinds; ``low = ms * (1 - m)``, ``high = ms * (1 + m)``.

Block cost model (v2, ``block_model`` in the params): where the profile carries block cycles
(``InstructionProfile.blocks``: every executed translation block priced by llvm-mca, see
``worker/armsim/armsim_blocks.py``) and the fit has the core, the cycles are those of the llvm-mca model
of the core (``worker.armsim.armsim_blocks.CORE_MODELS``: in-order cores by lodevem's in-order model on
LLVM 19's figures for that core with cited overrides, out-of-order cores by llvm-mca's model),
scaled by one constant per core:

    ms = cycles_m(profile) * k[core] * p[precision, isa] * runtime[rt, pipeline] * A(q[core], n) / (clock_GHz * 1e6)

It sees the code's own instruction-level parallelism, which the class CPIs cannot (issue 31), and
needs no runtime-version factor. Profiles without block cycles (armv7, an image without LLVM) keep
the class CPIs above; the note says which model priced a cell.

Every number comes from ``data/armsim_params.json``, written by ``scripts/fit_armsim.py`` from the
stored dev profiles (``data/armsim_dev_profiles.json``); this module holds no fitted constants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol

from ...errors import CostModelUnavailable
from ...store import bytes_digest

__all__ = [
    "COST_MODEL_VERSION",
    "DEFAULT_PARAMS",
    "GROUPS",
    "CostModel",
    "CostModelUnavailable",
    "CoreCost",
    "KindFigure",
    "group_counts",
    "load",
    "predict_ms",
]

COST_MODEL_VERSION = "v3"
DEFAULT_PARAMS: Path = Path(__file__).resolve().parents[2] / "data" / "armsim_params.json"

# Instruction classes of armsim's profiler, grouped by the pipeline that executes them.
# simd_fp16 and simd_dot are subsets of simd_arith (counted there as well), so they are not summed.
GROUPS: dict[str, tuple[str, ...]] = {
    "simd": ("simd_arith",),
    "memory": ("simd_load", "simd_store", "scalar_load", "scalar_store"),
    "scalar": ("int_alu", "branch", "other"),
}
# Fewest LODO rows of a kind whose MAPE is stated as that kind's uncertainty (as the estimator).
MIN_KIND_ROWS = 8


class ProfileLike(Protocol):
    """What the cost model reads of an ``InstructionProfile`` (armsim's record)."""

    runtime: str
    runtime_version: str
    isa: str
    uarch: str
    precision: str
    counts: Mapping[str, int]
    # blocks: Optional[BlockCycles] (InstructionProfile's; read with getattr: older records have none)


@dataclass(frozen=True)
class BlockModel:
    """The fitted block cost model: a block-pricing model per core (by what the core is), a constant per core."""

    models: dict[str, str]  # core -> block-pricing model (worker.armsim.armsim_blocks.CORE_MODELS)
    pipeline: dict[str, str]  # core -> family
    k: dict[str, float]
    q: dict[str, float]
    int8: dict[str, float]  # isa -> factor
    fp16: dict[str, float]  # isa -> factor of fp16 arithmetic (ARMv8.2) against fp32
    runtime: dict[tuple[str, str], float]  # (runtime, pipeline family) -> factor against ncnn
    fitted_cores: tuple[str, ...]

    def cycles(self, profile: "ProfileLike", core: str) -> Optional[tuple[float, str]]:
        """(scaled cycles of one 1-thread inference, llvm-mca model) or None: not covered."""
        blocks = getattr(profile, "blocks", None)
        model = self.models.get(core)
        if blocks is None or model is None or core not in self.k:
            return None
        fig = getattr(blocks, "cycles", {}).get(model)
        if not fig:
            return None
        factor = self.k[core] * self.runtime.get((profile.runtime, self.pipeline.get(core, "")), 1.0)
        if profile.precision == "int8":
            factor *= self.int8.get(profile.isa, 1.0)
        elif profile.precision == "fp16":
            factor *= self.fp16.get(profile.isa, 1.0)
        return fig[0] * factor, model


def _describe_model(model: str) -> str:
    """A block-pricing model as a cell's note names it."""
    if model == "inorder-a7":  # LLVM has no Cortex-A7 model: Arm's description of it in GCC
        return f"{model} (in-order dual issue, Arm's Cortex-A7 pipeline description in GCC)"
    if model.startswith("inorder-"):
        return f"{model} (in-order dual issue, LLVM 19 cortex-{model.split('-', 1)[1]} figures + overrides)"
    return f"llvm-mca -mcpu={model}"


def group_counts(counts: Mapping[str, int]) -> dict[str, float]:
    """Instructions per group of one inference (missing classes count 0)."""
    return {g: float(sum(int(counts.get(c, 0)) for c in classes)) for g, classes in GROUPS.items()}


@dataclass(frozen=True)
class CoreCost:
    """One core's fitted figures and where they come from."""

    core: str
    isa: str
    cpi: dict[str, float]  # group -> cycles per instruction
    cpi_min: dict[str, float]  # physical lower bounds (issue width, load/store pipes)
    parallel_fraction: float
    derived: bool  # no dev rows of this core: figures carried from other cores (see source)
    source: str

    def cycles(self, counts: Mapping[str, int]) -> float:
        n = group_counts(counts)
        return sum(n[g] * self.cpi[g] for g in GROUPS)


@dataclass(frozen=True)
class KindFigure:
    """LODO MAPE of one kind of cell; ``core``/``runtime`` None: pooled over them."""

    core: Optional[str]
    threads: str  # "1" | "multi"
    precision: str
    runtime: Optional[str]
    mape_pct: float
    rows: int


class CostModel:
    """The fitted cost model (immutable); ``load()`` reads the shipped parameters."""

    def __init__(self, params: Mapping[str, Any], path: Optional[Path] = None) -> None:
        where = path or "armsim cost-model parameters"
        try:
            self.version = str(params["version"])
            self.runtime_versions: dict[str, tuple[str, ...]] = {
                str(k): tuple(str(x) for x in v) for k, v in params["runtime_versions"].items()}
            self.cores: dict[str, CoreCost] = {
                str(name): CoreCost(core=str(name), isa=str(c["isa"]),
                                    cpi={g: float(c["cpi"][g]) for g in GROUPS},
                                    cpi_min={g: float(c["cpi_min"][g]) for g in GROUPS},
                                    parallel_fraction=float(c["parallel_fraction"]),
                                    derived=bool(c["derived"]), source=str(c["source"]))
                for name, c in params["cores"].items()}
            self.cpi_max = float(params["bounds"]["cpi_max"])
            self.costed_code: set[tuple[str, str]] = {(str(v), str(p)) for v, p in params["costed_code"]}
            self.version_factors: dict[tuple[str, str], float] = {
                (str(v["runtime_version"]), str(v["precision"])): float(v["factor"]) for v in params["version_factors"]}
            self.precision_factors: dict[tuple[str, str], float] = {
                (str(v["precision"]), str(v["isa"])): float(v["factor"]) for v in params.get("precision_factors", ())}
            bm = params.get("block_model")
            self.block_model: Optional[BlockModel] = None if not bm else BlockModel(
                models={str(k): str(v) for k, v in bm["models"].items()},
                pipeline={str(k): str(v) for k, v in bm["pipeline"].items()},
                k={str(c): float(v) for c, v in bm["k"].items()}, q={str(c): float(v) for c, v in bm["q"].items()},
                int8={str(i): float(v) for i, v in bm["int8"].items()},
                fp16={str(i): float(v) for i, v in bm.get("fp16", {}).items()},
                runtime={(str(f["runtime"]), str(f["pipeline"])): float(f["factor"]) for f in bm["runtime"]},
                fitted_cores=tuple(str(c) for c in bm["fitted_cores"]))
            unc = params["uncertainty"]
            self.kinds: tuple[KindFigure, ...] = tuple(
                KindFigure(k.get("core"), str(k["threads"]), str(k["precision"]), k.get("runtime"),
                           float(k["mape_pct"]), int(k["rows"])) for k in unc["per_kind"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CostModelUnavailable(f"{where}: malformed parameters ({type(exc).__name__}: {exc})") from None
        for c in self.cores.values():
            if not 0 <= c.parallel_fraction <= 1 or any(
                    not (c.cpi_min[g] > 0 and c.cpi_min[g] - 1e-9 <= c.cpi[g] <= self.cpi_max + 1e-9) for g in GROUPS):
                raise CostModelUnavailable(f"{where}: {c.core}: figures outside their physical bounds")
        if any(not 0.1 <= f <= 10 for f in (*self.version_factors.values(), *self.precision_factors.values())):
            raise CostModelUnavailable(f"{where}: a runtime-version or precision factor outside [0.1, 10]")

    def core(self, core: str) -> CoreCost:
        try:
            return self.cores[core]
        except KeyError:
            raise CostModelUnavailable(f"armsim cost model {self.version} has no figures for {core} "
                                       f"(covered: {', '.join(sorted(self.cores))})") from None

    def kind_figure(self, core: str, threads: int, precision: str, runtime: str) -> Optional[KindFigure]:
        """This cell's own kind, else the same kind pooled over cores, then over runtimes too."""
        kind = "1" if threads == 1 else "multi"
        for want in ((core, runtime), (None, runtime), (None, None)):
            for fig in self.kinds:
                if (fig.core, fig.runtime) == want and (fig.threads, fig.precision) == (kind, precision) \
                        and fig.rows >= MIN_KIND_ROWS:
                    return fig
        return None

    def cycles_1t(self, profile: ProfileLike, core: str) -> float:
        cost = self.core(core)
        if profile.isa != cost.isa:
            raise CostModelUnavailable(f"a {profile.isa} profile cannot be costed on {core} ({cost.isa})")
        return cost.cycles(profile.counts) * self.version_factor(profile)

    def version_factor(self, profile: ProfileLike) -> float:
        """The cycles factor of the profile's code: its runtime version's (per precision) times its
        precision's (int8, per ISA group)."""
        return (self.version_factors.get((profile.runtime_version, profile.precision), 1.0)
                * self.precision_factors.get((profile.precision, profile.isa), 1.0))

    def predict_ms(self, profile: ProfileLike, core: str, clock_ghz: float, threads: int
                   ) -> tuple[float, float, float, str]:
        """(ms, low_ms, high_ms, source_note) of one inference at ``threads`` threads."""
        if not clock_ghz > 0 or threads < 1:
            raise CostModelUnavailable(f"clock {clock_ghz} GHz / {threads} threads: expected positive values")
        cost = self.core(core)
        if profile.isa != cost.isa:
            raise CostModelUnavailable(f"a {profile.isa} profile cannot be costed on {core} ({cost.isa})")
        q = cost.parallel_fraction
        priced = self.block_model.cycles(profile, core) if self.block_model else None
        if priced is not None and self.block_model is not None:
            q = self.block_model.q.get(core, q)
            cycles_1t, how = priced[0], f"blocks priced by {_describe_model(priced[1])}"
            if core not in self.block_model.fitted_cores:
                how += f"; {core} has no dev rows with block profiles: its constant is its pipeline family's mean"
        else:
            cycles_1t, how = self.cycles_1t(profile, core), "instruction-class CPIs (no block cycles in the profile)"
        ms = cycles_1t * ((1 - q) + q / threads) / (clock_ghz * 1e6)
        fig = self.kind_figure(core, threads, profile.precision, profile.runtime)
        if fig is None:
            raise CostModelUnavailable(f"no LODO figure for {threads}-thread {profile.precision} {profile.runtime} "
                                       f"on {core}: the cost model states no latency it cannot bound")
        m = fig.mape_pct / 100
        # its held-out figure is the cell's uncertainty (latency.statement), stated once, not here again
        note = (f"armsim:{self.version} {profile.runtime} {profile.isa} {profile.precision} ({core}@{clock_ghz:g}GHz, "
                f"{threads}t, {how})")
        if cost.derived:
            note += f"; {core} has no dev rows: {cost.source}"
        if profile.runtime_version not in self.runtime_versions.get(profile.runtime, (profile.runtime_version,)):
            note += (f"; {profile.runtime_version} is not a version the fit profiled last "
                     f"({', '.join(self.runtime_versions[profile.runtime])})")
        elif (profile.runtime_version, profile.precision) not in self.costed_code:
            note += (f"; no dev rows were costed with {profile.runtime_version} {profile.precision} code: its IPC is "
                     "assumed to be that of the code the rows ran")
        return ms, ms * max(0.0, 1 - m), ms * (1 + m), note


def _load_cached(path: str) -> CostModel:
    """The file read every time (~50 KB), parsed once per content (``_parsed``)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError:
        raise CostModelUnavailable(f"{path}: no armsim cost-model parameters (run scripts/fit_armsim.py)") from None
    return _parsed(bytes_digest(raw), raw, str(p))


@lru_cache(maxsize=4)
def _parsed(sha256: str, raw: bytes, path: str) -> CostModel:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise CostModelUnavailable(f"{path}: unreadable armsim cost-model parameters ({exc})") from None
    return CostModel(data, Path(path))


def load(path: Path = DEFAULT_PARAMS) -> CostModel:
    """The cost model of a params file (cached per file content: parameters rewritten in place,
    even with their old size and time, are read anew)."""
    return _load_cached(str(path))


def predict_ms(profile: ProfileLike, core: str, clock_ghz: float, threads: int) -> tuple[float, float, float, str]:
    """The interface armsim's predictor calls: the shipped cost model's figures for one cell."""
    return load().predict_ms(profile, core, clock_ghz, threads)
