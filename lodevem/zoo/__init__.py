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

Modules, one concern each: ``blocks`` (shared layers and the init), ``mobile`` and ``classic``
(the architectures), ``registry`` (names -> seeded builders), ``summary`` (parameters and
MFLOPs for ``lodevem zoo``; MACs are counted by the worker's one counter,
``macs.count_macs``), ``files`` (writing a ``.pt``). Everything public is
importable from here, and the architectures are *pickled* under this package's name
(``lodevem.zoo.MobileNetV2``): a ``.pt`` written by ``write`` does not depend on which module
of the package defines the class, so files written before and after this layout are
byte-identical and load with either.
"""

from __future__ import annotations

from .blocks import ConvBNAct, SqueezeExcitation, StochasticDepth, make_divisible
from .classic import BasicBlock, Bottleneck, Fire, ResNet, ShuffleNetV2, ShuffleUnit, SqueezeNet11, channel_shuffle
from .files import ZooListing, catalogue, write
from .mobile import (
    EfficientNetB0,
    InvertedResidualV2,
    InvertedResidualV3,
    MBConv,
    MNASInvertedResidual,
    MNASNet,
    MobileNetV1,
    MobileNetV2,
    MobileNetV3,
    TinyCNN,
)
from .registry import DEFAULT_INPUT, SEED, ZOO, ZooEntry, build, names
from .summary import ZooSummary, count_mflops, count_params, describe_all

__all__ = [
    "DEFAULT_INPUT",
    "SEED",
    "ZOO",
    "ZooEntry",
    "ZooListing",
    "ZooSummary",
    "build",
    "catalogue",
    "channel_shuffle",
    "count_mflops",
    "count_params",
    "describe_all",
    "make_divisible",
    "names",
    "write",
    # the architectures (and the layers they are built of)
    "BasicBlock",
    "Bottleneck",
    "ConvBNAct",
    "EfficientNetB0",
    "Fire",
    "InvertedResidualV2",
    "InvertedResidualV3",
    "MBConv",
    "MNASInvertedResidual",
    "MNASNet",
    "MobileNetV1",
    "MobileNetV2",
    "MobileNetV3",
    "ResNet",
    "ShuffleNetV2",
    "ShuffleUnit",
    "SqueezeExcitation",
    "SqueezeNet11",
    "StochasticDepth",
    "TinyCNN",
]

# The classes a pickled zoo model names: ``lodevem.zoo.<Class>`` (see the docstring).
for _cls in (ConvBNAct, SqueezeExcitation, StochasticDepth, BasicBlock, Bottleneck, Fire, ResNet, ShuffleNetV2,
             ShuffleUnit, SqueezeNet11, EfficientNetB0, InvertedResidualV2, InvertedResidualV3, MBConv,
             MNASInvertedResidual, MNASNet, MobileNetV1, MobileNetV2, MobileNetV3, TinyCNN):
    _cls.__module__ = __name__
del _cls
