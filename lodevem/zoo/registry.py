"""The zoo's registry: every reference model by name, built seeded so every build is bit-identical."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .blocks import _init_weights
from .classic import BasicBlock, Bottleneck, ResNet, ShuffleNetV2, SqueezeNet11
from .mobile import _MBV3_LARGE, _MBV3_SMALL, EfficientNetB0, MNASNet, MobileNetV1, MobileNetV2, MobileNetV3, TinyCNN

__all__ = ["DEFAULT_INPUT", "SEED", "ZOO", "ZooEntry", "build", "names"]

SEED = 0
DEFAULT_INPUT: tuple[int, ...] = (1, 3, 224, 224)

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
