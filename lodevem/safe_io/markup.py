"""Names a user chose, carried as text through the methods paragraph and escaped for Markdown and
LaTeX.

Why: the methods text is sentences with two tokens, ``{cite:KEY}`` and ``{code:TEXT}``, and used
to be assembled from a run's own facts *and* from names a user picked (profile labels, model and
data file names, calibration notes). A label holding ``{cite:x}`` then became a citation of a
reference that does not exist (the run ended after every measurement), a file name holding
``{code:...}`` a ``\\texttt``, a label holding ``<img onerror=...>`` raw HTML in methodology.md,
and a blank line, a right-to-left mark or CJK in a name stopped the .tex from compiling. Here:

* ``literal`` makes a user's string inert before it joins the text: its braces become private-use
  characters the token pattern never matches, its control characters (newline, tab, a bidi
  override) visible escapes (``\\n``, ``\\u202e``). ``unliteral`` turns the braces back when a
  renderer writes the text out, escaped for its format.
* ``markdown_text`` escapes what Markdown would read as HTML or a link (``<``, ``>``, ``[``, ``]``,
  ``\\``).
* ``latex_ascii`` leaves only characters every LaTeX engine and font prints: ASCII, Latin-1
  letters, a few typographic signs as commands; anything else is transliterated (accents
  dropped: ``ő`` -> ``o``) or written as its code point ``[U+4E2D]``; format characters (a
  right-to-left mark) are shown the same way, never passed through.
"""

from __future__ import annotations

import unicodedata
from types import MappingProxyType
from typing import Any, Mapping

from .text import printable

__all__ = ["latex_ascii", "literal", "literal_value", "markdown_text", "unliteral"]

_OPEN, _CLOSE = "\ue000", "\ue001"  # private use: no font, file or name of lodevem's own holds them
_INERT = str.maketrans({"{": _OPEN, "}": _CLOSE})
_BACK = str.maketrans({_OPEN: "{", _CLOSE: "}"})


def literal(text: str) -> str:
    """``text`` (a name a user chose) as inert text of the methods paragraph (see the module)."""
    shown = printable(text.translate(_BACK), None, newlines=False)  # a planted private-use brace is escaped too
    return shown.translate(_INERT)


def literal_value(value: Any) -> Any:
    """``literal`` applied to every string in a JSON-like value (keys included)."""
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, Mapping):
        return {literal_value(k): literal_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(literal_value(v) for v in value) if isinstance(value, tuple) else \
            [literal_value(v) for v in value]
    return value


def unliteral(text: str) -> str:
    return text.translate(_BACK)


_MARKDOWN = str.maketrans({"\\": "\\\\", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]"})


def markdown_text(text: str) -> str:
    """Plain text for Markdown: no raw HTML and no link can be made of it."""
    return unliteral(text).translate(_MARKDOWN)


# Non-ASCII signs lodevem's own text uses, as LaTeX every engine prints with any font.
_LATEX_SIGNS: Mapping[str, str] = MappingProxyType({
    "\u00b1": r"$\pm$", "\u00a7": r"\S{}", "\u00b5": r"$\mu$", "\u03bc": r"$\mu$", "\u00d7": r"$\times$",
    "\u2212": "-", "\u2013": "--", "\u2014": "---", "\u2026": r"\ldots{}", "\u2018": "`", "\u2019": "'",
    "\u201c": "``", "\u201d": "''", "\u2264": r"$\le$", "\u2265": r"$\ge$", "\u226a": r"$\ll$", "\u226b": r"$\gg$",
    "\u2248": r"$\approx$", "\u2192": r"$\rightarrow$", "\u00b0": r"$^\circ$", "\u00a0": "~", "\u2020": r"\dag{}",
    "\u2021": r"\ddag{}", "\u00b6": r"\P{}", "\u2016": r"$\|$", "\u2022": r"$\bullet$", "\u00b7": r"$\cdot$",
    "\u2032": "'", "\u00ab": r"\guillemotleft{}", "\u00bb": r"\guillemotright{}",
})


def latex_ascii(text: str) -> str:
    """``text`` (already LaTeX-escaped for ASCII specials) with every other character made safe
    for any LaTeX engine and font (see the module)."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for char in text:
        if char.isascii():
            out.append(char if char.isprintable() else f"[U+{ord(char):04X}]")  # a newline ends no paragraph
        elif char in _LATEX_SIGNS:
            out.append(_LATEX_SIGNS[char])
        elif "\u00c0" <= char <= "\u00ff" and char.isalpha():
            out.append(char)  # Latin-1 letters: utf8 inputenc with T1 or OT1
        else:
            plain = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode("ascii")
            plain = "".join(c for c in plain if c.isalnum() or c in " -.")
            out.append(plain if plain else f"[U+{ord(char):04X}]")
    return "".join(out)
