"""Everything lodevem shows or writes: console tables, CSV, JSON, LaTeX and plots.

The reporter formats records it is given; it never measures or predicts anything itself. One
rule runs through every output: a latency is a *prediction* and says which predictor made it
(a mark per source, explained in a caption or comment), while peak RAM is a *measurement* and is
shown only when the model actually ran under the device's limit. A model that cannot load on a
device has no usable latency there, so the table shows ``OOM`` in the latency cell; the CSV and
JSON still keep the predicted number for anyone who wants it.

This module is the stage's face: callers import from here, the work is done in ``lodevem.report``
(``cells``: device order and the display form of a row, shared by every output; ``console``: the
rich tables and summary lines; ``files``: CSV, JSON and LaTeX; ``plots``: the figures;
``manifest``: the run's environment). Those modules never import this one, so there is no cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .profiles import Profile
from .report.cells import Cells, cells, group_by_model, latency_mark, ordered_devices
from .report.console import inspection_lines, latency_legend, latency_table, profiles_table, results_table, zoo_table
from .report.files import (
    CSV_NAME,
    JSON_NAME,
    TEX_NAME,
    csv_columns,
    latex_escape,
    latex_table,
    read_json,
    write_csv,
    write_json,
    write_latex,
)
from .report.html import HTML_NAME, write_report
from .report.legend import MarkNote, mark_notes
from .report.manifest import ManifestLike
from .report.paperkit import write_paper_kit
from .report.summaries import model_summaries
from .results import PairResult

__all__ = [
    "CSV_NAME", "HTML_NAME", "JSON_NAME", "TEX_NAME", "Cells", "MarkNote", "cells", "csv_columns",
    "group_by_model", "inspection_lines", "latency_legend", "latency_mark", "latency_table", "latex_escape",
    "latex_table", "mark_notes", "model_summaries", "ordered_devices", "profiles_table", "read_json",
    "results_table", "write_all", "write_csv", "write_json", "write_latex", "write_paper_kit",
    "write_report", "zoo_table",
]


def write_all(rows: Sequence[PairResult], profiles: Sequence[Profile], manifest: ManifestLike,
              out_dir: Path, plots: bool = True, latex_marks: str = "text") -> list[Path]:
    """Write CSV, JSON, LaTeX, the paper kit (methodology.md/.tex, references.bib), (unless
    ``plots=False``) the figures, and ``report.html`` with all of them inline; return every path
    written.

    matplotlib is imported only when a figure must be drawn: a figure whose inputs did not change
    since it was last written to ``out_dir`` is kept (``report.figure_cache``), so a fully cached
    rerun draws nothing.
    """
    out_dir = Path(out_dir)
    paths = [write_csv(rows, out_dir / CSV_NAME),
             write_json(rows, manifest, out_dir / JSON_NAME),
             write_latex(rows, out_dir / TEX_NAME, profiles, marks=latex_marks),
             *write_paper_kit(rows, manifest, out_dir)]
    if plots and rows:
        from .report.figure_cache import write_figures

        paths += [p for figure in write_figures(rows, profiles, out_dir) for p in figure.paths]
    if rows:  # last: it embeds the figures just written
        paths.append(write_report(rows, manifest, out_dir))
    return paths

