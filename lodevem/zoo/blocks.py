"""The zoo's shared building blocks: torchvision's layer layouts (so state_dict keys line up),
its channel rounding, and the variance-preserving initialisation every zoo model gets."""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import Tensor, nn

ActFactory = Optional[Callable[[], nn.Module]]

def make_divisible(v: float, divisor: int = 8, min_value: Optional[int] = None) -> int:
    """Round channels to a multiple of ``divisor`` (torchvision ``_make_divisible``).

    Kept bit-compatible with torchvision so width computations (and hence
    parameter counts) match exactly; never rounds down by more than 10%.
    """
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNAct(nn.Sequential):
    """Conv2d (no bias) -> BatchNorm2d -> optional activation.

    Mirrors torchvision's ``Conv2dNormActivation`` (a Sequential indexed
    0/1/2) so state_dict keys line up with torchvision checkpoints.
    """

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        act: ActFactory = nn.ReLU,
        bn_eps: float = 1e-5,
        bn_momentum: float = 0.1,
    ) -> None:
        padding = (kernel_size - 1) // 2
        layers: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch, eps=bn_eps, momentum=bn_momentum),
        ]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Squeeze-and-excitation gate (torchvision.ops.SqueezeExcitation layout).

    Uses 1x1 convs with bias for the two FC layers, so they are counted by the
    Conv2d MAC hook just like in torchvision's published figures.
    """

    def __init__(
        self,
        in_ch: int,
        squeeze_ch: int,
        act: Callable[[], nn.Module] = nn.ReLU,
        scale_act: Callable[[], nn.Module] = nn.Sigmoid,
    ) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(in_ch, squeeze_ch, 1)
        self.fc2 = nn.Conv2d(squeeze_ch, in_ch, 1)
        self.activation = act()
        self.scale_activation = scale_act()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        out: Tensor = scale * x
        return out


class StochasticDepth(nn.Module):
    """Row-wise stochastic depth; identity in eval so it never reaches ONNX graphs."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        survival = 1.0 - self.p
        noise = torch.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
        return x * noise.bernoulli_(survival).div_(survival)


def _relu() -> nn.Module:
    return nn.ReLU(inplace=True)


def _relu6() -> nn.Module:
    return nn.ReLU6(inplace=True)


def _hswish() -> nn.Module:
    return nn.Hardswish(inplace=True)


def _silu() -> nn.Module:
    return nn.SiLU(inplace=True)


def _init_weights(model: nn.Module) -> None:
    """Variance-preserving init (He fan_in for convs, LeCun for linears).

    Deliberately not torchvision's fan_out init: with untrained BatchNorm
    (identity in eval) fan_out makes activations of depthwise nets shrink to
    ~1e-10..1e-18 by the logits. Order-1 activations keep fp16/int8
    conversion meaningful and keep CPU benchmarks clear of denormal slow paths.
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, m.in_features**-0.5)
            nn.init.zeros_(m.bias)


class _PoolClassify(nn.Module):
    """Common ``features -> global avg pool -> flatten -> classifier`` forward."""

    features: nn.Module
    classifier: nn.Module

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1)
        out: Tensor = self.classifier(torch.flatten(x, 1))
        return out
