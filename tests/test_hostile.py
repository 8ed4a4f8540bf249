"""Hostile model files against the real Docker engine: a model file is code, and the host must
never act on what the container wrote without checking it.

Each case builds a pickle whose loading runs code inside the sandbox (that is what a ``.pt``
file can do) and asserts what the host did: the exit code, a one-line message, and what is left
on disk. More cases join this file as the security issue's suite grows.
"""

from __future__ import annotations

import csv
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli
from lodevem.sandbox.client import WorkerClient
from lodevem.sandbox.docker_backend import DockerBackend

pytestmark = pytest.mark.docker

# Run at the worker's exit (after it wrote its output into the scratch /output folder): replace
# every output file with a symlink to a host secret, hoping the host follows it.
_SWAP_FOR_LINKS = (
    "(__import__('atexit').register(lambda: [(__import__('os').remove('/output/' + n), "
    "__import__('os').symlink('/etc/shadow', '/output/' + n)) for n in __import__('os').listdir('/output')]), "
    "__import__('torch').nn.Sequential(__import__('torch').nn.Conv2d(3, 4, 3)).eval())[1]"
)


class _Payload:
    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):  # unpickling evaluates the code and yields a real model
        return (eval, (self.code,))


def _hostile(path: Path, code: str) -> Path:
    path.write_bytes(pickle.dumps(_Payload(code), protocol=2))
    path.chmod(0o644)
    return path


def test_derive_does_not_follow_a_symlink_the_container_made(docker_backend, tmp_path: Path) -> None:
    model = _hostile(tmp_path / "evil.pt", _SWAP_FOR_LINKS)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["derive", str(model), "--levels", "fp16", "--out", str(out),
                                      "--backend", "docker", "--input-shape", "1,3,16,16"])
    assert result.exit_code == 1, result.output
    assert "other than a regular file" in result.output and "Traceback" not in result.output
    secret = Path("/etc/shadow").read_bytes() if Path("/etc/shadow").exists() else b"\0no-secret"
    for path in out.rglob("*") if out.exists() else []:
        assert not path.is_symlink()
        assert path.is_dir() or path.read_bytes() != secret


def test_start_does_not_follow_a_symlink_in_the_export(docker_backend, tmp_path: Path) -> None:
    model = _hostile(tmp_path / "evil.pt", _SWAP_FOR_LINKS)
    out = tmp_path / "results"
    result = CliRunner().invoke(cli, ["start", str(model), "--profile", "nokia_c1", "--output", str(out),
                                      "--backend", "docker", "--input-shape", "1,3,16,16", "--runs", "1",
                                      "--warmup", "0"])
    assert result.exit_code == 1, result.output
    assert "other than a regular file" in result.output and "Traceback" not in result.output
    assert not [p for p in out.rglob("*") if p.is_symlink()]


_CANARY = "(__import__('pathlib').Path({path!r}).write_text('ran'), __import__('torch').nn.Identity())[1]"


