"""The files a run leaves in its output directory: CSV, JSON (with the manifest) and LaTeX.

Each writer takes the rows it is given and writes one file atomically (``write_atomic``: a
temporary file, then a rename), so an interrupted run never leaves half a table behind. CSV and
JSON keep every field, including the predicted latency of a model that did not fit; the LaTeX
table shows the same cells as the console (from ``cells``), for ``\\input{}`` into a paper.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Optional

from ..errors import InputError
from ..profiles import Profile
from ..results import RESULTS_SCHEMA_VERSION, PairResult
from ..results.columns import COLUMNS, op_profile_text
from ..safe_io import RESULTS_FILE, printable, read_bytes
from ..store.files import write_atomic, write_json_file
from ..version import __version__
from ..wire.verdict import Verdict
from .cells import (
    NOT_FINETUNED_MARK,
    accuracy_legend,
    accuracy_text,
    cells,
    group_by_model,
    has_accuracy,
    threads_text,
    verdict_legend,
    verdict_word,
)
from .latex_matrix import matrix_fits_better, matrix_table
from .latex_text import latex_escape
from .latex_text import latex_mark as _latex_mark
from .latex_text import stacked as _stacked
from .legend import BAND_DEFINITION, mark_notes, row_cell
from .manifest import Manifest, ManifestLike, manifest_dict
from .shared import shared_manifest, shared_rows
from .summaries import model_summaries

CSV_NAME = "benchmark_results.csv"
JSON_NAME = "benchmark_results.json"
TEX_NAME = "benchmark_results.tex"

_LATEX_FITS: Mapping[str, Mapping[Optional[bool], str]] = MappingProxyType({
    "text": MappingProxyType({True: "yes", False: "no", None: "?"}),
    "ding": MappingProxyType({True: r"\ding{51}", False: r"\ding{55}", None: "?"})})


def csv_columns() -> list[str]:
    """Every column of a row (``results.columns``: the flattened parts), then the derived ``fits`` and
    ``failure_reason`` (each missing figure with its reason: ``report.failures``)."""
    return [*COLUMNS, "fits", "failure_reason"]


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
    rows = shared_rows(rows, Path(path).parent)  # no path of the user's machine (report.shared)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        # "CONV_2D x36 20.42 ms (71.2%)" per node type
        values = {**row.to_dict(), "device_op_profile": op_profile_text(row.phone.op_profile if row.phone else ())}
        writer.writerow({k: _cell(v) for k, v in values.items()})
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
    rows, manifest = shared_rows(rows, Path(path).parent), shared_manifest(manifest, Path(path).parent)
    payload = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "lodevem_version": __version__,
        "environment": manifest_dict(manifest),
        "summary": model_summaries(rows, verbose=True),  # the file keeps every detail
        "results": [r.to_dict() for r in rows],
    }
    write_json_file(Path(path), _json_safe(payload), indent=2, ensure_ascii=False, default=str)
    return Path(path)


def read_json(path: Path) -> tuple[list[PairResult], dict[str, Any]]:
    """Rows and environment back from ``benchmark_results.json`` (to re-render or compare runs).

    A file of another ``schema_version`` is refused with an ``InputError`` rather than misread:
    its fields may mean something else.
    """
    from ..safe_io.records import BadRecord, parse_json

    where = str(path)
    payload = parse_json(read_bytes(path, RESULTS_FILE, follow=False), where)  # a link is refused, never followed
    if not isinstance(payload, dict):
        raise BadRecord(where, "", "expected a JSON object (a results file lodevem wrote)")
    version = payload.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION:
        raise InputError(f"{printable(where, 300, newlines=False)}: results schema_version "
                         f"{printable(repr(version), 40, newlines=False)}, expected {RESULTS_SCHEMA_VERSION} "
                         "(the version this lodevem reads)")
    results, environment = payload.get("results"), payload.get("environment", {})
    if not isinstance(results, list):
        raise BadRecord(where, "results", "expected a list of rows")
    if not isinstance(environment, dict):
        raise BadRecord(where, "environment", "expected an object")
    Manifest.from_dict(environment, where, prefix="environment.")  # a mistyped run description: refused here
    return [PairResult.from_dict(r, where, prefix=f"results[{i}].") for i, r in enumerate(results)], environment


LAYOUTS = ("auto", "long", "matrix")


def latex_table(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None,
                marks: str = "text", notes: bool = True, layout: str = "auto") -> str:
    """The text of ``benchmark_results.tex``; see ``write_latex``."""
    if marks not in _LATEX_FITS:
        raise InputError(f"marks must be one of {', '.join(_LATEX_FITS)}, got {marks!r}")
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    legend = mark_notes(row_cell(r) for r in rows)
    if layout == "matrix" or (layout == "auto" and matrix_fits_better(rows, profiles)):
        return matrix_table(rows, profiles, _latex_notes(rows, legend) if notes else [])
    out = [f"% lodevem {__version__}: {len(rows)} (model x device) pairs. Generated; re-run, do not edit.",
           r"% requires \usepackage{booktabs}"]
    if marks == "ding":
        out.append(r"% requires \usepackage{pifont}  (\ding{51} = fits, \ding{55} = does not fit)")
    runtimes = list(dict.fromkeys(r.memory.runtime_shown for r in rows))
    main = _main_runtime(rows)
    out.append(f"% Latency: predicted for {threads_text(rows)} on the device's fastest core; "
               f"peak RAM: measured peak RSS under the device's RAM limit with {', '.join(runtimes)}; "
               "OOM = killed at the limit.")
    out += [f"% {n.text()}" for n in legend]
    accuracy = has_accuracy(rows)  # --eval-data: a Top-1 column (drop vs fp32 in points)
    width = 6 if accuracy else 5
    out += [r"\setlength{\tabcolsep}{4pt}% narrower than the default 6pt: fits a one-column page more often",
            r"\begin{tabular}{lcrrc" + ("r" if accuracy else "") + "}", r"\toprule",
            r"Device & Tier & " + _stacked("Latency", "(ms)") + " & " + _peak_header(main) + r" & Fits"
            + (" & " + _stacked("Top-1", r"(\%)") if accuracy else "") + r" \\"]
    fits_text = _LATEX_FITS[marks]
    for label, group in group_by_model(rows, profiles).items():
        # each model a heading row over its devices: a Model column would make the table too wide
        out += [r"\midrule", rf"\multicolumn{{{width}}}{{@{{}}l}}{{\textit{{{latex_escape(label)}}}}} \\"]
        for row in group:
            c = cells(row)
            peak = c.peak_ram or "--"
            if c.peak_ram and row.memory.runtime != main:  # a figure of another runtime than the header's names it
                peak += " (" + latex_escape(row.memory.runtime) + ")"
            cols = [r"\quad " + latex_escape(row.device.label), latex_escape(row.device.tier_short),
                    _latex_latency(row), peak, _latex_fits(row, fits_text)]
            if accuracy:
                cols.append(latex_escape(accuracy_text(row, dash="\u2013")).replace(NOT_FINETUNED_MARK, r"$^\circ$"))
            out.append(" & ".join(cols) + r" \\")
    out.append(r"\bottomrule")
    out.append(r"\end{tabular}")
    if notes:  # under the table: the band, each mark with its held-out figures, the verdicts
        out.append(r"\par\smallskip{\footnotesize\raggedright")  # a paragraph at the float's width
        out += [text + r"\par" for text in _latex_notes(rows, legend)]
        out.append("}")
    return "\n".join(out) + "\n"


def _latex_notes(rows: Sequence[PairResult], legend: Sequence[Any]) -> list[str]:
    """The notes under either layout: the band, each mark's held-out figures, the verdicts."""
    lines = ["Latency (ms): " + latex_escape(BAND_DEFINITION.split(" = ", 1)[1]) + "."]
    lines += [_latex_mark(n.mark) + " " + latex_escape(n.text()[len(n.mark) + 1:]) + "." for n in legend]
    lines.append(latex_escape(verdict_legend(headroom=False)))
    fallback = [r for r in rows if r.memory.fallback]
    if fallback:
        runtime = fallback[0].memory.runtime
        lines.append(latex_escape(f"({runtime}): measured under {runtime} because the "
                                  "runtime's converter refused the file (CSV memory_runtime, memory_note)."))
    legend_text = accuracy_legend(rows)
    if legend_text:
        lines.append(latex_escape(legend_text).replace(NOT_FINETUNED_MARK, r"$^\circ$"))
    return lines


