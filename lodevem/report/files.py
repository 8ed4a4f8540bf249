"""The files a run leaves in its output directory: CSV, JSON (with the manifest) and LaTeX.

Each writer takes the rows it is given and writes one file atomically (``write_atomic``: a
temporary file, then a rename), so an interrupted run never leaves half a table behind. CSV and
JSON keep every field, including the predicted latency of a model that did not fit; the LaTeX
table shows the same cells as the console (from ``cells``), for ``\\input{}`` into a paper.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Optional

from ..errors import InputError
from ..profiles import Profile
from ..results import RESULTS_SCHEMA_VERSION, PairResult
from ..safe_io import RESULTS_FILE, read_text
from ..store.files import write_atomic, write_json_file
from ..version import __version__
from ..worker.verdict import Verdict
from .cells import (
    CALIBRATED_MARK,
    NOT_FINETUNED_MARK,
    OTHER_MARK,
    VERDICT_LEGEND,
    accuracy_legend,
    accuracy_text,
    cells,
    group_by_model,
    has_accuracy,
    source_notes,
    threads_text,
)
from .console import model_summaries
from .manifest import ManifestLike, manifest_dict

CSV_NAME = "benchmark_results.csv"
JSON_NAME = "benchmark_results.json"
TEX_NAME = "benchmark_results.tex"

# The LaTeX spelling of each latency mark, and of the Fits column per ``marks=`` style.
_LATEX_MARKS: Mapping[str, str] = MappingProxyType({
    "*": r"\textsuperscript{*}", "\u2020": r"\textsuperscript{\dag}", OTHER_MARK: r"\textsuperscript{\ddag}",
    CALIBRATED_MARK: r"\textsuperscript{\S}"})


def _latex_mark(mark: str) -> str:
    """A cell's mark in LaTeX: the predictor's, then the calibration's when it has one."""
    return "".join(_LATEX_MARKS.get(part, "") for part in mark)
_LATEX_FITS: Mapping[str, Mapping[Optional[bool], str]] = MappingProxyType({
    "text": MappingProxyType({True: "yes", False: "no", None: "?"}),
    "ding": MappingProxyType({True: r"\ding{51}", False: r"\ding{55}", None: "?"})})


def csv_columns() -> list[str]:
    """Every ``PairResult`` field in declaration order, then the derived ``fits``."""
    return [f.name for f in fields(PairResult)] + ["fits"]


def _cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as text: labels and paths come from file names, and
    one starting with ``= + - @`` (or a tab/CR) would be read as a formula (CSV injection)."""
    if value is None:
        return ""
    if isinstance(value, tuple):  # latency_calibrations: one cell, "; " between descriptions
        value = "; ".join(str(v) for v in value)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def write_csv(rows: Sequence[PairResult], path: Path) -> Path:
    """One line per (model x device) pair with every field; empty cell = no value.

    The csv module rather than pandas: a pandas column with a missing value turns integers
    such as ``params`` into floats (``3504872.0``), which a reader then has to undo.
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.to_dict().items()})
    write_atomic(Path(path), buffer.getvalue())
    return Path(path)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; a missing number is null
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(rows: Sequence[PairResult], manifest: ManifestLike, path: Path) -> Path:
    """Rows plus the environment they came from, like optimum-benchmark's ``benchmark.json``.

    ``schema_version`` lets a later lodevem refuse or convert an old file instead of misreading
    it; ``read_json`` is the matching reader.
    """
    payload = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "lodevem_version": __version__,
        "environment": manifest_dict(manifest),
        "summary": model_summaries(rows),
        "results": [r.to_dict() for r in rows],
    }
    write_json_file(Path(path), _json_safe(payload), indent=2, ensure_ascii=False, default=str)
    return Path(path)


def read_json(path: Path) -> tuple[list[PairResult], dict[str, Any]]:
    """Rows and environment back from ``benchmark_results.json`` (to re-render or compare runs).

    A file of another ``schema_version`` is refused with an ``InputError`` rather than misread:
    its fields may mean something else.
    """
    payload = json.loads(read_text(path, RESULTS_FILE, errors="strict"))
    version = payload.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION:
        raise InputError(f"{path}: results schema_version {version!r}, expected {RESULTS_SCHEMA_VERSION} "
                         "(the version this lodevem reads)")
    return [PairResult.from_dict(r) for r in payload["results"]], payload.get("environment", {})


