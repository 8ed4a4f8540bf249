"""Compression levels that ``--levels`` derives from a model inside the sandbox.

lodevem never compresses a user's file behind their back: variants exist only on request,
each as its own row labelled ``<file>@<level>``. The names, their descriptions and the
arithmetic each runs in are the precision vocabulary's (``lodevem.wire.precision``: the
sandbox derives the variants, so the worker reads the same names).
"""

from __future__ import annotations

from .errors import InputError
from .wire.precision import LEVEL_DESCRIPTIONS

# name -> what the variant is (the worker's vocabulary, in its order)
LEVELS: dict[str, str] = LEVEL_DESCRIPTIONS


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
