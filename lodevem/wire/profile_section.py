"""The armsim reply's ``profile`` section: the instruction counts of one steady-state inference.

Apart from the other sections because it has its own action (armsim-profile), its own image and
its own cache, and a size of its own (per-kernel and per-thread counts).

One record on both sides: the worker builds it (``armsim_profile``) and writes it with
``to_dict``; the host reads it only through ``InstructionProfile.parse`` (bounded, type-checked:
the reply comes from a sandbox that ran a user's converted model) and the cache stores it as
JSON. The host's per-core cost model (``latency.armsim.costmodel.predict_ms``) turns it into
milliseconds. Stdlib only, like the rest of the worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional

# The classes the plugin counts (lodevem/sandbox/armsim/lodevem_icount.c). simd_fp16 and simd_dot
# are SUBSETS of simd_arith, counted separately as well: the disjoint classes sum to ``total``.
INSN_CLASSES: tuple[str, ...] = ("simd_arith", "simd_fp16", "simd_dot", "simd_load", "simd_store", "scalar_load",
                                 "scalar_store", "int_alu", "branch", "other")
DISJOINT_CLASSES: tuple[str, ...] = tuple(c for c in INSN_CLASSES if c not in ("simd_fp16", "simd_dot"))
_COUNT_FIELDS = INSN_CLASSES + ("total", "bytes_loaded", "bytes_stored")
_MAX_COUNT = 10**15  # far above any inference's count: a bigger number is garbage
_MAX_THREADS = 64


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT else None


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _counts(data: Any) -> Optional[dict[str, int]]:
    if not isinstance(data, Mapping):
        return None
    counts = {name: _count(data.get(name)) for name in _COUNT_FIELDS}
    if any(v is None for v in counts.values()):
        return None
    return counts  # type: ignore[return-value]


@dataclass(frozen=True)
class KernelShare:
    """Instructions one function (or one unnamed shared object) executed in the counted inference."""

    symbol: str  # the function's name, or "?" (an object without a symbol for the address)
    library: str  # the shared object's file name
    instructions: int
    share: float  # of all instructions of the inference

    def to_dict(self) -> dict[str, object]:
        return {"symbol": self.symbol, "library": self.library, "instructions": self.instructions,
                "share": round(self.share, 5)}


@dataclass(frozen=True)
class ThreadCounts:
    """One guest thread's counts for one inference (thread 0: the one that called the runtime)."""

    thread: int
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return self.counts["total"]


@dataclass(frozen=True)
class BlockCycles:
    """The priced block profile of one inference (``worker.armsim.armsim_blocks``): distinct translation
    blocks and the instructions they hold, the LLVM version that priced them, and per llvm-mca
    model the cycles of the inference (all threads, the busiest thread). ``error``: why there are
    none (no LLVM in an older image, an oversized block file): the counts stand without them."""

    distinct: int = 0
    instructions: int = 0
    llvm: str = ""
    cycles: dict[str, tuple[float, float]] = field(default_factory=dict)
    error: str = ""

    @classmethod
    def parse(cls, data: Any) -> Optional["BlockCycles"]:
        if not isinstance(data, Mapping):
            return None
        if data.get("error"):
            return cls(error=_text(data.get("error"), 200))
        raw = data.get("cycles")
        distinct, instructions = _count(data.get("distinct")), _count(data.get("instructions"))
        if not isinstance(raw, Mapping) or distinct is None or instructions is None:
            return None
        cycles = {}
        for model, fig in list(raw.items())[:16]:
            pair = (fig.get("all"), fig.get("busiest")) if isinstance(fig, Mapping) else fig
            if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e16 for v in pair):
                return None
            cycles[str(model)[:40]] = (float(pair[0]), float(pair[1]))
        return cls(distinct, instructions, _text(data.get("llvm"), 40), cycles)


