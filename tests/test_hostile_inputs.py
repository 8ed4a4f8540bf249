"""Issue 21's rules against hostile inputs: one safe reader for user- and container-named paths,
bounded container output, bounded options and messages. Container cases use the real engine."""

from __future__ import annotations

import ast
import json
import os
import pickle
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from helpers import runs_in_the_sandbox

from lodevem.cli import cli
from lodevem.errors import InputError
from lodevem.gates import Budget, check_budget
from lodevem.latency.calibration import parse_benchmark_log
from lodevem.safe_io import LOG, LOG_LINE_CHARS, UnsafeInput, json_text, printable, read_text
from lodevem.sandbox.usercode import MAX_ARCH_KWARGS_DEPTH, code_digest, parse_arch_kwargs
from lodevem.wire.requests import InspectRequest

PACKAGE = Path(__file__).resolve().parent.parent / "lodevem"

# Host reads that are not of a path a user or a container names, by (module, function): system
# files, lodevem's own package data, nn-Meter's fetched data, and the image build context.
OWN_READS = {
    ("doctor.py", "check_cgroups"), ("report/environment.py", "_cpuinfo"),
    ("report/environment.py", "_os_name"),     ("sandbox/base.py", "host_memory_mb"), ("sandbox/process_backend.py", "read"),
    ("sandbox/process_backend.py", "_own_cgroup"), ("sandbox/process_backend.py", "find_cgroup_parent"),
    ("sandbox/slurm_job.py", "find"), ("sandbox/slurm_job.py", "read_int"), ("sandbox/slurm_job.py", "keyed"),
    ("sandbox/image_context.py", "download_wheels"), ("sandbox/image_context.py", "context_digest"), ("sandbox/image.py", "_sha256"),
    ("sandbox/image_context.py", "_debootstrap_import"), ("latency/estimator_params.py", "read_params"),
    ("latency/nnmeter_data.py", "_nn_meter_configs"), ("latency/nnmeter_data.py", "default_data_dir"),
    ("latency/sklearn_compat.py", "load_predictor_file"), ("latency/sklearn_compat.py", "load_legacy_pickle"),
    ("latency/pool.py", "__init__"), ("latency/kinds.py", "_sha256"),
    ("sandbox/slurm_backend.py", "_job_info"),
    # armsim: its shipped parameters and the digest of its own plugin/guest/Dockerfile sources
    ("latency/armsim/costmodel.py", "_load_cached"), ("latency/armsim/profiler.py", "sources_digest"),
    ("latency/armsim/kind.py", "identity"), ("latency/armsim/shipped.py", "_load"),  # + its shipped zoo profiles
    # the paper kit: lodevem's own references.json, armsim parameters and CITATION.cff
    ("latency/paper.py", "load_references"), ("latency/armsim/paper.py", "cost_model_facts"),
    ("report/paperkit.py", "repository_url"),
    ("wire/protocol.py", "source_digest"),  # the worker version: a digest of lodevem's own files
}
# Opens that write (lodevem's own new files) or hold locks: not reads.
WRITES = {("latency/nnmeter_data.py", "fetch_predictors"), ("store/files.py", "atomic_file"),
          ("store/files.py", "write_new"), ("runner/run.py", "__enter__"),
          ("sandbox/scratch.py", "take_output"), ("sandbox/slurm_job.py", "run_in_job"),
          ("sandbox/armsim/make_views.py", "main")}  # make_views: the image build's cpu views
READS = {"read_text", "read_bytes", "open", "fdopen"}


def _bare_reads(source: str, rel: str) -> list[str]:
    tree = ast.parse(source)
    owner: dict[int, str] = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                owner[id(node)] = func.name  # innermost wins: walked outer first
    from_safe_io = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").endswith("safe_io") for a in n.names}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "safe_io":
                continue  # safe_io.read_text(...)
            if isinstance(node.func, ast.Name) and name in from_safe_io:
                continue  # read_text(...) imported from safe_io
            if name in READS:
                where = (rel, owner.get(id(node), "<module>"))
                if rel.startswith("safe_io/") or where in OWN_READS | WRITES:
                    continue
                found.append(f"{rel}:{node.lineno} {where[1]}: {ast.unparse(node.func)}()")
    return found


