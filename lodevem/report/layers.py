"""Where the time goes, shown: ``predict --layers`` tables, ``layers.csv`` and report.html's section.

Why its own module: the summary itself is ``latency.layers``'s (pure); here it becomes a terminal
table (one per model and profile, shaped like LiteRT's ``benchmark_model --enable_op_profiling``
"Summary by node type"), a CSV beside the results, and an HTML section read back from that CSV
(a results folder is input like any other: bounded read, every cell escaped on output).
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from rich.table import Table

from ..latency.layers import LAYER_COLUMNS, NodeTypeRow, layers_csv_text, summarize_layers
from ..safe_io import RESULTS_FILE, UnsafeInput, read_text
from ..store.files import write_atomic

__all__ = ["LAYERS_NAME", "cell_layers", "layers_html", "layers_tables", "write_layers_csv"]

LAYERS_NAME = "layers.csv"
_MAX_HTML_CELLS = 60  # (model, profile) sections shown in report.html; the CSV has every one


def cell_layers(model: str, profile: str, latency: Any) -> Optional[tuple[str, str, str, int, tuple[NodeTypeRow, ...]]]:
    """One cell's summary from its ``LatencyPrediction`` (None: no number or no kernels kept)."""
    if latency is None or latency.latency_ms is None or not latency.kernels:
        return None
    return (model, profile, latency.runtime or "", int(latency.threads or 1),
            summarize_layers(latency.kernels, latency.latency_ms))


def _items_cells(items: Iterable[Any]) -> list[tuple[str, str, str, int, tuple[NodeTypeRow, ...]]]:
    out = []
    for item in items:
        cell = cell_layers(item.model.label, item.profile.id, item.latency)
        if cell is not None:
            out.append(cell)
    return out


def layers_tables(items: Sequence[Any]) -> list[Table]:
    """``predict --layers``: one "Summary by node type" table per (model, profile) cell."""
    tables = []
    for model, profile, runtime, threads, rows in _items_cells(items):
        total = sum(r.ms for r in rows)
        table = Table(title=f"Summary by node type: {model} on {profile} ({runtime}, {threads} thread(s), "
                            f"{total:,.2f} ms predicted)", title_justify="left")
        for name, justify in (("node type", "left"), ("count", "right"), ("avg ms", "right"), ("%", "right"),
                              ("cdf %", "right"), ("of it DRAM ms", "right")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for r in rows:
            table.add_row(r.node_type, str(r.count), f"{r.ms:.3f}", f"{r.pct:.2f}%", f"{r.cum_pct:.2f}%",
                          "" if r.dram_ms is None else f"{r.dram_ms:.3f}")
        tables.append(table)
    return tables


def write_layers_csv(path: Path, cells: Iterable[tuple[str, str, Any]]) -> Optional[Path]:
    """Write ``layers.csv`` for ``(model, profile_id, LatencyPrediction)`` cells; None (nothing
    written) when no cell kept its kernels."""
    rows = [c for c in (cell_layers(m, p, lat) for m, p, lat in cells) if c is not None]
    if not rows:
        return None
    write_atomic(Path(path), layers_csv_text(rows))
    return Path(path)


def _read(out_dir: Path) -> Optional[list[dict[str, str]]]:
    path = Path(out_dir) / LAYERS_NAME
    if not path.is_file():
        return None
    try:
        text = read_text(path, RESULTS_FILE)
    except (OSError, UnsafeInput):
        return None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != LAYER_COLUMNS:
        return None
    return list(reader)


def layers_html(out_dir: Path) -> str:
    """report.html's "Where the time goes" section from ``layers.csv`` in ``out_dir`` (a paragraph
    saying why not, when the run kept no per-layer figures)."""
    rows = _read(out_dir)
    if not rows:
        return ("<p>No per-layer figures in this folder (<code>layers.csv</code>): they are written for the "
                "cells the estimator predicted.</p>")
    groups: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["profile_id"], r["runtime"], r["threads"]), []).append(r)
    e = html.escape
    parts = ["<p>Each predicted latency split by node type, in the shape of LiteRT's <code>benchmark_model "
             "--enable_op_profiling</code> \"Summary by node type\" (predicted, not measured; DRAM ms: the part the "
             "SoC's memory bandwidth took). Every cell is in <code>layers.csv</code>.</p>"]
    for (model, profile, runtime, threads), group in list(groups.items())[:_MAX_HTML_CELLS]:
        body = "".join(f"<tr><td>{e(r['node_type'])}</td><td>{e(r['count'])}</td><td>{e(r['ms'])}</td>"
                       f"<td>{e(r['pct'])}</td><td>{e(r['cum_pct'])}</td><td>{e(r['dram_ms'])}</td></tr>"
                       for r in group)
        parts.append(f"<details><summary>{e(model)} on {e(profile)} ({e(runtime)}, {e(threads)} thread(s))</summary>"
                     "<table><thead><tr><th>node type</th><th>count</th><th>ms</th><th>%</th><th>cdf %</th>"
                     f"<th>DRAM ms</th></tr></thead><tbody>{body}</tbody></table></details>")
    if len(groups) > _MAX_HTML_CELLS:
        parts.append(f"<p>{len(groups) - _MAX_HTML_CELLS} more cells in <code>layers.csv</code>.</p>")
    return "".join(parts)
