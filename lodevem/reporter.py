"""Everything lodevem shows or writes: console tables, CSV, JSON, LaTeX and plots.

The reporter formats records it is given; it never measures or predicts anything itself. One
rule runs through every output: a latency is a *prediction* and says which predictor made it
(a mark per source, explained in a caption or comment), while peak RAM is a *measurement* and is
shown only when the model actually ran under the device's limit. A model that cannot load on a
device has no usable latency there, so the table shows ``OOM`` in the latency cell; the CSV and
JSON still keep the predicted number for anyone who wants it.
"""

from __future__ import annotations

import re

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

from rich.table import Table
from rich.text import Text

from . import __version__
from .profiles import TIERS, Profile, tier_rank
from .report.cells import (
    OTHER_MARK,
    VERDICT_WORDS,
    Cells,
    SourceNote,
    cells,
    group_by_model,
    latency_mark,
    ordered_devices,
    source_kind,
    source_notes,
    threads_text,
)
from .results import RESULTS_SCHEMA_VERSION, VERDICTS, PairResult, write_atomic

CSV_NAME = "benchmark_results.csv"
JSON_NAME = "benchmark_results.json"
TEX_NAME = "benchmark_results.tex"

_LATEX_MARKS = {"*": r"\textsuperscript{*}", "\u2020": r"\textsuperscript{\dag}",
                OTHER_MARK: r"\textsuperscript{\ddag}"}
_FITS_STYLE = {True: "green", False: "red", None: "yellow"}
_FITS_SYMBOL = {True: "\u2713", False: "\u2717", None: "?"}
_LATEX_FITS = {"text": {True: "yes", False: "no", None: "?"},
               "ding": {True: r"\ding{51}", False: r"\ding{55}", None: "?"}}


# --------------------------------------------------------------------------- console


def results_table(rows: Sequence[PairResult],
                  profiles: Optional[Sequence[Profile]] = None) -> Table:
    """The results table of ``lodevem start``, one section per model, devices in tier order.

    User-supplied strings (file names, labels) are passed as ``Text`` so that a ``[`` in a file
    name is never read as rich markup.
    """
    groups = group_by_model(rows, profiles)
    n_devices = len(ordered_devices(rows, profiles))
    table = Table(title=f"lodevem results: {len(groups)} model(s) \u00d7 {n_devices} device profile(s)",
                  title_justify="left", caption=_table_caption(rows), caption_justify="left")
    table.add_column("Model File", no_wrap=True)
    table.add_column("Device Profile")
    table.add_column("Latency (ms)", justify="right", no_wrap=True)
    table.add_column("Peak RAM (MB)", justify="right", no_wrap=True)
    table.add_column("Fits in RAM", justify="center", no_wrap=True)
    for label, group in groups.items():
        for i, row in enumerate(group):
            c = cells(row)
            style = _FITS_STYLE[c.fits]
            failed = not c.is_number and c.latency != "n/a"
            latency = Text(c.latency + c.mark, style=style if failed else "")
            ram = Text(c.peak_ram, style="") if c.peak_ram else Text("\u2014", style=style if failed else "dim")
            table.add_row(Text(label if i == 0 else "", style="bold"), Text(row.profile_label),
                          latency, ram, Text(_FITS_SYMBOL[c.fits], style=f"bold {style}"),
                          end_section=i == len(group) - 1)
    return table


def _table_caption(rows: Sequence[PairResult]) -> Text:
    lines = [f"Latency: predicted for {threads_text(rows)} on the device's fastest core, "
             "not measured on the phone."]
    lines += [f"  {note.text()}" for note in source_notes(rows)]
    # "docker cgroup v1 memory+swap=512MB" -> "docker cgroup v1 memory+swap": the limit is the row's RAM.
    backends = sorted({re.sub(r"=\d+\s*MB", "", r.limit_enforcement) or r.backend for r in rows})
    lines.append("Peak RAM: peak RSS (VmHWM) measured with the device's RAM as the limit "
                 f"({'; '.join(backends)}); OOM = killed at the limit.")
    return Text("\n".join(lines), style="dim")


