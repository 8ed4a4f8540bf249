"""The console tables and summary lines: what ``lodevem start``, ``list`` and ``zoo`` print.

Everything here returns a renderable (a ``layout.FittedTable``, which picks its columns at the
width of the console printing it, or a rich ``Table``) or plain strings and prints nothing
itself, so ``cli.py`` decides where output goes. A table's columns are declared once
(``RESULT_COLUMNS``, ``LATENCY_COLUMNS``, ``PROFILE_COLUMNS``), each with the priority at which a
narrow terminal leaves it out. User-supplied strings (file names, labels) enter tables as ``Text``,
never as markup, so a ``[`` in a file name is shown as typed. The cell rules (order, marks,
words for failures) come from ``cells``, shared with the LaTeX table and the plots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Optional

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from ..latency.described import MEASURED
from ..latency.statement import BAND_SHORT
from ..profiles import TIERS, Profile, tier_rank
from ..results import PairResult
from ..results.columns import clauses
from ..results.failures import one_line
from ..wire.registry import latency_runtimes
from ..wire.verdict import Verdict
from .cells import (
    accuracy_legend,
    accuracy_text,
    cells,
    count_text,
    group_by_model,
    has_accuracy,
    input_shape_text,
    latency_mark,
    not_finetuned,
    ordered_devices,
    run_counts,
    threads_text,
    verdict_legend,
    verdict_word,
)
from .layout import Column, FittedTable
from .legend import BAND_DEFINITION, CALIBRATED_MARK, mark_notes, prediction_cell, row_cell

if TYPE_CHECKING:  # lodevem.zoo imports torch; the table only reads the records' fields
    from ..latency.records import ModelLatency
    from ..zoo import ZooSummary

_VERDICT_SYMBOL: Mapping[Verdict, str] = MappingProxyType({Verdict.FITS: "\u2713", Verdict.TIGHT: "!",
                                                          Verdict.ERROR: "?"})  # else \u2717
_VERDICT_STYLE: Mapping[Verdict, str] = MappingProxyType({
    Verdict.FITS: "green", Verdict.TIGHT: "yellow", Verdict.OOM: "red", Verdict.THRASHING: "red",
    Verdict.TIMEOUT: "red", Verdict.ERROR: "yellow"})


def latency_text(value: Optional[float], mark: str, low: Optional[float], high: Optional[float]) -> Text:
    """The latency cell of ``start`` and ``predict`` alike: the number, its predictor's mark (and
    the calibration's), and the numeric band of its error figure beside it (``31.2* (25.0\u201337.4)``)."""
    if value is None:
        return Text("n/a", style="yellow")
    text = Text(f"{value:,.1f}{mark}")
    if low is not None and high is not None:
        text.append(f" ({low:,.1f}\u2013{high:,.1f})", style="dim")
    return text


def _latency_cell(row: PairResult) -> Text:
    c = cells(row)
    if c.is_number:
        return latency_text(row.latency.ms, c.mark, row.latency.band.low_ms, row.latency.band.high_ms)
    failed = c.latency != "n/a"  # a word saying why there is no number (OOM, timeout...)
    return Text(c.latency, style=_VERDICT_STYLE.get(row.verdict, "yellow") if failed else "yellow")


def _ram_cell(row: PairResult) -> Text:
    c = cells(row)
    if c.peak_ram:
        return Text(c.peak_ram)
    failed = not c.is_number and c.latency != "n/a"
    return Text("\u2014", style=_VERDICT_STYLE.get(row.verdict, "yellow") if failed else "dim")


def _verdict_cell(row: PairResult) -> Text:
    word = verdict_word(row)
    return Text(f"{_VERDICT_SYMBOL.get(row.verdict, chr(0x2717))} {word}",
                style=f"bold {_VERDICT_STYLE.get(row.verdict, 'yellow')}")


def _budget_cell(row: PairResult) -> Text:
    return Text(f"{row.device.app_budget_mb:,}" if row.device.app_budget_mb is not None else "\u2014", style="dim")


def _headroom_cell(row: PairResult) -> Text:
    if row.memory.headroom_mb is None:
        return Text("\u2014", style="dim")
    return Text(f"{row.memory.headroom_mb:+,.0f}", style=_VERDICT_STYLE.get(row.verdict, "yellow"))


