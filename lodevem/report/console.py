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

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Optional

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from ..profiles import TIERS, Profile, tier_rank
from ..results import PairResult
from ..worker.registry import latency_runtimes, on_device_runtimes
from ..worker.verdict import VERDICTS, Verdict
from .cells import (
    CALIBRATED_MARK,
    CALIBRATED_NOTE,
    VERDICT_LEGEND,
    VERDICT_WORDS,
    accuracy_legend,
    accuracy_text,
    cells,
    group_by_model,
    has_accuracy,
    input_shape_text,
    latency_mark,
    not_finetuned,
    ordered_devices,
    run_counts,
    source_notes,
    threads_text,
    uncertainty_text,
)
from .layout import Column, FittedTable

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
        return latency_text(row.latency_ms, c.mark, row.latency_low_ms, row.latency_high_ms)
    failed = c.latency != "n/a"  # a word saying why there is no number (OOM, timeout...)
    return Text(c.latency, style=_VERDICT_STYLE.get(row.verdict, "yellow") if failed else "yellow")


def _ram_cell(row: PairResult) -> Text:
    c = cells(row)
    if c.peak_ram:
        return Text(c.peak_ram)
    failed = not c.is_number and c.latency != "n/a"
    return Text("\u2014", style=_VERDICT_STYLE.get(row.verdict, "yellow") if failed else "dim")


def _verdict_cell(row: PairResult) -> Text:
    word = VERDICT_WORDS.get(row.verdict, str(row.verdict))
    return Text(f"{_VERDICT_SYMBOL.get(row.verdict, chr(0x2717))} {word}",
                style=f"bold {_VERDICT_STYLE.get(row.verdict, 'yellow')}")


def _budget_cell(row: PairResult) -> Text:
    return Text(f"{row.app_budget_mb:,}" if row.app_budget_mb is not None else "\u2014", style="dim")


def _headroom_cell(row: PairResult) -> Text:
    if row.headroom_mb is None:
        return Text("\u2014", style="dim")
    return Text(f"{row.headroom_mb:+,.0f}", style=_VERDICT_STYLE.get(row.verdict, "yellow"))


# The results table of ``lodevem start``. The first five are the columns promised from the start
# (priority 0: always shown); an optional column says with its priority how early it is left out
# on a narrow terminal (the highest number first), and the footer then names it. A new column is
# one more entry here.
RESULT_COLUMNS: tuple[Column[PairResult], ...] = (
    Column("Model File", lambda row: Text(row.model_label), model=True),
    Column("Device Profile", lambda row: Text(row.profile_label)),
    Column("Latency (ms)", _latency_cell, justify="right"),
    Column("Peak RAM (MB)", _ram_cell, justify="right"),
    Column("Fits in RAM", _verdict_cell),
    Column("App budget (MB)", _budget_cell, priority=2, justify="right"),
    Column("Headroom (MB)", _headroom_cell, priority=1, justify="right"),
)
# Shown when the run had --eval-data: top-1 (and its drop against fp32), kept longer than the budget
ACCURACY_COLUMN: Column[PairResult] = Column(
    "Top-1 (%)", lambda row: Text(accuracy_text(row), style="" if row.accuracy_top1_pct is not None else "dim"),
    priority=1, justify="right")


def results_table(rows: Sequence[PairResult],
                  profiles: Optional[Sequence[Profile]] = None) -> FittedTable[PairResult]:
    """The results table of ``lodevem start``, one section per model, devices in tier order; its
    layout fits the width of the console that prints it (``report.layout``).

    User-supplied strings (file names, labels) are passed as ``Text`` so that a ``[`` in a file
    name is never read as rich markup.
    """
    groups = group_by_model(rows, profiles)
    n_devices = len(ordered_devices(rows, profiles))
    counts = run_counts(rows)
    title = (f"lodevem results: {counts.text()} \u00d7 {n_devices} device profile(s); "
             f"input {input_shape_text(rows)}")
    # --eval-data: the trade-off's other half, a column of its own (left out before the budget)
    columns = RESULT_COLUMNS + ((ACCURACY_COLUMN,) if has_accuracy(rows) else ())
    return FittedTable(title, columns, groups, caption=_results_caption(rows))


def _predicted_cell(item: "ModelLatency") -> Text:
    latency = item.latency
    mark = latency_mark(latency.latency_source) + (CALIBRATED_MARK if latency.calibrations else "")
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
    title = (f"lodevem latency: {len(labels)} model(s) \u00d7 {len(profiles)} device profile(s); "
             f"input {predicted_shape_text(items)}")
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


