"""Untrusted text made safe for the terminal and for JSON, and lines bounded for parsers.

Why: a record, a benchmark log, a model's error message or anything the sandbox prints may
hold terminal escapes (``ESC ]0;...BEL`` retitles the window, ``ESC [2J`` clears it), be 27 MB
long, or hold a float JSON cannot carry (``Infinity``). Everything lodevem shows or writes of it
goes through here.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

# Lines longer than this are skipped by the log parsers (no tool's timing line is near it).
LOG_LINE_CHARS = 4096
# Untrusted text on the terminal: a whole message, and one listed entry or quoted value in it.
MESSAGE_CHARS = 1000
ENTRY_CHARS = 300


def bounded_lines(text: str, max_chars: int = LOG_LINE_CHARS) -> tuple[list[str], int]:
    """The lines of ``text`` of at most ``max_chars``, and how many longer ones were skipped:
    parsers then work line by line in linear time whatever a hostile line holds."""
    kept, skipped = [], 0
    for line in text.splitlines():
        if len(line) > max_chars:
            skipped += 1
        else:
            kept.append(line)
    return kept, skipped


def _escape(char: str) -> str:
    return char.encode("unicode_escape", "backslashreplace").decode("ascii")


def clip(text: str, limit: int = ENTRY_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left off."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def printable(text: object, limit: Optional[int] = MESSAGE_CHARS, *, newlines: bool = True) -> str:
    """Text from a record, a log, a model or the sandbox made safe for a terminal: every
    character that is not printable (ESC of an ANSI sequence, CR, BEL, a bidi override) shown as
    its escape (``\\x1b``), then capped at ``limit`` (None: not capped). ``newlines=True`` keeps
    newlines and tabs (a multi-line message); ``False`` escapes them too (one line per entry)."""
    out = str(text)
    if not out.isprintable():
        keep = "\n\t" if newlines else ""
        out = "".join(c if c.isprintable() or c in keep else _escape(c) for c in out)
    return out if limit is None else clip(out, limit)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` for what lodevem writes or prints: a float that is not finite becomes
    ``null`` (unavailable) instead of ``NaN``/``Infinity``, which are not JSON and break the
    reader; ``allow_nan=False`` then guarantees none is left."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)