def model_summaries(rows: Sequence[PairResult]) -> list[str]:
    """One plain-text line per model: how many devices it fits and the most constrained tier.

    "Lowest tier" is the least capable tier (tier3 < tier2 < tier1) holding at least one device
    the model fits on: the answer to "how cheap a phone can run this?". Lines carry no rich
    markup, so print them with ``markup=False`` (file names may contain brackets).
    """
    lines = []
    for label, group in group_by_model(rows).items():
        fitting = [r for r in group if r.fits]
        failed = [r for r in group if r.fits is False]
        undecided = [r for r in group if r.fits is None]
        if not fitting:
            text = f"{label}: fits nowhere (0 of {len(group)} devices: {_verdict_counts(group)})"
        else:
            if len(fitting) < len(group):
                head = f"fits on {len(fitting)} of {len(group)} devices"
            else:
                head = "fits on the 1 device" if len(group) == 1 else f"fits on all {len(group)} devices"
            lowest = max({r.tier for r in fitting}, key=tier_rank)
            text = f"{label}: {head}; lowest tier it runs on: {lowest} = {TIERS.get(lowest, lowest)}"
            peaks = [r.peak_rss_mb for r in fitting if r.peak_rss_mb is not None]
            if peaks:
                text += f"; peak RAM {max(peaks):,.0f} MB"
            shown = [(r.latency_ms, latency_mark(r.latency_source)) for r in fitting if cells(r).is_number]
            if shown:
                lo, hi = min(shown), max(shown)
                span = f"{lo[0]:,.1f}{lo[1]}" + (f"\u2013{hi[0]:,.1f}{hi[1]}" if hi != lo else "")
                text += f"; predicted latency {span} ms"
            if failed:
                text += f"; does not fit: {_verdict_counts(failed)}"
            if undecided:
                text += f"; undecided: {_verdict_counts(undecided)}"
        floors = [r.min_ram_mb for r in group if r.min_ram_mb is not None]
        if floors:
            text += f"; minimum RAM {max(floors):,.0f} MB"
        missing = [r.latency_note for r in group if r.latency_ms is None and r.latency_note]
        if missing:
            text += f"; no latency on {len(missing)} device(s): {missing[0][:160]}"
        lines.append(text)
    unstable = [r for r in rows if r.host_latency_unstable]  # pyperf's rule, see runner.unstable
    if unstable:
        lines.append(f"note: host-CPU timings (CSV host_latency_*) were unstable for {len(unstable)} of "
                     f"{len(rows)} pairs (std >= 10 % of the mean); they are informational, not the "
                     "device's latency")
    return lines


def _verdict_counts(rows: Sequence[PairResult]) -> str:
    counts: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: VERDICTS.index(r.verdict) if r.verdict in VERDICTS else 99):
        word = VERDICT_WORDS.get(row.verdict, row.verdict.replace("_", " "))
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{word} on {n}" for word, n in counts.items())


def csv_columns() -> list[str]:
    """Every ``PairResult`` field in declaration order, then the derived ``fits``."""
    return [f.name for f in fields(PairResult)] + ["fits"]


def write_csv(rows: Sequence[PairResult], path: Path) -> Path:
    """One line per (model x device) pair with every field; empty cell = no value.

    The csv module rather than pandas: a pandas column with a missing value turns integers
    such as ``params`` into floats (``3504872.0``), which a reader then has to undo.
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.to_dict().items()})
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


def write_json(rows: Sequence[PairResult], manifest: Mapping[str, Any], path: Path) -> Path:
    """Rows plus the environment they came from, like optimum-benchmark's ``benchmark.json``.

    ``schema_version`` lets a later lodevem refuse or convert an old file instead of misreading
    it; ``read_json`` is the matching reader.
    """
    payload = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "lodevem_version": __version__,
        "environment": dict(manifest),
        "summary": model_summaries(rows),
        "results": [r.to_dict() for r in rows],
    }
    text = json.dumps(_json_safe(payload), indent=2, ensure_ascii=False, allow_nan=False, default=str)
    write_atomic(Path(path), text + "\n")
    return Path(path)


def read_json(path: Path) -> tuple[list[PairResult], dict[str, Any]]:
    """Rows and environment back from ``benchmark_results.json`` (to re-render or compare runs)."""
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    version = payload.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION:
        raise ValueError(f"{path}: results schema_version {version!r}, this lodevem reads "
                         f"{RESULTS_SCHEMA_VERSION}")
    return [PairResult.from_dict(r) for r in payload["results"]], payload.get("environment", {})


_LATEX_SPECIAL = str.maketrans({
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}",
})


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in one pass (``cocoa_fp32.pt`` -> ``cocoa\\_fp32.pt``)."""
    return text.translate(_LATEX_SPECIAL)


