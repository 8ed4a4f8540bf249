"""The variants researchers actually have, through the real Docker engine: their own model code
(--code: a package and the training script), checkpoints and state_dicts (--arch), pruned files,
and `lodevem inspect`.

The scenario is the issue's: a package ``cocoa/`` (CocoaNet: four conv-bn-relu blocks and a linear
head) and a training script ``train.py`` that saves the variants, run as a user would run it.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli
from lodevem.sandbox.usercode import ModelLoading

pytestmark = pytest.mark.docker

FAST = ("--runs", "2", "--warmup", "0", "--backend", "docker", "--predictor", "estimator")

COCOA_MODEL = '''
import torch
from torch import nn

# Writes a marker when imported where it can (never in the sandbox: /code is read-only), so a
# test sees whether the HOST imported the user's code.
try:
    import os
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "imported-by"), "a") as f:
        f.write(f"{os.getpid()}\\n")
except OSError:
    pass


class CocoaNet(nn.Module):
    """Four conv-bn-relu blocks and a linear head."""

    def __init__(self, width: int = 16, classes: int = 10):
        super().__init__()
        chans = [3, width, width * 2, width * 4, width * 8]
        self.features = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1, bias=False),
                          nn.BatchNorm2d(chans[i + 1]), nn.ReLU())
            for i in range(4)])
        self.head = nn.Linear(chans[-1], classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))
'''

TRAIN = '''
import sys
import torch
import torch.nn.utils.prune as prune
from torch import nn
from cocoa.model import CocoaNet


class ScriptNet(nn.Module):
    """Defined in the training script itself: pickled as __main__.ScriptNet."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


