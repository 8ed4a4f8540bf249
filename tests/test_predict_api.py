"""`lodevem predict` and the Python API agree with `lodevem start`: same latency for the same
model and profile, calibrated or not. Files go through the real sandbox (the process backend,
the quicker of the two real ones); the caller's nn.Module is exported in-process."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import lodevem
from lodevem import zoo
from lodevem.cli import cli

PROFILES = ("jiophone2", "itel_it5626")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    """A tiny_cnn file, a calibrations folder with one record for jiophone2, and a start run."""
    root = tmp_path_factory.mktemp("agree")
    env = {"LODEVEM_CALIBRATIONS": str(root / "calibrations"), "XDG_CACHE_HOME": str(root / "cache")}
    model = zoo.write("tiny_cnn", root / "models")
    runner = CliRunner()
    calibrated = runner.invoke(cli, ["calibrate", "add", "jiophone2", "mobilenet_v2=333", "--runtime", "tflite"],
                               env=env, catch_exceptions=False)
    assert calibrated.exit_code == 0, calibrated.output
    args = ["start", str(model), "--output", str(root / "results"), "--runs", "1", "--warmup", "0",
            "--backend", "process"]
    for pid in PROFILES:
        args += ["--profile", pid]
    started = runner.invoke(cli, args, env=env, catch_exceptions=False)
    assert started.exit_code == 0, started.output
    with (root / "results" / "benchmark_results.csv").open() as handle:
        rows = {r["profile_id"]: r for r in csv.DictReader(handle)}
    return env, model, rows


def test_predict_agrees_with_start(setup) -> None:
    env, model, start_rows = setup
    args = ["predict", str(model), "tiny_cnn", "--backend", "process", "--json"]
    for pid in PROFILES:
        args += ["--profile", pid]
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 4
    for row in rows:  # the file (sandbox export) and the zoo name (in-process export) alike
        started = start_rows[row["profile_id"]]
        assert row["latency_ms"] == pytest.approx(float(started["latency_ms"]), rel=1e-9)
        assert row["latency_source"] == started["latency_source"]
    assert "calibrated(n=1)" in start_rows["jiophone2"]["latency_source"]
    assert "calibrated" not in start_rows["itel_it5626"]["latency_source"]


def test_the_api_agrees_with_start(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    env, model, start_rows = setup
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    expected = float(start_rows["jiophone2"]["latency_ms"])
    by_path = lodevem.predict_latency(model, "jiophone2", backend="process")
    assert by_path.latency_ms == pytest.approx(expected, rel=1e-9)
    module = zoo.build("tiny_cnn")  # the caller's own object: exported in this process
    by_module = lodevem.predict_latency(module, "jiophone2", input_shape=(1, 3, 224, 224))
    assert by_module.latency_ms == pytest.approx(expected, rel=1e-9)
    with lodevem.Predictor("jiophone2") as predictor:
        graph = predictor.graph(module)
        again = [predictor.predict(graph).latency_ms for _ in range(3)]
        assert again == [pytest.approx(expected, rel=1e-9)] * 3
        profile = predictor.profile("itel_it5626")
        assert predictor.predict(graph, profile).latency_ms == pytest.approx(
            float(start_rows["itel_it5626"]["latency_ms"]), rel=1e-9)
        raw = predictor.predict(graph, calibrated=False)
        assert raw.latency_ms != pytest.approx(expected) and "calibrated" not in raw.latency_source


def test_api_errors_are_lodevem_errors(tmp_path: Path) -> None:
    from lodevem.errors import InputError, ProfileError

    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        lodevem.predict_latency("tiny_cnn", "nope")
    with pytest.raises(InputError, match="not a zoo model name"):
        lodevem.predict_latency(str(tmp_path / "missing.pt"), "jiophone2")
    with pytest.raises(InputError, match="must be a file path"):
        lodevem.predict_latency(42, "jiophone2")


def test_import_lodevem_stays_light() -> None:
    code = ("import sys, lodevem; heavy = [m for m in ('torch', 'nn_meter', 'onnx', 'matplotlib', 'docker') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(lodevem.__file__).parent.parent)})
    assert out.stdout.strip() == "[]"


def test_resume_after_a_new_calibration_refuses(setup, tmp_path: Path) -> None:
    """Rows scaled with the old factor must not be mixed with rows scaled with a new one."""
    shared, model, _ = setup
    env = {**shared, "LODEVEM_CALIBRATIONS": str(tmp_path / "calibrations")}  # a copy: the others' stay as they are
    shutil.copytree(shared["LODEVEM_CALIBRATIONS"], env["LODEVEM_CALIBRATIONS"])
    out = tmp_path / "results"
    args = ["start", str(model), "--output", str(out), "--runs", "1", "--warmup", "0", "--backend", "process",
            "--profile", "jiophone2"]
    assert CliRunner().invoke(cli, args, env=env, catch_exceptions=False).exit_code == 0
    again = CliRunner().invoke(cli, [*args, "--resume"], env=env, catch_exceptions=False)
    assert again.exit_code == 0, again.output  # same records: resumes (nothing left to do)
    recalibrated = CliRunner().invoke(cli, ["calibrate", "add", "jiophone2", "resnet18=1500", "--runtime", "tflite"],
                                      env=env, catch_exceptions=False)
    assert recalibrated.exit_code == 0, recalibrated.output
    refused = CliRunner().invoke(cli, [*args, "--resume"], env=env, catch_exceptions=False)
    assert refused.exit_code == 2 and "other settings (calibration records" in refused.output, refused.output


MYNET = '''
import torch
from torch import nn


class MyNet(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, stride=2)
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))
'''


@pytest.fixture(scope="module")
def own_code(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A user's net.py, a whole module pickled from it and a state_dict of it (both need the code)."""
    root = tmp_path_factory.mktemp("own")
    (root / "net.py").write_text(MYNET)
    save = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import net; m = net.MyNet().eval(); "
            "torch.save(m, sys.argv[1] + '/net_fp32.pt'); torch.save(m.state_dict(), sys.argv[1] + '/net_weights.pt')")
    subprocess.run([sys.executable, "-c", save, str(root)], check=True)
    return root / "net.py", root / "net_fp32.pt", root / "net_weights.pt"


