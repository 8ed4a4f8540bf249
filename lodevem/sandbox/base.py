"""What every isolation backend shares: the Backend protocol, the RunOutcome record, and the
thrashing monitor.

Why a monitor: a memory limit a little below a model's working set does not always get the
process killed. The kernel keeps evicting and re-reading the file pages charged to the cgroup
(libtorch's code, the model file), and the run crawls: on this machine tiny_cnn took 10 minutes
at 160 MiB with a cold page cache, then exited 0. A phone's low-memory killer would have killed
that app long before, so lodevem stops such a run early and calls it ``thrashing`` (a failure to
fit). The signal is the one the kernel itself gives: sustained major page faults while the
cgroup sits at its limit, optionally confirmed by the run being far slower than the same model
without a limit.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from ..wire.registry import COMPARISON_RUNTIME

# A run is thrashing when, for SUSTAIN_S seconds in a row, the major-fault rate over the last
# WINDOW_S seconds stays above FAULT_RATE/s while usage is within NEAR_LIMIT of the limit.
# Calibrated on this machine (see measure.py's docstring): a healthy run makes < 5 major
# faults/s after import; a thrashing one makes hundreds to thousands per second.
WINDOW_S = 3.0
SUSTAIN_S = 6.0
FAULT_RATE = 50.0
NEAR_LIMIT = 0.90
# Without fault pressure a slow run is just slow; with some pressure seen and a run this many
# times slower than the unconstrained reference, it is thrashing too.
SLOW_FACTOR = 8.0
SLOW_GRACE_S = 15.0
POLL_S = 0.5

ProgressFn = Callable[[str], None]
# Runs that model no device (ONNX export, derivation, the page-cache prewarm) still get a memory
# limit: half the host's RAM, at most WORK_LIMIT_CAP_MB, so a memory bomb in a model file is
# killed in its cgroup instead of taking the host (seen: 10.1 GiB of host RAM during an export).
WORK_LIMIT_CAP_MB = 8192
PIDS_LIMIT = 64  # every sandboxed run; a fork bomb stops there


def cgroup_version() -> Optional[int]:
    """The host's cgroup hierarchy (the manifest and ``doctor`` report it): 2 for a unified
    hierarchy, 1 for a v1 memory controller, None when neither is mounted."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return 2
    if (root / "memory").is_dir():
        return 1
    return None


