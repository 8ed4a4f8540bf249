"""Slurm backend: each worker run is one Slurm job, submitted with submitit, limited by ``--mem``.

Why Slurm: a lab that benchmarks hundreds of variants x 16 devices outgrows one machine, and
university clusters run Slurm. Slurm enforces a job's ``--mem`` with the same cgroup memory
controller the Docker backend relies on (``ConstrainRAMSpace`` + ``ConstrainSwapSpace`` with
``AllowedSwapSpace=0``: RAM and no swap), and marks a job killed over it ``OUT_OF_MEMORY``.

How a run travels: everything goes through a working folder every node sees (``--slurm-workdir``,
on the cluster's shared file system). The model file is copied once into ``models/`` under its
content hash; each run gets ``runs/<key>/`` with ``request.json`` (the worker request rewritten
to those paths), ``job.json`` (the Slurm job id, so ``--resume`` can reattach), and what the job
writes: ``started``, ``worker.stdout``, ``worker.stderr``, ``report.json`` (see ``slurm_job``),
and ``out/`` for an ONNX export, derived variant or conversion, which is copied back with the
same checks as the Docker backend's output (no links followed, size-capped). The nodes need the
same lodevem install (same worker version; the client refuses any other) and the same python path.

tflite and ncnn (``slurm_runtimes``): each conversion runs once, in the Docker converter image on
this host when it can, else as a Slurm job; the converted files stay in the run's artifact store
(``<output>/.cache``, on the shared file system) and the jobs read them there in place. The
measurement runs in the job's cgroup with the nodes' ai-edge-litert / ncnn.

What it does not isolate: the job is a cgroup, not a container. The model file (which is code)
runs as the submitting user on the node, with that user's network and file system, like the
process backend. The host never unpickles anything a job wrote (submitit's result pickle is
never loaded: ``report.json`` and the worker's stdout are read as text).

Verdicts: ``--mem`` is the device's RAM and ``slurm_use_srun=False`` runs the wrapper in the
batch step, so an OOM kill is the job's (inside an ``srun`` step Slurm marks only the step).
Peak RSS is the worker's own VmHWM from its reply; Slurm's MaxRSS is sampled and reads 0 for
short or killed jobs. A run is ``oom`` when the job's cgroup counted an OOM kill, when the worker
died of SIGKILL with no timeout or thrashing to explain it, or when the job ended
``OUT_OF_MEMORY`` before the wrapper could report.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import BackendUnavailable, Cancelled, SandboxError
from ..safe_io import read_tail
from ..store import digest
from ..wire.protocol import artifact_files
from ..wire.registry import COMPARISON_RUNTIME, CONVERT_ACTIONS
from ..wire.requests import WorkerRequest
from . import slurm_job
from .base import POLL_S, Cancellable, ProgressFn, RunOutcome, tail, work_limit_mb
from .scratch import MAX_OUTPUT_BYTES, take_output
from .slurm_runtimes import SlurmRuntimes
from .slurm_share import SharedFolder

STATE_POLL_S = 2.0  # how often sacct is asked about a job that has not reported (submitit caches)
CANCEL_WAIT_S = 30.0  # longest wait for a cancelled job to leave the queue (KillWait and cleanup)


@dataclass(frozen=True)
class SlurmSettings:
    """Where and how jobs are submitted: ``--slurm-partition``, ``--slurm-account``,
    ``--slurm-time`` (minutes; default the run's timeout plus 2) and ``--slurm-workdir``.
    ``reattach`` (``--resume``): adopt the job of an identical earlier run instead of
    cancelling it."""

    workdir: Path = Path(".lodevem-slurm")
    partition: Optional[str] = None
    account: Optional[str] = None
    time_min: Optional[int] = None
    reattach: bool = False


@dataclass(frozen=True)
class JobCounts:
    """Jobs of this backend by state, for the progress bar."""

    queued: int
    running: int
    done: int

    def __str__(self) -> str:
        return f"slurm jobs: {self.queued} queued, {self.running} running, {self.done} done"


def _read_tail(path: Path) -> str:
    """The last bytes of a text file a job wrote (no link followed), '' when absent."""
    return read_tail(path, slurm_job.READ_CAP)


class SlurmBackend(Cancellable):
    """Runs each worker request as one Slurm job; see the module docstring.

    ``run`` submits and waits, so the runner's ``--jobs`` threads are the jobs in flight.
    ``cancel`` scancels every job this backend submitted and has not collected.
    """

    name = "slurm"

    def __init__(self, settings: SlurmSettings = SlurmSettings(),
                 on_status: Optional[Callable[[str], None]] = None, python: str = sys.executable) -> None:
        super().__init__()
        try:
            import submitit
        except ImportError:
            raise BackendUnavailable("--backend slurm needs submitit: pip install 'lodevem[slurm]'") from None
        if shutil.which("sbatch") is None or shutil.which("sacct") is None:
            raise BackendUnavailable("--backend slurm needs the Slurm client commands (sbatch, sacct, scancel) "
                                     "on PATH: run lodevem on a login node of the cluster")
        self.settings = settings
        self.workdir = Path(settings.workdir).resolve()
        self.python = python
        self.on_status = on_status
        try:
            for sub in ("models", "runs", "submitit"):
                (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailable(f"--slurm-workdir {settings.workdir}: {exc.strerror}") from None
        self._submitit = submitit
        self._lock = threading.Lock()
        self._executor: Any = None
        self._live: dict[str, str] = {}  # job id -> "queued" | "running"
        self._done = 0
        self.shared = SharedFolder(self.workdir)
        self.runtimes = SlurmRuntimes(python)

    @property
    def identity(self) -> str:
        return f"slurm:{self.python}:{sys.version_info[0]}.{sys.version_info[1]}"

    def enforcement(self, limit_mb: Optional[int], enforced: bool = True) -> str:
        if limit_mb is None:
            return "none (unconstrained reference)"
        if not enforced:
            return f"slurm --mem={limit_mb}M NOT enforced (no memory cgroup limit seen in the job)"
        return f"slurm job cgroup --mem={limit_mb}M, swap 0"

    # --- the cancel path -----------------------------------------------------------------------

    def cancel(self) -> None:
        super().cancel()
        for converter in self.runtimes.converters():  # a conversion running in Docker on this host
            converter.cancel()
        with self._lock:
            ids = list(self._live)
        self._scancel(ids, CANCEL_WAIT_S)

    def reset(self) -> None:
        super().reset()
        for converter in self.runtimes.converters():
            converter.reset()

    @staticmethod
    def _scancel(ids: list[str], wait_s: float = 0.0) -> None:
        """scancel ``ids``; with ``wait_s``, wait until the queue no longer lists them (a cancelled
        job stays COMPLETING while slurmd kills its processes), so none outlives lodevem's exit."""
        if not ids:
            return
        subprocess.run(["scancel", *ids], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       timeout=60)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i"], capture_output=True, text=True,
                                 check=False, timeout=60)
            if out.returncode != 0 or not out.stdout.strip():
                return
            time.sleep(POLL_S)

    def sweep_stale(self) -> int:
        """Cancel the jobs of runs whose lodevem died without cleaning up (unless ``reattach``:
        then ``run`` adopts them). Returns how many were cancelled."""
        if self.settings.reattach:
            return 0
        stale = []
        for job_file in (self.workdir / "runs").glob("*/job.json"):
            info = self._job_info(job_file.parent)
            if info is not None and not _pid_alive(info.get("owner_pid"), info.get("owner_host")):
                stale.append(str(info["job_id"]))
                shutil.rmtree(job_file.parent, ignore_errors=True)
        self._scancel(stale)
        return len(stale)

    # --- progress ------------------------------------------------------------------------------

    def counts(self) -> JobCounts:
        with self._lock:
            states = list(self._live.values())
            done = self._done
        return JobCounts(states.count("queued"), states.count("running"), done)

    def _set_state(self, job_id: str, state: Optional[str]) -> None:
        with self._lock:
            if state is None:
                if self._live.pop(job_id, None) is not None:
                    self._done += 1
            elif self._live.get(job_id) == state:
                return
            else:
                self._live[job_id] = state
        if self.on_status is not None:
            self.on_status(str(self.counts()))

    def _run_key(self, request: WorkerRequest, limit_mb: Optional[int], timeout_s: float) -> str:
        return digest([request.to_json(), limit_mb, timeout_s, self.identity, self.settings.partition,
                       self.settings.account])[:24]

    @staticmethod
    def _job_info(run_dir: Path) -> Optional[dict[str, Any]]:
        try:
            data = json.loads((run_dir / "job.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("job_id"), str) else None

    # --- submitting and waiting ----------------------------------------------------------------

    def prewarm(self, runtime: str = COMPARISON_RUNTIME) -> None:
        """Nothing to do: on a cluster the page cache is each node's own, and every job reads the
        runtime's files from the same install; the first job on a node warms it."""

    def identity_for(self, runtime: str) -> str:
        """The backend's identity plus, for tflite/ncnn, the nodes' runtime version; raises
        ``BackendUnavailable`` in one line when the nodes cannot measure ``runtime`` or nothing
        can convert to it (``slurm_runtimes``), so the run stops before any work."""
        return self.runtimes.resolve(runtime).identity(self.identity)

    def image_ids(self) -> dict[str, str]:
        """Tag -> id of the Docker converter image this host's conversions ran in (the manifest
        names what made the converted files the jobs measured); empty when none did."""
        # the converter's own tag and id (its image_ids() would label its default image "bench")
        return {converter.image_tag: converter.image_id for converter in self.runtimes.converters()}

    def _submit(self, run_dir: Path, mem_mb: int, threads: int, timeout_s: float,
                reference_s: Optional[float]) -> Any:
        time_min = self.settings.time_min or math.ceil(timeout_s / 60) + 2
        params: dict[str, Any] = dict(mem=f"{mem_mb}M", cpus_per_task=threads, time=time_min, use_srun=False,
                                      job_name="lodevem", signal_delay_s=10)
        if self.settings.partition:
            params["partition"] = self.settings.partition
        if self.settings.account:
            params["account"] = self.settings.account
        with self._lock:  # update_parameters + submit are one step on the shared executor
            if self._executor is None:
                self._executor = self._submitit.SlurmExecutor(folder=str(self.workdir / "submitit" / "%j"),
                                                              max_num_timeout=0, python=self.python)
            self._executor.update_parameters(**params)
            try:
                job = self._executor.submit(slurm_job.run_in_job, str(run_dir), timeout_s, threads, reference_s)
            except Exception as exc:  # sbatch refused: a bad partition or account, a full queue
                raise SandboxError(f"sbatch refused the job: {' '.join(str(exc).split())[:300]}") from None
        (run_dir / "job.json").write_text(json.dumps({"job_id": str(job.job_id), "owner_pid": os.getpid(),
                                                      "owner_host": os.uname().nodename,
                                                      "submitted": time.time()}, allow_nan=False))
        return job

    def _job_alive(self, job_id: str) -> bool:
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                             check=False, timeout=60)
        return out.returncode == 0 and bool(out.stdout.strip())

    def run(self, request: WorkerRequest, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Optional[ProgressFn] = None) -> RunOutcome:
        if self.cancelled.is_set():
            raise Cancelled("measurement cancelled")
        if request.action in CONVERT_ACTIONS.values():
            plan = self.runtimes.resolve(request.runtime)
            if plan.converter is not None:  # once, on this host, in the converter image
                return plan.converter.run(request, limit_mb, timeout_s, reference_s=reference_s,
                                          on_progress=on_progress)
        key = self._run_key(request, limit_mb, timeout_s)
        run_dir = self.workdir / "runs" / key
        job: Any = None  # a submitit Job once submitted
        inner = self.shared.request_for(request, run_dir)  # deterministic: the same paths an adopted job was given
        files, inner_files = request.files(), inner.files()
        info = self._job_info(run_dir)
        if info is not None and self.settings.reattach and (
                (run_dir / slurm_job.REPORT).exists() or self._job_alive(info["job_id"])):
            job = self._submitit.SlurmJob(folder=str(self.workdir / "submitit" / "%j"), job_id=info["job_id"])
        else:
            if info is not None:
                self._scancel([info["job_id"]])
            shutil.rmtree(run_dir, ignore_errors=True)
            (run_dir / "out").mkdir(parents=True)
            (run_dir / slurm_job.REQUEST).write_text(inner.to_json())
            job = self._submit(run_dir, limit_mb or work_limit_mb(), request.threads, timeout_s, reference_s)
        job_id = str(job.job_id)
        self._set_state(job_id, "queued")
        try:
            outcome = self._wait(job, run_dir, limit_mb, timeout_s)
            if on_progress is not None:
                for line in outcome.stderr_tail.splitlines():
                    on_progress(line)
            # A conversion's files reversed: an ncnn .bin before the .param that marks it done.
            converted = (list(zip(artifact_files(files.converted_path),
                                  artifact_files(inner_files.converted_path)))[::-1]
                         if files.converted_path and inner_files.converted_path else [])
            for wanted, inside in ((files.onnx_path, inner_files.onnx_path), (files.derive_out, inner_files.derive_out),
                                   (files.channels_removed_path, inner_files.channels_removed_path), *converted):
                if wanted and inside and Path(inside).parent == run_dir / "out":
                    take_output(run_dir / "out", Path(inside).name, Path(wanted), MAX_OUTPUT_BYTES)
            host_paths = {i: h for i, h in ((inner.model_path, request.model_path),
                                            (inner_files.onnx_path, files.onnx_path),
                                            (inner_files.converted_path, files.converted_path),
                                            (inner_files.derive_out, files.derive_out)) if i and h}
            shutil.rmtree(run_dir, ignore_errors=True)
            return dataclasses.replace(outcome, host_paths=host_paths)
        except BaseException:
            # Cancelled, interrupted or broken: the job must not outlive this run.
            self._scancel([job_id], CANCEL_WAIT_S)
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        finally:
            self._set_state(job_id, None)
            # submitit's own files of this job (its pickles and logs); what lodevem needed is read.
            shutil.rmtree(self.workdir / "submitit" / job_id, ignore_errors=True)

    def _wait(self, job: Any, run_dir: Path, limit_mb: Optional[int], timeout_s: float) -> RunOutcome:
        """Poll the run folder every POLL_S (and sacct every STATE_POLL_S through submitit's cached
        watcher) until the job reports or ends; scancel on cancel or a run far past its timeout."""
        job_id = str(job.job_id)
        started_at: Optional[float] = None
        last_state_check = time.monotonic()
        submitted = time.monotonic()
        while True:
            if self.cancelled.is_set():
                self._scancel([job_id], CANCEL_WAIT_S)
                raise Cancelled("measurement cancelled")
            report = slurm_job.JobReport.read(run_dir / slurm_job.REPORT) if (run_dir / slurm_job.REPORT).exists() \
                else None
            if report is not None:
                return self._outcome(report, run_dir, limit_mb, job)
            now = time.monotonic()
            if started_at is None and (run_dir / slurm_job.STARTED).exists():
                started_at = now
                self._set_state(job_id, "running")
            if started_at is not None and now - started_at > timeout_s + 60:
                # The wrapper kills its worker at timeout_s; a job silent well past that is stuck.
                self._scancel([job_id])
                return self._ended(run_dir, limit_mb, job, "timeout", now - started_at)
            if now - last_state_check >= STATE_POLL_S:
                last_state_check = now
                if job.done():  # ended without a report: killed before the wrapper could write one
                    time.sleep(POLL_S)  # a report written just as the job ended
                    if (run_dir / slurm_job.REPORT).exists():
                        continue
                    state = job.watcher.get_state(job_id, mode="force")
                    return self._ended(run_dir, limit_mb, job, state, now - (started_at or submitted))
            time.sleep(POLL_S)

    def _outcome(self, report: slurm_job.JobReport, run_dir: Path, limit_mb: Optional[int], job: Any) -> RunOutcome:
        timed_out, evidence = report.timed_out, report.thrash_evidence
        oom = report.oom_kills > 0 or (report.killed_by_sigkill and not timed_out and not evidence)
        observed: dict[str, Any] = dict(report.observed)
        if str(job.job_id).isdigit():
            observed["slurm_job_id"] = int(job.job_id)
        return RunOutcome(
            backend=self.name, exit_code=report.exit_code, oom_killed=oom and limit_mb is not None,
            timed_out=timed_out, thrashing=bool(evidence), thrash_evidence=evidence, wall_s=report.wall_s,
            stdout=_read_tail(run_dir / slurm_job.WORKER_STDOUT),
            stderr_tail=tail(_read_tail(run_dir / slurm_job.WORKER_STDERR)), limit_mb=limit_mb,
            limit_enforcement=self.enforcement(limit_mb, report.cgroup_enforced), observed=observed)

    def _ended(self, run_dir: Path, limit_mb: Optional[int], job: Any, state: str, wall_s: float) -> RunOutcome:
        """A job that ended without the wrapper's report: Slurm's state says why."""
        logs = "\n".join(filter(None, [_read_tail(run_dir / slurm_job.WORKER_STDERR), job.stderr() or ""]))
        oom = state == "OUT_OF_MEMORY" and limit_mb is not None
        timed_out = state in ("TIMEOUT", "timeout")
        if not (oom or timed_out):
            logs += f"\nslurm job {job.job_id} ended {state} before the worker reported"
        return RunOutcome(
            backend=self.name, exit_code=None, oom_killed=oom, timed_out=timed_out, thrashing=False,
            thrash_evidence="", wall_s=round(wall_s, 3), stdout=_read_tail(run_dir / slurm_job.WORKER_STDOUT),
            stderr_tail=tail(logs), limit_mb=limit_mb, limit_enforcement=self.enforcement(limit_mb),
            observed={"slurm_state": state})


def _pid_alive(pid: Any, host: Any) -> bool:
    """Whether the lodevem that submitted a job still runs (only knowable on its own host)."""
    if not isinstance(pid, int) or host != os.uname().nodename:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