_LATEX_SPECIAL: Mapping[int, str] = MappingProxyType(str.maketrans({
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "\u00b1": r"$\pm$", "\u00a7": r"\S{}",
}))


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in one pass (``cocoa_fp32.pt`` -> ``cocoa\\_fp32.pt``)."""
    return text.translate(_LATEX_SPECIAL)


def latex_table(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None,
                marks: str = "text", notes: bool = True) -> str:
    """The text of ``benchmark_results.tex``; see ``write_latex``."""
    if marks not in _LATEX_FITS:
        raise InputError(f"marks must be one of {', '.join(_LATEX_FITS)}, got {marks!r}")
    legend = source_notes(rows)
    out = [f"% lodevem {__version__}: {len(rows)} (model x device) pairs. Generated; re-run, do not edit.",
           r"% requires \usepackage{booktabs}"]
    if marks == "ding":
        out.append(r"% requires \usepackage{pifont}  (\ding{51} = fits, \ding{55} = does not fit)")
    runtimes = list(dict.fromkeys(r.memory_runtime or r.runtime for r in rows))
    out.append(f"% Latency: predicted for {threads_text(rows)} on the device's fastest core; "
               f"peak RAM: measured peak RSS under the device's RAM limit with {', '.join(runtimes)}; "
               "OOM = killed at the limit.")
    out += [f"% {n.text()}".replace("\u2020", r"\dag").replace(OTHER_MARK, r"\ddag") for n in legend]
    accuracy = has_accuracy(rows)  # --eval-data: a Top-1 column (drop vs fp32 in points)
    width = 7 if accuracy else 6
    out += [r"\begin{tabular}{llcrrc" + ("r" if accuracy else "") + "}", r"\toprule",
            r"Model & Device & Tier & Latency (ms) & " + _peak_header(runtimes) + r" & Fits"
            + (r" & Top-1 (\%)" if accuracy else "") + r" \\", r"\midrule"]
    fits_text = _LATEX_FITS[marks]
    for g, (label, group) in enumerate(group_by_model(rows, profiles).items()):
        if g:
            out.append(r"\midrule")
        for i, row in enumerate(group):
            c = cells(row)
            latency = latex_escape(c.latency) + _latex_mark(c.mark)
            peak = c.peak_ram or "--"
            if len(runtimes) > 1 and c.peak_ram:  # several runtimes: each figure names its own
                peak += " (" + latex_escape(row.memory_runtime or row.runtime) + ")"
            cols = [latex_escape(label) if i == 0 else "", latex_escape(row.profile_label),
                    latex_escape(row.tier.removeprefix("tier")), latency, peak,
                    "tight" if row.verdict == Verdict.TIGHT else fits_text[c.fits]]
            if accuracy:
                cols.append(latex_escape(accuracy_text(row, dash="--", minus="-")).replace(
                    NOT_FINETUNED_MARK, r"$^\circ$"))
            out.append(" & ".join(cols) + r" \\")
    out.append(r"\bottomrule")
    if notes:  # the footnote under the table: each mark with its error figure, then the verdicts
        lines = [_LATEX_MARKS[n.mark] + " " + latex_escape(n.text()[len(n.mark) + 1:]) for n in legend]
        lines.append(latex_escape(VERDICT_LEGEND))
        legend_text = accuracy_legend(rows)
        if legend_text:
            lines.append(latex_escape(legend_text.replace("\u2212", "-")).replace(NOT_FINETUNED_MARK, r"$^\circ$"))
        for text in lines:  # a p{} cell wraps long lines inside the table's width
            out.append(r"\multicolumn{" + str(width) + r"}{@{}p{\linewidth}@{}}{\footnotesize " + text + r"} \\")
    out.append(r"\end{tabular}")
    return "\n".join(out) + "\n"


def _peak_header(runtimes: Sequence[str]) -> str:
    """"Peak RAM (MB, tflite)": the runtime every figure is for, when the table has one."""
    return f"Peak RAM (MB, {latex_escape(runtimes[0])})" if len(runtimes) == 1 else "Peak RAM (MB)"


def write_latex(rows: Sequence[PairResult], path: Path, profiles: Optional[Sequence[Profile]] = None,
                marks: str = "text", notes: bool = True) -> Path:
    """A booktabs ``tabular`` for ``\\input{}`` inside the user's own ``table`` environment.

    Columns: Model, Device, Tier, Latency (ms), Peak RAM (MB), Fits; one row per pair, the model
    name on its first row only, a ``\\midrule`` between models. Needs ``\\usepackage{booktabs}``.
    ``marks="text"`` (default) writes ``yes``/``no``; ``marks="ding"`` writes ``\\ding{51}`` /
    ``\\ding{55}`` and needs ``\\usepackage{pifont}``. A model that cannot load shows ``OOM`` and
    ``--``. Latency marks (``*`` estimator, ``\\dag`` nn-Meter) are explained in the comment at the
    top, for the user's caption, and (``notes=True``, the default) in a footnote under the table that
    states each mark and its error figure (\u00b1) and what the verdicts mean; ``notes=False`` leaves it out.
    The table is written by hand rather than with ``Styler.to_latex``: Styler cannot put a
    booktabs ``\\midrule`` between row groups (only ``\\cline``), and the model grouping matters.
    """
    write_atomic(Path(path), latex_table(rows, profiles, marks=marks, notes=notes))
    return Path(path)
