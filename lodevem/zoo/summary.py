"""What ``lodevem zoo`` shows for a model: its parameter count and MFLOPs (the MACs counted by the
worker's one counter, ``zoo.macs.count_macs``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from torch import nn

from .macs import count_macs
from .registry import ZOO, build, names

__all__ = ["ZooSummary", "count_mflops", "count_params", "describe_all"]


def count_params(model: nn.Module) -> int:
    """Total number of parameters (trainable or not; buffers excluded)."""
    return sum(p.numel() for p in model.parameters())


def count_mflops(model: nn.Module, input_shape: Sequence[int]) -> float:
    """MFLOPs = 2 * MACs / 1e6 (one MAC = one multiply + one add).

    Note torchvision's docs label MACs as "GFLOPS"; compare their figures against
    ``zoo.macs.count_macs`` / 1e9, not against this function.
    """
    return 2 * count_macs(model, input_shape) / 1e6


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
