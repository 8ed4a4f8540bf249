"""Reference model zoo: torchvision-equivalent architectures in plain PyTorch.

Why this exists: benchmarking against phone profiles needs a stable set of
well-known models, but we cannot depend on torchvision (broken in our
environment) nor on downloading weights. Latency and memory depend on the
architecture, not on trained weights, so each model here re-implements the
torchvision layer structure exactly (same parameter counts, same module names
where practical, so a torchvision state_dict would load) and is initialised
with random weights from a fixed seed, which makes every build bit-identical.

Only ops that export cleanly to ONNX (opset 13-17) are used: nn.Hardswish /
nn.Hardsigmoid / nn.SiLU modules, channel shuffle via reshape/transpose, and
stochastic depth that is an identity in eval mode.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
from torch import Tensor, nn

__all__ = [
    "ZooEntry",
    "ZOO",
    "names",
    "build",
    "count_params",
    "count_macs",
    "count_mflops",
    "write",
]

SEED = 0
DEFAULT_INPUT: tuple[int, ...] = (1, 3, 224, 224)

ActFactory = Optional[Callable[[], nn.Module]]


# --------------------------------------------------------------------------
# Shared building blocks
# --------------------------------------------------------------------------


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
        return scale * x


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
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------------
# tiny_cnn
# --------------------------------------------------------------------------


class TinyCNN(_PoolClassify):
    """~61k-param CNN for fast tests; adaptive pooling accepts any input >= 16x16."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvBNAct(3, 16, 3, 2, act=_relu),
            ConvBNAct(16, 32, 3, 2, act=_relu),
            nn.MaxPool2d(2),
            ConvBNAct(32, 64, 3, 1, act=_relu),
            ConvBNAct(64, 64, 3, 2, act=_relu),
        )
        self.classifier = nn.Linear(64, num_classes)


# --------------------------------------------------------------------------
# MobileNet V1 / V2 / V3
# --------------------------------------------------------------------------


class MobileNetV1(_PoolClassify):
    """MobileNetV1 1.0 (Howard et al. 2017): 3x3 conv + 13 depthwise-separable blocks."""

    # (out_channels, stride) of each depthwise-separable block
    CFG: Sequence[tuple[int, int]] = (
        (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
        (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
    )

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=_relu)]
        in_ch = 32
        for out_ch, stride in self.CFG:
            layers.append(
                nn.Sequential(
                    ConvBNAct(in_ch, in_ch, 3, stride, groups=in_ch, act=_relu),
                    ConvBNAct(in_ch, out_ch, 1, act=_relu),
                )
            )
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1024, num_classes)


