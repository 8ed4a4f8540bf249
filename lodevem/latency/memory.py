"""What a SoC's caches and DRAM do to a kernel: the bytes it must stream from DRAM, at what bandwidth.

Why: boards with the same core differ by up to 2x (issue 44) and the per-model A55/A53 ratio
varies from 1.3 to 2 across models: the core's pipeline sets the compute side, but a kernel's
bytes come from the caches when its working set fits and from DRAM when it does not, at the
SoC's bandwidth. The model here is the simplest one that follows the hardware:

* **reachable cache** of one core of ``core`` on the SoC: its cluster's L2 (shared, or the core's
  private L2 on DynamIQ cores) plus the shared L3 / system cache (``lodevem.socs``);
* **weights** stream from DRAM on every inference when the model's weights do not fit the
  reachable cache (a warm run finds no weight left in cache), else they stay cached;
* **activations** (input + output of a kernel) beyond the reachable cache spill: tiled kernels
  stream the part that does not fit once;
* the time at peak is ``MB / (GB/s)`` ms; the fit scales it by one fitted inverse efficiency
  (>= 1: never faster than the SoC's peak) and an Amdahl fraction for threads.

A fact the SoC does not publish (``unknown`` in the table) is the median of the SoCs with a
cluster of the same core (caches) or the same core family (bandwidth) that publish it, and the
``assumed`` tuple names it, so the prediction's note says what was pooled.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Optional, Sequence

from ..socs import SocMemory, SocTable, load_table
from .selection import family_of

__all__ = ["KernelBytes", "MemorySystem", "dram_ms_at_peak", "resolve"]

_KIB = 1024.0
_MB = 1e6


@dataclass(frozen=True)
class MemorySystem:
    """The facts the cost model uses for one core on one SoC, resolved (no unknowns left):
    ``cache_bytes`` a core of ``core`` reaches before DRAM, ``peak_gbs`` the DRAM's peak, ``soc``
    the table's name (None: not in the table) and ``assumed`` what was pooled and from where."""

    soc: Optional[str]
    core: str
    cache_bytes: float
    peak_gbs: float
    assumed: tuple[str, ...] = ()

    def note(self) -> Optional[str]:
        if not self.assumed:
            return None
        return f"{self.soc or 'SoC not in the table'}: " + "; ".join(self.assumed)


@dataclass(frozen=True)
class KernelBytes:
    """A kernel's fp32 bytes split the way the memory model needs them (``kernels.Kernel``)."""

    activation_bytes: float  # input + output activations
    weight_bytes: float


def _reachable_kib(soc: SocMemory, core: str) -> Optional[float]:
    cluster = soc.cluster(core)
    if cluster is None or cluster.l2_kib is None or soc.l3_kib is None:
        return None
    return cluster.l2_kib + soc.l3_kib


def _median(values: Iterable[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


@lru_cache(maxsize=256)
def _resolve(soc_name: Optional[str], core: str, table: SocTable) -> MemorySystem:
    soc = table.find(soc_name)
    assumed = []
    cache = _reachable_kib(soc, core) if soc is not None else None
    if cache is None:
        pool = [_reachable_kib(s, core) for s in table.entries if s.cluster(core) is not None]
        cache = _median(pool)
        n = sum(v is not None for v in pool)
        assumed.append(f"{core} L2+L3 not published: the median of {n} SoCs that publish it "
                       f"({(cache or 0):g} KiB)")
    peak = soc.dram.peak_gbs if soc is not None else None
    if peak is None:
        family = family_of(core)
        same: Callable[[SocMemory], bool] = lambda s: any(family_of(c.core) is family for c in s.clusters)  # noqa: E731
        pool_bw = [s.dram.peak_gbs for s in table.entries if same(s)]
        peak = _median(pool_bw)
        n = sum(v is not None for v in pool_bw)
        label = family.value if family else core
        assumed.append(f"DRAM bandwidth not published: the median of {n} {label} SoCs that publish it "
                       f"({(peak or 0):g} GB/s)")
    return MemorySystem(soc.soc if soc is not None else None, core, (cache or 512.0) * _KIB, peak or 1.0,
                        tuple(assumed))


def resolve(soc_name: Optional[str], core: str, table: Optional[SocTable] = None) -> MemorySystem:
    """The memory system a core of ``core`` on ``soc_name`` (a profile's chipset, a dev row's soc)
    sees, unknown facts pooled (``MemorySystem.assumed`` says which)."""
    return _resolve(soc_name, core, table if table is not None else load_table())


def dram_ms_at_peak(kernels: Sequence[KernelBytes], memory: MemorySystem) -> list[float]:
    """Per kernel: ms its DRAM traffic takes at the SoC's peak bandwidth (MB / GB/s)."""
    weights_stream = sum(k.weight_bytes for k in kernels) > memory.cache_bytes
    out = []
    for k in kernels:
        dram = (k.weight_bytes if weights_stream else 0.0) + max(0.0, k.activation_bytes - memory.cache_bytes)
        out.append(dram / _MB / memory.peak_gbs)
    return out
