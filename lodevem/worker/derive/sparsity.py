"""Sparsity of a pruned file: how much is zero, and what removing the zero channels would buy.

Why: ``torch.nn.utils.prune`` (masks attached, or zeros after ``prune.remove``) leaves the tensors
their full size. A dense runtime (ncnn, XNNPACK, onnxruntime, PyTorch) multiplies the zeros like
any other number, so such a file runs at the dense model's speed. lodevem predicts that dense
speed, says how much of the model is zero, and, when whole output channels are zero, also
exports the graph with those channels physically removed (torch-pruning's dependency graph keeps
coupled layers consistent): the latency the user's pruning would buy once made physical.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

from ...wire.file_sections import LayerSparsity, SparsitySection
from ...wire.protocol import first_line, progress

# Layers listed per file in the reply: the most sparse first; the totals cover every layer.
MAX_LAYERS_REPORTED = 20
# A fraction this small is float noise or ReLU-dead weights, not pruning.
SPARSE_ENOUGH = 0.01


def _weight_layers(module: Any) -> list[tuple[str, Any, Any]]:
    """(name, module, effective weight) of every Conv/Linear with a float weight; the weight is
    ``weight_orig * weight_mask`` when prune masks are attached (``weight`` holds it after a
    forward pass, but a file saved right after ``prune.*`` may not have run one)."""
    import torch

    found = []
    for name, sub in module.named_modules():
        if not isinstance(sub, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
            continue
        orig, mask = getattr(sub, "weight_orig", None), getattr(sub, "weight_mask", None)
        weight = orig * mask if torch.is_tensor(orig) and torch.is_tensor(mask) else getattr(sub, "weight", None)
        if torch.is_tensor(weight) and weight.is_floating_point() and weight.dim() >= 2:
            found.append((name, sub, weight.detach()))
    return found


def sparsity_report(module: Any) -> Optional[SparsitySection]:
    """Zero fraction overall and per layer, all-zero output channels, attached prune masks.
    None for modules whose layers cannot be walked (TorchScript/exported graphs without them)."""
    try:
        layers = _weight_layers(module)
    except Exception as exc:  # an exotic module: sparsity is informative, the run goes on
        progress(f"could not read the weights for sparsity: {first_line(exc)}")
        return None
    if not layers:
        return None
    total = zeros = zero_channels = channels = 0
    per_layer = []
    masked = []
    for name, sub, weight in layers:
        n, z = weight.numel(), int((weight == 0).sum())
        rows = weight.reshape(weight.shape[0], -1)
        dead = [int(i) for i in (rows == 0).all(dim=1).nonzero().flatten()]
        total, zeros = total + n, zeros + z
        zero_channels, channels = zero_channels + len(dead), channels + weight.shape[0]
        if hasattr(sub, "weight_mask"):
            masked.append(name)
        per_layer.append(LayerSparsity(name, round(z / n, 4), len(dead), int(weight.shape[0])))
    per_layer.sort(key=lambda layer: -layer.zero_fraction)
    return SparsitySection(zero_fraction=round(zeros / total, 4) if total else 0.0, zero_channels=zero_channels,
                           channels=channels, masked_layers=len(masked), layers=tuple(per_layer[:MAX_LAYERS_REPORTED]),
                           weights=total)


def remove_zero_channels(model: Any, example: Any) -> tuple[Optional[Any], str]:
    """``model`` with its all-zero output channels physically removed, IN PLACE (a module with
    prune masks cannot be deep-copied: call this after the dense graph was exported), and what
    was done or why not. The output layers keep their width, so the output shape does not change."""
    import torch
    import torch.nn.utils.prune as prune
    import torch_pruning as tp

    from .variants import probe_layers

    for _, sub in model.named_modules():  # masks into plain weights: torch-pruning edits parameters
        for hook in list(sub._forward_pre_hooks.values()):
            if isinstance(hook, prune.BasePruningMethod):
                prune.remove(sub, hook._tensor_name)
    probe = probe_layers(model, example)
    final = set(probe["final"])
    dead = {}
    for name, sub, weight in _weight_layers(model):
        if name in final:
            continue
        rows = weight.reshape(weight.shape[0], -1)
        idxs = [int(i) for i in (rows == 0).all(dim=1).nonzero().flatten()]
        if idxs and len(idxs) < weight.shape[0]:
            dead[name] = (sub, idxs)
    if not dead:
        return None, "no prunable all-zero output channels"
    for p in model.parameters():
        p.requires_grad_(True)
    removed = 0
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            graph = tp.DependencyGraph().build_dependency(model, example_inputs=example)
            for sub, idxs in dead.values():
                fn = (tp.prune_linear_out_channels if isinstance(sub, torch.nn.Linear)
                      else tp.prune_conv_out_channels)
                current = _zero_rows(sub)
                idxs = [i for i in idxs if i in current] if current is not None else []
                if not idxs or len(idxs) >= sub.weight.shape[0]:
                    continue
                group = graph.get_pruning_group(sub, fn, idxs=idxs)
                if graph.check_pruning_group(group) and _zeros_everywhere(group):
                    group.prune()
                    removed += len(idxs)
        except Exception as exc:
            return None, f"torch-pruning could not remove them ({type(exc).__name__}: {first_line(exc, 150)})"
    for p in model.parameters():
        p.requires_grad_(False)
    if not removed:
        return None, "the zero channels are coupled to non-zero ones (residual adds, concatenations)"
    after = probe_layers(model, example)
    if after["output_shapes"] != probe["output_shapes"]:
        return None, "removing them changed the output shape"
    return model.eval(), f"{removed} all-zero output channel(s) removed with torch-pruning"


def _zero_rows(layer: Any) -> Optional[set[int]]:
    weight = getattr(layer, "weight", None)
    if weight is None or weight.dim() < 2:
        return None
    rows = weight.detach().reshape(weight.shape[0], -1)
    return {int(i) for i in (rows == 0).all(dim=1).nonzero().flatten()}


def _zeros_everywhere(group: Any) -> bool:
    """Whether every layer the group would cut loses only channels that are zero in it: coupled
    layers (a residual add) must not lose channels that carry weights."""
    import torch
    import torch_pruning as tp

    for dep, idxs in group:
        target = dep.target.module
        if dep.handler in (tp.prune_conv_out_channels, tp.prune_linear_out_channels) and isinstance(
                target, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
            zero = _zero_rows(target)
            if zero is None or not {int(getattr(i, "idx", i)) for i in idxs} <= zero:
                return False
    return True