def _latex_latency(row: PairResult) -> str:
    """``48.9 $\\pm$ 16.0\\textsuperscript{*}``: the number, its held-out error in ms, its marks; a
    band floored at 0 ms is written as its range; a word (OOM) as it is."""
    c = cells(row)
    if not c.is_number or row.latency.ms is None:
        return latex_escape(c.latency)
    text = f"{row.latency.ms:,.1f}"
    low, high = row.latency.band.low_ms, row.latency.band.high_ms
    if low is not None and high is not None:
        spread = high - row.latency.ms
        symmetric = abs((row.latency.ms - low) - spread) <= 0.05 + 1e-6 * row.latency.ms
        text += f" $\\pm$ {spread:,.1f}" if symmetric else f" ({low:,.1f}--{high:,.1f})"
    return text + _latex_mark(c.mark)


def _latex_fits(row: PairResult, fits_text: Mapping[Optional[bool], str]) -> str:
    """yes / tight / no, or why there is no verdict (``no peak``, ``error``)."""
    if row.verdict == Verdict.TIGHT:
        return "tight"
    if row.fits is None:
        return latex_escape(verdict_word(row))
    return fits_text[row.fits]


def _main_runtime(rows: Sequence[PairResult]) -> Optional[str]:
    """The runtime the Peak RAM header names: the only one the run measured under, or the one of
    most of its figures when a converter sent some files to another (``torch (fallback)``);
    None when the run asked for several (each figure then names its own)."""
    asked = {r.memory.runtime for r in rows if not r.memory.fallback}
    if len(asked) == 1:
        return asked.pop()
    return None if asked else (rows[0].memory.runtime if rows else None)