# The results table of ``lodevem start``. The first five are the columns promised from the start
# (priority 0: always shown); an optional column says with its priority how early it is left out
# on a narrow terminal (the highest number first), and the footer then names it. A new column is
# one more entry here.
RESULT_COLUMNS: tuple[Column[PairResult], ...] = (
    Column("Model File", lambda row: Text(row.model.label), model=True),
    Column("Device Profile", lambda row: Text(row.device.label)),
    Column("Latency (ms)", _latency_cell, justify="right"),
    Column("Peak RAM (MB)", _ram_cell, justify="right"),
    Column("Fits in RAM", _verdict_cell),
    Column("App budget (MB)", _budget_cell, priority=2, justify="right"),
    Column("Headroom (MB)", _headroom_cell, priority=1, justify="right"),
)
# Shown when the run had --eval-data: top-1 (and its drop against fp32), kept longer than the budget
ACCURACY_COLUMN: Column[PairResult] = Column(
    "Top-1 (%)", lambda row: Text(accuracy_text(row), style="" if row.accuracy.top1_pct is not None else "dim"),
    priority=1, justify="right")


def results_table(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]] = None,
                  verbose: bool = False) -> FittedTable[PairResult]:
    """The results table of ``lodevem start``, one section per model, devices in tier order; its
    layout fits the width of the console that prints it (``report.layout``).

    User-supplied strings (file names, labels) are passed as ``Text`` so that a ``[`` in a file
    name is never read as rich markup.
    """
    groups = group_by_model(rows, profiles)
    n_devices = len(ordered_devices(rows, profiles))
    counts = run_counts(rows)
    title = (f"lodevem results: {counts.text()} \u00d7 {count_text(n_devices, 'device profile')}; "
             f"input {input_shape_text(rows)}")
    # --eval-data: the trade-off's other half, a column of its own (left out before the budget)
    columns = RESULT_COLUMNS + ((ACCURACY_COLUMN,) if has_accuracy(rows) else ())
    return FittedTable(title, columns, groups, caption=_results_caption(rows, verbose))


def _predicted_cell(item: "ModelLatency") -> Text:
    latency = item.latency
    mark = latency_mark(latency.kind) + (CALIBRATED_MARK if latency.calibrations else "")
    return latency_text(latency.latency_ms, mark, latency.latency_low_ms, latency.latency_high_ms)


# The table of ``lodevem predict``: start's first columns, the same latency cell.
LATENCY_COLUMNS: tuple[Column["ModelLatency"], ...] = (
    Column("Model", lambda item: Text(item.model.label), model=True),
    Column("Device Profile", lambda item: Text(item.profile.label)),
    Column("Latency (ms)", _predicted_cell, justify="right"),
)


def latency_table(items: Sequence["ModelLatency"]) -> FittedTable["ModelLatency"]:
    """The table of ``lodevem predict``: ``start``'s columns without the memory ones (Model,
    Device Profile, Latency with its mark and range), the input shape each model was predicted
    with in the title; ``latency_legend`` is printed under it."""
    labels = list(dict.fromkeys(i.model.label for i in items))
    profiles = list(dict.fromkeys(i.profile.id for i in items))
    groups: dict[str, list["ModelLatency"]] = {label: [] for label in labels}
    for item in sorted(items, key=lambda i: (labels.index(i.model.label), tier_rank(i.profile.tier),
                                             profiles.index(i.profile.id))):
        groups[item.model.label].append(item)
    title = (f"lodevem latency: {count_text(len(labels), 'model')} \u00d7 "
             f"{count_text(len(profiles), 'device profile')}; input {predicted_shape_text(items)}")
    return FittedTable(title, LATENCY_COLUMNS, groups)


def predicted_shape_text(items: Sequence["ModelLatency"]) -> str:
    """``1x3x224x224 (default)``: the input each model was predicted with and where that shape came
    from, once when every model shares it (as ``start``'s title says it)."""
    by_model: dict[str, str] = {}
    for item in items:
        graph = item.model
        shape = "x".join(map(str, graph.input_shape)) if graph.input_shape else "unknown"
        source = getattr(graph, "input_shape_source", None)
        by_model.setdefault(graph.label, f"{shape} ({source})" if source else shape)
    shapes = list(dict.fromkeys(by_model.values()))
    if len(shapes) <= 1:
        return shapes[0] if shapes else "unknown"
    return "; ".join(f"{label} {shape}" for label, shape in by_model.items())