if __name__ == "__main__":
    out = sys.argv[1]
    torch.manual_seed(0)
    model = CocoaNet().eval()
    torch.save(model, f"{out}/cocoa_fp32.pt")
    state = {"module." + k: v for k, v in model.state_dict().items()}  # saved from DataParallel
    torch.save({"epoch": 3, "model_state_dict": state, "optimizer_state_dict": {}}, f"{out}/cocoa_ckpt.pt")
    torch.save(model.state_dict(), f"{out}/cocoa_weights.pt")
    torch.save(ScriptNet().eval(), f"{out}/script_net.pt")
    masked = CocoaNet().eval()
    masked.load_state_dict(model.state_dict())
    for sub in masked.modules():
        if isinstance(sub, nn.Conv2d):
            prune.ln_structured(sub, "weight", amount=0.5, n=1, dim=0)
    torch.save(masked, f"{out}/cocoa_pruned_masks.pt")
    for sub in masked.modules():
        if isinstance(sub, nn.Conv2d):
            prune.remove(sub, "weight")
    torch.save(masked, f"{out}/cocoa_pruned.pt")
    raise SystemExit("the training script's main block ran")  # never in the sandbox
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project: cocoa/ + train.py, and the variants train.py saved into models/."""
    root = tmp_path_factory.mktemp("project")
    (root / "cocoa").mkdir()
    (root / "cocoa" / "__init__.py").write_text("from .model import CocoaNet\n")
    (root / "cocoa" / "model.py").write_text(COCOA_MODEL)
    (root / "train.py").write_text(textwrap.dedent(TRAIN))
    (root / "models").mkdir()
    done = subprocess.run([sys.executable, "train.py", "models"], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert "main block ran" in done.stderr, done.stderr
    (root / "imported-by").unlink()  # the training run itself imported cocoa: start afresh
    for path in root.rglob("*"):  # the container runs as uid 1000
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def start(project: Path, out: Path, *args: str):
    return CliRunner().invoke(cli, ["start", *args, "--profile", "nokia_c1", "--output", str(out), *FAST],
                              catch_exceptions=False)


def rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "benchmark_results.csv").open() as handle:
        return {r["model_label"]: r for r in csv.DictReader(handle)}


def test_own_code_checkpoints_and_pruned_files_in_one_run(docker_backend, project: Path, tmp_path: Path) -> None:
    models = project / "models"
    result = start(project, tmp_path, str(models / "cocoa_fp32.pt"), str(models / "script_net.pt"),
                   str(models / "cocoa_ckpt.pt"), str(models / "cocoa_pruned.pt"),
                   str(models / "cocoa_pruned_masks.pt"), "--code", str(project / "cocoa"),
                   "--code", str(project / "train.py"), "--arch", "cocoa.model:CocoaNet")
    assert result.exit_code == 0, result.output
    found = rows(tmp_path)
    for label, row in found.items():
        assert row["verdict"] == "fits" and float(row["peak_rss_mb"]) > 100, (label, row)
        assert float(row["latency_ms"]) > 0, (label, row)
    fp32 = found["cocoa_fp32.pt"]
    assert fp32["model_class"] == "cocoa.model.CocoaNet" and fp32["model_format"] == "pickled_module"
    assert found["script_net.pt"]["model_class"] == "train.ScriptNet"  # resolved against train.py
    ckpt = found["cocoa_ckpt.pt"]
    assert ckpt["model_format"] == "state_dict" and ckpt["latency_ms"] == fp32["latency_ms"]
    assert ckpt["params"] == fp32["params"]
    for label in ("cocoa_pruned.pt", "cocoa_pruned_masks.pt"):
        pruned = found[label]
        assert pruned["latency_ms"] == fp32["latency_ms"]  # zeros run at the dense speed
        assert abs(float(pruned["sparsity"]) - 0.49) < 0.02 and int(pruned["zero_channels"]) == 120
        removed = float(pruned["latency_if_channels_removed_ms"])
        assert 0 < removed < 0.6 * float(fp32["latency_ms"])
        assert "dense runtime" in pruned["latency_note"] and "derive --levels pruned" in pruned["latency_note"]
    assert "prune masks attached on 4 layer(s)" in found["cocoa_pruned_masks.pt"]["latency_note"]
    assert fp32["sparsity"] == "0.0" and fp32["latency_if_channels_removed_ms"] == ""
    manifest = json.loads((tmp_path / "benchmark_results.json").read_text())["environment"]
    code = manifest["extra"]["model_code"]
    assert code["arch"] == "cocoa.model:CocoaNet" and len(code["code_sha256"]) == 64
    # The host never imported the user's code: the sandbox's copy is read-only, so no marker.
    assert not (project / "imported-by").exists()
    assert "cocoa" not in sys.modules and "train" not in sys.modules


@pytest.mark.parametrize("name, args, fragments", [
    ("cocoa_fp32.pt", (), ["module 'cocoa' is not importable", "--code"]),
    ("script_net.pt", (), ["class 'ScriptNet' was defined in the script that saved it (__main__)", "--code"]),
    ("cocoa_ckpt.pt", ("--code", "{project}/cocoa"), ["training checkpoint", "--arch"]),
    ("cocoa_weights.pt", ("--code", "{project}/cocoa"), ["state_dict only", "--arch"]),
    ("cocoa_ckpt.pt", ("--code", "{project}/cocoa", "--arch", "cocoa.model:CocoaNet", "--arch-kwargs",
                       '{"width": 8}'), ["do not fit --arch cocoa.model:CocoaNet", "features.0.0.weight"]),
    ("cocoa_ckpt.pt", ("--arch", "zoo:tiny_cnn"), ["do not fit --arch zoo:tiny_cnn", "missing", "unexpected"]),
    ("cocoa_ckpt.pt", ("--arch", "cocoa.model:CocoaNet"), ["module 'cocoa' is not importable", "--code"]),
])
def test_missing_code_and_mismatched_weights_are_one_line(docker_backend, project: Path, tmp_path: Path, name: str,
                                                          args: tuple[str, ...], fragments: list[str]) -> None:
    extra = [a.replace("{project}", str(project)) for a in args]
    result = start(project, tmp_path, str(project / "models" / name), *extra)
    assert result.exit_code == 2, result.output
    message = result.output.strip().splitlines()[-1]
    assert message.startswith("Error: ") and str(project / "models" / name) in message, message
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in message, message
    assert not (tmp_path / "benchmark_results.csv").exists()  # stopped before any measurement


@pytest.mark.parametrize("args, fragment", [
    (("--code", "{project}/nope"), "--code {project}/nope: no such file or folder"),
    (("--code", "{project}/models/cocoa_fp32.pt"), "expected a package folder or a .py file"),
    (("--arch", "cocoa.model"), "expected MODULE:CALLABLE"),
    (("--arch", "m:C", "--arch-kwargs", "[1]"), "--arch-kwargs: expected a JSON object"),
    (("--arch-kwargs", "{}"), "--arch-kwargs needs --arch"),
])
def test_bad_code_and_arch_options(project: Path, tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    extra = [a.replace("{project}", str(project)) for a in args]
    result = CliRunner().invoke(cli, ["start", str(project / "models" / "cocoa_fp32.pt"), "--output", str(tmp_path),
                                      *extra], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert fragment.replace("{project}", str(project)) in result.output and "Traceback" not in result.output


def test_code_digest_follows_the_code(project: Path, tmp_path: Path) -> None:
    """Edited code is another model: the digest (part of every cache key) changes; bytecode does not."""
    package = tmp_path / "cocoa"
    package.mkdir()
    (package / "model.py").write_text("x = 1\n")
    first = ModelLoading.from_options([package])
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0" * 10)
    assert ModelLoading.from_options([package]).key == first.key
    (package / "model.py").write_text("x = 2\n")
    assert ModelLoading.from_options([package]).key != first.key
    assert ModelLoading.from_options([package], "cocoa.model:Net").key != ModelLoading.from_options([package]).key
    assert ModelLoading().key == ""


def test_edited_code_is_exported_again(docker_backend, project: Path, tmp_path: Path) -> None:
    """The same file with other code behind it gets a new export and measurement, not a stale cache."""
    copy = tmp_path / "code" / "cocoa"
    copy.mkdir(parents=True)
    for path in (project / "cocoa").glob("*.py"):
        (copy / path.name).write_text(path.read_text())
    model = str(project / "models" / "cocoa_fp32.pt")
    first = start(project, tmp_path / "out", model, "--code", str(copy))
    assert first.exit_code == 0, first.output
    source = (copy / "model.py").read_text()
    (copy / "model.py").write_text(source.replace("return self.head(self.features(x).mean((2, 3)))",
                                                  "return self.head(self.features(x).amax((2, 3)))"))
    for path in copy.parent.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    second = start(project, tmp_path / "out", model, "--code", str(copy))
    assert second.exit_code == 0, second.output
    exports = sorted((tmp_path / "out" / ".cache" / "onnx").glob("*.onnx"))
    assert len(exports) == 2, exports
    assert rows(tmp_path / "out")["cocoa_fp32.pt"]["memory_cached"] == "False"


def test_inspect_describes_a_file_lodevem_did_not_write(docker_backend, project: Path) -> None:
    models = project / "models"
    result = CliRunner().invoke(cli, ["inspect", str(models / "cocoa_pruned_masks.pt"), str(models / "cocoa_ckpt.pt"),
                                      "--code", str(project / "cocoa"), "--arch", "cocoa.model:CocoaNet",
                                      "--backend", "docker"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "pickled_module (cocoa.model.CocoaNet)" in text and "state_dict (cocoa.model.CocoaNet)" in text
    assert "conv-bn-relu ×4" in text and "fc ×1" in text and "98,970" in text and "1x3x224x224 float32" in text
    assert "120 of 250 output channels entirely zero" in text and "prune masks attached on 4 layer(s)" in text
    as_json = CliRunner().invoke(cli, ["inspect", str(models / "cocoa_fp32.pt"), "--code", str(project / "cocoa"),
                                       "--backend", "docker", "--json"], catch_exceptions=False)
    assert as_json.exit_code == 0, as_json.output
    [record] = json.loads(as_json.output)
    assert record["class_name"] == "cocoa.model.CocoaNet" and record["params"] == 98970
    assert record["kernels"]["conv-bn-relu"] == 4 and record["macs"] > 40e6
    assert record["input_shape"] == [1, 3, 224, 224] and record["sparsity"]["zero_fraction"] == 0.0
    refused = CliRunner().invoke(cli, ["inspect", str(models / "cocoa_fp32.pt"), "--backend", "docker"])
    assert refused.exit_code == 2 and "--code" in refused.output and "Traceback" not in refused.output