class InvertedResidualV2(nn.Module):
    """MobileNetV2 inverted residual (expand 1x1 -> dw 3x3 -> linear 1x1)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = int(round(in_ch * expand_ratio))
        self.use_res_connect = stride == 1 and in_ch == out_ch
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNAct(in_ch, hidden, 1, act=_relu6))
        layers += [
            ConvBNAct(hidden, hidden, 3, stride, groups=hidden, act=_relu6),
            nn.Conv2d(hidden, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(_PoolClassify):
    """MobileNetV2 1.0 (Sandler et al. 2018), torchvision layout."""

    # t (expansion), c (channels), n (repeats), s (first stride)
    CFG: Sequence[tuple[int, int, int, int]] = (
        (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
    )

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        in_ch, last_ch = 32, 1280
        layers: list[nn.Module] = [ConvBNAct(3, in_ch, 3, 2, act=_relu6)]
        for t, c, n, s in self.CFG:
            out_ch = make_divisible(c, 8)
            for i in range(n):
                layers.append(InvertedResidualV2(in_ch, out_ch, s if i == 0 else 1, t))
                in_ch = out_ch
        layers.append(ConvBNAct(in_ch, last_ch, 1, act=_relu6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last_ch, num_classes))


class InvertedResidualV3(nn.Module):
    """MobileNetV3 bneck: optional expand, dw kxk, optional SE (hardsigmoid), project."""

    def __init__(
        self, in_ch: int, kernel: int, exp_ch: int, out_ch: int, use_se: bool, use_hs: bool, stride: int
    ) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and in_ch == out_ch
        act = _hswish if use_hs else _relu
        bn = {"bn_eps": 0.001, "bn_momentum": 0.01}
        layers: list[nn.Module] = []
        if exp_ch != in_ch:
            layers.append(ConvBNAct(in_ch, exp_ch, 1, act=act, **bn))
        layers.append(ConvBNAct(exp_ch, exp_ch, kernel, stride, groups=exp_ch, act=act, **bn))
        if use_se:
            layers.append(SqueezeExcitation(exp_ch, make_divisible(exp_ch // 4, 8), _relu, nn.Hardsigmoid))
        layers.append(ConvBNAct(exp_ch, out_ch, 1, act=None, **bn))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        result = self.block(x)
        return result + x if self.use_res_connect else result


# (in, kernel, expanded, out, use_se, use_hardswish, stride)
_V3Cfg = tuple[int, int, int, int, bool, bool, int]

_MBV3_LARGE: Sequence[_V3Cfg] = (
    (16, 3, 16, 16, False, False, 1),
    (16, 3, 64, 24, False, False, 2),
    (24, 3, 72, 24, False, False, 1),
    (24, 5, 72, 40, True, False, 2),
    (40, 5, 120, 40, True, False, 1),
    (40, 5, 120, 40, True, False, 1),
    (40, 3, 240, 80, False, True, 2),
    (80, 3, 200, 80, False, True, 1),
    (80, 3, 184, 80, False, True, 1),
    (80, 3, 184, 80, False, True, 1),
    (80, 3, 480, 112, True, True, 1),
    (112, 3, 672, 112, True, True, 1),
    (112, 5, 672, 160, True, True, 2),
    (160, 5, 960, 160, True, True, 1),
    (160, 5, 960, 160, True, True, 1),
)

_MBV3_SMALL: Sequence[_V3Cfg] = (
    (16, 3, 16, 16, True, False, 2),
    (16, 3, 72, 24, False, False, 2),
    (24, 3, 88, 24, False, False, 1),
    (24, 5, 96, 40, True, True, 2),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 120, 48, True, True, 1),
    (48, 5, 144, 48, True, True, 1),
    (48, 5, 288, 96, True, True, 2),
    (96, 5, 576, 96, True, True, 1),
    (96, 5, 576, 96, True, True, 1),
)


class MobileNetV3(_PoolClassify):
    """MobileNetV3 large/small (Howard et al. 2019), torchvision layout."""

    def __init__(self, cfg: Sequence[_V3Cfg], last_ch: int, num_classes: int = 1000) -> None:
        super().__init__()
        bn = {"bn_eps": 0.001, "bn_momentum": 0.01}
        layers: list[nn.Module] = [ConvBNAct(3, cfg[0][0], 3, 2, act=_hswish, **bn)]
        layers += [InvertedResidualV3(*c) for c in cfg]
        lastconv_in = cfg[-1][3]
        lastconv_out = 6 * lastconv_in
        layers.append(ConvBNAct(lastconv_in, lastconv_out, 1, act=_hswish, **bn))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(lastconv_out, last_ch),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(last_ch, num_classes),
        )


# --------------------------------------------------------------------------
# ShuffleNetV2
# --------------------------------------------------------------------------


def channel_shuffle(x: Tensor, groups: int) -> Tensor:
    """Channel shuffle via reshape/transpose (exports as Reshape+Transpose)."""
    b, c, h, w = x.shape
    x = x.reshape(b, groups, c // groups, h, w).transpose(1, 2)
    return x.reshape(b, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2 unit: split (stride 1) or dual-branch downsample (stride 2)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        branch = out_ch // 2
        # Flat Sequentials (not ConvBNAct) to match torchvision's state_dict keys.
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(in_ch, in_ch, 3, stride, 1, groups=in_ch, bias=False),
                nn.BatchNorm2d(in_ch),
                nn.Conv2d(in_ch, branch, 1, bias=False),
                nn.BatchNorm2d(branch),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(in_ch if stride > 1 else branch, branch, 1, bias=False),
            nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True),
            nn.Conv2d(branch, branch, 3, stride, 1, groups=branch, bias=False),
            nn.BatchNorm2d(branch),
            nn.Conv2d(branch, branch, 1, bias=False),
            nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: Tensor) -> Tensor:
        if self.stride == 1:
            # split with a static size (not chunk): exports as one Split node
            x1, x2 = x.split(x.shape[1] // 2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 x1.0 (Ma et al. 2018), torchvision layout."""

    def __init__(
        self,
        repeats: Sequence[int] = (4, 8, 4),
        channels: Sequence[int] = (24, 116, 232, 464, 1024),
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.conv1 = ConvBNAct(3, channels[0], 3, 2, act=_relu)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_ch = channels[0]
        stages: list[nn.Sequential] = []
        for n, out_ch in zip(repeats, channels[1:4]):
            units = [ShuffleUnit(in_ch, out_ch, 2)] + [ShuffleUnit(out_ch, out_ch, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*units))
            in_ch = out_ch
        self.stage2, self.stage3, self.stage4 = stages
        self.conv5 = ConvBNAct(in_ch, channels[-1], 1, act=_relu)
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


# --------------------------------------------------------------------------
# MNASNet
# --------------------------------------------------------------------------

_MNAS_BN_MOMENTUM = 1 - 0.9997


class MNASInvertedResidual(nn.Module):
    """MNASNet inverted residual (no SE in the torchvision B1 variant)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = in_ch * expand
        self.apply_residual = in_ch == out_ch and stride == 1
        m = _MNAS_BN_MOMENTUM
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False),
            nn.BatchNorm2d(mid, momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False),
            nn.BatchNorm2d(mid, momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch, momentum=m),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x) + x if self.apply_residual else self.layers(x)


def _mnas_stack(in_ch: int, out_ch: int, kernel: int, stride: int, expand: int, repeats: int) -> nn.Sequential:
    blocks = [MNASInvertedResidual(in_ch, out_ch, kernel, stride, expand)]
    blocks += [MNASInvertedResidual(out_ch, out_ch, kernel, 1, expand) for _ in range(repeats - 1)]
    return nn.Sequential(*blocks)


class MNASNet(nn.Module):
    """MNASNet 1.0 (Tan et al. 2019), torchvision layout (flat ``layers`` Sequential)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        d = [32, 16, 24, 40, 80, 96, 192, 320]  # depths at alpha=1.0
        m = _MNAS_BN_MOMENTUM
        self.layers = nn.Sequential(
            nn.Conv2d(3, d[0], 3, padding=1, stride=2, bias=False),
            nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[0], 3, padding=1, stride=1, groups=d[0], bias=False),
            nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[1], 1, bias=False),
            nn.BatchNorm2d(d[1], momentum=m),
            _mnas_stack(d[1], d[2], 3, 2, 3, 3),
            _mnas_stack(d[2], d[3], 5, 2, 3, 3),
            _mnas_stack(d[3], d[4], 5, 2, 6, 3),
            _mnas_stack(d[4], d[5], 3, 1, 6, 2),
            _mnas_stack(d[5], d[6], 5, 2, 6, 4),
            _mnas_stack(d[6], d[7], 3, 1, 6, 1),
            nn.Conv2d(d[7], 1280, 1, bias=False),
            nn.BatchNorm2d(1280, momentum=m),
            nn.ReLU(inplace=True),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(1280, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.layers(x).mean([2, 3]))


