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
from dataclasses import replace
from pathlib import Path

import pytest

from lodevem.report.files import latex_table, read_json
from lodevem.report.paperkit import write_paper_kit
from lodevem.wire.verdict import Verdict

STORED = Path(__file__).parent / "data" / "report_run"
DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{booktabs}
\usepackage{pifont}
\usepackage{url}
\begin{document}
\begin{table}[t]
\centering
\input{benchmark_results.tex}
\caption{Predicted latency and measured peak RAM.}
\end{table}
\section{Methods}
\input{methodology.tex}
\bibliographystyle{plain}
\bibliography{references}
\end{document}
"""

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
    rows += [replace(first, model_label="odd_#1&{x}%.pt", verdict=Verdict.OOM, peak_rss_mb=None),
             replace(first, model_label="odd_#1&{x}%.pt", profile_id="p2", verdict=Verdict.ERROR, peak_rss_mb=None,
                     memory_error="converter refused it"),
             replace(first, model_label="odd_#1&{x}%.pt", profile_id="p3",
                     latency_calibrations=("x0.9 from 1 measurement",))]
    (tmp_path / "benchmark_results.tex").write_text(latex_table(rows, marks=marks))
    write_paper_kit(rows, environment, tmp_path)
    (tmp_path / "paper.tex").write_text(DOCUMENT)
    _run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], tmp_path)
    _run(["bibtex", "paper"], tmp_path)
    for _ in range(2):
        log = _run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], tmp_path)
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
