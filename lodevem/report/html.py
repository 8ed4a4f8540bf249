"""``report.html``: one file a collaborator opens in a browser, offline, with everything in it.

Why one self-contained file: results are shared by mail and chat with people who have no Python
and no lodevem; a page that fetches a script or a font from a CDN breaks behind a firewall, on a
plane, or in ten years. So the table, the figures (PNG as ``data:`` URIs), the methods, the
manifest, the style and the script are all inline, and the page's Content-Security-Policy
forbids every network load (``default-src 'none'``): a reference to anything outside would not
load even if one slipped in.

The table has one row per CSV row, every cell written in the HTML (readable without script);
the inline script only sorts (click a header: numbers as numbers, empty cells last) and
filters (a text box and a verdict choice). User strings (file names, labels, notes) are
escaped; nothing from a row is ever executed. Built from the rows and manifest a results file
holds, so ``lodevem report RESULTS_DIR`` rebuilds it from ``benchmark_results.json`` alone.
"""

from __future__ import annotations

import base64
import html
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

from .. import safe_io
from ..errors import InputError
from ..latency.described import describe_kind
from ..results import PairResult
from ..results.failures import failures
from ..store.files import write_atomic
from ..version import __version__
from .cells import ACCURACY, HEATMAP, MIN_RAM, SCATTER, accuracy_text, cells, verdict_word
from .layers import layers_html
from .legend import BAND_DEFINITION, mark_notes, row_cell
from .manifest import Manifest, ManifestLike
from .methodology import run_facts, sections
from .paperkit import render_html, short_references
from .shared import shared_manifest, shared_rows

__all__ = ["HTML_NAME", "rebuild", "report_html", "write_report"]

HTML_NAME = "report.html"
_FIGURES = ((HEATMAP, "Predicted latency per device"), (SCATTER, "Latency vs peak RAM"),
            (MIN_RAM, "Minimum RAM per model"), (ACCURACY, "Accuracy trade-off"))
_MAX_FIGURE_BYTES = 8 * 2**20  # a PNG larger than this is not one lodevem drew: left out
_FIGURE = safe_io.Kind("figure", _MAX_FIGURE_BYTES)


def _e(value: Any) -> str:
    """Escaped for HTML; a control or bidi character (ESC, a right-to-left override) shown as its escape."""
    return html.escape("" if value is None else safe_io.printable(str(value), None), quote=True)


def _number(value: Optional[float], digits: int = 1) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"  # never "nan"/"inf"


# (header, cell text, sort key: a number, or None to sort by the text)
Column = tuple[str, Callable[[PairResult], str], Callable[[PairResult], Optional[float]]]


def _why(row: PairResult, figure: str) -> str:
    """A failed or missing cell's one-line reason, shown under it (``results.failures``)."""
    reasons = [f.reason for f in failures(row) if f.figure == figure]
    return f'<div class="why">{_e(reasons[0])}</div>' if reasons else ""


def _latency(row: PairResult) -> str:
    c = cells(row)
    if not c.is_number:
        return _e(c.latency) + _why(row, "latency")
    band = (f' <span class="band">({_number(row.latency.band.low_ms)}\u2013{_number(row.latency.band.high_ms)})</span>'
            if row.latency.band.low_ms is not None and row.latency.band.high_ms is not None else "")
    return f"{_e(c.latency)}<sup>{_e(c.mark)}</sup>{band}"


COLUMNS: tuple[Column, ...] = (
    ("Model", lambda r: _e(r.model.label), lambda r: None),
    ("Device", lambda r: _e(r.device.label), lambda r: None),
    ("Tier", lambda r: _e(r.device.tier), lambda r: None),
    ("Latency (ms)", _latency, lambda r: r.latency.ms if cells(r).is_number else None),
    ("Held-out error (%)", lambda r: _number(r.latency.band.held_out_pct), lambda r: r.latency.band.held_out_pct),
    ("Predictor", lambda r: _e(describe_kind(r.latency.kind).title if r.latency.kind else ""), lambda r: None),
    ("Peak RAM (MB)", lambda r: _e(cells(r).peak_ram or "\u2014") + _why(r, "peak RAM"),
     lambda r: r.memory.peak_rss_mb if r.ran else None),
    ("Fits", lambda r: _e(verdict_word(r)), lambda r: None),
    ("App budget (MB)", lambda r: _e(r.device.app_budget_mb if r.device.app_budget_mb is not None else "\u2014"),
     lambda r: r.device.app_budget_mb),
    ("Runtime", lambda r: _e(r.memory.runtime_shown), lambda r: None),
)
_TOP1: Column = ("Top-1 (%)", lambda r: _e(accuracy_text(r)) + _why(r, "top-1"), lambda r: r.accuracy.top1_pct)


