"""The compact LaTeX layout of a run: one row per variant, one column per device.

Why: a compression paper compares variants across phones. The long table (``report.files``: one
row per (variant, device) under a heading per variant) is 60 data rows for 10 variants on 6
phones, more than a page; a reviewer reads a matrix. ``latex_table`` picks this layout by itself
when the long one would pass a page (``matrix_fits_better``), and ``layout="long"|"matrix"``
forces either. Each cell stacks the predicted latency (ms, with the predictor's mark) over the
measured peak RAM (MB); a variant's top-1 (and its drop, with a real minus sign) is one column,
since accuracy does not depend on the phone. A device whose run gave no peak says why in the cell
(``OOM``, ``error``, ``no peak``); a tight fit is in italics. The notes are the long table's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from ..profiles import Profile
from ..results import PairResult
from ..wire.verdict import Verdict
from .cells import (
    NOT_FINETUNED_MARK,
    accuracy_text,
    cells,
    group_by_model,
    has_accuracy,
    ordered_devices,
    verdict_word,
)
from .latex_text import latex_escape, latex_mark, stacked

__all__ = ["LONG_TABLE_PAGE_LINES", "long_table_lines", "matrix_fits_better", "matrix_table"]

# Lines of the long table that fit one page of a one-column article (a 592 pt text block at 12 pt
# per table line, less the header, rules, caption and the notes under it): past this, the matrix.
LONG_TABLE_PAGE_LINES = 36


def long_table_lines(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None) -> int:
    """The long layout's body lines: a heading line per variant and a line per (variant, device)."""
    return len(rows) + len(group_by_model(rows, profiles))


def matrix_fits_better(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None) -> bool:
    """Whether ``latex_table``'s ``auto`` layout is the matrix: the long table would pass a page and
    there is more than one device to put side by side."""
    devices = {r.device.profile_id for r in rows}
    return len(devices) > 1 and long_table_lines(rows, profiles) > LONG_TABLE_PAGE_LINES


def _header(label: str) -> str:
    """A device's label on two lines, split at the space nearest its middle (columns stay narrow)."""
    words = label.split(" ")
    if len(words) < 2:
        return latex_escape(label)
    best = min(range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(" ".join(words[i:]))))
    return stacked(latex_escape(" ".join(words[:best])), latex_escape(" ".join(words[best:])))


def _cell(row: Optional[PairResult]) -> str:
    """Latency over peak RAM (italic when tight), or over why there is no peak; no pair: ``--``."""
    if row is None:
        return r"--"
    c = cells(row)
    latency = latex_escape(c.latency) + (latex_mark(c.mark) if c.is_number else "")
    if not (c.peak_ram and row.fits is not None):
        return stacked(latency, latex_escape(verdict_word(row)))
    ram = latex_escape(c.peak_ram)
    return stacked(latency, rf"\textit{{{ram}}}" if row.verdict == Verdict.TIGHT else ram)


def _network(label: str, row: PairResult) -> str:
    """The network a variant row belongs to: a derived level's label less its ``@level``."""
    return label.rsplit("@", 1)[0] if row.model.level is not None and "@" in label else label


def _variant_name(label: str, network: str, row: PairResult) -> str:
    """What the matrix calls a variant under its network's heading: its level, or ``fp32`` for the
    file as given (its own precision when the user's file is not float)."""
    if label == network:
        return (row.model.precision or "fp32") if row.model.level is None else label
    return label[len(network) + 1:] if label.startswith(network + "@") else label


def _by_network(groups: dict[str, list[PairResult]]) -> dict[str, list[tuple[str, list[PairResult]]]]:
    out: dict[str, list[tuple[str, list[PairResult]]]] = {}
    for label, group in groups.items():
        out.setdefault(_network(label, group[0]), []).append((label, group))
    return out


def matrix_table(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]], notes: Sequence[str]) -> str:
    """The variant x device matrix as a booktabs ``tabular`` (``\\input`` inside a ``table``)."""
    devices = ordered_devices(rows, profiles)
    accuracy = has_accuracy(rows)
    groups = group_by_model(rows, profiles)
    out = [f"% lodevem: {len(rows)} (model x device) pairs as a {len(groups)} x {len(devices)} matrix (the long table "
           "would pass a page). Generated; re-run, do not edit.",
           r"% requires \usepackage{booktabs}",
           r"\footnotesize\setlength{\tabcolsep}{3pt}%",
           r"\begin{tabular}{l" + ("r" if accuracy else "") + "c" * len(devices) + "}", r"\toprule",
           " & ".join(["Variant"] + ([stacked("Top-1", r"(\%)")] if accuracy else [])
                      + [_header(d.device.label) for d in devices]) + r" \\", r"\midrule"]
    width = 1 + int(accuracy) + len(devices)
    for network, variants in _by_network(groups).items():
        heading = len(variants) > 1 or variants[0][0] != network  # a heading row names the network once
        if heading:
            out.append(rf"\multicolumn{{{width}}}{{@{{}}l}}{{\textit{{{latex_escape(network)}}}}} \\")
        for label, group in variants:
            by_device = {r.device.profile_id: r for r in group}
            name = _variant_name(label, network, group[0]) if heading else label
            cols = [(r"\quad " if name != label else "") + latex_escape(name)]
            if accuracy:
                evaluated = next((r for r in group if r.accuracy.top1_pct is not None), group[0])
                top1, _, drop = accuracy_text(evaluated, dash="\u2013").partition(" ")
                cols.append(stacked(*(latex_escape(t).replace(NOT_FINETUNED_MARK, r"$^\circ$") for t in (top1, drop)
                                      if t)))
            cols += [_cell(by_device.get(device.device.profile_id)) for device in devices]
            out.append(" & ".join(cols) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    if notes:
        out.append(r"\par\smallskip{\footnotesize\raggedright")
        out.append(r"Each cell: predicted latency (ms) over measured peak RAM (MB); \textit{italic} RAM: tight "
                   r"(above the app budget).\par")
        out += [text + r"\par" for text in notes]
        out.append("}")
    return "\n".join(out) + "\n"