# --------------------------------------------------------------------------
# SqueezeNet 1.1
# --------------------------------------------------------------------------


class Fire(nn.Module):
    """SqueezeNet fire module: 1x1 squeeze, then concat of 1x1 and 3x3 expands."""

    def __init__(self, in_ch: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(in_ch, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], 1
        )


class SqueezeNet11(nn.Module):
    """SqueezeNet 1.1 (Iandola et al. 2016), torchvision layout."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Conv2d(512, num_classes, 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, x: Tensor) -> Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


# --------------------------------------------------------------------------
# ResNet
# --------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """ResNet-18/34 block: two 3x3 convs."""

    expansion = 1

    def __init__(self, in_ch: int, planes: int, stride: int = 1, downsample: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """ResNet-50 block, v1.5 (stride on the 3x3 conv, as torchvision)."""

    expansion = 4

    def __init__(self, in_ch: int, planes: int, stride: int = 1, downsample: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ResNet (He et al. 2015), torchvision layout (conv1/bn1/layer1..4/fc)."""

    def __init__(
        self, block: type[BasicBlock] | type[Bottleneck], layers: Sequence[int], num_classes: int = 1000
    ) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1)
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(
        self, block: type[BasicBlock] | type[Bottleneck], planes: int, blocks: int, stride: int
    ) -> nn.Sequential:
        downsample: Optional[nn.Module] = None
        out_ch = planes * block.expansion
        if stride != 1 or self.inplanes != out_ch:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch)
            )
        layers: list[nn.Module] = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = out_ch
        layers += [block(out_ch, planes) for _ in range(blocks - 1)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# --------------------------------------------------------------------------
# EfficientNet-B0
# --------------------------------------------------------------------------


class MBConv(nn.Module):
    """EfficientNet MBConv: expand, dw, SE (squeeze = in/4, SiLU), project, stochastic depth."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, expand: int, sd_prob: float) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and in_ch == out_ch
        exp_ch = make_divisible(in_ch * expand, 8)
        layers: list[nn.Module] = []
        if exp_ch != in_ch:
            layers.append(ConvBNAct(in_ch, exp_ch, 1, act=_silu))
        layers += [
            ConvBNAct(exp_ch, exp_ch, kernel, stride, groups=exp_ch, act=_silu),
            SqueezeExcitation(exp_ch, max(1, in_ch // 4), _silu, nn.Sigmoid),
            ConvBNAct(exp_ch, out_ch, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(sd_prob)

    def forward(self, x: Tensor) -> Tensor:
        result = self.block(x)
        return self.stochastic_depth(result) + x if self.use_res_connect else result


class EfficientNetB0(_PoolClassify):
    """EfficientNet-B0 (Tan & Le 2019), torchvision layout (features[0..8])."""

    # expand, kernel, stride, in, out, layers
    CFG: Sequence[tuple[int, int, int, int, int, int]] = (
        (1, 3, 1, 32, 16, 1),
        (6, 3, 2, 16, 24, 2),
        (6, 5, 2, 24, 40, 2),
        (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3),
        (6, 5, 2, 112, 192, 4),
        (6, 3, 1, 192, 320, 1),
    )

    def __init__(self, num_classes: int = 1000, stochastic_depth_prob: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, self.CFG[0][3], 3, 2, act=_silu)]
        total = sum(c[5] for c in self.CFG)
        block_id = 0
        for expand, kernel, stride, in_ch, out_ch, n in self.CFG:
            stage: list[nn.Module] = []
            for i in range(n):
                sd = stochastic_depth_prob * block_id / total
                stage.append(MBConv(in_ch if i == 0 else out_ch, out_ch, kernel, stride if i == 0 else 1, expand, sd))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last_in = self.CFG[-1][4]
        layers.append(ConvBNAct(last_in, 4 * last_in, 1, act=_silu))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(4 * last_in, num_classes))


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


def _seeded(factory: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    """Wrap a constructor so it seeds torch with SEED, without leaking the
    seeding into the caller's global RNG state (fork_rng restores it)."""

    @functools.wraps(factory)
    def builder() -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            model = factory()
            _init_weights(model)
        return model

    return builder


@dataclass(frozen=True)
class ZooEntry:
    """One reference model: name, one-line description, default input, builder."""

    name: str
    description: str
    default_input: tuple[int, ...]
    builder: Callable[[], nn.Module]


def _entry(name: str, description: str, factory: Callable[[], nn.Module]) -> ZooEntry:
    return ZooEntry(name, description, DEFAULT_INPUT, _seeded(factory))


ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in (
        _entry("tiny_cnn", "Tiny 4-conv CNN, 10 classes (~61k params), for tests", TinyCNN),
        _entry("mobilenet_v1", "MobileNetV1 1.0 (Howard et al. 2017), 1000 classes", MobileNetV1),
        _entry("mobilenet_v2", "MobileNetV2 1.0 (Sandler et al. 2018), torchvision layout", MobileNetV2),
        _entry(
            "mobilenet_v3_small",
            "MobileNetV3-Small 1.0 (Howard et al. 2019), torchvision layout",
            lambda: MobileNetV3(_MBV3_SMALL, 1024),
        ),
        _entry(
            "mobilenet_v3_large",
            "MobileNetV3-Large 1.0 (Howard et al. 2019), torchvision layout",
            lambda: MobileNetV3(_MBV3_LARGE, 1280),
        ),
        _entry("shufflenet_v2_x1_0", "ShuffleNetV2 x1.0 (Ma et al. 2018), torchvision layout", ShuffleNetV2),
        _entry("mnasnet1_0", "MNASNet 1.0 (Tan et al. 2019), torchvision layout", MNASNet),
        _entry("squeezenet1_1", "SqueezeNet 1.1 (Iandola et al. 2016), torchvision layout", SqueezeNet11),
        _entry("resnet18", "ResNet-18 (He et al. 2015), torchvision layout", lambda: ResNet(BasicBlock, (2, 2, 2, 2))),
        _entry(
            "resnet50", "ResNet-50 v1.5 (He et al. 2015), torchvision layout", lambda: ResNet(Bottleneck, (3, 4, 6, 3))
        ),
        _entry("efficientnet_b0", "EfficientNet-B0 (Tan & Le 2019), torchvision layout", EfficientNetB0),
    )
}


