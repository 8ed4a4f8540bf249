"""Nothing stale, nothing lost on the data surfaces (issue 38), with real files against the REAL
Docker engine: the digits CNN trained in the session (``tests/digits.py``) and its data.

* a file whose conversion fails is measured under torch, labelled ``torch (fallback)``, never an
  error row and never exit 1 (38.3);
* a data file rewritten in place, to its old size and time, gives a fresh figure, and the manifest
  names the digest each accuracy stands for (38.1);
* a fine-tune that fails keeps the pruned row's RAM and latency and says why; labels the model
  cannot have are refused up front (38.2);
* a bad image in an ImageFolder tree is refused in one line naming it, before any model runs
  (38.4; the host's side of the walk is tests/test_image_trees.py), and the decoding container
  runs under the memory, pids, disk, output and time limits of every sandbox run.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import struct
import zlib
from pathlib import Path

import numpy as np
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
        # its latency: its float structure with the int8 Linear layers priced as int8-dynamic (issue 46)
        assert row["latency_ms"] and row["precision"] == "int8-dynamic", row
    assert "Traceback" not in result.output


def _top1(model_path: Path, x: np.ndarray, y: np.ndarray) -> float:
    """A plain torch evaluation here, one sample at a time, rounded as a row's figure."""
    import torch

    model = torch.load(model_path, weights_only=False).eval()
    with torch.inference_mode():
        predicted = np.array([int(model(torch.from_numpy(x[i][None])).argmax()) for i in range(len(y))])
    return round(100.0 * float(np.mean(predicted == y)), 2)


