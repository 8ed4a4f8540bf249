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

# torch: these tests are about loading the user's code in the sandbox (the converters' own
# handling of a user's quantized file: tests/test_app_runtime.py)
FAST = ("--runs", "2", "--warmup", "0", "--backend", "docker", "--predictor", "estimator", "--runtime", "torch")

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
import copy
import sys
import torch
from torch.ao.quantization import DeQuantStub, QuantStub
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


class QuantCocoa(nn.Module):
    """Eager-mode static quantization wraps the float model between QuantStub and DeQuantStub."""

    def __init__(self, net):
        super().__init__()
        self.quant, self.net, self.dequant = QuantStub(), net, DeQuantStub()

    def forward(self, x):
        return self.dequant(self.net(self.quant(x)))


def calibrate(model):
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(1, 3, 224, 224))


def save_compressed(model, out):
    """The compression mechanisms the README's Compression Levels table names, as users apply them."""
    example = torch.randn(1, 3, 224, 224)
    torch.save(copy.deepcopy(model).half(), f"{out}/cocoa_fp16.pt")
    dynamic = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)
    torch.save(dynamic, f"{out}/cocoa_int8_dynamic.pt")
    eager = QuantCocoa(copy.deepcopy(model)).eval()
    for block in eager.net.features:
        torch.ao.quantization.fuse_modules(block, [["0", "1", "2"]], inplace=True)
    eager.qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    torch.ao.quantization.prepare(eager, inplace=True)
    calibrate(eager)
    torch.ao.quantization.convert(eager, inplace=True)
    torch.save(eager, f"{out}/cocoa_int8_static.pt")
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    prepared = prepare_fx(copy.deepcopy(model), get_default_qconfig_mapping("fbgemm"), (example,))
    calibrate(prepared)
    fx = convert_fx(prepared)
    torch.jit.save(torch.jit.trace(fx, example), f"{out}/cocoa_int8_fx.pt")
    torch.onnx.export(copy.deepcopy(model), (example,), f"{out}/cocoa_fp32.onnx", dynamo=False, opset_version=13,
                      input_names=["input"])
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"input": torch.randn(1, 3, 224, 224).numpy()} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    for fmt, name in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qop")):
        quantize_static(f"{out}/cocoa_fp32.onnx", f"{out}/cocoa_int8_{name}.onnx", Reader(), quant_format=fmt)


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
    save_compressed(model, out)
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


@pytest.mark.fresh_store  # it checks what its run's own .cache holds
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
    # edited code is another run: into the same folder (and its caches) only with --overwrite
    refused = start(project, tmp_path / "out", model, "--code", str(copy))
    assert refused.exit_code == 2 and "--overwrite" in refused.output, refused.output
    second = start(project, tmp_path / "out", model, "--code", str(copy), "--overwrite")
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


TIER2_CORES = {"itel_a23_pro": "Cortex-A53", "itel_p37": "Cortex-A55", "nokia_c1": "Cortex-A7",
               "redmi_a1": "Cortex-A53", "samsung_a03_core": "Cortex-A55", "tecno_pop5_go": "Cortex-A53"}


def by_pair(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with (out / "benchmark_results.csv").open() as handle:
        return {(r["model_label"], r["profile_id"]): r for r in csv.DictReader(handle)}


def test_acceptance_every_variant_of_cocoa_on_tier2(docker_backend, project: Path, tmp_path: Path) -> None:
    """The issue's scenario in one command: `lodevem start models/*.pt --code cocoa/ --tier tier2`
    (plus --arch for the checkpoint): every row has a latency and a peak RAM; static int8 differs
    from fp32 by the fitted factor on every core; the fp16 file equals `--levels fp16`; the pruned
    file carries its sparsity note and the removed-channel latency."""
    files = sorted(str(p) for p in (project / "models").glob("*.pt") if p.name != "cocoa_weights.pt")
    result = CliRunner().invoke(cli, ["start", *files, "--code", str(project / "cocoa"), "--code",
                                      str(project / "train.py"), "--arch", "cocoa.model:CocoaNet", "--tier", "tier2",
                                      "--output", str(tmp_path / "all"), *FAST], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    found = by_pair(tmp_path / "all")
    assert len(found) == len(files) * len(TIER2_CORES)
    for key, row in found.items():
        assert row["latency_ms"] and float(row["latency_ms"]) > 0, (key, row["latency_note"])
        assert row["peak_rss_mb"] and float(row["peak_rss_mb"]) > 0, (key, row["memory_error"])
    levels = CliRunner().invoke(cli, ["start", str(project / "models" / "cocoa_fp32.pt"), "--code",
                                      str(project / "cocoa"), "--levels", "fp16,int8,int8-static", "--tier", "tier2",
                                      "--output", str(tmp_path / "levels"), *FAST], catch_exceptions=False)
    assert levels.exit_code == 0, levels.output
    derived = by_pair(tmp_path / "levels")
    for pid, core in TIER2_CORES.items():
        fp32 = float(found[("cocoa_fp32.pt", pid)]["latency_ms"])
        # int8 files: the fitted per-core int8 factors, the same as --levels on the fp32 file
        static = float(derived[("cocoa_fp32.pt@int8-static", pid)]["latency_ms"])
        if core != "Cortex-A55":  # in ncnn's data int8 is no faster than fp32 on the A55
            assert abs(static / fp32 - 1) > 0.02, (pid, core)
        for label in ("cocoa_int8_static.pt", "cocoa_int8_fx.pt"):
            row = found[(label, pid)]
            assert row["precision"] == "int8-static", (label, row["precision"])
            assert abs(float(row["latency_ms"]) / static - 1) < 0.005, (label, pid, row["latency_ms"], static)
        dynamic = found[("cocoa_int8_dynamic.pt", pid)]
        assert dynamic["precision"] == "int8-dynamic"
        assert abs(float(dynamic["latency_ms"]) / float(derived[("cocoa_fp32.pt@int8", pid)]["latency_ms"]) - 1) < 0.005
        # the fp16 file: exactly the number --levels fp16 gives for the fp32 model
        assert found[("cocoa_fp16.pt", pid)]["precision"] == "fp16"
        assert found[("cocoa_fp16.pt", pid)]["latency_ms"] == derived[("cocoa_fp32.pt@fp16", pid)]["latency_ms"], pid
        pruned = found[("cocoa_pruned.pt", pid)]
        assert float(pruned["latency_if_channels_removed_ms"]) < 0.6 * fp32 and "dense runtime" in pruned["latency_note"]
        assert found[("cocoa_ckpt.pt", pid)]["latency_ms"] == found[("cocoa_fp32.pt", pid)]["latency_ms"]


def test_onnxruntime_quantized_files_are_predicted_as_int8(docker_backend, project: Path, tmp_path: Path) -> None:
    models = project / "models"
    result = CliRunner().invoke(cli, ["start", *(str(models / f"cocoa_{n}.onnx") for n in ("fp32", "int8_qdq", "int8_qop")),
                                      "--runtime", "onnxruntime", "--profile", "nokia_c1", "--output", str(tmp_path),
                                      *FAST], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    found = rows(tmp_path)
    fp32 = float(found["cocoa_fp32.onnx"]["latency_ms"])
    for label in ("cocoa_int8_qdq.onnx", "cocoa_int8_qop.onnx"):
        row = found[label]
        # Cortex-A7: the fitted int8 factor is well above 1
        assert row["precision"] == "int8-static" and float(row["latency_ms"]) < 0.9 * fp32 and row["verdict"] == "fits", row
