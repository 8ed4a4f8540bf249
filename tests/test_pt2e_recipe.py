"""The PT2E recipe of docs/runtimes.md runs on the pinned torch (issue 46): torch 2.13 has no
``torch.ao.quantization.quantize_pt2e``, so the documented block (torchao's ``prepare_pt2e`` /
``convert_pt2e`` with litert-torch's quantizer, batch-1 calibration, ``torch.export.save``) is run
as it is written, in the converter image where those packages are pinned (a throw-away container,
no network), on a small CNN and calibration inputs made beside it. The file it writes is a
PT2E-quantized exported program with static scales: what lodevem's tflite conversion keeps as the
file's own (that conversion is checked end to end by tests/test_formats.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

DOC = Path(__file__).resolve().parent.parent / "docs" / "runtimes.md"

# Makes what the recipe reads: net_fp32.pt (a pickled module of a class of this script, which the
# recipe's torch.load finds in __main__) and calib.npz (inputs N x C x H x W, float32).
BEFORE = '''
import numpy as np, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 10)
    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))
torch.manual_seed(0)
torch.save(Net().eval(), "net_fp32.pt")
np.savez("calib.npz", inputs=np.random.default_rng(0).standard_normal((16, 3, 32, 32)).astype(np.float32))
'''
AFTER = '''
program = torch.export.load("net_int8_pt2e.pt2").module()
ops = sorted({str(n.target) for n in program.graph.nodes if n.op == "call_function"})
print("OPS", " ".join(ops))
'''


def recipe() -> str:
    """The documented block, as a reader copies it (the fenced Python after its marker)."""
    text = DOC.read_text()
    found = re.search(r"<!-- runtimes\.md: pt2e-recipe[^>]*-->\n```python\n(.*?)^```", text, re.S | re.M)
    assert found, "docs/runtimes.md lost its PT2E recipe block"
    return found.group(1)


def test_the_documented_pt2e_recipe_runs_on_the_pinned_torch(app_backend, tmp_path: Path) -> None:
    import docker

    from lodevem.sandbox.image import IMAGES

    code = recipe()
    assert "torch.ao.quantization" not in code and "torch.export.save" in code and "torch.zeros(1," in code
    tmp_path.chmod(0o777)
    logs = docker.from_env().containers.run(
        IMAGES["convert"].tag, ["-c", BEFORE + code + AFTER], entrypoint="python3", working_dir="/work",
        network_disabled=True, remove=True, volumes={str(tmp_path): {"bind": "/work", "mode": "rw"}})
    ops = next(line for line in logs.decode().splitlines() if line.startswith("OPS ")).split()[1:]
    assert (tmp_path / "net_int8_pt2e.pt2").stat().st_size > 0
    # static PT2E: per-tensor activations quantized and dequantized with fixed scales, per-channel
    # weights dequantized; no choose_qparams (a dynamic graph picks its scales at run time)
    assert any(op.startswith("quantized_decomposed.quantize_per_tensor") for op in ops), ops
    assert any(op.startswith("quantized_decomposed.dequantize_per_channel") for op in ops), ops
    assert not any("choose_qparams" in op for op in ops), ops