def latency_legend(items: Sequence["ModelLatency"]) -> list[str]:
    """The lines under ``latency_table``: what the numbers are, each source's mark and stated
    uncertainty, and each distinct note once with the pairs it applies to. Plain text (no
    markup): print with ``markup=False``."""
    threads = sorted({i.latency.threads for i in items})
    what = "1 thread" if threads in ([], [1]) else f"{'/'.join(map(str, threads))} threads"
    runtimes = sorted({i.latency.runtime for i in items if i.latency.runtime})
    under = f" under {'/'.join(runtimes)}" if runtimes else ""
    lines = [f"Latency: predicted for {what}{under} on the device's fastest core, not measured on the phone."]
    legend: dict[str, set[str]] = {}
    for item in items:
        if item.latency.latency_ms is None:
            continue
        key = f"{latency_mark(item.latency.latency_source)} {item.latency.latency_source.split(' (')[0]}"
        if item.latency.uncertainty:
            legend.setdefault(key, set()).add(item.latency.uncertainty)
        else:
            legend.setdefault(key, set())
    for key, uncertainties in legend.items():
        lines.append(f"  {key}" + (f", uncertainty {uncertainty_text(uncertainties)}" if uncertainties else ""))
    if any(i.latency.calibrations and i.latency.latency_ms is not None for i in items):
        lines.append(f"  {CALIBRATED_MARK} {CALIBRATED_NOTE.split(' (')[0]}")
    notes: dict[str, list[str]] = {}  # each part of a note once, with the pairs it applies to
    for item in items:
        for part in (item.latency.note or "").split("; "):
            if part:
                notes.setdefault(part, []).append(f"{item.model.label} on {item.profile.id}")
    for note, pairs in notes.items():
        where = ("all pairs" if len(pairs) == len(items) and len(items) > 1
                 else ", ".join(pairs) if len(pairs) <= 3 else f"{len(pairs)} pairs")
        lines.append(f"  note ({where}): {note}")
    return lines


def _results_caption(rows: Sequence[PairResult]) -> Text:
    lines = [f"Latency: predicted for {threads_text(rows)} on the device's fastest core, "
             "not measured on the phone."]
    lines += [f"  {note.text()}" for note in source_notes(rows)]
    # "docker cgroup v1 memory+swap=512MB" -> "docker cgroup v1 memory+swap": the limit is the row's RAM.
    backends = sorted({re.sub(r"=\d+\s*MB", "", r.limit_enforcement) or r.backend for r in rows
                       if r.memory_inferred_from_mb is None})
    lines.append("Peak RAM: peak RSS (VmHWM) measured with the device's RAM as the limit "
                 f"({'; '.join(backends)}), including the runtime's own footprint.")
    inferred = sum(1 for r in rows if r.memory_inferred_from_mb is not None)
    if inferred:  # memory.planning: rows of limits far above the peak of the largest limit's run
        lines.append(f"  {inferred} of {len(rows)} peaks come from the model's run at its largest RAM limit, far "
                     "above its peak (CSV limit_enforcement; --no-infer measures each).")
    lines.append(VERDICT_LEGEND)
    lines.append(memory_runtime_line(rows))
    legend = accuracy_legend(rows)
    if legend:
        lines.append(legend)
    elif not_finetuned(rows):  # without --eval-data: what the pruned rows are, said once
        lines.append(f"{', '.join(not_finetuned(rows))}: pruned without fine-tuning, accuracy not measured "
                     "(--finetune-data fine-tunes it, --eval-data measures it).")
    return Text("\n".join(lines), style="dim")