def latex_table(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None,
                marks: str = "text", notes: bool = False) -> str:
    """The text of ``benchmark_results.tex``; see ``write_latex``."""
    if marks not in _LATEX_FITS:
        raise ValueError(f"marks must be one of {', '.join(_LATEX_FITS)}, got {marks!r}")
    legend = source_notes(rows)
    out = [f"% lodevem {__version__}: {len(rows)} (model x device) pairs. Generated; re-run, do not edit.",
           r"% requires \usepackage{booktabs}"]
    if marks == "ding":
        out.append(r"% requires \usepackage{pifont}  (\ding{51} = fits, \ding{55} = does not fit)")
    out.append(f"% Latency: predicted for {threads_text(rows)} on the device's fastest core; "
               "peak RAM: measured peak RSS under the device's RAM limit; OOM = killed at the limit.")
    out += [f"% {n.text()}".replace("\u2020", r"\dag").replace(OTHER_MARK, r"\ddag") for n in legend]
    out += [r"\begin{tabular}{llcrrc}", r"\toprule",
            r"Model & Device & Tier & Latency (ms) & Peak RAM (MB) & Fits \\", r"\midrule"]
    fits_text = _LATEX_FITS[marks]
    for g, (label, group) in enumerate(group_by_model(rows, profiles).items()):
        if g:
            out.append(r"\midrule")
        for i, row in enumerate(group):
            c = cells(row)
            latency = latex_escape(c.latency) + _LATEX_MARKS.get(c.mark, "")
            cols = [latex_escape(label) if i == 0 else "", latex_escape(row.profile_label),
                    latex_escape(row.tier.removeprefix("tier")), latency, c.peak_ram or "--",
                    fits_text[c.fits]]
            out.append(" & ".join(cols) + r" \\")
    out.append(r"\bottomrule")
    if notes and legend:
        for n in legend:  # one line per note: an ``l`` cell never wraps
            text = _LATEX_MARKS[n.mark] + " " + latex_escape(n.text()[2:])
            out.append(r"\multicolumn{6}{@{}l}{\footnotesize " + text + r"} \\")
    out.append(r"\end{tabular}")
    return "\n".join(out) + "\n"


def write_latex(rows: Sequence[PairResult], path: Path, profiles: Optional[Sequence[Profile]] = None,
                marks: str = "text", notes: bool = False) -> Path:
    """A booktabs ``tabular`` for ``\\input{}`` inside the user's own ``table`` environment.

    Columns: Model, Device, Tier, Latency (ms), Peak RAM (MB), Fits; one row per pair, the model
    name on its first row only, a ``\\midrule`` between models. Needs ``\\usepackage{booktabs}``.
    ``marks="text"`` (default) writes ``yes``/``no``; ``marks="ding"`` writes ``\\ding{51}`` /
    ``\\ding{55}`` and needs ``\\usepackage{pifont}``. A model that cannot load shows ``OOM`` and
    ``--``. Latency marks (``*`` estimator, ``\\dag`` nn-Meter) are explained in the comment at the
    top, for the user's caption; ``notes=True`` adds them as a footnote row under the table.
    The table is written by hand rather than with ``Styler.to_latex``: Styler cannot put a
    booktabs ``\\midrule`` between row groups (only ``\\cline``), and the model grouping matters.
    """
    write_atomic(Path(path), latex_table(rows, profiles, marks=marks, notes=notes))
    return Path(path)


def write_all(rows: Sequence[PairResult], profiles: Sequence[Profile], manifest: Mapping[str, Any],
              out_dir: Path, plots: bool = True, latex_marks: str = "text") -> list[Path]:
    """Write CSV, JSON, LaTeX and (unless ``plots=False``) the figures; return every path written.

    matplotlib is imported only here, so ``lodevem list`` and table-only uses stay fast.
    """
    out_dir = Path(out_dir)
    paths = [write_csv(rows, out_dir / CSV_NAME),
             write_json(rows, manifest, out_dir / JSON_NAME),
             write_latex(rows, out_dir / TEX_NAME, profiles, marks=latex_marks)]
    if plots and rows:
        from .report import plots as figures

        paths += figures.latency_heatmap(rows, profiles, out_dir)
        paths += figures.latency_vs_ram(rows, profiles, out_dir)
        paths += figures.min_ram_bar(rows, out_dir)
    return paths


def profiles_table(profiles: Sequence[Profile]) -> Table:
    """The ``lodevem list`` table: one row per device profile."""
    tiers = ", ".join(f"{t} = {d}" for t, d in TIERS.items())
    table = Table(title=f"lodevem device profiles ({len(profiles)})", title_justify="left",
                  caption=tiers, caption_justify="left")
    for column, justify in (("ID", "left"), ("Device", "left"), ("Chipset", "left"),
                            ("Cores", "left"), ("Clock", "right"), ("RAM", "right"),
                            ("Tier", "left")):
        table.add_column(column, justify=justify, no_wrap=column in ("ID", "RAM", "Tier"))
    for p in profiles:
        table.add_row(p.id, p.label, p.chipset, p.cores_label, p.clock_label, p.ram_label, p.tier)
    return table


def zoo_table(summaries: Sequence["ZooSummary"]) -> Table:  # noqa: F821 - lodevem.zoo imports torch
    """The ``lodevem zoo`` table: reference models with parameters and MFLOPs."""
    table = Table(title="lodevem model zoo (architectures in code, seeded random weights)",
                  title_justify="left")
    for column, justify in (("Name", "left"), ("Params", "right"), ("MFLOPs", "right"),
                            ("Input", "left"), ("Description", "left")):
        table.add_column(column, justify=justify, no_wrap=column != "Description")
    for s in summaries:
        table.add_row(s.name, f"{s.params:,}", f"{s.mflops:,.0f}",
                      "x".join(map(str, s.input_shape)), s.description)
    return table
