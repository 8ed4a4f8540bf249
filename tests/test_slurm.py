"""The Slurm backend against a real single-node cluster (scripts/slurm-cluster.sh up).

Why real: what matters is what Slurm does with ``--mem`` (the job cgroup, OUT_OF_MEMORY), what
sacct reports and that scancel leaves nothing behind; a fake scheduler would test none of it.
The verdicts and peaks are compared with the Docker backend's on the same files and limits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lodevem import measure, zoo
from lodevem.errors import BackendUnavailable, Cancelled
from lodevem.sandbox import image
from lodevem.sandbox.client import MeasureSettings, WorkerClient
from lodevem.sandbox.slurm_runtimes import SlurmRuntimes, installed_version

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"
pytestmark = pytest.mark.slurm
# 1 GiB and 512 MiB fit both models; 150 MiB is below the runtime's own ~180 MiB: OOM for both.
LIMITS = (1024, 512, 150)
QUICK = MeasureSettings(warmup=1, runs=3)


@pytest.fixture(scope="session")
def slurm_conf() -> str:
    """Brings the cluster up (installing Slurm when missing) and points the clients at it.

    Needs root (apt-get, the daemons); skipped elsewhere unless CI=true, where it must work."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run as root to bring the Slurm cluster up")
        pytest.skip("the single-node Slurm cluster needs root (scripts/slurm-cluster.sh up)")
    was_up = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, timeout=120).returncode == 0
    up = subprocess.run(["bash", str(SCRIPT), "up"], capture_output=True, text=True, timeout=600)
    assert up.returncode == 0, up.stderr
    conf = up.stdout.strip().rpartition("SLURM_CONF=")[2]
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    yield conf
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous
    if not was_up:  # leave the machine as the session found it
        subprocess.run(["bash", str(SCRIPT), "down"], capture_output=True, timeout=300)


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("slurm-models")
    return [zoo.write("mobilenet_v3_small", folder), zoo.write("tiny_cnn", folder)]


def _slurm(workdir: Path, **kwargs: Any):
    from lodevem.sandbox.slurm_backend import SlurmBackend, SlurmSettings

    return SlurmBackend(SlurmSettings(workdir=workdir, **kwargs))


