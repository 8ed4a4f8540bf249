"""Compression levels that ``--levels`` derives from a model inside the sandbox.

lodevem never compresses a user's file behind their back: variants exist only on request,
each as its own row labelled ``<file>@<level>``.
"""

from __future__ import annotations

from .errors import InputError
from .worker.protocol import LEVELS as LEVEL_NAMES

_DESCRIPTIONS: dict[str, str] = {
    "fp32": "the file as given (baseline)",
    "fp16": "model.half(), half-precision inputs",
    "int8": "post-training dynamic quantization (Linear/LSTM/GRU; convolutions stay fp32)",
    "int8-static": "post-training static int8 (FX graph mode, calibrated on random inputs)",
    "pruned": "structured L1-norm channel pruning at 50 %, channels physically removed (no fine-tuning)",
}
# The names are the worker protocol's (the sandbox derives the variants); descriptions are ours.
LEVELS: dict[str, str] = {name: _DESCRIPTIONS[name] for name in LEVEL_NAMES}


def parse_levels(text: str) -> tuple[str, ...]:
    """``"fp32,int8"`` -> ("fp32", "int8"); ``"all"`` -> every level. Order kept, duplicates dropped."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return tuple(LEVELS)
    unknown = [n for n in names if n not in LEVELS]
    if unknown or not names:
        raise InputError(f"unknown level(s) {', '.join(unknown) or repr(text)}; expected any of "
                         f"{', '.join(LEVELS)} or 'all'")
    return tuple(dict.fromkeys(names))