def _table(rows: Sequence[PairResult]) -> str:
    columns = COLUMNS + ((_TOP1,) if any(r.accuracy.top1_pct is not None or _why(r, "top-1") for r in rows) else ())
    head = "".join(f'<th data-col="{i}" data-numeric="{int(any(key(r) is not None for r in rows))}" '
                   f'tabindex="0" aria-sort="none">{_e(name)}</th>' for i, (name, _, key) in enumerate(columns))
    body = []
    for n, row in enumerate(rows):  # the CSV's order: a reader can find a row in both
        tds = []
        for _, text, key in columns:
            value = key(row)
            sort = "" if value is None or not math.isfinite(value) else f' data-sort="{float(value):.6g}"'
            tds.append(f"<td{sort}>{text(row)}</td>")
        body.append(f'<tr data-verdict="{_e(row.verdict)}" data-index="{n}">{"".join(tds)}</tr>')
    verdicts = sorted({str(r.verdict) for r in rows})
    choice = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in verdicts)
    return (f'<div class="controls"><label>Filter <input id="filter" type="search" placeholder="model, device, '
            f'predictor..."></label> <label>Verdict <select id="verdict"><option value="">any</option>{choice}'
            f'</select></label> <span id="count">{len(rows)} of {len(rows)} rows</span></div>'
            f'<table id="results"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')


def _legend(rows: Sequence[PairResult]) -> str:
    notes = "".join(f"<li><b>{_e(n.mark)}</b> {_e(n.text()[len(n.mark) + 1:])}</li>"
                    for n in mark_notes(row_cell(r) for r in rows))
    return f"<p>{_e(BAND_DEFINITION)}.</p><ul>{notes}</ul>"