def _peak_header(runtime: Optional[str]) -> str:
    """"Peak RAM (MB, tflite)": the runtime the figures are for, when most are for one."""
    return _stacked("Peak RAM", f"(MB, {latex_escape(runtime)})" if runtime else "(MB)")


def write_latex(rows: Sequence[PairResult], path: Path, profiles: Optional[Sequence[Profile]] = None,
                marks: str = "text", notes: bool = True, layout: str = "auto") -> Path:
    """A booktabs ``tabular`` for ``\\input{}`` inside the user's own ``table`` environment.

    Columns: Device, Tier, Latency (ms), Peak RAM (MB), Fits; one row per pair under a heading
    row naming its model, a ``\\midrule`` between models. Needs ``\\usepackage{booktabs}``.
    ``marks="text"`` (default) writes ``yes``/``no``; ``marks="ding"`` writes ``\\ding{51}`` /
    ``\\ding{55}`` and needs ``\\usepackage{pifont}``. A model that cannot load shows ``OOM`` and
    ``--``. The latency column is the prediction \u00b1 its held-out error in ms with the predictor
    kind's mark (``*`` estimator, ``\\dag`` nn-Meter, ``\\ddag`` armsim: each kind's own), explained in
    the comment at the top and (``notes=True``, the default) in notes under the tabular (a paragraph
    at the float's width) with each mark's held-out figures and what the verdicts mean;
    ``notes=False`` leaves them out.
    ``layout``: ``auto`` (the default) writes the variant x device matrix of ``report.latex_matrix``
    instead when the long table would pass a page; ``long`` / ``matrix`` force one.
    The table is written by hand rather than with ``Styler.to_latex``: Styler cannot put a
    booktabs ``\\midrule`` between row groups (only ``\\cline``), and the model grouping matters.
    """
    write_atomic(Path(path), latex_table(shared_rows(rows, Path(path).parent), profiles, marks=marks, notes=notes,
                                         layout=layout))
    return Path(path)
