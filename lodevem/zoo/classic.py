"""The zoo's other architectures: ShuffleNetV2, SqueezeNet 1.1, ResNet-18/50."""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from .blocks import ConvBNAct, _relu

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
            x1, x2 = torch.split(x, x.shape[1] // 2, dim=1)
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
        out: Tensor = self.fc(x.mean([2, 3]))
        return out


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
        result: Tensor = self.relu(out + identity)
        return result


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
        result: Tensor = self.relu(out + identity)
        return result


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
        out: Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return out