def _queue() -> list[str]:
    """Ids of this cluster's lodevem jobs still pending or running (not a finished job Slurm still
    lists as COMPLETING for a moment while its epilog runs: that made a check right after a job
    flaky)."""
    out = subprocess.run(["squeue", "-h", "-n", "lodevem", "-t", "PENDING,RUNNING", "-o", "%i"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def _queue_drains(within_s: float = 30.0) -> list[str]:
    """The jobs still queued ``within_s`` after a run returned. The backend returns as soon as
    the wrapper's report is written; Slurm lists that job as RUNNING until its batch script exits
    a moment later, so an immediate check saw a finished job (CI, test_conversion_is_a_job_...)."""
    deadline = time.monotonic() + within_s
    while (left := _queue()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _wait_for_running_job(deadline_s: float, alive: Any = None) -> str:
    deadline = time.monotonic() + deadline_s
    while True:
        out = subprocess.run(["squeue", "-h", "-n", "lodevem", "-t", "RUNNING", "-o", "%i"], capture_output=True,
                             text=True, check=True).stdout.split()
        if out:
            return out[0]
        assert alive is None or alive(), "the run ended before a job was running"
        assert time.monotonic() < deadline, "no lodevem job started running"
        time.sleep(0.2)


def _sacct_state(job_id: str) -> str:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def test_cluster_script_is_idempotent(slurm_conf: str) -> None:
    again = subprocess.run(["bash", str(SCRIPT), "up"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert subprocess.run(["bash", str(SCRIPT), "status"], timeout=60).returncode == 0


def test_verdicts_and_peaks_equal_dockers(slurm_conf: str, docker_backend, models: list[Path],
                                          tmp_path: Path) -> None:
    """2 models x 3 limits (one OOM for both): the same verdicts as Docker, VmHWM within 5 %."""
    slurm = _slurm(tmp_path / "workdir")
    # infer=False: every limit really runs on both backends (no row inferred from a larger one)
    got_slurm = measure.measure_models(models, LIMITS, client=WorkerClient(slurm), settings=QUICK, jobs=2,
                                       timeout_s=300, use_cache=False, infer=False)
    got_docker = measure.measure_models(models, LIMITS, client=WorkerClient(docker_backend), settings=QUICK,
                                        jobs=2, timeout_s=300, use_cache=False, infer=False)
    assert len(got_slurm) == len(got_docker) == 6
    for key, on_docker in got_docker.items():
        on_slurm = got_slurm[key]
        assert on_slurm.sandbox.backend == "slurm"
        assert on_slurm.verdict == on_docker.verdict, (key, on_slurm.error, on_docker.error)
        if on_docker.verdict == "fits":
            assert on_slurm.peak.rss_mb is not None and on_docker.peak.rss_mb is not None
            assert abs(on_slurm.peak.rss_mb - on_docker.peak.rss_mb) <= 0.05 * on_docker.peak.rss_mb, key
            assert on_slurm.sandbox.observed.get("job_cgroup_limit_mb") == key[1]  # Slurm really set --mem
    by_limit = {limit: {m.verdict for (_, lim), m in got_slurm.items() if lim == limit} for limit in LIMITS}
    assert by_limit[150] == {"oom"} and by_limit[1024] == {"fits"}
    assert all("--mem=150M" in m.sandbox.limit_enforcement for (_, lim), m in got_slurm.items() if lim == 150)
    assert not _queue_drains()
    # submitit's per-job folders (pickles, logs) are removed once collected
    assert [p.name for p in (tmp_path / "workdir" / "submitit").iterdir() if p.is_dir()] == []


# tflite/ncnn: 512 MiB fits mobilenet_v3_small (VmHWM ~72 MB under LiteRT in a container);
# 48 MiB is below that peak: OOM in the container and in the job (which also holds the wrapper).
CONVERTED_LIMITS = (512, 48)


@pytest.mark.fresh_store  # it checks what its run's own .cache holds
@pytest.mark.parametrize("runtime", ["tflite", "ncnn"])
def test_converted_runtime_verdicts_equal_dockers(slurm_conf: str, docker_backend, models: list[Path],
                                                  tmp_path: Path, runtime: str) -> None:
    """--runtime tflite / ncnn on Slurm: converted once in the Docker converter image on this
    host, read by the jobs from the run's artifact store, measured in the job's cgroup with the
    nodes' runtime; the same verdicts as Docker, VmHWM within 10 %."""
    slurm = _slurm(tmp_path / "workdir")
    plan = slurm.runtimes.resolve(runtime)
    assert plan.converts_in == "docker" and plan.version
    assert list(slurm.image_ids()) == [image.CONVERT.tag]  # the manifest names the converter image
    store = tmp_path / "store"
    settings = replace(QUICK, runtime=runtime)
    model = models[0]  # mobilenet_v3_small
    # Slurm first (its conversion goes into the store), then Docker with the same store: the
    # conversion is a cache hit, so both measure the very same converted file.
    # 600 s: the conversion (litert-torch) took 80-200 s here on a loaded 2-core machine
    got_slurm = measure.measure_models([model], CONVERTED_LIMITS, client=WorkerClient(slurm), settings=settings,
                                       jobs=2, timeout_s=600, cache_dir=store / "measure", infer=False)
    got_docker = measure.measure_models([model], CONVERTED_LIMITS, client=WorkerClient(docker_backend),
                                        settings=settings, jobs=2, timeout_s=600, cache_dir=store / "measure",
                                        infer=False)
    converted = [p for p in (store / "converted").rglob("*") if p.suffix in (".tflite", ".param")]
    assert len(converted) == 1, converted  # one conversion served both backends
    for key, on_docker in got_docker.items():
        on_slurm = got_slurm[key]
        assert on_slurm.sandbox.backend == "slurm" and on_slurm.runtime == runtime
        assert on_slurm.verdict == on_docker.verdict, (key, on_slurm.error, on_docker.error)
        # measured in a job under --mem (or the job was killed before its wrapper could report)
        assert (on_slurm.sandbox.observed.get("job_cgroup_limit_mb") == key[1]
                or on_slurm.sandbox.observed.get("slurm_state") == "OUT_OF_MEMORY"), on_slurm.sandbox.observed
    slurm_at = {limit: m for (_, limit), m in got_slurm.items()}
    fits_slurm, fits_docker = slurm_at[512], {limit: m for (_, limit), m in got_docker.items()}[512]
    assert fits_docker.verdict == "fits", fits_docker.error
    assert fits_slurm.peak.rss_mb is not None and fits_docker.peak.rss_mb is not None
    assert abs(fits_slurm.peak.rss_mb - fits_docker.peak.rss_mb) <= 0.10 * fits_docker.peak.rss_mb
    assert fits_slurm.peak.rss_mb < 150  # the app runtime's peak, not torch's (~220 MB after import)
    assert slurm_at[48].verdict == "oom"
    assert not _queue_drains()


def test_converted_runtime_needs_are_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cluster needed: what a node lacks for tflite is named before any job is submitted."""
    bare = "/usr/bin/python3"  # Debian's python: no ai-edge-litert
    if installed_version(bare, "ai-edge-litert") is None:
        with pytest.raises(BackendUnavailable, match=r"has no ai-edge-litert.*ai-edge-litert==2\.3\.0"):
            SlurmRuntimes(bare).resolve("tflite")
    # No Docker engine to convert in: converted as a Slurm job if the nodes have the converter,
    # else one line naming both ways out.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{Path('/nonexistent') / 'docker.sock'}")
    runtimes = SlurmRuntimes(sys.executable)
    if installed_version(sys.executable, "litert-torch") is None:
        with pytest.raises(BackendUnavailable) as raised:
            runtimes.resolve("tflite")
        message = str(raised.value)
        assert "\n" not in message and "lodevem-convert" in message and "litert-torch==0.10.0" in message
    else:
        assert runtimes.resolve("tflite").converts_in == "slurm"
    assert runtimes.resolve("torch").converts_in == ""  # torch needs nothing converted


def test_conversion_is_a_job_when_no_docker_engine_answers(slurm_conf: str, models: list[Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """No Docker engine on the submitting host: the nodes' pnnx converts in a Slurm job, the
    .param and .bin come back through the run folder, and a job measures them."""
    if installed_version(sys.executable, "pnnx") is None:
        pytest.skip("the nodes' python has no pnnx (lodevem[test] installs it)")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-docker.sock'}")
    slurm = _slurm(tmp_path / "workdir")
    assert slurm.runtimes.resolve("ncnn").converts_in == "slurm"
    client = WorkerClient(slurm)
    target = tmp_path / "converted" / "tiny_cnn.param"
    run = client.convert(models[1], "ncnn", target, None, 600)
    assert run.ok, run.failure_message("conversion")
    assert run.reply is not None and run.reply.converted is not None and run.reply.converted.converter == "pnnx"
    assert target.stat().st_size > 0 and target.with_suffix(".bin").stat().st_size > 0
    measured = client.measure(models[1], 512, replace(QUICK, runtime="ncnn"), 300, converted_path=target)
    verdict, message, _ = measure.classify(measured)
    assert verdict == "fits", message
    assert measured.outcome.observed.get("job_cgroup_limit_mb") == 512
    assert not _queue_drains()


def test_over_the_limit_job_is_out_of_memory(slurm_conf: str, models: list[Path], tmp_path: Path) -> None:
    """At 100 MiB the job cgroup kills the worker during import: an OOM verdict with its phase."""
    run = WorkerClient(_slurm(tmp_path / "workdir")).measure(models[1], 100, QUICK, 300)
    verdict, message, phase = measure.classify(run)
    assert verdict == "oom", message
    assert phase == "during runtime import"
    assert run.reply is None and run.outcome.observed.get("job_cgroup_limit_mb") == 100


def test_cancel_leaves_no_job_behind(slurm_conf: str, models: list[Path], tmp_path: Path) -> None:
    backend = _slurm(tmp_path / "workdir")
    client = WorkerClient(backend)
    raised: list[BaseException] = []

    def endless() -> None:
        try:
            client.measure(models[1], 1024, MeasureSettings(warmup=0, runs=1_000_000), 600)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            raised.append(exc)

    thread = threading.Thread(target=endless)
    thread.start()
    job_id = _wait_for_running_job(120, thread.is_alive)
    backend.cancel()
    thread.join(60)
    assert not thread.is_alive()
    assert raised and isinstance(raised[0], Cancelled)
    assert job_id not in _queue()
    deadline = time.monotonic() + 60  # accounting lags the queue
    ended = ("CANCELLED", "OUT_OF_MEMORY")
    while not _sacct_state(job_id).startswith(ended) and time.monotonic() < deadline:
        time.sleep(0.5)
    # scancel ends it. Slurm 22.05 on this cgroup v1 host sometimes records a job killed while its
    # cgroup is torn down as OUT_OF_MEMORY instead of CANCELLED (seen once in a loaded CI run);
    # either way the job ended and left the queue, which is what cancelling must achieve.
    assert _sacct_state(job_id).startswith(ended), _sacct_state(job_id)
    assert list((tmp_path / "workdir" / "runs").iterdir()) == []


def _start(models: list[Path], output: Path, runs: int, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "lodevem.cli", "start", *map(str, models), "--backend", "slurm", "--tier", "tier2",
           "--warmup", "0", "--runs", str(runs), "--predictor", "estimator", "--jobs", "1", "--output", str(output),
           "--slurm-time", "10", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _running_measurement(workdir: Path, proc: subprocess.Popen, deadline_s: float = 180) -> str:
    """The job id of a measurement (not the ONNX export) whose worker has started."""
    deadline = time.monotonic() + deadline_s
    while True:
        for job_file in (workdir / "runs").glob("*/job.json"):
            try:
                request = json.loads((job_file.parent / "request.json").read_text())
                if request["action"] == "measure" and (job_file.parent / "started").exists():
                    return json.loads(job_file.read_text())["job_id"]
            except (OSError, ValueError, KeyError):
                continue
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no measurement job started running"
        time.sleep(0.2)


def test_sigint_cancels_the_submitted_jobs(slurm_conf: str, models: list[Path], tmp_path: Path) -> None:
    proc = _start(models[1:], tmp_path / "out", 100_000)
    try:
        job_id = _running_measurement(tmp_path / "out" / ".slurm", proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted" in err
    assert job_id not in _queue() and not _queue_drains()
    assert _sacct_state(job_id).startswith("CANCELLED")


def test_resume_reattaches_to_a_job_still_running(slurm_conf: str, models: list[Path], tmp_path: Path) -> None:
    """lodevem killed outright (SIGKILL: no cleanup) leaves its job running; --resume adopts that
    job instead of submitting the same measurement again, and records its result."""
    output = tmp_path / "out"
    runs = 2500  # tiny_cnn: ~3 ms a pass here, so a job runs long enough to be killed mid-run
    first = _start(models[1:], output, runs, "--no-infer")  # every limit measured: three jobs to adopt from
    try:
        job_id = _running_measurement(output / ".slurm", first)
        first.kill()
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    assert job_id in _queue()  # nobody cancelled it
    second = _start(models[1:], output, runs, "--resume", "--no-infer")
    _, err = second.communicate(timeout=600)
    assert second.returncode == 0, err
    cached = [json.loads(p.read_text())["value"] for p in (output / ".cache" / "measure").glob("*.json")]
    assert len(cached) == 3  # tier2's three RAM limits
    assert int(job_id) in [c["sandbox"]["observed"].get("slurm_job_id") for c in cached]
    assert {c["verdict"] for c in cached} == {"fits"}
    assert not _queue_drains()
