"""The node side of the Slurm backend: what one Slurm job runs, inside the job's cgroup.

submitit calls ``run_in_job`` on the compute node (the node imports this module from its own
lodevem install, which must be the same version as the submitting host's). It mirrors the
process backend's watch loop: the worker runs as a child process in its own session, its stdout
and stderr go to files in the job's run folder, the job's memory cgroup (the one Slurm limited
to ``--mem``) is sampled every ``POLL_S`` for the thrashing monitor, and the child is killed on
timeout or thrashing. What happened is written to ``report.json`` (plain JSON, atomically):
the host reads that file and the worker's stdout as text and never loads submitit's result
pickle, since the job ran the user's model file, which is code and could have rewritten it.

Why a child and not the worker in this process: the worker's VmHWM must be the model's peak,
not submitit's; the cost is that the job cgroup also holds this wrapper (python + submitit,
~30 MB), which counts against ``--mem`` like the shell of any batch job.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..safe_io import OUTPUT_TAIL_BYTES, REPLY_TAIL_BYTES, read_tail
from ..store.files import write_atomic, write_json_file
from .base import ThrashMonitor
from .watch import TailBuffer, drain, kill_group, wait_child, watch

REPORT = "report.json"
STARTED = "started"
REQUEST = "request.json"
WORKER_STDOUT = "worker.stdout"
WORKER_STDERR = "worker.stderr"
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
UNLIMITED = 2**60
READ_CAP = 1 << 20  # bytes of a job's text files the host reads back


@dataclass(frozen=True)
class JobReport:
    """What one job's wrapper saw (``report.json``): written here on the node, read by the host
    with every field type-checked, since the job ran the user's model, which is code."""

    exit_code: Optional[int]
    killed_by_sigkill: bool = False
    oom_kills: int = 0
    timed_out: bool = False
    thrash_evidence: str = ""
    wall_s: float = 0.0
    cgroup_enforced: bool = False
    node: str = ""
    observed: dict[str, float] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Optional["JobReport"]:
        """The report at ``path`` (no link followed, size-capped), or None when absent or unreadable."""
        try:
            data = json.loads(read_tail(path, 65536) or "null")
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None

        def num(key: str) -> Optional[float]:
            v = data.get(key)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None

        def text(key: str, limit: int) -> str:
            v = data.get(key)
            return v[:limit] if isinstance(v, str) else ""

        observed: Any = data.get("observed")
        exit_code = num("exit_code")
        return cls(exit_code=int(exit_code) if exit_code is not None else None,
                   killed_by_sigkill=data.get("killed_by_sigkill") is True, oom_kills=int(num("oom_kills") or 0),
                   timed_out=data.get("timed_out") is True, thrash_evidence=text("thrash_evidence", 500),
                   wall_s=num("wall_s") or 0.0, cgroup_enforced=data.get("cgroup_enforced") is True,
                   node=text("node", 100),
                   observed={k[:40]: v for k, v in (observed.items() if isinstance(observed, dict) else ())
                             if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)})


class JobCgroup:
    """The memory cgroup Slurm limited for this job (cgroup v1: the nearest ancestor of this
    process's own cgroup with a finite ``memory.limit_in_bytes``; the task leaf is unlimited)."""

    def __init__(self, path: Path, limit_bytes: int) -> None:
        self.path, self.limit_bytes = path, limit_bytes

    @classmethod
    def find(cls) -> Optional["JobCgroup"]:
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, names, rel = line.split(":", 2)
            if "memory" not in names.split(","):
                continue
            here = MEMORY_ROOT / rel.lstrip("/")
            while here != MEMORY_ROOT and MEMORY_ROOT in here.parents:
                try:
                    limit = int((here / "memory.limit_in_bytes").read_text())
                except (OSError, ValueError):
                    limit = UNLIMITED
                if limit < UNLIMITED:
                    return cls(here, limit)
                here = here.parent
        return None

    def read_int(self, name: str) -> Optional[int]:
        try:
            text = (self.path / name).read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def keyed(self, name: str, key: str) -> Optional[int]:
        try:
            for line in (self.path / name).read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == key and v.strip().isdigit():
                    return int(v)
        except OSError:
            pass
        return None

    def sample(self) -> tuple[Optional[int], Optional[int]]:
        return self.read_int("memory.usage_in_bytes"), self.keyed("memory.stat", "total_pgmajfault")




def run_in_job(run_dir: str, timeout_s: float, threads: int, reference_s: Optional[float] = None) -> None:
    """Run ``python -m lodevem.worker`` on ``run_dir/request.json``; write ``run_dir/report.json``."""
    folder = Path(run_dir)
    (folder / STARTED).write_text(str(time.time()))
    cgroup = JobCgroup.find()
    pkg_parent = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join([pkg_parent] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    monitor = ThrashMonitor(cgroup.limit_bytes if cgroup else None, reference_s)
    started = time.monotonic()
    # Output through pipes into tail buffers, written to the run folder at the end: a model that
    # prints without end fills neither the node's memory nor the shared folder.
    out, err = TailBuffer(REPLY_TAIL_BYTES), TailBuffer(OUTPUT_TAIL_BYTES)
    proc = subprocess.Popen([sys.executable, "-m", "lodevem.worker", "--request-file", str(folder / REQUEST)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    readers = [drain(proc.stdout, out), drain(proc.stderr, err)]  # type: ignore[arg-type]
    try:
        ended = watch(lambda t: wait_child(proc, t), cgroup.sample if cgroup else lambda: (None, None),
                      lambda: kill_group(proc), monitor, started, timeout_s)
    finally:
        if proc.poll() is None:  # the job being cancelled (SIGTERM) or an error in the loop
            kill_group(proc)
        for reader in readers:
            reader.join(timeout=5)
        for name, buffer in ((WORKER_STDOUT, out), (WORKER_STDERR, err)):
            write_atomic(folder / name, buffer.text())
    timed_out, evidence = ended.timed_out, ended.evidence
    observed = monitor.summary()
    oom_kills = 0
    if cgroup is not None:
        peak = cgroup.read_int("memory.max_usage_in_bytes")
        oom_kills = cgroup.keyed("memory.oom_control", "oom_kill") or 0
        observed.update(cgroup_peak_mb=round(peak / 2**20, 1) if peak else None, oom_kills=oom_kills,
                        job_cgroup_limit_mb=round(cgroup.limit_bytes / 2**20))
    # A killed child's peak, which its own reply cannot give (KiB on Linux).
    observed["child_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    code = proc.returncode
    write_json_file(folder / REPORT, asdict(JobReport(
        exit_code=128 - code if code < 0 else code, killed_by_sigkill=code == -signal.SIGKILL,
        oom_kills=oom_kills, timed_out=timed_out, thrash_evidence=evidence or "",
        wall_s=round(time.monotonic() - started, 3), cgroup_enforced=cgroup is not None,
        node=os.uname().nodename, observed=observed)))
