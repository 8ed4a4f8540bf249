"""Memory figures of the worker process: RSS per phase from /proc/self/status, the high-water
mark, page faults and the container cgroup's counters (read from inside: the cgroup vanishes
with the container)."""

from __future__ import annotations

import gc
import os
import resource
from typing import Any, Optional

from ..wire.sections import CgroupCounters, MemorySection


def proc_status_kb() -> dict[str, int]:
    """VmRSS/VmHWM of this process in kB (the RSS the phone's low-memory killer would see)."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def _read_cgroup(path: str) -> Any:
    """An int (None for "max"/unreadable) or, for memory.stat, a dict of its selected keys."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    if path.endswith("stat"):
        pairs = (line.split() for line in text.splitlines())
        return {k: int(v) for k, v in pairs if k in _CGROUP_STAT_KEYS} or None
    return int(text) if text.strip().isdigit() else None


_CGROUP_STAT_KEYS = {"anon", "file", "file_mapped", "shmem", "kernel", "pgfault", "pgmajfault",  # v2
                     "cache", "rss", "rss_huge", "mapped_file", "total_cache", "total_rss", "total_mapped_file"}  # v1
_CGROUP_FILES = {2: ("/sys/fs/cgroup/memory.", "peak", "current", "max", "stat"),
                 1: ("/sys/fs/cgroup/memory/memory.", "max_usage_in_bytes", "usage_in_bytes", "limit_in_bytes", "stat")}


def cgroup_memory() -> Optional[CgroupCounters]:
    """The container cgroup's counters, read from inside because the cgroup vanishes on exit.

    They differ from VmHWM: the cgroup is also charged for page cache (e.g. libtorch's pages).
    Outside a container these are the enclosing cgroup's numbers; the host decides what to trust.
    """
    version = 2 if os.path.exists("/sys/fs/cgroup/memory.current") else 1
    base, *names = _CGROUP_FILES[version]
    values = dict(zip(("peak_bytes", "usage_bytes", "limit_bytes", "stat"), (_read_cgroup(base + n) for n in names)))
    if values["limit_bytes"] is not None and values["limit_bytes"] >= 2 ** 60:
        values["limit_bytes"] = None  # v1 spells "unlimited" as a huge number
    if all(v is None for v in values.values()):
        return None
    return CgroupCounters(version, **values)


class MemoryPhases:
    """RSS at each phase; ``finish`` adds the high-water mark, faults and cgroup counters."""

    def __init__(self, rss_start_kb: int) -> None:
        self.kb: dict[str, Optional[int]] = {"rss_start_kb": rss_start_kb, "rss_after_import_kb": None,
                                             "rss_after_load_kb": None, "rss_after_derive_kb": None,
                                             "rss_after_warmup_kb": None}
        self.hwm_after_derive: Optional[int] = None

    def mark(self, phase: str) -> None:
        status = proc_status_kb()
        self.kb[f"rss_{phase}_kb"] = status["VmRSS"]
        if phase == "after_derive":
            self.hwm_after_derive = status["VmHWM"]

    def finish(self) -> MemorySection:
        """``peak_phase`` (with a level only): "derivation" when the high-water mark was already
        reached by loading the original and deriving the variant, else "inference"."""
        status, usage = proc_status_kb(), resource.getrusage(resource.RUSAGE_SELF)
        base = self.kb["rss_after_import_kb"]
        derive_hwm = self.hwm_after_derive
        return MemorySection(
            phases_kb=dict(self.kb), rss_end_kb=status["VmRSS"], hwm_kb=status["VmHWM"],
            hwm_after_derive_kb=derive_hwm,
            peak_phase=None if derive_hwm is None else ("derivation" if status["VmHWM"] <= derive_hwm else "inference"),
            runtime_baseline_kb=base, model_increment_kb=status["VmHWM"] - base if base is not None else None,
            major_faults=usage.ru_majflt, minor_faults=usage.ru_minflt, cgroup=cgroup_memory())


def _released(mem: MemoryPhases) -> None:
    """After the caller dropped the original: collect it, hand freed heap pages back to the OS
    (glibc keeps them otherwise, and RSS would still show the derivation), then record RSS and
    the peak so far."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS may include freed heap
        pass
    mem.mark("after_derive")
