"""Test doubles shared by the tests: a fake isolation backend that never runs a model.

It answers the worker protocol like the real worker would (one JSON reply on stdout with this
lodevem's schema and worker versions), so everything above the backend (the client, verdicts,
the scheduler, the cache, the runner's planning) runs for real without Docker.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Optional, Union

from lodevem.sandbox.base import Cancellable, RunOutcome
from lodevem.wire.protocol import SCHEMA_VERSION, WORKER_VERSION


def outcome(limit: Optional[int] = 512, result: Optional[dict[str, Any]] = None, **kw: Any) -> RunOutcome:
    """A RunOutcome whose stdout carries ``result`` as the worker's reply line (None: no reply)."""
    stdout = "" if result is None else json.dumps(
        {"schema_version": SCHEMA_VERSION, "worker_version": WORKER_VERSION, **result}) + "\n"
    base = dict(backend="fake", exit_code=0, oom_killed=False, timed_out=False, thrashing=False, thrash_evidence="",
                wall_s=1.0, stdout=stdout, stderr_tail="", limit_mb=limit, limit_enforcement="fake")
    base.update(kw)
    return RunOutcome(**base)


def ok_result(hwm_mb: float, base_mb: float = 200.0) -> dict[str, Any]:
    return {"ok": True, "model": {"format": "pickled_module", "params": 10},
            "latency": {"mean_ms": 2.0, "std_ms": 0.1, "p50_ms": 2.0, "p95_ms": 2.2, "throughput_ips": 500.0},
            "memory": {"hwm_kb": int(hwm_mb * 1024), "runtime_baseline_kb": int(base_mb * 1024),
                       "model_increment_kb": int((hwm_mb - base_mb) * 1024), "major_faults": 0,
                       "cgroup": {"version": 1, "peak_bytes": int(hwm_mb * 0.6 * 2**20)}}}


class FakeBackend(Cancellable):
    """Fits when limit >= need_mb (peak = need_mb), OOM-killed below; records every run.

    ``export-onnx`` and ``derive`` requests fail with the worker's usual error reply (it writes
    no file), so latency cells and derived levels say why they are missing; ``calls`` records
    the measurement runs only, ``actions`` every request.
    """

    name = "fake"
    identity = "fake:1"

    def __init__(self, need_mb: Union[dict[str, float], float] = 250.0) -> None:
        super().__init__()
        self.need = need_mb
        self.calls: list[tuple[str, Optional[int], Optional[float]]] = []
        self.actions: list[str] = []
        self.timeouts: list[tuple[str, float]] = []  # (action, timeout_s) of every request
        self.lock = threading.Lock()

    def prewarm(self, runtime: str = "torch") -> None:
        pass

    def identity_for(self, runtime: str) -> str:
        return self.identity

    def run(self, request: Any, limit_mb: Optional[int], timeout_s: float, *,
            reference_s: Optional[float] = None, on_progress: Any = None) -> RunOutcome:
        with self.lock:
            self.actions.append(request.action)
            self.timeouts.append((request.action, timeout_s))
            if request.action in ("export-onnx", "derive", "export-tflite", "export-ncnn"):
                kind = "export_failed" if request.action == "export-onnx" else "level_failed"
                return outcome(None, {"ok": False, "error": {"kind": kind, "message": "the fake backend writes no file"}},
                               exit_code=3)
            self.calls.append((Path(request.model_path).name, limit_mb, reference_s))
        need = self.need[Path(request.model_path).name] if isinstance(self.need, dict) else self.need
        if limit_mb is not None and limit_mb < need:
            return outcome(limit_mb, exit_code=137, oom_killed=True, stderr_tail="lodevem-worker: loaded x\n")
        return outcome(limit_mb, ok_result(need), wall_s=2.0)


class InterruptAfter:
    """A progress sink that presses Ctrl-C (raises KeyboardInterrupt) after ``n`` finished pairs."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def stage(self, text: str) -> None: ...
    def start_pairs(self, total: int, done: int) -> None: ...
    def working_on(self, text: str) -> None: ...

    def pair_done(self, model_label: str, profile_label: str) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise KeyboardInterrupt


class Counting:
    """Wraps a backend to count worker runs (prewarm is not a worker run)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.identity, self.runs = inner, inner.name, inner.identity, 0
        self.actions: list[str] = []  # the action of every worker run

    def prewarm(self, runtime: str = "torch") -> None:
        self.inner.prewarm(runtime)

    def identity_for(self, runtime: str) -> str:
        return self.inner.identity_for(runtime)

    def cancel(self) -> None:
        self.inner.cancel()

    def reset(self) -> None:
        self.inner.reset()

    def sweep_stale(self) -> int:
        return self.inner.sweep_stale()

    def run(self, request: Any, *args: Any, **kwargs: Any):
        self.runs += 1
        self.actions.append(request.action)
        return self.inner.run(request, *args, **kwargs)
