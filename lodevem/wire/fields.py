"""Typed values out of parsed JSON that lodevem did not just make: a worker's reply, a results
file's manifest read back, a parameters file. Each reader returns the value when it has the
expected type and None (or an empty container) otherwise, never raises: the record that reads a
field decides what a missing one means."""

from __future__ import annotations

import math
from typing import Any, Optional

__all__ = ["integer", "items", "mapping", "number", "text"]


def text(value: Any, limit: Optional[int] = None) -> Optional[str]:
    """``value`` when it is a string, cut to ``limit`` characters (ending ``...``) when given."""
    if not isinstance(value, str):
        return None
    return value if limit is None or len(value) <= limit else value[: limit - 3] + "..."


def integer(value: Any) -> Optional[int]:
    """``value`` when it is a whole number (a bool is not)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: Any) -> Optional[float]:
    """``value`` as a float when it is a finite number (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []
