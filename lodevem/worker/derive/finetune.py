"""Fine-tuning of a pruned variant (``--finetune-data``): "structured pruning + fine-tune", as the
``pruned`` level promises, in the sandbox that derives it.

Fixed, stated recipe (the methods paragraph quotes ``RECIPE``): SGD with momentum 0.9, learning
rate 0.01, no weight decay, batches of 32, cross-entropy, ``finetune_epochs`` passes over the
samples in a seeded order (torch.Generator seed 0), the module in train mode (BatchNorm statistics
update) and back in eval mode afterwards. A short fixed recipe rather than options: it recovers
most of what pruning took on small nets, and every run with the same data and epochs gives the
same weights. The samples (the host's normalised ``.npz``) are held in memory here: the host caps
them (``--eval-limit`` applies) and the derivation runs under the work limit, not a phone's.

A fine-tune that cannot be done (the loss turns NaN, a label beyond the model's outputs the host
could not see) leaves the pruned variant as pruning made it (its weights restored) and says
``not fine-tuned: <reason>``: the row keeps its RAM and latency (issue 38), only the promise of
fine-tuning is withdrawn, in its note.
"""

from __future__ import annotations

import time
from typing import Any

from ...wire.protocol import WorkerError, progress
from ..evaluate.samples import NpzSamples, SampleFileError

LEARNING_RATE, MOMENTUM, BATCH, SEED = 0.01, 0.9, 32, 0
RECIPE = f"SGD (lr {LEARNING_RATE}, momentum {MOMENTUM}), batch {BATCH}, cross-entropy"
NOT_FINETUNED = "not fine-tuned"


def finetune(module: Any, data_path: str, epochs: int) -> tuple[str, dict[str, Any]]:
    """Train ``module`` in place; returns (note, details). A fine-tune that fails leaves ``module``
    as it was and returns the note ``not fine-tuned: <reason>``."""
    import copy

    before = copy.deepcopy(module.state_dict())
    try:
        return _train(module, data_path, epochs)
    except _NotTuned as exc:
        module.load_state_dict(before)
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)
        progress(f"{NOT_FINETUNED}: {exc}; the pruned variant is kept as pruning made it")
        return f"{NOT_FINETUNED}: {exc}", {"finetune_epochs": epochs, "finetune_failed": str(exc)}


class _NotTuned(Exception):
    """Why the samples could not fine-tune this model (one line)."""


def _train(module: Any, data_path: str, epochs: int) -> tuple[str, dict[str, Any]]:
    import numpy as np
    import torch

    try:
        with open(data_path, "rb") as fh:
            samples = NpzSamples(fh, np)
            labels = torch.from_numpy(samples.labels_array().copy())
            inputs = torch.from_numpy(np.stack(list(samples.iter_inputs())))
    except SampleFileError as exc:
        raise WorkerError("bad_request", f"fine-tuning data {data_path}: {exc}") from None
    n = len(labels)
    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    with torch.no_grad():
        outputs = module.eval()(inputs[:1].to(dtype))
    classes = outputs.shape[-1] if outputs.dim() > 1 else 1
    if int(labels.max()) >= classes:
        raise _NotTuned(f"label {int(labels.max())} of --finetune-data is outside the model's {classes} outputs "
                        f"(labels must be 0..{classes - 1})")
    for p in module.parameters():
        if p.is_floating_point():
            p.requires_grad_(True)
    optimizer = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=LEARNING_RATE,
                                momentum=MOMENTUM)
    generator = torch.Generator().manual_seed(SEED)
    t0 = time.perf_counter()
    losses = []
    module.train()
    with torch.enable_grad():
        for epoch in range(epochs):
            total = 0.0
            for batch in torch.randperm(n, generator=generator).split(BATCH):
                optimizer.zero_grad()
                out = module(inputs[batch].to(dtype))
                loss = torch.nn.functional.cross_entropy(out.float(), labels[batch])
                if not torch.isfinite(loss):
                    raise _NotTuned(f"the loss became {loss.item()} in epoch {epoch + 1} (the fine-tuning diverged)")
                loss.backward()
                optimizer.step()
                total += loss.item() * len(batch)
            losses.append(round(total / n, 4))
            progress(f"fine-tuned epoch {epoch + 1}/{epochs}: mean loss {losses[-1]}")
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    seconds = round(time.perf_counter() - t0, 2)
    note = f"fine-tuned {epochs} epoch(s) on {n} samples: {RECIPE}"
    return note, {"finetune_epochs": epochs, "finetune_samples": n, "finetune_recipe": RECIPE,
                  "finetune_losses": losses, "finetune_s": seconds}