def latency_legend(items: Sequence["ModelLatency"], verbose: bool = False) -> list[str]:
    """The lines under ``latency_table``: what the numbers and their bands are, each kind's mark
    with its held-out figures, and (``verbose``) each distinct note once with the pairs it applies
    to; else how many notes there are. Plain text (no markup): print with ``markup=False``."""
    threads = sorted({i.latency.threads for i in items})
    what = "1 thread" if threads in ([], [1]) else f"{'/'.join(map(str, threads))} threads"
    runtimes = sorted({i.latency.runtime for i in items if i.latency.runtime})
    under = f" under {'/'.join(runtimes)}" if runtimes else ""
    measured = any(i.latency.kind == MEASURED for i in items)  # predict --device's cells
    lines = [f"Latency (ms): predicted for {what}{under} on the device's fastest core, not measured on the phone"
             + (" (except the rows marked m: measured on the phone itself)" if measured else "")
             + f"; {_band_text(verbose)}."]
    lines += [f"  {note.text()}" for note in mark_notes(prediction_cell(i) for i in items)]
    missing: dict[tuple[str, str], list[str]] = {}  # a cell without a number says why, without --verbose
    for item in items:
        if item.latency.latency_ms is None:
            why = one_line(next(iter(clauses(item.latency.note)), ""))
            missing.setdefault((item.model.label, why), []).append(item.profile.id)
    lines += [f"  n/a ({label} on {', '.join(ids)}): {why}" for (label, why), ids in missing.items()]
    notes: dict[str, list[str]] = {}  # each part of a note once, with the pairs it applies to
    for item in items:
        for part in clauses(item.latency.note):
            if part:
                notes.setdefault(part, []).append(f"{item.model.label} on {item.profile.id}")
    if notes and not verbose:
        lines.append(f"  {count_text(len(notes), 'note')} on how cells were predicted: --verbose shows them "
                     "(--json has each cell's latency_note).")
    for note, pairs in notes.items() if verbose else ():
        where = ("all pairs" if len(pairs) == len(items) and len(items) > 1
                 else ", ".join(pairs) if len(pairs) <= 3 else f"{len(pairs)} pairs")
        lines.append(f"  note ({where}): {note}")
    return lines


def _band_text(verbose: bool) -> str:
    return BAND_DEFINITION if verbose else BAND_SHORT


def _results_caption(rows: Sequence[PairResult], verbose: bool = False) -> Text:
    measured = any(r.latency.kind == MEASURED for r in rows)  # start --device's rows
    lines = [f"Latency (ms): predicted for {threads_text(rows)} on the device's fastest core, not measured on the "
             "phone" + (" (except the rows marked m: measured on the phone itself)" if measured else "")
             + f"; {_band_text(verbose)}."]
    lines += [f"  {note.text()}" for note in mark_notes(row_cell(r) for r in rows)]
    # "docker cgroup v1 memory+swap=512MB" -> "docker cgroup v1 memory+swap": the limit is the row's RAM.
    backends = sorted({r.memory.enforcement or r.memory.backend for r in rows
                       if r.memory.inferred_from_mb is None and r.memory.limit_enforcement})
    runtimes = list(dict.fromkeys(r.memory.runtime_shown for r in rows if r.memory.runtime))
    lines.append(f"Peak RAM (MB): peak RSS (VmHWM) under {', '.join(runtimes)} with the device's RAM as the limit"
                 + (f" ({'; '.join(backends)})" if backends else "") + ", including the runtime's own footprint.")
    inferred = sum(1 for r in rows if r.memory.inferred_from_mb is not None)
    if inferred:  # memory.planning: rows of limits far above the peak of the largest limit's run
        lines.append(f"  {inferred} of {len(rows)} peaks come from the model's run at its largest RAM limit"
                     + (", far above its peak (CSV limit_enforcement; --no-infer measures each)." if verbose
                        else " (--no-infer measures each)."))
    if verbose:
        lines.append(verdict_legend())
        lines.append(memory_runtime_line(rows))
    else:
        lines.append("Fits: peak within the app budget; tight = above it; OOM = killed at the RAM limit"
                     + ("; torch (fallback): a converter refused the file" if any(
                         r.memory.fallback for r in rows) else "")
                     + ". --verbose explains more; the CSV has every field.")
    legend = accuracy_legend(rows)
    if legend:
        lines.append(legend)
    elif not_finetuned(rows) and verbose:  # without --eval-data: what the pruned rows are, said once
        lines.append(f"{', '.join(not_finetuned(rows))}: pruned without fine-tuning, accuracy not measured "
                     "(--finetune-data fine-tunes it, --eval-data measures it).")
    return Text("\n".join(lines), style="dim")


def memory_runtime_line(rows: Sequence[PairResult]) -> str:
    """The footer line that says which runtime every peak RAM figure is for (and, with several,
    which runtime each latency stands for)."""
    runtimes = list(dict.fromkeys(r.memory.runtime_shown for r in rows if r.memory.runtime))
    line = f"Peak RAM measured under {', '.join(runtimes)} (CSV column memory_runtime)."
    if any(r.memory.fallback for r in rows):
        line += " torch (fallback): the runtime's converter could not take the file (CSV memory_note)."
    if len(runtimes) > 1 and any(r in latency_runtimes() for r in runtimes):  # runner.models.latency_runtime
        line += (" Rows measured under tflite or ncnn show the latency predicted for that runtime; "
                 "torch and onnxruntime rows the one for --latency-runtime.")
    return line


