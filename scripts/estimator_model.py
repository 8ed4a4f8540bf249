"""The estimator's least-squares fit with the hardware's order built in (used by ``fit_estimator``).

Why a separate module: ``fit_estimator`` reads the data, runs the folds and writes the params; this
module is the one definition of what is fitted and which constraints hold *by construction* in
every fit (so in every fold, not only in the shipped one). Each constraint cites its source:

* **Per-clock order of the cores** (``ORDER``): every core's log compute and memory scale is its
  parent's plus a bounded step, so Cortex-A7 >= A53 >= A55 >= A75, A76 and A53 >= A72, A73 cycles
  for the same work, whatever the rows. Documented per-clock ratios (``PRIORS``) are soft priors
  of width ``sigma`` (chosen by nested SoC folds, never on the fold scored): they place a core a
  fold has no rows of.
* **Threads**: Amdahl fractions bounded to [0, 1] (never slower than 1 thread, never more than N x).
* **fp16** (executed fp16: ncnn on ARMv8.2 cores): one dense and one depthwise divisor shared by
  the FP16 cores, each in [1, 2] (8 fp16 lanes per 128-bit NEON op instead of 4 fp32).
* **int8 per runtime and ISA group**: ncnn's fitted on its int8 rows, with the per-clock order kept
  for int8 cells too (``int8 order``); XNNPACK's bounded so int8 is faster than fp32 and more so
  with the dot product (``XNNPACK_INT8``), anchored where no XNNPACK int8 rows exist by the
  published ratio ``XNNPACK_INT8_ANCHOR``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Optional, Protocol, Sequence

import numpy as np

REFERENCE_CORE = "Cortex-A53"
REFERENCE_RUNTIME = "ncnn"
ALL_CORES = ("Cortex-A7", "Cortex-A53", "Cortex-A55", "Cortex-A72", "Cortex-A73", "Cortex-A75", "Cortex-A76")
RUNTIMES_KNOWN = ("ncnn", "tflite")
INT8_GROUPS = ("armv7", "armv8.0", "armv8.2")

ARM_A55_A75 = ("Arm launch figures for Cortex-A75/A55 (May 2017), as reported by Android Authority "
               "'A closer look at ARM's new Cortex-A75 and Cortex-A55 CPUs' (2017-05-31)")
ARM_A76 = ("Arm Cortex-A76 disclosure (May 2018), as reported by Android Authority 'Cortex-A76 deep dive': "
           "two 128-bit NEON pipes with twice the SIMD bandwidth of Arm's prior cores")
ANANDTECH_A73 = ("AnandTech 'HiSilicon Kirin 960 performance and power' (2017): Cortex-A73 ~11% ahead of "
                 "Cortex-A72 in SPECint2000 at similar clocks, no FP/NEON uplift claimed")
ARM_A53 = ("Arm Cortex-A53 launch (Oct 2012) and product brief: 2.3 DMIPS/MHz against the Cortex-A7's 1.9, "
           "ARMv8 with a wider NEON datapath for AArch64 code; an A7 is never faster per clock")
ARM_BIG_LITTLE = ("Arm big.LITTLE / DynamIQ pairings: the out-of-order Cortex-A72/A73 are the big cores beside "
                  "the in-order Cortex-A53, the Cortex-A75/A76 beside the Cortex-A55 (Arm product briefs): the "
                  "big core of a pair is the faster per clock")
A55_VS_A53 = f"{ARM_A55_A75}: Cortex-A55 +18% integer / +38% FP/NEON performance vs Cortex-A53 at the same clock"

# core -> (parent, +1: never faster than the parent per clock / -1: never slower, source)
ORDER: dict[str, tuple[str, int, str]] = {
    "Cortex-A7": ("Cortex-A53", +1, ARM_A53),
    "Cortex-A55": ("Cortex-A53", -1, A55_VS_A53),
    "Cortex-A72": ("Cortex-A53", -1, ARM_BIG_LITTLE),
    "Cortex-A73": ("Cortex-A53", -1, ARM_BIG_LITTLE),
    "Cortex-A75": ("Cortex-A55", -1, ARM_BIG_LITTLE),
    "Cortex-A76": ("Cortex-A55", -1, ARM_BIG_LITTLE),
}
# Documented per-clock speed ratios (core / other), soft priors on the compute and memory scales.
PRIORS: tuple[tuple[str, str, float, str], ...] = (
    ("Cortex-A55", "Cortex-A53", 1.38, A55_VS_A53),
    ("Cortex-A73", "Cortex-A72", 1.0, ANANDTECH_A73),
    ("Cortex-A75", "Cortex-A73", 1.33, f"{ARM_A55_A75}: Cortex-A75 +33% FP/NEON vs Cortex-A73 at the same clock"),
    ("Cortex-A76", "Cortex-A75", 2.0, f"{ARM_A76}: Cortex-A76 = 2x Cortex-A75 SIMD throughput"),
)
SIGMA_GRID = (0.03, 0.1, 0.3, 1.0)  # widths of the priors, chosen by nested SoC folds
RIDGE_SIGMA = 3.0  # keeps a parameter no row sees finite; negligible where rows exist
FP16_MAX = 2.0
FP16_SOURCE = ("ARMv8.2-A half-precision arithmetic (FEAT_FP16): Cortex-A55/A75/A76 implement it, Cortex-A7/A53/A72/"
               "A73 do not (Arm core TRMs). A 128-bit NEON op holds 8 fp16 lanes vs 4 fp32 lanes (compute gains at "
               "most 2x: bounded, one divisor for dense work and one for depthwise convs, shared by the FP16 cores) "
               "and fp16 tensors are half the bytes (bytes / 2)")
INT8_BYTES_MAX = 4.0
XNNPACK_KERNELS = ("google/XNNPACK src/configs/gemm-config.c (init_qs8_qc8w_gemm_config): on a core with the dot "
                   "product (xnn_arch_arm_neon_dot: Cortex-A55/A75/A76) the QS8 GEMMs are the c4 'neondot' kernels "
                   "(SDOT: 16 int8 MACs per 128-bit instruction); elsewhere the 'mlal_lane' kernels (Cortex-A53 "
                   "'neonv8_mlal_lane_cortex_a53', Cortex-A7 'neon_mlal_lane_cortex_a7': SMLAL, 4 MACs per "
                   "instruction, as FMLA .4s does for fp32)")
XNNPACK_INT8 = (f"{XNNPACK_KERNELS}. So the int8 compute divisor of the ARMv7/ARMv8.0 cores (one value: the same "
                "MLAL kernels) is bounded to [1, 2] (as many MACs per instruction as fp32, fewer bytes to load) and "
                "the dot-product cores' is that times [1, 4] (SDOT's 4x MACs per instruction), prior centre 2x (the "
                "geometric middle, width log 2); int8 tensors are a quarter of the bytes (bytes / 4, requantization "
                "fused in the kernels' output stage)")
# Published end-to-end ratio (fp32 / int8 latency) that anchors XNNPACK's ARMv8.0 int8 divisor when
# the dev data hold no XNNPACK int8 rows. Not a dev row: a pseudo-observation of the ratio.
XNNPACK_INT8_ANCHOR = {
    "model": "std:mobilenet_v2", "core": "Cortex-A53", "clock_ghz": 1.4, "threads": 4, "fp32_ms": 95.7,
    "int8_ms": 70.5,
    "source": ("Raspberry Pi 3B+ (BCM2837B0, 4x Cortex-A53 1.4 GHz), TFLite + XNNPACK, MobileNet v2 float 95.7 ms vs "
               "int8 70.5 ms (1.36x): the table of TensorFlow Blog 'Faster Quantized Inference with XNNPACK' (Marat "
               "Dukhan, Frank Barchard, 2021-09-09), read through its summary at velog.io/@kcw4875 (2022-09-23) "
               "because the stored blog page carries its tables as images; threads and OS bitness are not stated "
               "there (4 threads assumed: 95.7 ms is 4-thread speed on that board)")}
FP16_CORES = ("Cortex-A55", "Cortex-A75", "Cortex-A76")
DRAM_SOURCE = ("lodevem/latency/memory.py with the SoC facts of lodevem/data/socs.yaml (sources there): a kernel's "
               "weights stream from DRAM when the model's weights exceed the core's reachable cache (L2 + L3), "
               "activations beyond it spill; time = MB / peak GB/s x inverse_efficiency (fitted, >= 1: never "
               "faster than the SoC's peak), threads by an Amdahl fraction (fitted, one memory controller)")
# Which MAC terms each runtime charges where: XNNPACK has no Winograd convolution.
TERM_MAPS: dict[str, dict[str, str]] = {"ncnn": {}, "tflite": {"conv3x3s1_macs": "gemm_conv_macs", "winograd_io": ""}}
XNNPACK_NO_WINOGRAD = ("XNNPACK has no Winograd convolution: dense 3x3 stride-1 convs run as indirect GEMM "
                       "(google/XNNPACK src/operators/convolution-nhwc.c), so TFLite charges their MACs at the GEMM rate")


class WorkRow(Protocol):
    """What the fit reads of a dev row (``fit_estimator.Row``)."""

    device: str
    core: str
    clock_ghz: float
    threads: int
    precision: str
    avg_ms: float
    runtime: str

    @property
    def graph_key(self) -> str: ...

    @property
    def board(self) -> tuple[str, str]: ...


def int8_group(core: str) -> str:
    from lodevem.latency.arithmetic import int8_group as group

    return group(core)


def executed(runtime: str, core: str, precision: str) -> str:
    from lodevem.latency.arithmetic import executed as run

    return run(runtime, core, precision)


@dataclass
class Fit:
    """One fit's parameters (what the estimator reads) plus its bookkeeping for the params file."""

    theta: np.ndarray
    scales: dict[str, tuple[float, float]]  # core -> (compute, memory), reference A53 = (1, 1)
    runtime_factors: dict[str, tuple[float, float]]  # runtime -> (compute, memory); ncnn = (1, 1)
    q: dict[str, tuple[float, float]]  # core -> (compute, memory) parallel fractions
    phi: tuple[float, float]  # fp16 divisors: dense, depthwise
    int8: dict[str, dict[str, float]]  # runtime -> int8 group -> compute divisor
    mu8: dict[str, float]  # runtime -> int8 bytes divisor
    sigma: float
    rows_per_core: dict[str, int]
    runtimes_per_core: dict[str, tuple[str, ...]]
    precisions_per_runtime: dict[str, tuple[str, ...]]
    q_source: dict[str, str] = field(default_factory=dict)
    int8_measured: dict[str, bool] = field(default_factory=dict)
    dram: tuple[float, float] = (0.0, 0.0)  # inverse efficiency (>= 1) of the SoC's peak bandwidth, parallel fraction
    rms_log: float = 0.0
    x: Optional[np.ndarray] = None  # the solver's vector: a warm start for the next fold

    def estimator_params(self) -> dict[str, Any]:
        """The predictive part of the params file (what ``Estimator`` reads)."""
        from lodevem.latency.estimator import TERMS

        def int8_source(rt: str) -> str:
            if rt == "tflite":
                rows = ("its few tflite int8 rows" if self.int8_measured.get(rt) else
                        "no tflite int8 rows in the dev data")
                return (f"bounded prior ({XNNPACK_INT8}); the ARMv8.0 divisor anchored on "
                        f"{XNNPACK_INT8_ANCHOR['source']}; fitted with {rows}")
            return f"fit on {rt} int8 rows per int8 ISA group (dot-product cores, ARMv8.0, ARMv7)"

        return {
            "version": "v4",
            "reference_core": REFERENCE_CORE,
            "reference_runtime": REFERENCE_RUNTIME,
            "terms": {t: {"cycles_per_unit": float(v)} for t, v in zip(TERMS, self.theta)},
            "cores": {c: {
                "compute_scale": self.scales[c][0], "memory_scale": self.scales[c][1],
                "parallel_fraction_compute": self.q[c][0], "parallel_fraction_memory": self.q[c][1],
                "source": (f"fit: {self.rows_per_core[c]} rows" if c in self.rows_per_core else
                           "no rows: the per-clock order and priors place it"),
                "derived": c not in self.rows_per_core,
                "measured_runtimes": list(self.runtimes_per_core.get(c, ())),
                "order": (f"{'never faster' if ORDER[c][1] > 0 else 'never slower'} than {ORDER[c][0]} per clock: "
                          f"{ORDER[c][2]}") if c in ORDER else "reference core",
            } for c in ALL_CORES},
            "runtimes": {rt: {"compute_factor": f[0], "memory_factor": f[1], "term_map": TERM_MAPS[rt],
                              "measured_precisions": list(self.precisions_per_runtime.get(rt, ())),
                              "source": ("reference runtime" if rt == REFERENCE_RUNTIME else
                                         f"fit: {XNNPACK_NO_WINOGRAD}" if rt == "tflite" else "fit"),
                              "int8": {"compute_speedup": dict(self.int8[rt]), "memory_speedup": self.mu8[rt],
                                       "measured": bool(self.int8_measured.get(rt)), "source": int8_source(rt)}}
                         for rt, f in self.runtime_factors.items()},
            "dram": {"inverse_efficiency": self.dram[0], "parallel_fraction": self.dram[1], "source": DRAM_SOURCE},
            "precision": {"fp16": {"compute_speedup": self.phi[0], "depthwise_speedup": self.phi[1],
                                   "memory_speedup": 2.0, "cores": list(FP16_CORES), "source": FP16_SOURCE}},
        }

    @cached_property
    def estimator(self) -> Any:
        from lodevem.latency.estimator import Estimator

        return Estimator(self.estimator_params())

    def predict_row(self, r: WorkRow, works: dict[str, Any]) -> float:
        return self.estimator.latency_ms(row_work(r, works), r.core, r.clock_ghz, r.runtime, r.precision, r.threads)

    def predict(self, work: np.ndarray, core: str, clock: float, threads: int = 1, precision: str = "fp32",
                runtime: str = REFERENCE_RUNTIME) -> float:
        return self.estimator.latency_ms(work, core, clock, runtime, precision, threads)


