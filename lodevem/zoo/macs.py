"""lodevem's one MAC counter: multiply-accumulates of Conv and Linear layers, counted by forward
hooks. The zoo's MFLOPs, the worker's pruning report (``worker.derive.variants.probe_layers``) and the
tests use it. Why in the zoo: it counts ``nn.Module``s, and the zoo is the package of modules the
worker already imports (``--arch zoo:NAME``); the zoo imports nothing of the worker, so the two
do not import each other. torch is imported inside the functions."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["count_macs", "layer_macs"]


def layer_macs(layer: Any, out: Any) -> int:
    """MACs of one Linear (``out_elems * in_features``) or Conv (``out_elems * in_ch/groups *
    prod(kernel)``, grouped/depthwise aware) call that produced ``out``."""
    import torch

    if isinstance(layer, torch.nn.Linear):
        return int(out.numel() * layer.in_features)
    k = 1
    for d in layer.kernel_size:
        k *= d
    return int(out.numel() * (layer.in_channels // layer.groups) * k)


def count_macs(module: Any, input_shape: Sequence[int]) -> int:
    """Multiply-accumulates of one forward pass on a zero tensor of ``input_shape``.

    Counts Conv and Linear layers only (``layer_macs``); biases, BN, activations, pooling and
    element-wise ops are ignored. This is the convention behind torchvision's published "GFLOPS"
    column (which is really GMACs), so mobilenet_v2 at 224x224 gives ~300.8M. The batch dimension
    of ``input_shape`` is included. The pass runs in eval mode (BN running statistics untouched)
    and the module's train/eval flags are restored; no hook outlives the call.
    """
    import torch

    total = 0

    def hook(layer: Any, _inp: Any, out: Any) -> None:
        nonlocal total
        total += layer_macs(layer, out)

    layers = [m for m in module.modules() if isinstance(m, (torch.nn.Linear, torch.nn.modules.conv._ConvNd))]
    handles = [m.register_forward_hook(hook) for m in layers]
    modes = {m: m.training for m in module.modules()}
    first = next(module.parameters(), None)
    example = torch.zeros(tuple(input_shape), device=first.device if first is not None else None,
                          dtype=first.dtype if first is not None else None)
    try:
        module.eval()
        with torch.no_grad():
            module(example)
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes.items():
            m.training = mode
    return total