def host_memory_mb() -> Optional[int]:
    """MemTotal of this machine in MiB (None when /proc/meminfo cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def work_limit_mb() -> int:
    """The memory limit of sandbox runs that model no device; see ``WORK_LIMIT_CAP_MB``."""
    total = host_memory_mb()
    return min(WORK_LIMIT_CAP_MB, total // 2) if total else WORK_LIMIT_CAP_MB


@dataclass(frozen=True)
class RunOutcome:
    """What happened to one worker run, before anything reads the worker's reply.

    ``stdout`` is the worker's standard output as captured; only ``sandbox.client`` parses it
    (the one owner of the protocol). ``observed`` holds the host-side samples' summary (max
    cgroup usage, failcnt, major faults) since the container's own counters vanish with it.
    ``limit_breach`` says why the backend killed a run for another limit than memory (the
    scratch folder's size). ``host_paths`` maps each path the worker saw (``/input/x.pt`` in a container) to the host
    path the user knows, so messages can name what the user typed.
    """

    backend: str
    exit_code: Optional[int]
    oom_killed: bool
    timed_out: bool
    thrashing: bool
    thrash_evidence: str
    wall_s: float
    stdout: str
    stderr_tail: str
    limit_mb: Optional[int]
    limit_enforcement: str
    observed: dict[str, Any] = field(default_factory=dict)
    host_paths: dict[str, str] = field(default_factory=dict)
    limit_breach: str = ""  # a sandbox limit other than memory that stopped the run (disk)


class Backend(Protocol):
    """Runs one worker request under a memory limit and reports what happened.

    ``cancel()`` stops every run of this backend now (the Ctrl-C / SIGTERM path): watch loops
    kill their child or container within ``POLL_S``; ``reset()`` makes it usable again.
    """

    name: str

    @property
    def identity(self) -> str:
        """What the results depend on besides the request (image id, python): for cache keys."""
        ...

    def identity_for(self, runtime: str) -> str:
        """The identity of what measures under ``runtime`` (tflite and ncnn run in their own
        images); raises ``BackendUnavailable`` when something that runtime needs is missing."""
        ...

    def prewarm(self, runtime: str = COMPARISON_RUNTIME) -> None:
        """Bring ``runtime``'s files into the page cache, charged outside any measured cgroup."""
        ...

    def run(self, request: Any, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Optional[ProgressFn] = None) -> RunOutcome:
        """Run ``request`` (a ``worker.WorkerRequest``); never leaves a process or container behind."""
        ...

    def cancel(self) -> None:
        """Stop every run of this backend now."""
        ...

    def reset(self) -> None:
        """Accept runs again after ``cancel``."""
        ...

    def sweep_stale(self) -> int:
        """Remove what a killed lodevem left behind (containers); returns how many."""
        ...


class Cancellable:
    """The cancel state every backend shares: ``cancel`` sets ``cancelled``, which each watch loop
    checks every ``POLL_S`` to kill its run; ``reset`` clears it. ``sweep_stale`` has nothing to
    sweep here; a backend whose runs can outlive lodevem (containers) overrides it."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()

    def reset(self) -> None:
        self.cancelled.clear()

    def sweep_stale(self) -> int:
        return 0


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class ThrashMonitor:
    """Feed it (time, usage, major faults) samples; ``check`` returns evidence once thrashing.

    Why both rules: the fault rule alone catches the classic crawl; the slowness rule catches a
    run that alternates between bursts of faults and progress (never SUSTAIN_S in a row) but
    still runs many times slower than without a limit.
    """

    def __init__(self, limit_bytes: Optional[int], reference_s: Optional[float]) -> None:
        self.limit = limit_bytes
        self.reference_s = reference_s
        self.samples: deque[tuple[float, int, int]] = deque()
        self.pressure_since: Optional[float] = None
        self.pressure_seen = 0.0
        self.max_rate = 0.0
        self.max_usage = 0
        self.last_faults = 0
        self.start = time.monotonic()

    def add(self, now: float, usage_bytes: Optional[int], major_faults: Optional[int]) -> None:
        if usage_bytes is None or major_faults is None:
            return
        self.max_usage = max(self.max_usage, usage_bytes)
        self.last_faults = major_faults
        if self.samples and now - self.samples[-1][0] < 1e-3:
            return
        prev_t = self.samples[-1][0] if self.samples else now
        self.samples.append((now, usage_bytes, major_faults))
        while len(self.samples) > 2 and now - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()
        first = self.samples[0]
        span = now - first[0]
        if span < min(1.0, WINDOW_S):
            return
        rate = (major_faults - first[2]) / span
        self.max_rate = max(self.max_rate, rate)
        near = self.limit is not None and max(u for _, u, _ in self.samples) >= NEAR_LIMIT * self.limit
        if rate >= FAULT_RATE and near:
            if self.pressure_since is None:
                self.pressure_since = now
            self.pressure_seen += now - prev_t
        else:
            self.pressure_since = None

    def check(self, now: float) -> Optional[str]:
        """Evidence text when the run should be stopped as thrashing, else None."""
        limit_mb = (self.limit or 0) / 2**20
        if self.pressure_since is not None and now - self.pressure_since >= SUSTAIN_S:
            return (f"{self.max_rate:.0f} major page faults/s for {now - self.pressure_since:.0f} s with the cgroup "
                    f"at its {limit_mb:.0f} MB limit (the kernel is re-reading evicted pages instead of killing)")
        elapsed = now - self.start
        if (self.reference_s and self.pressure_seen >= 1.0
                and elapsed > max(SLOW_FACTOR * self.reference_s, self.reference_s + SLOW_GRACE_S)):
            return (f"{elapsed:.0f} s against {self.reference_s:.1f} s without a limit, with up to "
                    f"{self.max_rate:.0f} major page faults/s at the {limit_mb:.0f} MB limit")
        return None

    def summary(self) -> dict[str, Any]:
        return {"max_usage_mb": round(self.max_usage / 2**20, 1), "host_major_faults": self.last_faults,
                "max_major_fault_rate": round(self.max_rate, 1)}
