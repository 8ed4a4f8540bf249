"""Process backend: the worker as a child of the host's python, for machines without Docker.

Limit, best first:
- a memory cgroup made for the run (v1: ``memory.limit_in_bytes`` + ``memory.memsw.limit_in_bytes``;
  v2: ``memory.max`` + ``memory.swap.max = 0``), nested under lodevem's own cgroup when that is
  writable (root, or a delegated v2 subtree). Same kernel mechanism as Docker, same verdicts.
- else ``RLIMIT_AS``: it limits *virtual* memory, which is far stricter than RSS for torch. Seen
  here: mobilenet_v2 maps ~780 MB of address space for a 268 MB VmHWM, and at RLIMIT_AS=512 MB
  ``import torch`` already aborts (OpenBLAS cannot allocate its buffers). Such verdicts are
  pessimistic and every result says so in ``limit_enforcement``.

The child joins the cgroup / sets the rlimit itself in a tiny launcher before ``exec``ing the
worker: no ``preexec_fn``, which is unsafe with the thread pool that runs jobs in parallel. It
gets its own session so a timeout kills the whole group (the worker's ONNX export child too).
The model file is never opened by this process beyond what the worker reads itself.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

from ..errors import BackendUnavailable
from ..safe_io import OUTPUT_TAIL_BYTES, REPLY_TAIL_BYTES
from ..wire.registry import COMPARISON_RUNTIME, RUNTIMES
from ..wire.requests import WorkerRequest
from . import image as image_mod
from .base import Cancellable, ProgressFn, RunOutcome, ThrashMonitor, tail
from .watch import TailBuffer, WatchResult, drain, kill_group, wait_child, watch

CGROUP_ROOT = Path("/sys/fs/cgroup")
_LAUNCHER = (
    "import os, resource, sys\n"
    "procs, rlimit = sys.argv[1], int(sys.argv[2])\n"
    "if procs:\n"
    "    with open(procs, 'w') as fh: fh.write(str(os.getpid()))\n"
    "if rlimit:\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (rlimit, rlimit))\n"
    "os.execv(sys.executable, [sys.executable] + sys.argv[3:])\n"
)
_OOM_WORDS = ("memoryerror", "can't allocate memory", "cannot allocate memory", "bad_alloc",
              "failed to map segment", "memory allocation still failed")


def _own_cgroup(controller: str) -> Optional[str]:
    """This process's cgroup path for ``controller`` ("" = the v2 unified line)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(","):
                return path.lstrip("/")
    except OSError:
        pass
    return None