def test_auto_backend_never_runs_a_model_outside_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreachable daemon (a mistyped DOCKER_HOST) must stop the run, not unpickle the file
    as a child of this process."""
    canary = tmp_path / "canary"
    model = _hostile(tmp_path / "evil.pt", _CANARY.format(path=str(canary)))
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    for args in (["start", str(model), "--profile", "nokia_c1", "--output", str(tmp_path / "out")],
                 ["derive", str(model), "--levels", "fp16", "--out", str(tmp_path / "variants")]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "DOCKER_HOST=tcp://127.0.0.1:1" in lines[0], result.output
        assert "does not fall back" in lines[0] and "Traceback" not in result.output
    assert not canary.exists()


_MEMORY_BOMB = "(bytearray(1536 * 2**20), __import__('torch').nn.Identity())[1]"
# Write 64 MB into the output folder, then stall so the backend's watch sees it.
_DISK_FILLER = ("(__import__('pathlib').Path('/output/junk').write_bytes(bytes(64 * 2**20)), "
                "__import__('time').sleep(30), __import__('torch').nn.Identity())[2]")


def test_an_export_runs_under_the_work_memory_limit(docker_backend, tmp_path: Path) -> None:
    model = _hostile(tmp_path / "bomb.pt", _MEMORY_BOMB)
    client = WorkerClient(docker_backend, work_limit=512)
    run = client.export_onnx(model, tmp_path / "bomb.onnx", (1, 3, 8, 8), timeout_s=120)
    assert run.problem() is not None and run.problem()[0] == "oom", run.problem()
    assert "memory+swap=512MB" in run.outcome.limit_enforcement
    assert not (tmp_path / "bomb.onnx").exists()


def test_a_sandbox_that_fills_its_output_folder_is_stopped(docker_backend, tmp_path: Path) -> None:
    backend = DockerBackend()
    backend.max_output_bytes = 16 * 2**20
    model = _hostile(tmp_path / "filler.pt", _DISK_FILLER)
    run = WorkerClient(backend).export_onnx(model, tmp_path / "filler.onnx", (1, 3, 8, 8), timeout_s=120)
    problem = run.problem()
    assert problem is not None and "over the 16 MB cap" in problem[1], problem
    # killed while it stalled (SIGKILL: 128 + 9), not after: no wall-time assert on a shared machine
    assert run.outcome.limit_breach and run.outcome.exit_code == 137, run.outcome
    assert not (tmp_path / "filler.onnx").exists()


# ---- interrupts: any point, any signal, a second one too -------------------------------------------

def _labelled_by(pid: int) -> list[str]:
    import subprocess

    return subprocess.run(["docker", "ps", "-aq", "--filter", "label=lodevem=1", "--filter", f"label=lodevem.pid={pid}"],
                          capture_output=True, text=True, check=True).stdout.split()


def _stage(out: Path) -> str:
    """Which stage a run writing into ``out`` is in, from what it has written so far."""
    cache = out / ".cache"
    if not list((cache / "onnx").glob("*.onnx")):
        return "exporting"
    # a derivation writes into a staging folder of the artifact store, published when it succeeded
    if not list((cache / "derived").glob("*.pt")) and any((cache / ".staging").glob("run-*")):
        return "deriving"
    return "measuring"


@pytest.mark.parametrize("signals, wait_for, runs, levels, code", [
    (("SIGTERM",), "exporting", "3", (), 143),                    # the first seconds: the export container
    (("SIGTERM",), "deriving", "3", ("--levels", "fp32,fp16"), 143),  # a derivation in the sandbox
    (("SIGINT", "SIGINT"), "measuring", "100000", (), 130),       # mid-measurement, a second Ctrl-C in cleanup
])
@pytest.mark.fresh_store  # it checks what its run's own .cache holds
def test_a_signal_at_any_point_cleans_up(docker_backend, tmp_path: Path, signals: tuple[str, ...], wait_for: str,
                                         runs: str, levels: tuple[str, ...], code: int) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from lodevem import zoo

    model = zoo.write("mobilenet_v2", tmp_path)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "lodevem.cli", "start", str(model), "--profile", "nokia_c1", "--output", str(out),
               "--backend", "docker", "--runs", runs, "--warmup", "0", *levels]
    # A private TMPDIR: lodevem's scratch folders (tempfile) go there, so other lodevem runs on a
    # shared machine cannot make a leftover folder appear or disappear.
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    scratch_before = set(private_tmp.glob("lodevem-out-*"))
    env = {**os.environ, "COLUMNS": "200", "TMPDIR": str(private_tmp)}
    proc = subprocess.Popen([*command, "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 180
        while True:  # until the stage we want has a container of this process running
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be signalled"
            if _labelled_by(proc.pid) and _stage(out) == wait_for:
                break
            time.sleep(0.2)
        time.sleep(1.0)
        for name in signals:
            proc.send_signal(getattr(signal, name))
            time.sleep(0.3)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, output
    assert "Interrupted." in output and "Traceback" not in output, output
    assert _labelled_by(proc.pid) == []
    assert set(private_tmp.glob("lodevem-out-*")) <= scratch_before  # every scratch folder removed
    if runs != "100000":  # then --resume finishes what the interrupted run started
        resumed = subprocess.run([*command, "--no-cache", "--resume"], capture_output=True, text=True, env=env,
                                 timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        with (out / "benchmark_results.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == max(1, len(levels and levels[1].split(",")))