def names() -> list[str]:
    """Zoo model names in registry order."""
    return list(ZOO)


def build(name: str) -> nn.Module:
    """Build a zoo model with deterministic (seeded) random weights, in eval() mode.

    Raises KeyError listing the valid names if ``name`` is unknown.
    """
    try:
        entry = ZOO[name]
    except KeyError:
        raise KeyError(f"unknown zoo model {name!r}; valid names: {', '.join(ZOO)}") from None
    return entry.builder().eval()


def count_params(model: nn.Module) -> int:
    """Total number of parameters (trainable or not; buffers excluded)."""
    return sum(p.numel() for p in model.parameters())


def count_macs(model: nn.Module, input_shape: Sequence[int]) -> int:
    """Multiply-accumulates of one forward pass on a zero tensor of ``input_shape``.

    Counts Conv2d (``out_elems * in_ch/groups * kh * kw``, grouped/depthwise
    aware) and Linear (``out_elems * in_features``) only; biases, BN,
    activations, pooling and element-wise ops are ignored. This is the
    convention behind torchvision's published "GFLOPS" column (which is really
    GMACs), so e.g. mobilenet_v2 at 224x224 gives ~300.8M. The batch dimension
    of ``input_shape`` is included in the count. The model's train/eval flags
    are preserved; the pass runs in eval mode so BN running stats are untouched.
    """
    total = 0

    def conv_hook(m: nn.Conv2d, _inp: tuple[Tensor, ...], out: Tensor) -> None:
        nonlocal total
        kh, kw = m.kernel_size
        total += out.numel() * (m.in_channels // m.groups) * kh * kw

    def linear_hook(m: nn.Linear, _inp: tuple[Tensor, ...], out: Tensor) -> None:
        nonlocal total
        total += out.numel() * m.in_features

    handles = []
    modes = {m: m.training for m in model.modules()}
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            handles.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            handles.append(m.register_forward_hook(linear_hook))
    first = next(model.parameters(), None)
    x = torch.zeros(
        tuple(input_shape),
        device=first.device if first is not None else None,
        dtype=first.dtype if first is not None else None,
    )
    try:
        model.eval()
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes.items():
            m.training = mode
    return total


def count_mflops(model: nn.Module, input_shape: Sequence[int]) -> float:
    """MFLOPs = 2 * MACs / 1e6 (one MAC = one multiply + one add).

    Note torchvision's docs label MACs as "GFLOPS"; compare their figures
    against ``count_macs`` / 1e9, not against this function.
    """
    return 2 * count_macs(model, input_shape) / 1e6


def write(name: str, out_dir: Path) -> Path:
    """Build ``name`` and torch.save the whole (eval-mode) module to out_dir/<name>.pt.

    Saving the full module (not just a state_dict) lets the worker load it
    without knowing the architecture, but loading needs ``lodevem.zoo``
    importable and ``torch.load(..., weights_only=False)``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.pt"
    tmp = out_dir / f".{name}.pt.tmp{os.getpid()}"
    try:
        # Through a Python file object, so a full or read-only disk is an OSError naming the file
        # (torch's own writer reports it as an opaque RuntimeError), and never a truncated .pt.
        with open(tmp, "wb") as handle:
            torch.save(build(name), handle)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        tmp.unlink(missing_ok=True)
        # torch's zip writer turns the disk's OSError into a RuntimeError of its own on the way out
        cause = exc if isinstance(exc, OSError) else exc.__context__
        if isinstance(cause, OSError):
            raise OSError(cause.errno, cause.strerror, str(path)) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@dataclass(frozen=True)
class ZooSummary:
    """What ``lodevem zoo`` shows for one model."""

    name: str
    description: str
    params: int
    mflops: float
    input_shape: tuple[int, ...]


def describe_all(selected: Sequence[str] = ()) -> list[ZooSummary]:
    """Parameter count and MFLOPs of each (or each selected) zoo model at its default input."""
    summaries = []
    for name in selected or names():
        entry, model = ZOO[name], build(name)
        summaries.append(ZooSummary(name, entry.description, count_params(model),
                                    count_mflops(model, entry.default_input), entry.default_input))
    return summaries
