"""The mobile architectures of the zoo: tiny_cnn, MobileNet V1/V2/V3, MNASNet, EfficientNet-B0."""

from __future__ import annotations

from typing import Any, Sequence

from torch import Tensor, nn

from .blocks import (
    ConvBNAct,
    SqueezeExcitation,
    StochasticDepth,
    _hswish,
    _PoolClassify,
    _relu,
    _relu6,
    _silu,
    make_divisible,
)

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
        out: Tensor = self.conv(x)
        return x + out if self.use_res_connect else out


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
        bn: dict[str, Any] = {"bn_eps": 0.001, "bn_momentum": 0.01}
        layers: list[nn.Module] = []
        if exp_ch != in_ch:
            layers.append(ConvBNAct(in_ch, exp_ch, 1, act=act, **bn))
        layers.append(ConvBNAct(exp_ch, exp_ch, kernel, stride, groups=exp_ch, act=act, **bn))
        if use_se:
            layers.append(SqueezeExcitation(exp_ch, make_divisible(exp_ch // 4, 8), _relu, nn.Hardsigmoid))
        layers.append(ConvBNAct(exp_ch, out_ch, 1, act=None, **bn))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        result: Tensor = self.block(x)
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
        bn: dict[str, Any] = {"bn_eps": 0.001, "bn_momentum": 0.01}
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
        out: Tensor = self.layers(x)
        return out + x if self.apply_residual else out


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
        out: Tensor = self.classifier(self.layers(x).mean([2, 3]))
        return out


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
        result: Tensor = self.block(x)
        if not self.use_res_connect:
            return result
        out: Tensor = self.stochastic_depth(result) + x
        return out


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