def test_the_host_reads_named_paths_only_through_safe_io() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not runs_in_the_sandbox(rel):
            offenders += _bare_reads(path.read_text(), rel)
    assert offenders == []


def test_the_read_rule_catches_a_bare_read() -> None:
    assert _bare_reads("def f(p):\n    return p.read_text()\n", "cli.py")
    assert _bare_reads("def f(p):\n    with open(p) as h:\n        return h.read()\n", "latency/calibration.py")
    assert not _bare_reads("from .safe_io import read_text\ndef f(p):\n    return read_text(p, LOG)\n", "cli.py")
    assert _bare_reads("from pathlib import Path\ndef f(p):\n    return Path.read_text(p)\n", "cli.py")


def test_every_json_lodevem_writes_refuses_nan() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        # the wire's own lines (a request for the worker, the worker's reply), each read back by the
        # other side's bounded parser, as when they lived in worker/
        if runs_in_the_sandbox(rel) or rel.startswith("wire/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("dumps", "dump") and getattr(node.func.value, "id", "") == "json":
                if not any(k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                           for k in node.keywords):
                    offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []
    assert json.loads(json_text({"a": float("inf"), "b": [float("nan"), 1.5]})) == {"a": None, "b": [None, 1.5]}


# --------------------------------------------------------------------------- the reader


def test_fifos_devices_and_sparse_files_are_refused_without_being_read(tmp_path: Path) -> None:
    fifo = tmp_path / "log.txt"
    os.mkfifo(fifo)
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    sparse = tmp_path / "sparse.txt"
    with open(sparse, "wb") as handle:
        handle.truncate(20 * 2**30)  # 20 GB that cost no disk
    cases = ((fifo, "(a FIFO)"), (link, "(a device)"), (sparse, "at most 16 MiB"), (tmp_path, "(a directory)"))
    for path, needle in cases:
        with pytest.raises(UnsafeInput, match=needle) as caught:
            read_text(path, LOG)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    for path in (fifo, link, sparse):  # the CLI: one line, exit 2, nothing hangs
        result = CliRunner().invoke(cli, ["calibrate", "from-log", str(path), "jiophone2", "mobilenet_v2"])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert str(path) in result.output


def test_code_folders_hash_links_as_links_and_refuse_fifos(tmp_path: Path) -> None:
    pkg = tmp_path / "cocoa"
    pkg.mkdir()
    (pkg / "model.py").write_text("X = 1\n")
    (pkg / "urandom.py").symlink_to("/dev/urandom")  # hashed as its target string, never read
    (pkg / "loop").symlink_to(pkg)  # a linked folder is not descended into
    first = code_digest([pkg])
    assert first == code_digest([pkg]) and len(first) == 64
    (pkg / "urandom.py").unlink()
    (pkg / "urandom.py").symlink_to("/dev/zero")
    assert code_digest([pkg]) != first  # the link's target is part of the digest
    os.mkfifo(pkg / "pipe.py")
    with pytest.raises(UnsafeInput, match="a FIFO"):
        code_digest([pkg])
    (pkg / "pipe.py").unlink()
    with open(pkg / "huge.py", "wb") as handle:
        handle.truncate(2 * 2**30)
    with pytest.raises(UnsafeInput, match="at most"):
        code_digest([pkg])


def test_the_log_parser_is_linear_and_caps_line_length() -> None:
    hostile = "Inference timings in us: " * 40_000 + "\n"  # 1 MB line: quadratic in the old regex
    good = "INFO: Inference timings in us: Init: 1, First inference: 2, Warmup (avg): 3, Inference (avg): 12345.6\n"
    parsed = parse_benchmark_log(hostile + good, "log")
    assert [e.ms for e in parsed.entries] == [pytest.approx(12.3456)]
    with pytest.raises(InputError, match=f"over {LOG_LINE_CHARS} characters skipped"):
        parse_benchmark_log(hostile, "log")
    long_ok = "Inference timings in us: " * 100 + "Inference (avg): 1000\n"  # under the cap: parsed
    assert parse_benchmark_log(long_ok, "log").entries[0].ms == pytest.approx(1.0)


def test_a_huge_benchncnn_log_gives_a_short_error(tmp_path: Path) -> None:
    log = tmp_path / "bench.txt"
    log.write_text("".join(f"model{i}  min = 1.0  max = 2.0  avg = 1.5\n" for i in range(200_000)))
    result = CliRunner().invoke(cli, ["calibrate", "from-log", str(log), "jiophone2", "not_there"])
    assert result.exit_code == 2 and len(result.output) < 1500, result.output[:2000]


# --------------------------------------------------------------------------- options and messages


def test_arch_kwargs_are_bounded_in_depth_and_size(tmp_path: Path) -> None:
    assert parse_arch_kwargs('{"width": 32}') == {"width": 32}
    for text, needle in (("[" * 5000 + "]" * 5000, "nested deeper"),
                         ('{"a":' * (MAX_ARCH_KWARGS_DEPTH + 1) + "1" + "}" * (MAX_ARCH_KWARGS_DEPTH + 1), "nested"),
                         ('{"a": "' + "x" * 200_000 + '"}', "KiB"), ('{"a": NaN}', "not valid JSON")):
        with pytest.raises(InputError, match=needle) as caught:
            parse_arch_kwargs(text)
        assert str(caught.value).startswith("--arch-kwargs") and len(str(caught.value)) < 400
    model = tmp_path / "m.pt"
    model.write_bytes(b"not read")
    for command in (["inspect", str(model)], ["predict", str(model)], ["start", str(model), "--output", str(tmp_path)]):
        result = CliRunner().invoke(cli, [*command, "--arch", "zoo:tiny_cnn", "--arch-kwargs", "[" * 5000 + "]" * 5000])
        assert result.exit_code == 2 and "--arch-kwargs" in result.output and "Traceback" not in result.output


def test_control_characters_never_reach_the_terminal() -> None:
    assert printable("ok\x1b[2J\x1b]0;title\x07\rdone\u202e") == "ok\\x1b[2J\\x1b]0;title\\x07\\rdone\\u202e"
    assert printable("a\nb", newlines=False) == "a\\nb"
    assert printable("x" * 5000).endswith("(4000 more characters)")


def test_a_gate_never_passes_on_a_latency_that_is_no_figure() -> None:
    def row(latency):
        return SimpleNamespace(model=SimpleNamespace(label="m"),
                               device=SimpleNamespace(tier="tier3", label="p", profile_id="p"),
                               latency=SimpleNamespace(ms=latency, note=None), verdict="fits",
                               memory=SimpleNamespace(limit_mb=256, error=None))

    budget = Budget(max_latency_ms=100.0)
    assert check_budget([row(50.0)], budget) == []
    for bad in (0.0, -1.0, float("inf"), float("nan"), None, 200.0):
        assert len(check_budget([row(bad)], budget)) == 1, bad


# --------------------------------------------------------------------------- bounded container output

_LOUD = ("(__import__('os').write(2, b'x' * (300 * 2**20)), print('y' * (50 * 2**20)), "
         "__import__('torch').nn.Sequential(__import__('torch').nn.Conv2d(3, 4, 3)).eval())[-1]")


class _Payload:
    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return (eval, (self.code,))


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.docker
def test_a_model_that_prints_300_mb_leaves_a_small_host_and_a_capped_log(docker_backend, tmp_path: Path) -> None:
    from lodevem.sandbox.client import WorkerClient

    model = tmp_path / "loud.pt"
    model.write_bytes(pickle.dumps(_Payload(_LOUD), protocol=2))
    model.chmod(0o644)
    client = WorkerClient(docker_backend)
    seen: dict[str, int] = {"log_bytes": 0, "containers": 0}
    done = threading.Event()

    def spy() -> None:  # the container's log file on the host's disk, while it runs
        while not done.is_set():
            for c in docker_backend.client.containers.list(filters={"label": "lodevem=1"}):
                try:
                    c.reload()
                    config = c.attrs["HostConfig"]["LogConfig"]
                    assert config["Type"] == "json-file" and config["Config"]["max-size"] == "8m"
                    seen["containers"] += 1
                    seen["log_bytes"] = max(seen["log_bytes"], os.stat(c.attrs["LogPath"]).st_size)
                except (OSError, KeyError):
                    pass
                except Exception:
                    pass
            time.sleep(0.2)

    import docker.types  # noqa: F401  (imported here, not by two threads at once: docker-py is not safe so)

    _ = docker_backend.client  # opened before the spy thread uses it
    watcher = threading.Thread(target=spy, daemon=True)
    before = _hwm_mb()
    watcher.start()
    try:
        run = client.run(InspectRequest(model_path=str(model), input_shape=[1, 3, 16, 16]),
                         None, 300)
    finally:
        done.set()
        watcher.join()
    assert run.reply is not None and run.reply.ok, run.outcome.stderr_tail[-500:]
    assert len(run.outcome.stdout) <= 2**20 and len(run.outcome.stderr_tail) <= 2**20
    assert _hwm_mb() - before < 150, "the host read the container's output whole"
    assert seen["containers"] > 0
    assert seen["log_bytes"] <= 9 * 2**20, seen


@pytest.mark.docker
def test_an_arch_callable_that_builds_no_module_is_one_line_exit_2(docker_backend, tmp_path: Path) -> None:
    import torch

    code = tmp_path / "mk.py"
    code.write_text("def nothing(**kwargs):\n    return None\n")
    weights = tmp_path / "weights.pt"
    torch.save(torch.nn.Conv2d(3, 4, 3).state_dict(), weights)
    for path in (code, weights):
        path.chmod(0o644)
    common = ["--arch", "mk:nothing", "--code", str(code), "--backend", "docker", "--input-shape", "1,3,16,16"]
    for command in (["inspect", str(weights)], ["predict", str(weights), "--profile", "jiophone2"],
                    ["start", str(weights), "--profile", "jiophone2", "--output", str(tmp_path / "out"), "--runs", "1",
                     "--warmup", "0"]):
        result = CliRunner().invoke(cli, [*command, *common])
        assert "Traceback" not in result.output and "AttributeError" not in result.output, result.output
        assert "not an nn.Module" in result.output, result.output
        assert result.exit_code == 2, (command[0], result.exit_code, result.output)


@pytest.mark.parametrize("side", ["process backend", "slurm job"])
def test_a_loud_model_keeps_only_output_tails_on_the_host_and_the_node(side: str, tmp_path: Path) -> None:
    """The process backend and the Slurm job (its node side, run here as a node would) pipe the
    worker's output into tail buffers: 40 MB printed leave at most 64 KiB of stderr."""
    from lodevem.sandbox import slurm_job
    from lodevem.sandbox.client import WorkerClient, parse_reply
    from lodevem.sandbox.process_backend import ProcessBackend

    model = tmp_path / "loud.pt"
    model.write_bytes(pickle.dumps(_Payload(_LOUD.replace("300 *", "40 *").replace("50 *", "5 *")), protocol=2))
    client = WorkerClient(ProcessBackend())
    request = InspectRequest(model_path=str(model), input_shape=[1, 3, 16, 16])
    if side == "process backend":
        run = client.run(request, None, 300)
        assert run.reply is not None and run.reply.ok
        assert run.outcome.observed["stderr_dropped_bytes"] > 40 * 2**20
        return
    (tmp_path / slurm_job.REQUEST).write_text(request.to_json())
    slurm_job.run_in_job(str(tmp_path), 300, 1)
    report = json.loads((tmp_path / slurm_job.REPORT).read_text())
    assert report["exit_code"] == 0 and not report["timed_out"], report
    assert (tmp_path / slurm_job.WORKER_STDERR).stat().st_size <= 64 * 2**10
    reply = parse_reply((tmp_path / slurm_job.WORKER_STDOUT).read_text())
    assert reply is not None and reply.ok
