"""Nothing stale, nothing lost on the data surfaces (issue 38), with real files against the REAL
Docker engine: the digits CNN trained in the session (``tests/digits.py``) and its data.

* a file whose conversion fails is measured under torch, labelled ``torch (fallback)``, never an
  error row and never exit 1 (38.3);
"""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli

pytestmark = pytest.mark.docker


def _start(*argv: str):
    return CliRunner().invoke(cli, ["start", *map(str, argv), "--profile", "nokia_8110_4g", "--runs", "1",
                                    "--warmup", "0", "--backend", "docker", "--predictor", "estimator"],
                              catch_exceptions=False)


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "benchmark_results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_dynamic_int8_torchscript_no_converter_takes_is_measured_under_torch(app_backend, digits_files,
                                                                                tmp_path: Path,
                                                                                shared_output: Path) -> None:
    """``quantize_dynamic`` then ``torch.jit.trace``: neither litert-torch (through torch's TorchScript
    converter) nor pnnx takes ``quantized::linear_dynamic``; torch runs the file, so both rows have its
    peak RAM and its accuracy, say ``torch (fallback)`` and the converter's line, and the run exits 0."""
    import torch
    from torch.ao.quantization import quantize_dynamic

    model = torch.load(digits_files.pickled, weights_only=False).eval()
    dynamic = quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    path = tmp_path / "dynamic_ts.pt"
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(dynamic, torch.zeros(1, 1, 8, 8)), str(path))
    path.chmod(0o644)
    result = _start(path, "--runtime", "tflite,ncnn", "--eval-data", digits_files.npz, "--output", shared_output,
                    "--overwrite")
    assert result.exit_code == 0, result.output
    rows = {r["model_label"].rsplit("[", 1)[-1].rstrip("]"): r for r in _rows(shared_output)}
    assert set(rows) == {"tflite", "ncnn"}
    for runtime, row in rows.items():
        assert row["memory_runtime"] == "torch (fallback)" and row["verdict"] in ("fits", "tight"), row
        assert float(row["peak_rss_mb"]) > 100  # PyTorch's own ~220 MB
        assert row["memory_note"].startswith(f"{runtime} conversion failed") and "\n" not in row["memory_note"]
        assert "measured under torch instead" in row["memory_note"]
        # its accuracy under torch, as its memory: the dynamic int8 Linear layers barely change the digits' top-1
        assert abs(float(row["accuracy_top1_pct"]) - digits_files.plain_top1) <= 1.0, row
        assert row["accuracy_note"].startswith("evaluated under torch (fallback)")
    assert "Traceback" not in result.output