def memory_runtime_line(rows: Sequence[PairResult]) -> str:
    """The footer line that says which runtime every peak RAM figure is for (and, with several,
    which runtime each latency stands for)."""
    runtimes = list(dict.fromkeys(r.memory_runtime or r.runtime for r in rows if r.memory_runtime or r.runtime))
    line = f"Peak RAM measured under {', '.join(runtimes)} (CSV column memory_runtime)."
    if any(r.endswith("(fallback)") for r in runtimes):
        line += " torch (fallback): the runtime's converter refused the user's quantized file (CSV memory_note)."
    if len(runtimes) > 1 and any(r in latency_runtimes() for r in runtimes):  # runner.models.latency_runtime
        line += (" Rows measured under tflite or ncnn show the latency predicted for that runtime; "
                 "torch and onnxruntime rows the one for --latency-runtime.")
    return line


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
            text = f"{label}: {head}; {_lowest_tier_text(group, fitting)}"
            peaks = [r for r in fitting if r.peak_rss_mb is not None]
            if peaks:
                top = max(peaks, key=lambda r: r.peak_rss_mb or 0.0)
                text += f"; peak RAM {top.peak_rss_mb:,.0f} MB"
                if top.runtime_baseline_mb is not None:
                    text += f", of which runtime {top.runtime_baseline_mb:,.0f} MB ({top.runtime})"
            shown = [(r.latency_ms, latency_mark(r.latency_source)) for r in fitting if cells(r).is_number]
            if shown:
                lo, hi = min(shown), max(shown)
                span = f"{lo[0]:,.1f}{lo[1]}" + (f"\u2013{hi[0]:,.1f}{hi[1]}" if hi != lo else "")
                text += f"; predicted latency {span} ms"
            if failed:
                text += f"; does not fit: {_verdict_counts(failed)}"
        hint = _smaller_runtime_hint(group, rows)
        if hint:
            text += f"; {hint}"
            if undecided:
                text += f"; undecided: {_verdict_counts(undecided)}"
        sparse = [r for r in group if r.sparsity is not None and (r.sparsity >= 0.01 or r.zero_channels)]
        if sparse:
            text += f"; {sparse[0].sparsity:.0%} of its weights are zero, run at the dense speed"
            removed = [r.latency_if_channels_removed_ms for r in sparse if r.latency_if_channels_removed_ms is not None]
            if removed:
                text += (f" ({min(removed):,.1f}" + (f"\u2013{max(removed):,.1f}" if max(removed) != min(removed)
                                                     else "") + " ms with its all-zero channels removed)")
        measured = measured_file_text(group)
        if measured:
            text += f"; {measured}"
        floors = [r.min_ram_mb for r in group if r.min_ram_mb is not None]
        if floors:
            text += f"; minimum RAM {max(floors):,.0f} MB"
        errors = [r.memory_error for r in group if r.verdict == "error" and r.memory_error]
        if errors:  # why there is no figure, in one line (a converter's reason, a failed derivation)
            text += f"; no peak RAM: {' '.join(errors[0].split())[:200]}"
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


def measured_file_text(group: Sequence[PairResult]) -> Optional[str]:
    """What a model's rows loaded when it was converted (tflite, ncnn): "measured 3.4 MB int8-static
    .tflite (scheme)", and each note on how it was made (a synthetic calibration, a fallback)."""
    parts = []
    row = next((r for r in group if r.converted_mb is not None), None)
    if row is not None:
        what = " ".join(x for x in (f"{row.converted_mb:,.1f} MB", row.converted_precision) if x)
        parts.append(f"measured {what} {row.memory_runtime or row.runtime} file"
                     + (f" ({row.converted_scheme})" if row.converted_scheme else ""))
    notes = dict.fromkeys(part for r in group if r.memory_note for part in r.memory_note.split("; "))
    parts += list(notes)
    return "; ".join(parts) or None


def _lowest_tier_text(group: Sequence[PairResult], fitting: Sequence[PairResult]) -> str:
    """"lowest tier it runs on" only when the run tried the tier below it (or there is none);
    else "lowest tier tested", so an untried tier is never implied to fail or to fit."""
    lowest = max({r.tier for r in fitting}, key=tier_rank)
    tried = {r.tier for r in group}
    below = [t for t in TIERS if tier_rank(t) > tier_rank(lowest)]
    if not below or any(t in tried for t in below):
        return f"lowest tier it runs on: {lowest} = {TIERS.get(lowest, lowest)}"
    return f"lowest tier tested: {lowest} = {TIERS.get(lowest, lowest)} ({', '.join(below)} not tried)"


def _smaller_runtime_hint(group: Sequence[PairResult], rows: Sequence[PairResult]) -> Optional[str]:
    """For torch rows over the app budget or the RAM: most of the peak is PyTorch itself, which no
    phone app ships; name an on-device runtime, with its figure when this run measured it."""
    over = [r for r in group if r.runtime == "torch" and r.verdict in (Verdict.TIGHT, Verdict.OOM, Verdict.THRASHING)]
    if not over:
        return None
    worst = over[0]
    same = [r for r in rows if r.model_path == worst.model_path and r.level == worst.level
            and r.profile_id == worst.profile_id and r.runtime in on_device_runtimes()]
    base = (f"the PyTorch runtime alone takes {worst.runtime_baseline_mb:,.0f} MB"
            if worst.runtime_baseline_mb is not None else "PyTorch's own footprint is part of the peak")
    if same:
        other = same[0]
        peak = f"peak {other.peak_rss_mb:,.0f} MB, {other.verdict}" if other.peak_rss_mb is not None else other.verdict
        return f"{base}: on {worst.profile_label} under {other.runtime} ({peak}) in this run"
    if (worst.memory_runtime or "").endswith("(fallback)"):  # the on-device converter was tried and refused it
        return f"{base}: an app would ship a smaller runtime, which needs a file its converter takes (an fp32 export)"
    return f"{base}: an app would ship a smaller runtime, try --runtime tflite"


def _verdict_counts(rows: Sequence[PairResult]) -> str:
    counts: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: VERDICTS.index(r.verdict)):
        word = VERDICT_WORDS.get(row.verdict, str(row.verdict))
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{word} on {n}" for word, n in counts.items())


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
