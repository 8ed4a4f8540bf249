"""Which input shape a model is run with, where it came from, and whether the default looks wrong.

Why: a model made for 96x96 inputs that is exported, measured and predicted at the default
1x3x224x224 gets a latency 5x too high and a wrong peak RAM, silently. So the worker says where
the shape came from (``--input-shape``, recorded in the file, or the default) and, for the
default, looks at the model's first layers for evidence of another size: a first convolution
that takes another number of channels, or a first fully connected layer whose ``in_features``
match another square input side (its input grows with the input's area in a conv net without
adaptive pooling). Runs in the sandbox only (it imports torch and calls the user's module).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from ...wire.shape_sources import (  # noqa: F401  (the worker's words, re-exported for its modules)
    SOURCE_DEFAULT,
    SOURCE_EVAL_DATA,
    SOURCE_FINETUNE_DATA,
    SOURCE_GIVEN,
    SOURCE_RECORDED,
    SOURCE_REQUEST,
    SOURCE_WORDS,
    host_shape_source,
)

# Attributes a module may carry to record the input it was made for (a list/tuple of ints, or
# an example tensor): lodevem's zoo and common training scripts set one of these.
_SHAPE_ATTRIBUTES = ("example_input_shape", "input_shape", "example_input")


# The largest input lodevem runs: every dimension, and all of them together (elements of one float32
# tensor: 2**28 = 1 GiB), so a typo (1,3,22400,224) is refused before a container starts.
MAX_DIMENSION = 1 << 16
MAX_ELEMENTS = 1 << 28


def input_shape_problem(dims: "tuple[int, ...] | list[int]") -> Optional[str]:
    """Why ``--input-shape`` cannot be run (None: it can), checked on the host before any container:
    positive integers, a batch of one first (lodevem predicts and measures one inference), two to
    eight dimensions, and a tensor that fits in memory. The message says what to write instead."""
    shape = ",".join(map(str, dims))
    fallback = ("leave it out to use the shape the model file records (when it records one) or the default "
                "1,3,224,224")
    if not dims or any(d <= 0 for d in dims):
        return f"{shape}: expected positive integers like 1,3,224,224"
    if len(dims) < 2 or len(dims) > 8:
        return f"{shape}: {len(dims)} dimension(s); expected the batch of one, then 1 to 7 more (like 1,3,224,224)"
    if dims[0] != 1:
        hint = f"1,{shape}" if len(dims) < 8 else None
        return (f"{shape}: the first dimension is the batch and must be 1 (one inference)"
                + (f"; did you mean {hint}?" if hint else "") + f" Or {fallback}")
    if any(d > MAX_DIMENSION for d in dims) or math.prod(dims) > MAX_ELEMENTS:
        return (f"{shape}: {math.prod(dims):,} elements, larger than lodevem runs (at most {MAX_ELEMENTS:,}, "
                f"{MAX_DIMENSION:,} per dimension); {fallback}")
    return None


def recorded_input_shape(module: Any) -> Optional[list[int]]:
    """The input shape the module records about itself, or None."""
    for name in _SHAPE_ATTRIBUTES:
        try:
            value = getattr(module, name, None)
        except Exception:  # a property that raises is no record
            continue
        shape = getattr(value, "shape", value)
        try:
            dims = [int(d) for d in shape] if shape is not None and (
                isinstance(shape, (list, tuple)) or hasattr(shape, "__iter__")) else None
        except (TypeError, ValueError):
            dims = None
        if dims and 1 <= len(dims) <= 8 and all(0 < d <= 1 << 16 for d in dims):
            return dims
    return None


def _first(module: Any, kinds: tuple[type, ...]) -> Optional[Any]:
    return next((m for m in module.modules() if isinstance(m, kinds)), None)


class DefaultShapeCheck:
    """Watches the first Linear layer during one forward pass at the default shape and says
    afterwards whether the model's first layers suggest another input (``warning``)."""

    def __init__(self, module: Any, shape: list[int]) -> None:
        import torch.nn as nn

        self.shape, self.features = list(shape), None  # type: list[Any], Optional[int]
        self._hook = None
        self.conv = _first(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d))
        self.linear = _first(module, (nn.Linear,))
        self.adaptive = _first(module, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.AdaptiveAvgPool1d))
        if self.linear is not None:
            self._hook = self.linear.register_forward_pre_hook(self._seen)

    def _seen(self, layer: Any, inputs: tuple[Any, ...]) -> None:
        if self.features is None and inputs and hasattr(inputs[0], "shape") and inputs[0].dim() >= 2:
            self.features = int(inputs[0].shape[-1])

    def close(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def warning(self) -> Optional[str]:
        """One sentence when the first layers contradict the default shape, else None."""
        shape, given = self.shape, "x".join(map(str, self.shape))
        if self.conv is not None and len(shape) >= 2 and self.conv.in_channels != shape[1]:
            return (f"the first convolution takes {self.conv.in_channels} channel(s) but the default input "
                    f"{given} has {shape[1]}; pass --input-shape")
        if self.linear is None:
            return None
        wanted = int(self.linear.in_features)
        if self.conv is None:  # an MLP: the input's features feed the first Linear directly
            have = math.prod(shape[1:])
            if have != wanted and shape[-1] != wanted:
                return (f"the first fully connected layer takes {wanted} features but the default input {given} "
                        f"has {have}; pass --input-shape (e.g. 1,{wanted})")
            return None
        if self.adaptive is not None or self.features is None or self.features == wanted or len(shape) != 4:
            return None
        side = shape[-1] * math.sqrt(wanted / self.features)  # features grow with the input's area
        if side >= 8 and abs(side - round(side)) < 0.05:
            s = round(side)
            return (f"the first fully connected layer takes {wanted} features, which matches a {s}x{s} input, "
                    f"not the default {given}; pass --input-shape {shape[0]},{shape[1]},{s},{s}")
        return (f"the first fully connected layer takes {wanted} features but receives {self.features} at the "
                f"default {given}; pass --input-shape")