@dataclass(frozen=True)
class InstructionProfile:
    """What the runtime's Arm build executed for ONE steady-state inference of a converted model.

    ``isa``: armv7 | armv8.0 | armv8.2; ``qemu_cpu``: the emulated model (cortex-a7 / cortex-a53 /
    cortex-a76); ``uarch``: the core the guest's /proc/cpuinfo names (XNNPACK picks core-tuned
    kernels from it); ``precision``: the path the runtime took (fp32 | fp16 | int8), not the one
    asked for; ``options``: the runtime options that decided it. ``counts`` sum over threads;
    ``per_thread`` keeps each thread (the busiest bounds a parallel inference's time).
    ``bytes_*`` are 0 unless the plugin counted memory (docs/armsim.md). ``seconds``: the wall
    time of the whole profiling run (emulation cost, not a latency).
    """

    runtime: str
    runtime_version: str
    isa: str
    qemu_cpu: str
    uarch: str
    precision: str
    threads: int
    counts: dict[str, int]
    per_thread: tuple[ThreadCounts, ...]
    inferences: int
    seconds: float
    plugin_digest: str
    model_sha256: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    # guest seconds of the emulation's phases: load_s (imports + model load), warmup_s, counted_s
    phases: dict[str, float] = field(default_factory=dict)
    blocks: Optional[BlockCycles] = None  # A64 profiles made by an image with LLVM
    # the core as the guest saw it (HWCAPs, MIDR in cpuinfo / sysfs / MRS) and the functions the
    # counted inference ran in, largest first (the runtime's selected micro-kernels)
    identity: dict[str, Any] = field(default_factory=dict)
    kernels: tuple[KernelShare, ...] = ()

    @property
    def total_instructions(self) -> int:
        return self.counts["total"]

    @property
    def bytes_loaded(self) -> int:
        return self.counts["bytes_loaded"]

    @property
    def bytes_stored(self) -> int:
        return self.counts["bytes_stored"]

    def busiest(self) -> ThreadCounts:
        return max(self.per_thread, key=lambda t: t.total)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any, runtime: str = "", runtime_version: str = "",
              model_sha256: str = "") -> Optional["InstructionProfile"]:
        """The record from a worker's ``profile`` section (or a cache entry); None when any
        field is missing or out of bounds."""
        if not isinstance(data, Mapping):
            return None
        counts = _counts(data.get("counts"))
        raw_threads = data.get("per_thread")
        if counts is None or not isinstance(raw_threads, list) or not 0 < len(raw_threads) <= _MAX_THREADS:
            return None
        per_thread = []
        for index, item in enumerate(raw_threads):
            thread_counts = _counts(item.get("counts") if isinstance(item, Mapping) and "counts" in item else item)
            if thread_counts is None:
                return None
            per_thread.append(ThreadCounts(index, thread_counts))
        threads, inferences = _count(data.get("threads")), _count(data.get("inferences"))
        seconds = data.get("seconds")
        if not threads or not inferences or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            return None
        options = data.get("options")
        options = options if isinstance(options, Mapping) else {}
        raw_phases = data.get("phases")
        raw_phases = raw_phases if isinstance(raw_phases, Mapping) else {}
        phases = {name: float(raw_phases[name]) for name in ("load_s", "warmup_s", "counted_s")
                  if isinstance(raw_phases.get(name), (int, float)) and not isinstance(raw_phases.get(name), bool)}
        return cls(runtime=_text(data.get("runtime"), 20) or runtime,
                   runtime_version=_text(data.get("runtime_version"), 80) or runtime_version,
                   isa=_text(data.get("isa"), 20), qemu_cpu=_text(data.get("qemu_cpu"), 40),
                   uarch=_text(data.get("uarch"), 40), precision=_text(data.get("precision"), 20),
                   threads=threads, counts=counts, per_thread=tuple(per_thread), inferences=inferences,
                   seconds=float(seconds), plugin_digest=_text(data.get("plugin_digest"), 64),
                   model_sha256=_text(data.get("model_sha256"), 64) or model_sha256,
                   options={str(k)[:40]: v for k, v in list(options.items())[:20] if _option_value(v)},
                   phases=phases, blocks=BlockCycles.parse(data.get("blocks")),
                   identity=_identity(data.get("identity")), kernels=parse_kernels(data.get("kernels")))


def _identity(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k)[:20]: ([_text(v, 20) for v in value[:64]] if isinstance(value, list) else _text(value, 200))
            for k, value in list(raw.items())[:16] if isinstance(value, (list, str))}


def parse_kernels(raw: Any) -> tuple[KernelShare, ...]:
    """The ``kernels`` list of a profile (symbol, object, instructions, share), bounded."""
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw[:64]:
        if not isinstance(item, Mapping):
            continue
        n, share = _count(item.get("instructions")), item.get("share")
        if n is None or not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 <= share <= 1:
            continue
        out.append(KernelShare(_text(item.get("symbol"), 200) or "?", _text(item.get("library"), 100) or "?", n,
                               float(share)))
    return tuple(out)


def _option_value(value: Any) -> bool:
    """A runtime option worth keeping: a flag, a number or a short text."""
    return isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 80)
