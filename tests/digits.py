"""The digits CNN in every format a researcher has, and its data as an ``.npz`` and as an ImageFolder tree.

Real data (scikit-learn's ``load_digits``: 1,797 8x8 handwritten digits shipped inside the package)
and a real model: a small CNN of ``torch.nn`` built-ins trained here on 1,200 digits in seconds (its
classes are torch's own, so the sandbox unpickles it without any user code). The other 597 are the
evaluation data. The same trained network is written as

* ``cnn.pt``: a pickled module (``torch.save(model)``),
* ``digits_ts.pt``: TorchScript (``torch.jit.save(torch.jit.trace(...))``),
* ``digits.pt2``: an exported program (``torch.export.save``),
* ``digits.onnx``: ONNX (``torch.onnx.export``, the legacy exporter);

and the test split as ``digits.npz`` (``inputs`` N x 1 x 8 x 8 in [0, 1], ``labels``) and as
``digits_tree/<class>/<n>.png`` (8-bit greyscale PNGs, the value v/16 stored as round(255 v/16): within
half a grey level of the ``.npz``). ``plain_top1`` is a plain torch evaluation done here, one sample at
a time. Shared by the accuracy and formats tests (``conftest.digits_files``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class DigitsFiles:
    folder: Path
    pickled: Path
    torchscript: Path
    exported: Path
    onnx: Path
    npz: Path
    train: Path
    tree: Path
    plain_top1: float  # % of the 597 test digits, torch, one sample at a time

    @property
    def model_formats(self) -> dict[str, Path]:
        return {"pickled_module": self.pickled, "torchscript": self.torchscript, "exported_program": self.exported,
                "onnx": self.onnx}


def write_digits(folder: Path) -> DigitsFiles:
    import torch
    from PIL import Image
    from sklearn.datasets import load_digits
    from torch import nn

    folder.chmod(0o755)
    torch.manual_seed(0)
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:1200], order[1200:]
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters(), 1e-2)
    xs, ys = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for _ in range(10):
        for i in range(0, len(train), 64):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xs[i:i + 64]), ys[i:i + 64]).backward()
            optimizer.step()
    model.eval()
    with torch.inference_mode():
        predicted = np.array([int(model(torch.from_numpy(x[i][None])).argmax()) for i in test])
    plain = 100.0 * float(np.mean(predicted == y[test]))
    example = torch.from_numpy(x[test[:1]])
    torch.save(model, folder / "cnn.pt")
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(model, example), str(folder / "digits_ts.pt"))
    torch.export.save(torch.export.export(model, (example,)), str(folder / "digits.pt2"))
    torch.onnx.export(model, (example,), str(folder / "digits.onnx"), dynamo=False, input_names=["input"],
                      output_names=["logits"])
    np.savez(folder / "digits.npz", inputs=x[test], labels=y[test])
    np.savez(folder / "train.npz", inputs=x[train], labels=y[train])
    tree = folder / "digits_tree"
    for n, i in enumerate(test):
        (tree / str(y[i])).mkdir(parents=True, exist_ok=True)
        pixels = np.rint(d.images[i] / 16.0 * 255.0).astype(np.uint8)
        Image.fromarray(pixels, mode="L").save(tree / str(y[i]) / f"{n:04d}.png")
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert plain > 90, plain  # a trained model, not a coin toss
    return DigitsFiles(folder, folder / "cnn.pt", folder / "digits_ts.pt", folder / "digits.pt2",
                       folder / "digits.onnx", folder / "digits.npz", folder / "train.npz", tree, plain)