def test_a_data_file_rewritten_in_place_gives_a_fresh_figure(app_backend, digits_files, tmp_path: Path,
                                                             shared_output: Path) -> None:
    """The issue's case: digits.npz rewritten with other labels, same size and modification time."""
    data = tmp_path / "digits.npz"
    data.write_bytes(digits_files.npz.read_bytes())
    data.chmod(0o644)
    with np.load(data) as loaded:
        x, y = loaded["inputs"], loaded["labels"].copy()
    first = _start(digits_files.pickled, "--runtime", "torch", "--eval-data", data, "--output", shared_output,
                   "--overwrite")
    assert first.exit_code == 0, first.output
    (row,) = _rows(shared_output)
    assert float(row["accuracy_top1_pct"]) == _top1(digits_files.pickled, x, y)
    before = json.loads((shared_output / "benchmark_results.json").read_text())["environment"]["datasets"][0]
    st = data.stat()
    y[::2] = (y[::2] + 1) % 10
    np.savez(data, inputs=x, labels=y)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (data.stat().st_size, data.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    again = _start(digits_files.pickled, "--runtime", "torch", "--eval-data", data, "--output", shared_output,
                   "--overwrite")
    assert again.exit_code == 0, again.output
    (row,) = _rows(shared_output)
    assert float(row["accuracy_top1_pct"]) == _top1(digits_files.pickled, x, y) < 60  # the new labels' figure
    after = json.loads((shared_output / "benchmark_results.json").read_text())["environment"]["datasets"][0]
    import hashlib

    assert after["source_sha256"] == hashlib.sha256(data.read_bytes()).hexdigest() != before["source_sha256"]
    assert after["samples_sha256"] != before["samples_sha256"] and after["option"] == "--eval-data"
    assert after["format"] == "npz" and after["preprocessing"] is None and after["samples"] == len(y)


def test_a_fine_tune_that_diverges_keeps_the_pruned_row(app_backend, digits_files, tmp_path: Path,
                                                        shared_output: Path) -> None:
    """Inputs of 1e30 make the loss overflow: the pruned variant is kept as pruning made it, with its
    RAM, latency and accuracy, and the row says it is not fine-tuned and why."""
    with np.load(digits_files.train) as loaded:
        x, y = loaded["inputs"], loaded["labels"]
    wild = tmp_path / "wild.npz"
    np.savez(wild, inputs=(x * 1e30).astype(np.float32), labels=y)
    wild.chmod(0o644)
    result = _start(digits_files.pickled, "--runtime", "torch", "--levels", "fp32,pruned", "--eval-data",
                    digits_files.npz, "--finetune-data", wild, "--finetune-epochs", "1", "--output", shared_output,
                    "--overwrite")
    assert result.exit_code == 0, result.output
    rows = {r["level"] or "fp32": r for r in _rows(shared_output)}
    pruned = rows["pruned"]
    assert pruned["verdict"] != "error" and float(pruned["peak_rss_mb"]) > 0 and float(pruned["latency_ms"]) > 0
    assert pruned["accuracy_note"].startswith("not fine-tuned: the loss became"), pruned["accuracy_note"]
    assert float(pruned["accuracy_top1_pct"]) < float(rows["fp32"]["accuracy_top1_pct"])  # pruning's own drop
    assert rows["fp32"]["accuracy_note"] == ""


def test_fine_tune_labels_the_model_cannot_have_are_refused_up_front(app_backend, digits_files, tmp_path: Path,
                                                                     shared_output: Path) -> None:
    with np.load(digits_files.train) as loaded:
        x, y = loaded["inputs"], loaded["labels"]
    shifted = tmp_path / "shifted.npz"
    np.savez(shifted, inputs=x, labels=y + 10)
    shifted.chmod(0o644)
    result = _start(digits_files.pickled, "--runtime", "torch", "--levels", "fp32,pruned", "--finetune-data",
                    shifted, "--output", shared_output, "--overwrite")
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == ("Error: --finetune-data shifted.npz: label 19 is outside cnn.pt's 10 outputs (labels must be "
                    "0..9)"), last
    assert not (shared_output / "benchmark_results.csv").exists()  # nothing measured, nothing derived


# --- bad images: found by the decoder in the sandbox, refused naming the file ---------------------------

def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _bomb_png() -> bytes:
    """A 58-byte PNG whose header declares 60,000 x 60,000 pixels (3.6 gigapixels)."""
    header = struct.pack(">IIBBBBB", 60000, 60000, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + _png_chunk(b"IEND", b""))


def _jpeg(tmp: Path) -> bytes:
    from PIL import Image

    Image.new("L", (64, 64), 128).save(tmp / "whole.jpg", quality=90)
    return (tmp / "whole.jpg").read_bytes()


BAD_IMAGES = {
    "a truncated PNG": ("3/cut.png", lambda d, tmp: (d / "3" / sorted(os.listdir(d / "3"))[0]).read_bytes()[:60],
                        "cannot be decoded, it looks truncated or corrupt"),
    "a truncated JPEG": ("5/cut.jpg", lambda d, tmp: _jpeg(tmp)[:300], "cannot be decoded, it looks truncated"),
    "a non-image named .png": ("7/notes.png", lambda d, tmp: b"just text, not an image\n",
                               "not a PNG or JPEG image"),
    "a decompression bomb": ("1/bomb.png", lambda d, tmp: _bomb_png(), "a decompression bomb: its header declares"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_a_bad_image_in_the_tree_is_refused_naming_it(app_backend, digits_files, tmp_path: Path,
                                                      shared_output: Path, case: str) -> None:
    import shutil

    rel, make, fragment = BAD_IMAGES[case]
    tree = tmp_path / "tree"
    shutil.copytree(digits_files.tree, tree)
    (tree / rel).write_bytes(make(digits_files.tree, tmp_path))
    for path in tree.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    result = _start(digits_files.pickled, "--runtime", "torch", "--eval-data", tree, "--output", shared_output,
                    "--overwrite")
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: --eval-data {tree / rel}: ") and fragment in last, last
    assert "Traceback" not in result.output
    assert not (shared_output / "benchmark_results.csv").exists()  # refused before any model ran


def _pack(tmp_path: Path, images: dict[str, bytes]) -> Path:
    """A pack as the host writes it (``write_pack``), of the given images in two classes."""
    from lodevem.accuracy.imagefolder import walk_tree, write_pack

    root = tmp_path / "tree"
    for rel, data in images.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    pack = tmp_path / "pack.zip"
    write_pack(walk_tree(root, 1000), pack)
    return pack


def _png(size: tuple[int, int], mode: str = "RGB") -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, size, 0).save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_decoding_container_runs_under_the_sandboxs_limits(app_backend, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory: a 36-megapixel image (under the pixel cap) decodes to ~430 MB of float32: killed at a
    256 MB limit. Output: samples over the output cap stop the run. Time: the wall-clock timeout.
    And every container of the kind is created with the pids limit, no network, a read-only root,
    every capability dropped (the same create call as every sandbox run)."""
    from docker.models.containers import ContainerCollection

    from lodevem.errors import SandboxError
    from lodevem.sandbox.base import PIDS_LIMIT
    from lodevem.sandbox.client import WorkerClient
    from lodevem.sandbox.docker_backend import DockerBackend
    from lodevem.worker.evaluate.images import Preprocessing

    created: list[dict] = []
    backend = DockerBackend()
    real_create = ContainerCollection.create

    def spy(self, *args, **kwargs):  # the real engine's create, its arguments recorded
        created.append(kwargs)
        return real_create(self, *args, **kwargs)

    monkeypatch.setattr(ContainerCollection, "create", spy)
    plain = Preprocessing().to_dict()
    big = _pack(tmp_path / "big", {"a/big.png": _png((6000, 6000)), "b/small.png": _png((6000, 6000))})
    run = WorkerClient(backend, work_limit=256).decode_images(big, tmp_path / "big.npz", plain, timeout_s=300)
    assert run.problem() is not None and run.problem()[0] == "oom", run.problem()
    assert "memory+swap=256MB" in run.outcome.limit_enforcement and not (tmp_path / "big.npz").exists()
    many = _pack(tmp_path / "many", {f"{c}/{i}.png": _png((64, 64)) for c in "ab" for i in range(100)})
    backend.max_output_bytes = 1 * 2**20  # the samples are 200 x 3 x 64 x 64 float32: 9.8 MB
    try:  # stopped while it writes (the scratch watch), or refused when it is taken out: never kept
        problem = WorkerClient(backend).decode_images(many, tmp_path / "many.npz", plain, timeout_s=300).problem()
        said = problem[1] if problem else "kept"
    except SandboxError as exc:
        said = str(exc)
    assert "over the 1 MB cap" in said or "over the 1048576 byte cap" in said, said
    assert not (tmp_path / "many.npz").exists()
    backend.max_output_bytes = 64 * 2**20
    run = WorkerClient(backend).decode_images(big, tmp_path / "late.npz", plain, timeout_s=2)  # decodes for longer
    assert run.problem() is not None and run.problem()[0] == "timeout", run.problem()
    assert len(created) == 3 and all(c["pids_limit"] == PIDS_LIMIT and c["network_disabled"] and c["read_only"]
                                     and c["cap_drop"] == ["ALL"] and c["mem_limit"] == c["memswap_limit"]
                                     for c in created), created
    run = WorkerClient(backend).decode_images(many, tmp_path / "ok.npz", plain, timeout_s=300)  # the same, let be
    assert run.ok and (tmp_path / "ok.npz").stat().st_size > 9 * 2**20
