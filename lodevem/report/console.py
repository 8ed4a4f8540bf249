"""The console tables and summary lines: what ``lodevem start``, ``list`` and ``zoo`` print.

Everything here returns a rich ``Table`` or plain strings and prints nothing itself, so ``cli.py``
decides where output goes. User-supplied strings (file names, labels) enter tables as ``Text``,
never as markup, so a ``[`` in a file name is shown as typed. The cell rules (order, marks,
words for failures) come from ``cells``, shared with the LaTeX table and the plots.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Optional

from rich.table import Table
from rich.text import Text

from ..worker.registry import latency_runtimes, on_device_runtimes
from ..profiles import TIERS, Profile, tier_rank
from ..results import VERDICTS, PairResult
from .cells import (
    VERDICT_LEGEND,
    VERDICT_WORDS,
    accuracy_legend,
    accuracy_text,
    has_accuracy,
    input_shape_text,
    not_finetuned,
    run_counts,
    uncertainty_text,
    cells,
    group_by_model,
    latency_mark,
    ordered_devices,
    source_notes,
    threads_text,
)

if TYPE_CHECKING:  # lodevem.zoo imports torch; the table only reads the records' fields
    from ..latency.api import ModelLatency
    from ..zoo import ZooSummary

_VERDICT_SYMBOL: Mapping[str, str] = MappingProxyType({"fits": "\u2713", "tight": "!", "error": "?"})  # else \u2717
_VERDICT_STYLE: Mapping[str, str] = MappingProxyType({"fits": "green", "tight": "yellow", "oom": "red",
                                                      "thrashing": "red", "timeout": "red", "error": "yellow"})


def results_table(rows: Sequence[PairResult],
                  profiles: Optional[Sequence[Profile]] = None) -> Table:
    """The results table of ``lodevem start``, one section per model, devices in tier order.

    User-supplied strings (file names, labels) are passed as ``Text`` so that a ``[`` in a file
    name is never read as rich markup.
    """
    groups = group_by_model(rows, profiles)
    n_devices = len(ordered_devices(rows, profiles))
    counts = run_counts(rows)
    table = Table(title=f"lodevem results: {counts.text()} \u00d7 {n_devices} device profile(s); "
                        f"input {input_shape_text(rows)}",
                  title_justify="left", caption=_results_caption(rows), caption_justify="left")
    table.add_column("Model File", no_wrap=True)
    table.add_column("Device Profile")
    table.add_column("Latency (ms)", justify="right", no_wrap=True)
    table.add_column("Peak RAM (MB)", justify="right", no_wrap=True)
    table.add_column("Verdict", no_wrap=True)
    table.add_column("App budget (MB)", justify="right", no_wrap=True)
    table.add_column("Headroom (MB)", justify="right", no_wrap=True)
    accuracy = has_accuracy(rows)  # --eval-data: the trade-off's other half
    if accuracy:
        table.add_column("Top-1 (%)", justify="right", no_wrap=True)
    for label, group in groups.items():
        for i, row in enumerate(group):
            c = cells(row)
            style = _VERDICT_STYLE.get(row.verdict, "yellow")
            failed = not c.is_number and c.latency != "n/a"
            latency = Text(c.latency + c.mark, style=style if failed else "")
            if range_text(row):  # the numeric band of the error figure, beside the number it qualifies
                latency.append(f" ({range_text(row)})", style="dim")
            ram = Text(c.peak_ram, style="") if c.peak_ram else Text("\u2014", style=style if failed else "dim")
            verdict = Text(f"{_VERDICT_SYMBOL.get(row.verdict, chr(0x2717))} "
                           f"{VERDICT_WORDS.get(row.verdict, row.verdict)}", style=f"bold {style}")
            budget = Text(f"{row.app_budget_mb:,}" if row.app_budget_mb is not None else "\u2014", style="dim")
            headroom = Text(f"{row.headroom_mb:+,.0f}" if row.headroom_mb is not None else "\u2014",
                            style=style if row.headroom_mb is not None else "dim")
            cols = [Text(label if i == 0 else "", style="bold"), Text(row.profile_label), latency]
            extra = [Text(accuracy_text(row), style="" if row.accuracy_top1_pct is not None else "dim")] \
                if accuracy else []
            table.add_row(*cols, ram, verdict, budget, headroom, *extra, end_section=i == len(group) - 1)
    return table


def range_text(row: PairResult) -> Optional[str]:
    """``40.1\u201359.3``: the latency's numeric range (the error figure of its kind), or None."""
    if not cells(row).is_number or row.latency_low_ms is None or row.latency_high_ms is None:
        return None
    return f"{row.latency_low_ms:,.1f}\u2013{row.latency_high_ms:,.1f}"


def latency_table(items: Sequence["ModelLatency"]) -> Table:
    """The table of ``lodevem predict``: ``start``'s columns without the memory ones (Model,
    Device Profile, Latency), the predictor's mark on each number, the legend as caption."""
    labels = list(dict.fromkeys(i.model.label for i in items))
    profiles = list(dict.fromkeys(i.profile.id for i in items))
    table = Table(title=f"lodevem latency: {len(labels)} model(s) \u00d7 {len(profiles)} device profile(s)",
                  title_justify="left")
    table.add_column("Model", no_wrap=True)
    table.add_column("Device Profile")
    table.add_column("Latency (ms)", justify="right", no_wrap=True)
    ordered = sorted(items, key=lambda i: (labels.index(i.model.label), tier_rank(i.profile.tier),
                                           profiles.index(i.profile.id)))
    for n, item in enumerate(ordered):
        first = n == 0 or ordered[n - 1].model.label != item.model.label
        last = n == len(ordered) - 1 or ordered[n + 1].model.label != item.model.label
        ms = item.latency.latency_ms
        cell = Text(f"{ms:,.1f}{latency_mark(item.latency.latency_source)}") if ms is not None else Text(
            "n/a", style="yellow")
        table.add_row(Text(item.model.label if first else "", style="bold"), Text(item.profile.label), cell,
                      end_section=last)
    return table


def latency_legend(items: Sequence["ModelLatency"]) -> list[str]:
    """The lines under ``latency_table``: what the numbers are, each source's mark and stated
    uncertainty, and each distinct note once with the pairs it applies to. Plain text (no
    markup): print with ``markup=False``."""
    threads = sorted({i.latency.threads for i in items})
    what = "1 thread" if threads in ([], [1]) else f"{'/'.join(map(str, threads))} threads"
    lines = [f"Latency: predicted for {what} on the device's fastest core, not measured on the phone."]
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
    legend = accuracy_legend(rows)
    if legend:
        lines.append(legend)
    elif not_finetuned(rows):  # without --eval-data: what the pruned rows are, said once
        lines.append(f"{', '.join(not_finetuned(rows))}: pruned without fine-tuning, accuracy not measured "
                     "(--finetune-data fine-tunes it, --eval-data measures it).")
    runtimes = list(dict.fromkeys(r.runtime for r in rows))
    if runtimes != ["torch"]:
        line = f"Runtime of the measurement: {', '.join(runtimes)} (CSV column runtime)."
        if any(r in latency_runtimes() for r in runtimes):  # runner.latency_runtime
            line += (" Rows measured under tflite or ncnn show the latency predicted for that runtime; "
                     "torch and onnxruntime rows the one for --latency-runtime.")
        lines.append(line)
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
    over = [r for r in group if r.runtime == "torch" and r.verdict in ("tight", "oom", "thrashing")]
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
    return f"{base}: an app would ship a smaller runtime, try --runtime tflite"


def _verdict_counts(rows: Sequence[PairResult]) -> str:
    counts: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: VERDICTS.index(r.verdict) if r.verdict in VERDICTS else 99):
        word = VERDICT_WORDS.get(row.verdict, row.verdict.replace("_", " "))
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{word} on {n}" for word, n in counts.items())


def profiles_table(profiles: Sequence[Profile]) -> Table:
    """The ``lodevem list`` table: one row per device profile."""
    tiers = ", ".join(f"{t} = {d}" for t, d in TIERS.items())
    table = Table(title=f"lodevem device profiles ({len(profiles)})", title_justify="left",
                  caption=tiers, caption_justify="left")
    for column, justify in (("ID", "left"), ("Device", "left"), ("Chipset", "left"),
                            ("Cores", "left"), ("Clock", "right"), ("RAM", "right"),
                            ("App budget", "right"), ("Tier", "left")):
        table.add_column(column, justify=justify, no_wrap=column in ("ID", "RAM", "App budget", "Tier"))
    for p in profiles:
        budget = f"{p.app_budget_mb} MB" if p.app_budget_mb is not None else "\u2014"
        table.add_row(p.id, p.label, p.chipset, p.cores_label, p.clock_label, p.ram_label, budget, p.tier)
    return table


def zoo_table(summaries: Sequence[ZooSummary]) -> Table:
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