# The ``lodevem list`` table: what names a device and decides its verdicts always shown; the
# hardware details go first on a narrow terminal (the profile YAML files have them all).
PROFILE_COLUMNS: tuple[Column[Profile], ...] = (
    Column("ID", lambda p: Text(p.id)),
    Column("Device", lambda p: Text(p.label)),
    Column("Chipset", lambda p: Text(p.chipset), priority=4),
    Column("Cores", lambda p: Text(p.cores_label), priority=3),
    Column("Clock", lambda p: Text(p.clock_label), priority=2, justify="right"),
    Column("RAM", lambda p: Text(p.ram_label), justify="right"),
    Column("App budget", lambda p: Text(f"{p.app_budget_mb} MB" if p.app_budget_mb is not None else "\u2014"),
           priority=1, justify="right"),
    Column("Tier", lambda p: Text(p.tier)),
)


def profiles_table(profiles: Sequence[Profile]) -> FittedTable[Profile]:
    """The ``lodevem list`` table: one row per device profile, fitted to the console's width."""
    tiers = ", ".join(f"{t} = {d}" for t, d in TIERS.items())
    return FittedTable(f"lodevem device profiles ({len(profiles)})", PROFILE_COLUMNS, {"": list(profiles)},
                       caption=Text(tiers), complete="the profile YAML files have them all")


def zoo_table(summaries: Sequence[ZooSummary]) -> Table:
    """The ``lodevem zoo`` table: reference models with parameters and MFLOPs."""
    table = Table(title="lodevem model zoo (architectures in code, seeded random weights)",
                  title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (("Name", "left"), ("Params", "right"), ("MFLOPs", "right"),
                                                      ("Input", "left"), ("Description", "left"))
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=column != "Description")
    for s in summaries:
        table.add_row(s.name, f"{s.params:,}", f"{s.mflops:,.0f}",
                      "x".join(map(str, s.input_shape)), s.description)
    return table


def inspection_lines(found: Any) -> list[str]:
    """``lodevem inspect`` for one file (a ``ModelInspection``): one fact per line, plain text."""
    model = found.model
    lines = [f"{found.path}  ({found.size_bytes / 1e6:.2f} MB, sha256 {found.sha256[:12]})"]

    def fact(name: str, value: str) -> None:
        lines.append(f"  {name:<13}{value}")

    fact("format", f"{model.format or '?'}" + (f" ({model.class_name})" if model.class_name else ""))
    if model.params is not None:
        size = f", {model.param_bytes / 1e6:.2f} MB of tensors" if model.param_bytes is not None else ""
        fact("parameters", f"{model.params:,}{size}")
    if model.input_shape:
        source = getattr(model, "input_shape_source", None)
        fact("input", "x".join(map(str, model.input_shape)) + (f" {model.input_dtype}" if model.input_dtype else "")
             + (f" ({source})" if source else ""))
        warning = getattr(model, "input_shape_warning", None)
        if warning:
            fact("", f"warning: {warning}")
    precision = getattr(model, "precision", None)
    quantization = getattr(model, "quantization", None)
    if precision or found.precision_by_class:
        by_class = ", ".join(f"{cls} {prec} ×{n}" for cls, prec, n in found.precision_by_class)
        head = precision or "fp32"
        if quantization:
            head += f" ({quantization})"
        fact("precision", head + (f": {by_class}" if by_class else ""))
    if found.kernels:
        fact("MACs", f"{found.macs / 1e6:,.1f} M" if found.macs is not None else "?")
        fact("kernels", f"{found.kernel_count}: " + ", ".join(f"{name} ×{n}" for name, n in found.kernels))
    elif found.graph_error:
        fact("kernels", f"not available: {found.graph_error}")
    sparsity = model.sparsity
    if sparsity is not None:
        text = f"{sparsity.zero_fraction:.1%} of the Conv/Linear weights are zero"
        if sparsity.zero_channels:
            text += f"; {sparsity.zero_channels} of {sparsity.channels} output channels entirely zero"
        if sparsity.masked_layers:
            text += f"; prune masks attached on {sparsity.masked_layers} layer(s)"
        fact("sparsity", text)
        for layer in sparsity.layers[:5] if sparsity.pruned else ():
            fact("", f"{layer.name}: {layer.zero_fraction:.0%} zero, {layer.zero_channels}/{layer.channels} "
                     f"channels zero")
    return lines