def find_cgroup_parent() -> Optional[tuple[int, Path]]:
    """(version, directory) under which lodevem may create memory-limited cgroups, or None."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # pure v2
        own = _own_cgroup("")
        for cand in ([CGROUP_ROOT / own] if own else []) + [CGROUP_ROOT]:
            try:
                enabled = (cand / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "memory" in enabled and os.access(cand, os.W_OK):
                return 2, cand
        return None
    v1 = CGROUP_ROOT / "memory"
    if (v1 / "memory.limit_in_bytes").exists():
        own = _own_cgroup("memory")
        for cand in ([v1 / own] if own else []) + [v1]:
            if os.access(cand, os.W_OK):
                return 1, cand
    return None


class _Cgroup:
    """A per-run memory cgroup; a context manager that always removes it."""

    def __init__(self, version: int, parent: Path, limit_bytes: int, serial: int) -> None:
        self.version = version
        self.path = parent / f"lodevem-{os.getpid()}-{serial}"
        self.path.mkdir()
        if version == 1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            if (self.path / "memory.memsw.limit_in_bytes").exists():
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def stat(self, key: str) -> Optional[int]:
        for line in self.read("memory.stat").splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
        return None

    def usage_and_faults(self) -> tuple[Optional[int], Optional[int]]:
        usage = self.read("memory.usage_in_bytes" if self.version == 1 else "memory.current").strip()
        faults = self.stat("total_pgmajfault" if self.version == 1 else "pgmajfault")
        return (int(usage) if usage.isdigit() else None), faults

    def peak_bytes(self) -> Optional[int]:
        text = self.read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak").strip()
        return int(text) if text.isdigit() else None

    def oom_kills(self) -> int:
        text = self.read("memory.oom_control" if self.version == 1 else "memory.events")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def __enter__(self) -> "_Cgroup":
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in range(50):  # the killed task can take a moment to leave the cgroup
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.02)




class ProcessBackend(Cancellable):
    """Runs ``python -m lodevem.worker`` as a limited child process; see the module docstring."""

    name = "process"

    def __init__(self, python: str = sys.executable) -> None:
        super().__init__()
        self.python = python
        self.cgroup_parent = find_cgroup_parent()
        self._warm_lock = threading.Lock()
        self._warm: set[str] = set()
        self._missing: dict[str, list[str]] = {}
        self._serials = itertools.count()  # names this backend's cgroups apart
        # Nothing outlives a run (each child dies with its session, its cgroup is removed), so the
        # inherited sweep_stale has nothing to do.

    def prewarm(self, runtime: str = COMPARISON_RUNTIME) -> None:
        """Import the runtime once so its pages are cached and charged to lodevem's own cgroup.

        Locked: ``measure_models`` calls it from every job thread at once."""
        with self._warm_lock:
            if runtime not in self._warm:
                # what the runtime's image prewarms (the host's python runs every runtime here)
                warm = image_mod.spec_for("measure", runtime).warm_imports
                subprocess.run([self.python, "-c", f"import {warm}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=300)
                self._warm.add(runtime)

    def identity_for(self, runtime: str) -> str:
        """The same python for every runtime; raises ``BackendUnavailable`` when that python lacks
        the runtime or its converter (tflite: ai-edge-litert + litert-torch; ncnn: ncnn + pnnx),
        so a run stops (or, with the default runtime, falls back) before any work instead of
        giving an error row per model."""
        missing = self._missing_packages(runtime)
        if missing:
            raise BackendUnavailable(f"--backend process: runtime {runtime} needs {' and '.join(missing)} in "
                                     f"{self.python} (pip install 'lodevem[runtimes]'), or use --backend docker")
        return self.identity

    def _missing_packages(self, runtime: str) -> list[str]:
        """The distributions ``runtime`` needs that this backend's python does not have (checked once)."""
        with self._warm_lock:
            if runtime not in self._missing:
                spec = RUNTIMES.get(runtime)
                wanted = [spec.package, spec.converter.package] if spec is not None and spec.converter else []
                script = ("import importlib.metadata as m, sys\n"
                          "for d in sys.argv[1:]:\n"
                          "    try: m.version(d)\n"
                          "    except m.PackageNotFoundError: print(d)\n")
                found: list[str] = []
                if wanted:
                    proc = subprocess.run([self.python, "-c", script, *wanted], capture_output=True, text=True,
                                          check=False, timeout=60)
                    found = proc.stdout.split() if proc.returncode == 0 else wanted
                self._missing[runtime] = found
            return self._missing[runtime]

    @property
    def identity(self) -> str:
        return f"process:{self.python}:{sys.version_info[0]}.{sys.version_info[1]}"

    def enforcement(self, limit_mb: Optional[int]) -> str:
        if limit_mb is None:
            return "none (unconstrained reference)"
        if self.cgroup_parent is not None:
            version, _ = self.cgroup_parent
            return f"cgroup v{version} " + ("memory+memsw" if version == 1 else "memory.max, swap 0") + f"={limit_mb}MB"
        return f"RLIMIT_AS={limit_mb}MB (virtual memory: stricter than RSS)"

    def run(self, request: WorkerRequest, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Optional[ProgressFn] = None) -> RunOutcome:
        """One child run: in a memory cgroup of its own (or under RLIMIT_AS), watched to its end,
        then read back: how it ended, its output's tails, the cgroup's counters."""
        limit_bytes = limit_mb * 2**20 if limit_mb else None
        cgroup: Optional[_Cgroup] = None
        if limit_bytes and self.cgroup_parent is not None:
            cgroup = _Cgroup(self.cgroup_parent[0], self.cgroup_parent[1], limit_bytes, next(self._serials))
        started = time.monotonic()
        # The output goes through pipes into tail buffers: the host never holds more than their tails.
        out, err = TailBuffer(REPLY_TAIL_BYTES), TailBuffer(OUTPUT_TAIL_BYTES)
        try:
            proc, ended, observed = self._watched_child(request, cgroup, limit_bytes, started, timeout_s,
                                                        reference_s, out, err)
            oom_kills = cgroup.oom_kills() if cgroup else 0
            if cgroup is not None:
                peak = cgroup.peak_bytes()
                observed.update(cgroup_peak_mb=round(peak / 2**20, 1) if peak else None, oom_kills=oom_kills)
        finally:
            if cgroup is not None:
                cgroup.__exit__(None, None, None)
        stdout, stderr = out.text(), err.text()
        if err.dropped:
            observed["stderr_dropped_bytes"] = err.dropped
        if on_progress is not None:
            for line in stderr.splitlines():
                on_progress(line)
        code = proc.returncode
        oom = _ran_out_of_memory(code, oom_kills, ended, cgroup is not None, bool(limit_bytes), stdout, stderr)
        return RunOutcome(
            backend=self.name, exit_code=128 - code if code < 0 else code, oom_killed=oom, timed_out=ended.timed_out,
            thrashing=ended.evidence is not None, thrash_evidence=ended.evidence or "",
            wall_s=round(time.monotonic() - started, 3), stdout=stdout, stderr_tail=tail(stderr), limit_mb=limit_mb,
            limit_enforcement=self.enforcement(limit_mb), observed=observed)

    def _watched_child(self, request: WorkerRequest, cgroup: Optional[_Cgroup], limit_bytes: Optional[int],
                       started: float, timeout_s: float, reference_s: Optional[float], out: TailBuffer,
                       err: TailBuffer) -> tuple[subprocess.Popen, WatchResult, dict[str, Any]]:
        """Launch the worker (the launcher joins ``cgroup`` or sets the rlimit, then execs it) and
        watch it to its end, killing its whole group on a timeout, thrashing or an interrupt; the
        child, how it ended and what the monitor saw."""
        rlimit = limit_bytes if limit_bytes and cgroup is None else 0
        # The request travels in a file (--arch-kwargs can be long; an argument list has a limit).
        with tempfile.NamedTemporaryFile("w", prefix="lodevem-request-", suffix=".json") as request_file:
            request_file.write(request.to_json())
            request_file.flush()
            cmd = [self.python, "-c", _LAUNCHER, str(cgroup.path / "cgroup.procs") if cgroup else "", str(rlimit),
                   "-m", "lodevem.worker", "--request-file", request_file.name]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    env=_child_env(request.threads), start_new_session=True)
            readers = [drain(proc.stdout, out), drain(proc.stderr, err)]  # type: ignore[arg-type]
            monitor = ThrashMonitor(limit_bytes, reference_s)
            try:
                sample = cgroup.usage_and_faults if cgroup else lambda: (None, None)
                ended = watch(lambda t: wait_child(proc, t), sample,
                              lambda: kill_group(proc), monitor, started, timeout_s, cancelled=self.cancelled)
            finally:
                if proc.poll() is None:  # KeyboardInterrupt or an error in the watch loop
                    kill_group(proc)
                for reader in readers:  # the pipes close when the group is gone
                    reader.join(timeout=5)
        return proc, ended, monitor.summary()


