"""PyTorch eager: the model file as it is (the comparison runtime; no phone app ships it)."""

from __future__ import annotations

from ..base import Citation, Runtime

__all__ = ["ADAPTER", "Torch"]


class Torch(Runtime):
    """Runs the user's file itself: nothing to make first, no device log."""

    name = "torch"
    cited = Citation("PyTorch", "pytorch")


ADAPTER = Torch()
