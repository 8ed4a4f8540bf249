"""The .tex a run writes compiles as a user pastes it: Debian's TeX Live, a real article.

``benchmark_results.tex`` goes inside a ``table`` float and ``methodology.tex`` into a methods
section citing ``references.bib``, exactly as their header comments say; pdflatex, bibtex and
pdflatex twice must finish without an error, an undefined citation or reference, and the page is
rendered to PNG by pdftoppm (kept in the test's folder for a look). Built from a stored run's
rows (tests/data/report_run) plus rows of every verdict and mark, no Docker.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import with_columns

from lodevem.report.files import latex_table, read_json
from lodevem.report.paperkit import write_paper_kit
from lodevem.wire.verdict import Verdict

STORED = Path(__file__).parent / "data" / "report_run"
PREAMBLE = "\n".join([r"\documentclass{article}", r"\usepackage[T1]{fontenc}", r"\usepackage[utf8]{inputenc}",
                      r"\usepackage{booktabs}"]) + "\n"
TABLE = "\n".join([r"\begin{table}[t]", r"\centering", r"\input{benchmark_results.tex}",
                   r"\caption{Predicted latency and measured peak RAM.}", r"\end{table}"]) + "\n"
DOCUMENT = (PREAMBLE + r"\usepackage{pifont}" + "\n" + r"\usepackage{url}" + "\n" + r"\begin{document}" + "\n" + TABLE
            + "\n".join([r"\section{Methods}", r"\input{methodology.tex}", r"\bibliographystyle{plain}",
                         r"\bibliography{references}", r"\end{document}"]) + "\n")

pytestmark = pytest.mark.skipif(shutil.which("pdflatex") is None or shutil.which("pdftoppm") is None,
                                reason="TeX Live and poppler-utils are not installed "
                                       "(apt-get install texlive-latex-base texlive-latex-extra poppler-utils)")


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.parametrize("marks", ["text", "ding"])
def test_the_table_and_the_methods_compile_and_render(marks: str, tmp_path: Path) -> None:
    rows, environment = read_json(STORED / "benchmark_results.json")
    first = rows[0]
    # every cell form the table writes: OOM, a memory run without a figure, a calibrated number,
    # a label with LaTeX's specials
    rows += [with_columns(first, model_label="odd_#1&{x}%.pt", verdict=Verdict.OOM, peak_rss_mb=None),
             with_columns(first, model_label="odd_#1&{x}%.pt", profile_id="p2", verdict=Verdict.ERROR, peak_rss_mb=None,
                     memory_error="converter refused it"),
             with_columns(first, model_label="odd_#1&{x}%.pt", profile_id="p3",
                     latency_calibrations=("x0.9 from 1 measurement",))]
    (tmp_path / "benchmark_results.tex").write_text(latex_table(rows, marks=marks))
    write_paper_kit(rows, environment, tmp_path)
    (tmp_path / "paper.tex").write_text(DOCUMENT)
    _run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], tmp_path)
    _run(["bibtex", "paper"], tmp_path)
    for _ in range(2):
        log = _run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], tmp_path)
    full = (tmp_path / "paper.log").read_text(errors="replace")
    assert "Undefined control sequence" not in full and "! " not in full
    assert not re.search(r"Citation `[^']+' .*undefined", full), "a \\cite without its bib entry"
    assert "There were undefined references" not in log
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \((\d+\.\d+)pt", full)]
    assert max(overfull, default=0.0) < 1.0, f"wider than article's text: {overfull}"  # it pastes as it is
    bbl = (tmp_path / "paper.bbl").read_text()
    assert "QEMU" in bbl and "lodevem" in bbl  # the armsim cells' emulator and lodevem itself
    _run(["pdftoppm", "-png", "-r", "70", "paper.pdf", "page"], tmp_path)  # every page, for a look
    pages = sorted(tmp_path.glob("page-*.png"))
    assert pages and all(page.stat().st_size > 10_000 for page in pages)


TABLE_ONLY = PREAMBLE + r"\begin{document}" + "\n" + TABLE + r"\end{document}" + "\n"


def _compression_rows() -> list:
    """A compression paper's run: 10 variants (2 networks x 5 levels) x the stored run's 6 phones,
    with top-1 and drops against fp32."""
    rows, _ = read_json(STORED / "benchmark_results.json")
    base = [r for r in rows if r.model.label == rows[0].model.label]
    out = []
    for net in ("net_a.pt", "net_b.pt"):
        for i, level in enumerate(("fp32", "fp16", "int8", "int8-static", "pruned")):
            for row in base:
                out.append(with_columns(row, model_label=f"{net}@{level}" if level != "fp32" else net,
                                   level=None if level == "fp32" else level, accuracy_top1_pct=91.2 - i,
                                   accuracy_drop_pts=None if level == "fp32" else float(i), accuracy_samples=450,
                                   verdict=Verdict.TIGHT if level == "fp16" else row.verdict))
    return out


@pytest.mark.parametrize("layout", ["auto", "long"])
def test_a_compression_table_compiles_as_a_matrix_that_fits_a_page(layout: str, tmp_path: Path) -> None:
    """Issue 46: 10 variants x 6 phones is 70 lines as the long table, past a page (a float too
    large); ``auto`` writes the variant x device matrix instead, which fits the column and the
    page; drops have real minus signs; both layouts compile with pdflatex -no-shell-escape."""
    rows = _compression_rows()
    assert len(rows) == 60
    tex = latex_table(rows, layout=layout)
    (tmp_path / "benchmark_results.tex").write_text(tex)
    (tmp_path / "paper.tex").write_text(TABLE_ONLY)
    _run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], tmp_path)
    log = (tmp_path / "paper.log").read_text(errors="replace")
    assert "! " not in log and "Undefined control sequence" not in log
    assert "91.2" in tex and "$-$1.0" in tex and "(-1.0)" not in tex  # a minus sign, not a hyphen
    assert not re.search(r"(?<![{-])--[a-z]", tex)  # no option names typeset as en dashes
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \((\d+\.\d+)pt", log)]
    if layout == "auto":
        assert "a 10 x 6 matrix" in tex and r"\textit{" in tex  # the tight fp16 cells
        assert "Float too large" not in log, "the matrix must fit one page"
        assert max(overfull, default=0.0) < 1.0, f"wider than article's text: {overfull}"
    else:
        assert "matrix" not in tex.splitlines()[0]
        assert "Float too large" in log  # why the matrix is chosen: the long table passes the page