def _child_env(threads: int) -> dict[str, str]:
    """The worker's environment: the host's, its thread counts, and this lodevem first on the path."""
    pkg_parent = str(Path(__file__).resolve().parent.parent.parent)
    count = str(threads)
    return {**os.environ, "OMP_NUM_THREADS": count, "MKL_NUM_THREADS": count, "OPENBLAS_NUM_THREADS": count,
            "PYTHONPATH": os.pathsep.join([pkg_parent] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
            # No current folder on sys.path: the user's code is importable only through --code,
            # as in the container (else a run from the project folder would pass here and fail there).
            "PYTHONSAFEPATH": "1"}


def _ran_out_of_memory(code: int, oom_kills: int, ended: WatchResult, in_cgroup: bool, limited: bool,
                       stdout: str, stderr: str) -> bool:
    """Whether the child died of the limit: the cgroup counted an OOM kill, or it was SIGKILLed
    in a cgroup and not by the watch (timeout, thrashing); under RLIMIT_AS, where allocations fail
    rather than the kernel killing, an error exit whose output names a failed allocation."""
    oom = oom_kills > 0 or (code == -signal.SIGKILL and not ended.timed_out and ended.evidence is None and in_cgroup)
    if not oom and not in_cgroup and limited:  # RLIMIT_AS: allocation failures, not kills
        # The worker's error message is in its stdout reply and its traceback in stderr.
        text = (stdout[-2000:] + stderr[-2000:]).lower()
        oom = code != 0 and any(word in text for word in _OOM_WORDS)
    return oom
