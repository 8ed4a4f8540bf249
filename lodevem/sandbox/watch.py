"""The one watch loop of a sandboxed run, and the bounded buffer its output goes to.

Why one loop: the process backend, the Slurm job and the Docker backend all wait for a run
``POLL_S`` at a time, sample its cgroup for the thrashing monitor, and kill it on timeout,
thrashing, cancellation or another limit; written three times, the copies drifted (one
reported a timeout that thrashing had caused). Each backend now passes only how to wait, sample
and kill its kind of run.

Why a tail buffer: a model is code and may print without end (400 MB printed once cost the host
1.28 GB when the whole output was read back). The host keeps only the last bytes of a run's
stdout and stderr (``safe_io.REPLY_TAIL_BYTES``, ``OUTPUT_TAIL_BYTES``): the worker's reply is its
last stdout line, and the end of stderr holds the traceback that explains a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Callable, Optional

from ..errors import Cancelled
from .base import POLL_S, ThrashMonitor

__all__ = ["TailBuffer", "WatchResult", "drain", "kill_group", "wait_child", "watch"]


@dataclass(frozen=True)
class WatchResult:
    """How a watched run ended: exit code (None when unknown), and why it was stopped if it was."""

    exit_code: Optional[int]
    timed_out: bool
    evidence: Optional[str]  # thrashing evidence
    breach: str = ""  # another limit (the scratch folder's size)


def watch(wait: Callable[[float], Optional[int]], sample: Callable[[], tuple[Optional[int], Optional[int]]],
          kill: Callable[[], Optional[int]], monitor: ThrashMonitor, started: float, timeout_s: float, *,
          cancelled: Optional[threading.Event] = None, breach: Callable[[], str] = lambda: "",
          tick: Callable[[], None] = lambda: None) -> WatchResult:
    """Block in ``wait(POLL_S)`` (the exit code, or None while running: no busy loop); between
    waits, feed ``sample()`` (cgroup usage, major faults) to ``monitor``, call ``tick`` (progress),
    and stop the run with ``kill()`` (which returns its exit code) on cancellation (``Cancelled``
    raised), thrashing, ``timeout_s`` or a ``breach()`` message."""
    while True:
        code = wait(POLL_S)
        if code is not None:
            return WatchResult(code, False, None)
        now = time.monotonic()
        monitor.add(now, *sample())
        evidence = monitor.check(now)
        timed_out = now - started > timeout_s
        if cancelled is not None and cancelled.is_set():
            kill()
            raise Cancelled("measurement cancelled")
        tick()
        broke = breach()
        if evidence is not None or timed_out or broke:
            return WatchResult(kill(), timed_out and evidence is None and not broke, evidence, broke)


class TailBuffer:
    """The last ``max_bytes`` written to it (older bytes dropped), and how many were dropped."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data = bytearray()
        self.dropped = 0
        self._lock = threading.Lock()

    def write(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            excess = len(self._data) - self.max_bytes
            if excess > 0:
                del self._data[:excess]
                self.dropped += excess

    def text(self) -> str:
        with self._lock:
            return self._data.decode(errors="replace")


def drain(stream: IO[bytes], buffer: TailBuffer) -> threading.Thread:
    """A daemon thread copying ``stream`` (a child's pipe) into ``buffer`` until EOF."""

    def copy() -> None:
        with stream:
            while chunk := stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16):
                buffer.write(chunk)

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def wait_child(proc: subprocess.Popen, timeout_s: float) -> Optional[int]:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def kill_group(proc: subprocess.Popen) -> int:
    """SIGKILL the run's whole session (the worker's ONNX export child too); its exit code."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.wait()
