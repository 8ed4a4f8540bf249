"""LaTeX spelling shared by the results tables (``report.files``, ``report.latex_matrix``) and the
paper kit: escaping, the latency marks, stacked header cells.

Why its own module: both table layouts and the methods text must typeset the same way, and the
details are easy to get wrong in print: ``--`` in plain text is an en dash (an option name like
``--eval-data`` came out as "–eval-data"), a hyphen is not a minus sign (an accuracy drop is
``$-$1.2``), ``±`` and ``§`` are not in every font.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from ..safe_io.markup import latex_ascii

__all__ = ["LATEX_MARKS", "latex_escape", "latex_mark", "stacked"]

_LATEX_SPECIAL: Mapping[int, str] = MappingProxyType(str.maketrans({
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "\u00b1": r"$\pm$", "\u00a7": r"\S{}",
    "\u2212": r"$-$",  # a minus sign (an accuracy drop), not a hyphen
}))


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in one pass (``cocoa_fp32.pt`` -> ``cocoa\\_fp32.pt``), then
    leave only what any engine and font prints (``safe_io.markup.latex_ascii``: a control character,
    a right-to-left mark or CJK in a name never stops the .tex from compiling); a run of hyphens
    stays hyphens (``-{}-``: TeX would make ``--`` an en dash)."""
    return re.sub(r"-(?=-)", "-{}", latex_ascii(text.translate(_LATEX_SPECIAL)))


# The LaTeX spelling of each latency mark (a kind's mark outside this table is written escaped).
LATEX_MARKS: Mapping[str, str] = MappingProxyType({
    "*": "*", "\u2020": r"\dag", "\u2021": r"\ddag", "\u00a7": r"\S", "\u00b6": r"\P", "\u2016": r"\|"})


def latex_mark(mark: str) -> str:
    """A cell's marks in LaTeX, as one superscript: the predictor's, then the calibration's."""
    return r"\textsuperscript{" + "".join(LATEX_MARKS.get(part) or latex_escape(part) for part in mark) + "}" \
        if mark else ""


def stacked(*lines: str) -> str:
    """A cell on several lines (plain LaTeX: a one-column tabular), so the table stays narrow."""
    return r"\begin{tabular}[b]{@{}c@{}}" + r"\\".join(lines) + r"\end{tabular}"
