"""measure.py against the REAL Docker engine and the real worker image.

Skipped only when no Docker daemon answers (CI starts one with scripts/setup-docker.sh). The
image is built once per session if missing (~80 s with cached wheels). Test models with custom
code are TorchScript files: they carry their code, so the worker in the container can load them
without importing anything from this test module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any, Optional

import pytest
import torch
from fakes import Counting
from torch import nn

from lodevem import measure, zoo
from lodevem.sandbox import image, open_backend
from lodevem.sandbox.client import MeasureSettings, WorkerClient

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny(model_dir: Path) -> Path:
    return zoo.write("tiny_cnn", model_dir)


class Hog(nn.Module):
    """Its forward pass fills a ``mb``-MiB tensor: more than the limit means OOM for sure."""

    def __init__(self, mb: int) -> None:
        super().__init__()
        self.numel = mb * 2**20 // 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum() + torch.ones(self.numel).sum()


@pytest.fixture(scope="session")
def hog600(model_dir: Path) -> Path:
    path = model_dir / "hog600.pt"
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; it still carries the code
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(Hog(600)), str(path))
    return path


def _one(model: Path, limit: int, backend: Any, runtime: str = "torch", warmup: int = 1, runs: int = 3,
         **kw: Any) -> measure.MemoryMeasurement:
    kw.setdefault("timeout_s", 180)
    settings = MeasureSettings(runtime=runtime, warmup=warmup, runs=runs)
    return measure.measure_models([model], [limit], client=WorkerClient(backend), settings=settings, jobs=1,
                                  **kw)[(str(model), limit)]


def _labelled(pid: Optional[int] = None) -> list[str]:
    cmd = ["docker", "ps", "-aq", "--filter", "label=lodevem=1"]
    if pid is not None:  # other lodevem runs may share this engine: only look at ours
        cmd += ["--filter", f"label=lodevem.pid={pid}"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()


def test_zoo_model_fits_at_1gb(docker_backend, tiny: Path) -> None:
    m = _one(tiny, 1024, docker_backend)
    assert m.verdict == "fits", m.error
    assert m.sandbox.backend == "docker" and "memory+swap=1024MB" in m.sandbox.limit_enforcement
    assert 150 < m.peak.runtime_baseline_mb < 350  # python + torch, measured ~219 MiB
    assert 0 < m.peak.model_increment_mb < 100  # tiny_cnn ~20 MiB
    assert m.peak.rss_mb == pytest.approx(m.peak.runtime_baseline_mb + m.peak.model_increment_mb, abs=1.0)
    assert m.peak.cgroup_mb is not None and 0 < m.peak.cgroup_mb <= 1024
    assert m.host.mean_ms and m.host.mean_ms > 0
    assert m.sandbox.image_id == docker_backend.identity and not m.cached


def test_allocation_over_the_limit_is_oom(docker_backend, hog600: Path) -> None:
    m = _one(hog600, 512, docker_backend)
    assert m.verdict == "oom", m.error
    assert m.phase in ("during warm-up", "during inference", "while loading the model")


def test_64mb_is_oom_during_runtime_import(docker_backend, tiny: Path) -> None:
    m = _one(tiny, 64, docker_backend)
    assert m.verdict == "oom" and m.phase == "during runtime import", m.error


def test_shared_limits_run_once(docker_backend, tiny: Path) -> None:
    """Profiles with the same RAM share one run; with --no-infer each distinct limit runs once, by
    default the 512 MB row is inferred from the 1024 MB run (tiny's ~240 MB peak is far below)."""
    profiles_ram = [1024, 1024, 1024, 512, 512, 512, 512]  # e.g. 3 + 4 profiles
    for infer, runs in ((False, 2), (True, 1)):
        counting = Counting(docker_backend)
        results = measure.measure_models([tiny], profiles_ram, client=WorkerClient(counting),
                                         settings=MeasureSettings(warmup=1, runs=2), jobs=2, infer=infer)
        assert counting.runs == runs, infer
        assert {k[1] for k in results} == {512, 1024}
        assert all(m.verdict == "fits" for m in results.values())
        assert [m.inferred_from_mb for _, m in sorted(results.items(), key=lambda kv: kv[0][1])] == \
            ([1024, None] if infer else [None, None])


def test_bad_model_file_is_an_error_with_the_workers_message(docker_backend, model_dir: Path) -> None:
    bad = model_dir / "notes.pt"
    bad.write_text("these are my notes, not a model\n")
    m = _one(bad, 1024, docker_backend)
    assert m.verdict == "error"
    assert "not a model" in m.error and "notes.pt" in m.error


def test_second_call_is_served_from_cache(docker_backend, tiny: Path, tmp_path: Path) -> None:
    counting = Counting(docker_backend)
    cache = tmp_path / ".cache" / "measure"
    first = _one(tiny, 1024, counting, cache_dir=cache)
    second = _one(tiny, 1024, counting, cache_dir=cache)
    assert counting.runs == 1 and not first.cached and second.cached
    assert second.peak.rss_mb == first.peak.rss_mb


@pytest.mark.fresh_store  # it checks what its run's own .cache holds
def test_onnxruntime_runtime_has_a_leaner_baseline(docker_backend, tiny: Path, tmp_path: Path) -> None:
    torch_m = _one(tiny, 1024, docker_backend)
    ort_m = _one(tiny, 1024, docker_backend, runtime="onnxruntime", cache_dir=tmp_path / ".cache" / "measure")
    assert ort_m.verdict == "fits", ort_m.error
    assert ort_m.runtime == "onnxruntime" and ort_m.peak.runtime_baseline_mb < torch_m.peak.runtime_baseline_mb
    assert list((tmp_path / ".cache" / "onnx").glob("*.onnx"))  # exported once, outside the limit


def test_sigint_removes_running_containers(docker_backend, tiny: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    # SIGINT as a fresh shell gives it: an ignored SIGINT is inherited across exec, and Python
    # then installs no KeyboardInterrupt handler (the pytest process may hold one ignored).
    script.write_text(textwrap.dedent(f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from lodevem import measure
        from lodevem.sandbox import open_backend
        from lodevem.sandbox.client import MeasureSettings, WorkerClient
        measure.measure_models([{str(tiny)!r}], [1024], settings=MeasureSettings(runs=100000, warmup=0), jobs=1,
                               timeout_s=300, client=WorkerClient(open_backend("docker")[0]))
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _labelled(proc.pid):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no container appeared"
            time.sleep(0.2)
        time.sleep(3)  # let the worker get going inside the container
        assert _labelled(proc.pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert _labelled(proc.pid) == []
    # Nothing labelled is left at all, except containers of other lodevem processes still
    # running on this machine (a concurrent test session).
    from lodevem.sandbox.containers import owner_alive

    client = image.docker_client()
    assert [c.id for c in client.containers.list(all=True, filters={"label": "lodevem=1"})
            if not owner_alive(c, set())] == []


def test_process_backend_agrees_on_clear_cases(tiny: Path) -> None:
    backend, _ = open_backend("process")
    fits = _one(tiny, 1024, backend)
    oom = _one(tiny, 64, backend)
    assert fits.verdict == "fits", fits.error
    assert fits.sandbox.backend == "process" and fits.sandbox.limit_enforcement
    assert 150 < fits.peak.rss_mb < 400
    assert oom.verdict == "oom", oom.error


def test_wall_clock_timeout_stops_the_run(docker_backend, tiny: Path) -> None:
    # A million passes would take hours: the verdict says the timeout stopped it. How soon after
    # the 3 s it stops is a figure of benchmarks/worker_overheads.py, not an assert here.
    m = _one(tiny, 1024, docker_backend, runs=1_000_000, timeout_s=3)
    assert m.verdict == "timeout" and "timeout" in m.error
    assert _labelled(os.getpid()) == []