def test_the_api_predicts_a_file_that_needs_its_code(own_code, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: code= and arch= (and $LODEVEM_CODE) do for the API what --code and --arch do for
    the CLI; without them the refusal is one lodevem error, not a traceback."""
    from lodevem.errors import LodevemError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("LODEVEM_CODE", raising=False)
    code, whole, weights = own_code
    common = {"input_shape": (1, 3, 32, 32), "backend": "process", "use_calibrations": False}
    with pytest.raises(LodevemError, match=r"--code \(Python API: code=\)"):
        lodevem.predict_latency(whole, "jiophone2", **common)
    fp32 = lodevem.predict_latency(whole, "jiophone2", code=code, **common)
    assert fp32.latency_ms is not None and fp32.latency_ms > 0
    built = lodevem.predict_latency(weights, "jiophone2", code=[code], arch="net:MyNet", arch_kwargs={"width": 4},
                                    **common)
    assert built.latency_ms == pytest.approx(fp32.latency_ms, rel=1e-9)  # the same network, from its weights
    int8 = lodevem.predict_latency(whole, "jiophone2", code=code, level="int8", **common)
    assert int8.latency_ms is not None and int8.latency_ms != pytest.approx(fp32.latency_ms)
    monkeypatch.setenv("LODEVEM_CODE", str(code))  # as the CLI reads it
    with lodevem.Predictor("jiophone2", backend="process", use_calibrations=False) as predictor:
        assert predictor.predict(whole, input_shape=(1, 3, 32, 32)).latency_ms == pytest.approx(fp32.latency_ms,
                                                                                               rel=1e-9)
    with pytest.raises(LodevemError, match="either loading= or code="):
        lodevem.Predictor(code=code, loading=predictor.session.loading)