def row_work(r: WorkRow, works: dict[str, Any]) -> np.ndarray:
    """The row's work vector on its SoC: the graph's summed terms plus its DRAM ms at the peak of
    the row's SoC (``lodevem.latency.memory``; pooled where the SoC does not publish it)."""
    return works[r.graph_key].on(getattr(r, "soc", "") or None, r.core)


class _Layout:
    """Where each parameter sits in the solver's vector, and its bounds."""

    def __init__(self) -> None:
        self.slices: dict[str, slice] = {}
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.x0: list[float] = []

    def add(self, name: str, size: int, lo: float, hi: float, start: float) -> None:
        self.slices[name] = slice(len(self.x0), len(self.x0) + size)
        self.lower += [lo] * size
        self.upper += [hi] * size
        self.x0 += [start] * size

    def __getitem__(self, name: str) -> slice:
        return self.slices[name]


def fit(rows: Sequence[WorkRow], works: dict[str, Any], sigma: float = 0.3, board_offsets: bool = True,
        x0: Optional[np.ndarray] = None) -> Fit:
    """Bounded least squares on log latency over every row, with the order and priors above.

    ``sigma``: width (in log) of the documented per-clock priors (a hyperparameter: nested folds
    choose it). ``board_offsets``: one log offset per (board, core) where a (core, runtime) has
    several boards, centred per (core, runtime); predictions use 0.
    """
    from scipy.optimize import least_squares

    from lodevem.latency.estimator import COMPUTE_TERMS, TERMS

    obs = [r for r in rows if r.graph_key in works]
    if REFERENCE_CORE not in {r.core for r in obs} or REFERENCE_RUNTIME not in {r.runtime for r in obs}:
        raise ValueError(f"no {REFERENCE_CORE} {REFERENCE_RUNTIME} rows: the reference is needed")
    missing_rt = [rt for rt in RUNTIMES_KNOWN if rt not in {r.runtime for r in obs}]
    if missing_rt:
        raise ValueError(f"no {', '.join(missing_rt)} rows: the runtime cannot be fitted")
    one_thread = {(r.board, r.runtime) for r in obs if r.threads == 1}
    mt_cores = sorted({r.core for r in obs if r.threads > 1 and (r.board, r.runtime) in one_thread})
    if not mt_cores:
        raise ValueError("no board measured both 1 and N threads: thread scaling cannot be fitted")
    groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for r in obs:
        groups.setdefault((r.core, r.runtime), set()).add(r.board)
    boards = sorted(b for g in groups.values() if len(g) > 1 for b in g) if board_offsets else []
    offset_groups = [sorted(g) for _, g in sorted(groups.items()) if len(g) > 1] if board_offsets else []

    n_t, n_c = len(TERMS), len(COMPUTE_TERMS)
    dw_col = COMPUTE_TERMS.index("depthwise_macs")
    Wd = np.array([row_work(r, works)[n_t] for r in obs])  # DRAM ms at the SoC's peak
    Wc = np.zeros((len(obs), n_c))
    for i, r in enumerate(obs):
        w = works[r.graph_key].work
        for j, term in enumerate(COMPUTE_TERMS):
            target = TERM_MAPS[r.runtime].get(term, term)
            if target:
                Wc[i, COMPUTE_TERMS.index(target)] += w[j]
    Wb = np.array([works[r.graph_key].work[n_c] for r in obs])
    Wk = np.array([works[r.graph_key].work[n_c + 1] for r in obs])
    y = np.log([r.avg_ms for r in obs])
    clock = np.array([r.clock_ghz for r in obs])
    nthr = np.array([float(r.threads) for r in obs])
    done = [executed(r.runtime, r.core, r.precision) for r in obs]
    fp16 = np.array([d == "fp16" for d in done])
    int8 = np.array([d in ("int8", "int8-dynamic") for d in done])
    int8_bytes = np.array([d == "int8" for d in done])  # dynamic range keeps float tensors
    tflite = np.array([r.runtime == "tflite" for r in obs])
    core_idx = np.array([ALL_CORES.index(r.core) for r in obs])
    grp_idx = np.array([INT8_GROUPS.index(int8_group(r.core)) for r in obs])

    L = _Layout()
    L.add("theta", n_t, 0.0, np.inf, 0.5)
    steps = [c for c in ALL_CORES if c in ORDER]
    for side in ("c", "m"):
        L.add(side, len(steps), 0.0, np.inf, 0.2)  # each core's step from its parent, >= 0
    L.add("rt", 2, -np.inf, np.inf, 0.0)  # tflite compute, memory (log)
    L.add("q", 2 * len(mt_cores), 0.0, 1.0, 0.7)
    L.add("phi", 2, 0.0, math.log(FP16_MAX), 0.2)
    L.add("k80", 1, -math.log(INT8_BYTES_MAX), math.log(INT8_BYTES_MAX), 0.2)  # ncnn ARMv8.0
    L.add("u7", 1, 0.0, np.inf, 0.5)  # ncnn ARMv7: k7 = k80 + c_A7 - u7 (A7 int8 never faster per clock)
    L.add("udot", 1, 0.0, np.inf, 0.5)  # ncnn dot: kdot = k80 + c_A55 + udot (A55 int8 never slower)
    L.add("mu8", 1, -math.log(INT8_BYTES_MAX), math.log(INT8_BYTES_MAX), 0.5)
    L.add("kx80", 1, 0.0, math.log(2.0), 0.2)  # XNNPACK MLAL cores (A53, A7 and the ARMv8.0 big cores)
    L.add("uxdot", 1, 0.0, math.log(4.0), math.log(2.0))  # XNNPACK dot cores: kx80 + uxdot
    L.add("dram", 1, 0.0, np.inf, 0.5)  # log inverse efficiency (>= 0: never faster than the SoC's peak)
    L.add("qd", 1, 0.0, 1.0, 0.5)  # DRAM time's parallel fraction (threads share one memory controller)
    L.add("offsets", len(boards), -np.inf, np.inf, 0.0)
    board_idx = {b: i for i, b in enumerate(boards)}
    row_board = np.array([board_idx.get(r.board, -1) for r in obs])
    q_idx = np.array([mt_cores.index(c) if c in mt_cores else -1 for c in (r.core for r in obs)])
    anchor = XNNPACK_INT8_ANCHOR
    anchor_work = works.get(str(anchor["model"]))

    def log_scales(p: np.ndarray, side: str) -> np.ndarray:
        """Log scale per core in ALL_CORES from the parent steps (the order, by construction)."""
        out = {REFERENCE_CORE: 0.0}
        step = dict(zip(steps, p[L[side]]))
        for core in ALL_CORES:  # parents come first in ALL_CORES order except A75/A76 after A55
            if core in ORDER:
                parent, sign, _ = ORDER[core]
                out[core] = out[parent] + sign * step[core]
        return np.array([out[c] for c in ALL_CORES])

    def int8_logs(p: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log int8 compute divisors per group (ARMv7, ARMv8.0, ARMv8.2) for ncnn and for tflite."""
        k80 = p[L["k80"]][0]
        ncnn = np.array([k80 + cs[ALL_CORES.index("Cortex-A7")] - p[L["u7"]][0], k80,
                         k80 + cs[ALL_CORES.index("Cortex-A55")] + p[L["udot"]][0]])
        kx = p[L["kx80"]][0]
        return ncnn, np.array([kx, kx, kx + p[L["uxdot"]][0]])

    def model(p: np.ndarray, cs: np.ndarray, ms: np.ndarray, wc: np.ndarray, wb: np.ndarray, wk: np.ndarray,
              on_fp16: np.ndarray, on_int8: np.ndarray, on_tflite: np.ndarray, cidx: np.ndarray, gidx: np.ndarray,
              qc: np.ndarray, qm: np.ndarray, n: np.ndarray, int8_tensors: np.ndarray, wd: np.ndarray,
              clk: np.ndarray) -> np.ndarray:
        theta = p[L["theta"]]
        rtc, rtm = np.exp(np.where(on_tflite, p[L["rt"]][0], 0.0)), np.exp(np.where(on_tflite, p[L["rt"]][1], 0.0))
        s, m = np.exp(cs[cidx]) * rtc, np.exp(ms[cidx]) * rtm
        dense = s * (wc @ theta[:n_c] - wc[:, dw_col] * theta[dw_col])
        dw = s * wc[:, dw_col] * theta[dw_col]
        B = m * theta[n_c] * wb
        K = m * theta[n_c + 1] * wk
        D = math.exp(p[L["dram"]][0]) * wd * clk  # ms at the achieved bandwidth, in Mcycles
        qd = p[L["qd"]][0]
        phi = np.exp(p[L["phi"]])
        dense, dw, B = (np.where(on_fp16, dense / phi[0], dense), np.where(on_fp16, dw / phi[1], dw),
                        np.where(on_fp16, B / 2.0, B))
        D = np.where(on_fp16, D / 2.0, D)
        k_ncnn, k_x = int8_logs(p, cs)
        kappa = np.exp(np.where(on_tflite, k_x[gidx], k_ncnn[gidx]))
        mu = np.where(on_tflite, INT8_BYTES_MAX, math.exp(p[L["mu8"]][0]))
        dense, dw, B = (np.where(on_int8, dense / kappa, dense), np.where(on_int8, dw / kappa, dw),
                        np.where(int8_tensors, B / mu, B))
        D = np.where(int8_tensors, D / mu, D)
        cycles = (dense + dw) * ((1 - qc) + qc / n) + (B + K) * ((1 - qm) + qm / n) + D * ((1 - qd) + qd / n)
        return np.log(np.maximum(cycles, 1e-12))

    # The anchor's fp32 and int8 runs are two more rows of the one vectorised model call (their
    # work does not depend on the parameters, so it is stacked once here): one call per residual
    # instead of three, the fit's hot path (numerical Jacobian: ~80 residuals per step).
    n_obs = len(obs)
    a_rows = 0
    m_args = [Wc, Wb, Wk, fp16, int8, tflite, core_idx, grp_idx, nthr, int8_bytes, Wd, clock]
    a_q = -1
    if anchor_work is not None:
        aw = anchor_work.on(None, str(anchor["core"]))  # BCM2837B0 is not in the SoC table: pooled facts
        a_core = ALL_CORES.index(str(anchor["core"]))
        a_grp = INT8_GROUPS.index(int8_group(str(anchor["core"])))
        a_qs = q_idx[core_idx == a_core]
        a_q = int(a_qs[0]) if len(a_qs) else -1
        wc_a = np.zeros((1, n_c))
        for j, term in enumerate(COMPUTE_TERMS):
            target = TERM_MAPS["tflite"].get(term, term)
            if target:
                wc_a[0, COMPUTE_TERMS.index(target)] += aw[j]
        two = lambda v: np.array([v, v])  # noqa: E731
        a_d = float(aw[n_t]) if len(aw) > n_t else 0.0
        extra_rows = [np.vstack([wc_a, wc_a]), two(aw[n_c]), two(aw[n_c + 1]), np.array([False, False]),
                      np.array([False, True]), np.array([True, True]), two(a_core), two(a_grp),
                      two(float(anchor["threads"])), np.array([False, True]), two(a_d),
                      two(float(anchor["clock_ghz"]))]
        m_args = [np.concatenate([a, b]) for a, b in zip(m_args, extra_rows)]
        a_rows = 2
    (mWc, mWb, mWk, mfp16, mint8, mtfl, mcore, mgrp, mthr, mbytes, mWd, mclk) = m_args
    anchor_log_ratio = math.log(float(anchor["fp32_ms"]) / float(anchor["int8_ms"]))
    log_clock = np.log(clock)
    # zero-mean constraint per offset group: the mean of each group's offsets, as one matrix product
    group_mean = np.zeros((len(offset_groups), len(boards)))
    for gi, g in enumerate(offset_groups):
        group_mean[gi, [board_idx[b] for b in g]] = 1.0 / len(g)
    on_board = row_board >= 0
    board_col = np.maximum(row_board, 0)
    prior_idx = [(ALL_CORES.index(a), ALL_CORES.index(b), math.log(ratio)) for a, b, ratio, _ in PRIORS]

    def residuals(x: np.ndarray) -> np.ndarray:
        cs, ms = log_scales(x, "c"), log_scales(x, "m")
        qq = x[L["q"]].reshape(-1, 2)
        mean_q = qq.mean(axis=0)
        qc = np.where(q_idx >= 0, qq[np.maximum(q_idx, 0), 0], mean_q[0])
        qm = np.where(q_idx >= 0, qq[np.maximum(q_idx, 0), 1], mean_q[1])
        if a_rows:
            aq = qq[a_q] if a_q >= 0 else mean_q
            qc, qm = np.concatenate([qc, [aq[0], aq[0]]]), np.concatenate([qm, [aq[1], aq[1]]])
        out = model(x, cs, ms, mWc, mWb, mWk, mfp16, mint8, mtfl, mcore, mgrp, qc, qm, mthr, mbytes, mWd, mclk)
        pred = out[:n_obs] - log_clock
        extra: list[float] = []
        if boards:
            off = x[L["offsets"]]
            pred = pred + np.where(on_board, off[board_col], 0.0)
            extra += list(10.0 * (group_mean @ off))
        for a, b, log_ratio in prior_idx:  # documented per-clock ratios, soft
            for side in (cs, ms):
                extra.append((side[a] - side[b] + log_ratio) / sigma)
        extra += list(np.concatenate([x[L["c"]], x[L["m"]], x[L["rt"]], x[L["k80"]], x[L["mu8"]]]) / RIDGE_SIGMA)
        k_ncnn, _ = int8_logs(x, cs)  # a group no int8 row sees keeps the ARMv8.0 divisor
        extra += [(k_ncnn[0] - k_ncnn[1]) / RIDGE_SIGMA, (k_ncnn[2] - k_ncnn[1]) / RIDGE_SIGMA]
        # XNNPACK's int8: the dot-product factor's prior (centre 2x, width log 2) and the published
        # ARMv8.0 ratio, always (evidence like a row: XNNPACK int8 rows, where any, weigh in beside them)
        extra.append((x[L["uxdot"]][0] - math.log(2.0)) / math.log(2.0))
        if a_rows:  # the anchor's fp32 / int8 ratio (its two stacked rows)
            extra.append(float(out[n_obs] - out[n_obs + 1]) - anchor_log_ratio)
        return np.concatenate([pred - y, extra])

    start = np.array(L.x0, dtype=float) if x0 is None or len(x0) != len(L.x0) else np.clip(x0, L.lower, L.upper)
    sol = least_squares(residuals, start, bounds=(L.lower, L.upper), method="trf", x_scale="jac", max_nfev=20000)
    x = sol.x
    cs, ms = log_scales(x, "c"), log_scales(x, "m")
    theta = np.where(x[L["theta"]] < 1e-9, 0.0, x[L["theta"]])
    qq = x[L["q"]].reshape(-1, 2)
    q = {c: (float(qq[i, 0]), float(qq[i, 1])) for i, c in enumerate(mt_cores)}
    q_source = {c: (f"fit: {sum(r.core == c and r.threads > 1 for r in obs)} multi-thread rows, boards with 1- and "
                    f"N-thread pairs") for c in mt_cores}
    mean_fitted = (statistics.mean(v[0] for v in q.values()), statistics.mean(v[1] for v in q.values()))
    for core in ALL_CORES:
        if core not in q:
            q[core] = mean_fitted
            q_source[core] = f"no board with 1- and N-thread rows: mean of the paired cores ({', '.join(mt_cores)})"
    k_ncnn, k_x = int8_logs(x, cs)
    result = Fit(
        theta=theta, scales={c: (float(math.exp(cs[i])), float(math.exp(ms[i]))) for i, c in enumerate(ALL_CORES)},
        runtime_factors={"ncnn": (1.0, 1.0), "tflite": (float(math.exp(x[L["rt"]][0])),
                                                          float(math.exp(x[L["rt"]][1])))},
        q=q, phi=(float(math.exp(x[L["phi"]][0])), float(math.exp(x[L["phi"]][1]))),
        int8={"ncnn": {g: float(math.exp(v)) for g, v in zip(INT8_GROUPS, k_ncnn)},
              "tflite": {g: float(math.exp(v)) for g, v in zip(INT8_GROUPS, k_x)}},
        mu8={"ncnn": float(math.exp(x[L["mu8"]][0])), "tflite": INT8_BYTES_MAX}, sigma=sigma,
        rows_per_core={c: sum(r.core == c for r in obs) for c in sorted({r.core for r in obs})},
        runtimes_per_core={c: tuple(sorted({r.runtime for r in obs if r.core == c})) for c in {r.core for r in obs}},
        precisions_per_runtime={rt: tuple(p for p in ("fp32", "fp16", "int8")
                                          if any(r.runtime == rt and r.precision == p for r in obs))
                                for rt in RUNTIMES_KNOWN},
        q_source=q_source, rms_log=float(np.sqrt(np.mean(sol.fun[:len(obs)] ** 2))), x=x,
        int8_measured={"ncnn": bool((int8 & ~tflite).any()), "tflite": bool((int8 & tflite).any())},
        dram=(float(math.exp(x[L["dram"]][0])), float(x[L["qd"]][0])))
    return result