def _figures(out_dir: Path) -> str:
    parts = []
    for stem, title in _FIGURES:
        path = Path(out_dir) / f"{stem}.png"
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _MAX_FIGURE_BYTES:
            continue
        try:
            data = base64.b64encode(safe_io.read_bytes(path, _FIGURE, follow=False)).decode("ascii")
        except (OSError, safe_io.UnsafeInput):
            continue
        parts.append(f'<figure><img alt="{_e(title)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{_e(title)} ({_e(path.name)})</figcaption></figure>")
    return "".join(parts) or "<p>No figure was drawn for this run.</p>"


def _methods(rows: Sequence[PairResult], manifest: ManifestLike) -> str:
    facts = run_facts(rows, manifest)
    out = []
    for section in sections(facts):
        out.append(f"<h3>{_e(section.title)}</h3>")
        out += [f"<p>{render_html(text)}</p>" for text in section.paragraphs]
        if section.items:
            out.append("<ul>" + "".join(f"<li>{render_html(item)}</li>" for item in section.items) + "</ul>")
        out += [f"<p>{render_html(text)}</p>" for text in section.after]
    out.append("<h3>References</h3><ol class=\"refs\">" + "".join(
        f'<li id="ref-{_e(key)}">[{_e(key)}] {_e(text)}</li>' for key, text in short_references(facts)) + "</ol>")
    return "".join(out)


def _manifest(manifest: ManifestLike) -> str:
    env = Manifest.coerce(manifest)
    facts = (("Command", env.command), ("Created (UTC)", env.created_utc),
             ("lodevem", f"{env.lodevem.version} {env.lodevem.git_commit or ''}"
                         + (" (local changes)" if env.lodevem.git_dirty else "")),
             ("Host", f"{env.host.machine or ''} {env.host.cpu_model or ''}, cgroup {env.host.cgroup_version or '?'}"),
             ("Backend", f"{env.backend.name} {env.backend.docker_server_version or ''}"),
             ("Images", ", ".join(f"{tag} {ident.removeprefix('docker:')[:19]}"
                                  for tag, ident in sorted(env.backend.images.items()))))
    table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts if v and str(v).strip())
    full = safe_io.json_text(env.to_dict(), indent=1, ensure_ascii=False, default=str)
    return (f'<table class="facts">{table}</table><details><summary>The whole manifest (JSON)</summary>'
            f"<pre>{_e(full)}</pre></details>")


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;margin-top:2em}
table#results{border-collapse:collapse;width:100%}
#results th,#results td{padding:.25em .5em;border-bottom:1px solid #eee}
#results th{cursor:pointer;background:#f4f4f4;text-align:left;white-space:nowrap;position:sticky;top:0}
#results th[aria-sort=ascending]::after{content:" \\25B2"}#results th[aria-sort=descending]::after{content:" \\25BC"}
#results td[data-sort]{text-align:right;white-space:nowrap}.band{color:#777;font-size:.9em}
.why{color:#8a4b00;font-size:.85em;white-space:normal;max-width:28em}
tr[data-verdict=oom] td,tr[data-verdict=thrashing] td,tr[data-verdict=timeout] td{background:#fdeaea}
tr[data-verdict=tight] td{background:#fff6dd}
.controls{margin:.5em 0}.controls input{width:18em}figure{margin:1em 0}img{max-width:100%}
table.facts th{text-align:left;padding-right:1em;vertical-align:top}pre{white-space:pre-wrap;font-size:12px}
code{background:#f4f4f4;padding:0 .2em}
"""

_SCRIPT = """
(function(){
  var table=document.getElementById('results'); if(!table){return;}
  var body=table.tBodies[0], heads=table.tHead.rows[0].cells, rows=[].slice.call(body.rows);
  var filter=document.getElementById('filter'), verdict=document.getElementById('verdict');
  function key(row,col,numeric){var td=row.cells[col];
    if(numeric){var v=td.getAttribute('data-sort');return v===null?null:parseFloat(v);}
    return td.textContent.toLowerCase();}
  function sort(col){var th=heads[col],numeric=th.getAttribute('data-numeric')==='1';
    var up=th.getAttribute('aria-sort')!=='ascending';
    for(var i=0;i<heads.length;i++){heads[i].setAttribute('aria-sort','none');}
    th.setAttribute('aria-sort',up?'ascending':'descending');
    rows.sort(function(a,b){var x=key(a,col,numeric),y=key(b,col,numeric);
      if(x===y){return a.getAttribute('data-index')-b.getAttribute('data-index');}
      if(x===null){return 1;} if(y===null){return -1;}
      return (x<y?-1:1)*(up?1:-1);});
    rows.forEach(function(r){body.appendChild(r);});}
  function apply(){var q=filter.value.toLowerCase(),v=verdict.value,shown=0;
    rows.forEach(function(r){var ok=(!q||r.textContent.toLowerCase().indexOf(q)>=0)&&
      (!v||r.getAttribute('data-verdict')===v);r.hidden=!ok;if(ok){shown++;}});
    document.getElementById('count').textContent=shown+' of '+rows.length+' rows';}
  [].forEach.call(heads,function(th,i){th.addEventListener('click',function(){sort(i);});
    th.addEventListener('keydown',function(e){if(e.key==='Enter'){sort(i);}});});
  filter.addEventListener('input',apply); verdict.addEventListener('change',apply);
})();
"""
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def report_html(rows: Sequence[PairResult], manifest: ManifestLike, out_dir: Path) -> str:
    """The page (see the module docstring); figures are read from ``out_dir`` when drawn."""
    env = Manifest.coerce(manifest)
    title = f"lodevem results: {len(rows)} rows"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{_e(title)}</h1><p>Made by lodevem {_e(env.lodevem.version or __version__)} on "
            f"{_e(env.created_utc or 'an unrecorded date')}: latency is predicted for the phone's CPU, never "
            "measured on it; peak RAM is measured in a container limited to the phone's RAM. Every row of "
            "<code>benchmark_results.csv</code> is one row here; click a column to sort it.</p>"
            f"<h2>Results</h2>{_table(rows)}<h2>What the latency figures are</h2>{_legend(rows)}"
            f"<h2>Figures</h2>{_figures(out_dir)}<h2>Where the time goes</h2>{layers_html(out_dir)}"
            f"<h2>Methods</h2>{_methods(rows, manifest)}"
            f"<h2>Manifest</h2>{_manifest(manifest)}<script>{_SCRIPT}</script></body></html>\n")


def write_report(rows: Sequence[PairResult], manifest: ManifestLike, out_dir: Path) -> Path:
    """Write ``report.html`` into ``out_dir`` (beside the CSV and the figures it embeds)."""
    if not rows:
        raise InputError(f"{out_dir}: no result rows to report")
    path = Path(out_dir) / HTML_NAME
    # a page meant to be sent: no path of the user's machine (report.shared)
    write_atomic(path, report_html(shared_rows(rows, out_dir), shared_manifest(manifest, out_dir), out_dir))
    return path


def rebuild(results_dir: Path) -> Path:
    """``lodevem report RESULTS_DIR``: ``report.html`` again from the folder's
    ``benchmark_results.json`` and the figures beside it (an ``InputError`` when there is none)."""
    from .files import JSON_NAME, read_json

    folder = Path(results_dir)
    source = folder / JSON_NAME
    if not os.path.lexists(source):
        raise InputError(f"{folder}: no {JSON_NAME} (expected the --output folder of a `lodevem start` run)")
    rows, environment = read_json(source)  # no link followed, typed: one line per problem
    return write_report(rows, environment, folder)
