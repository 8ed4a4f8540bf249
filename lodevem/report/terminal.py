"""What a command shows on the terminal: every line ``lodevem`` prints, in one place.

Why a module of its own: a command parses its options, makes one library call and hands the
result here (the library never prints, the commands never format). The tables themselves are
``report.console``'s; this module decides which of them a result needs, in what order, on which
stream (results on stdout, warnings, progress and errors on stderr), and escapes every text that
comes from a user's file, a record or the sandbox. The tables are imported when first shown, so
``lodevem --help`` stays quick.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

from rich.console import Console
from rich.markup import escape

from ..safe_io import ENTRY_CHARS, json_text, printable

if TYPE_CHECKING:
    from ..device import DeviceInfo, PhoneRow
    from ..doctor import Readiness
    from ..inspection import InspectionReport
    from ..latency.calibration import CalibrationOutcome, RecordListing, Removed
    from ..profiles import Profile
    from ..progress import RichProgress
    from ..results import ModelFile
    from ..results.outcome import StartResult
    from ..sandbox.image import ImageInfo, ImageStatus
    from ..zoo import ZooListing

CHECK_MARKS = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]"}


def output_width() -> Optional[int]:
    """$COLUMNS, else the terminal's (None: rich asks the terminal), else 120: rich assumes 80
    columns when stdout is not a terminal, and results tables piped into a file or a CI log
    read better wider. Read on every command, not at import, so a caller that sets $COLUMNS
    (a test, a script) gets that width."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else 120


class Terminal:
    """stdout (``out``: results) and stderr (``err``: warnings, progress, errors) of one process."""

    def __init__(self) -> None:
        self.out = Console(highlight=False)
        self.err = Console(stderr=True, highlight=False)

    def fit_width(self) -> None:
        """The width of this command's output (``output_width``)."""
        self.out.width = output_width()  # type: ignore[assignment]  # None: the terminal's own width

    # -- what every command may show ------------------------------------------------------------

    def warn(self, warnings: Sequence[str]) -> None:
        """Warnings on stderr, each once, escaped (they may quote a record, a log or a model): wrapped
        at word boundaries to a terminal (or to $COLUMNS), one line each into a pipe or a log file,
        so a grep finds a whole warning."""
        wrap = self.err.is_terminal or os.environ.get("COLUMNS", "").isdigit()
        for warning in dict.fromkeys(warnings):
            self.err.print(f"[yellow]warning:[/] {escape(printable(warning))}", highlight=False, soft_wrap=not wrap,
                           width=output_width() if wrap and not self.err.is_terminal else None)

    def interrupted(self, note: str) -> None:
        self.err.print("[yellow]Interrupted.[/] " + escape(note), markup=True, highlight=False)

    def deprecated(self, text: str) -> None:
        self.err.print(f"[yellow]deprecated:[/] {text}", highlight=False, soft_wrap=True)

    def status(self, text: str, *, on_stdout: bool = False) -> Any:
        """A spinner while the library works (a context manager; ``update`` changes its text)."""
        return (self.out if on_stdout else self.err).status(text)

    def progress(self) -> "RichProgress":
        """``start``'s progress bar (pairs done, ETA) on stderr."""
        from ..progress import RichProgress

        return RichProgress(self.err)

    def json(self, items: Sequence[Any]) -> None:
        """``--json``: the records' own ``to_dict``, one list."""
        self.out.file.write(json_text([item.to_dict() for item in items], indent=1) + "\n")

    # -- per command ----------------------------------------------------------------------------

    def profiles(self, profiles: Sequence["Profile"]) -> None:
        from .console import profiles_table

        self.out.print(profiles_table(profiles))

    def checks(self, readiness: "Readiness") -> None:
        for item in readiness.checks:
            # ✗ means `start` cannot run as asked (the exit code is 1); something missing that only
            # an opt-in feature needs (another runtime's image) is shown as !, with its hint.
            status = "warn" if item.status == "fail" and not item.required else item.status
            self.out.print(f"{CHECK_MARKS[status]} [bold]{item.name}[/]: {item.detail}")
            if item.hint and item.status != "ok":
                self.out.print(f"    [dim]hint:[/] {item.hint}")

    def zoo(self, listing: "ZooListing") -> None:
        from .console import zoo_table

        if not listing.written:
            self.out.print(zoo_table(listing.summaries))
        for path in listing.written:
            self.out.print(f"[green]✓[/] wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")

    def start(self, result: "StartResult", verbose: bool = False) -> None:
        """A finished run: warnings, the results table, one summary per model, the files written,
        then the pairs that broke a budget gate (``verbose``: every note and legend in full)."""
        from ..results.failures import failure_lines
        from .console import results_table
        from .summaries import model_summaries

        self.warn(result.warnings)
        self.out.print(results_table(result.rows, result.profiles, verbose=verbose))
        missing = failure_lines(result.rows)
        if missing:  # every failed cell says why, without --verbose (the CSV's failure_reason)
            self.out.print(f"Missing figures ({len(missing)}; CSV failure_reason):", style="yellow", highlight=False)
            for line in missing:
                self.out.print(f"  {printable(line, newlines=False)}", markup=False, highlight=False, soft_wrap=True)
        for line in model_summaries(result.rows, verbose=verbose):
            self.out.print(line, markup=False)
        self.out.print(f"[dim]wrote {', '.join(str(p) for p in result.written)}[/]")
        for line in result.broken:
            self.err.print(f"[red]budget:[/] {line}", highlight=False)

    def wrote(self, paths: Sequence[Path]) -> None:
        """The files a command wrote (``report``: the page)."""
        self.out.print(f"wrote {', '.join(str(p) for p in paths)}", markup=False, highlight=False)

    def devices(self, rows: Sequence["PhoneRow"]) -> None:
        """``device``: one line per phone adb lists; every field is the phone's text (escaped)."""
        if not rows:
            self.out.print("no phones: adb lists none (connect one over USB with USB debugging on, or "
                           "`adb connect HOST:PORT`; docs/device.md)")
        for row in rows:
            head = f"{escape(printable(row.listing.serial, 128, newlines=False))}  {escape(row.listing.state)}"
            if row.info is not None:
                head += "  " + self._phone(row.info)
            elif row.problem:
                head += f"  [yellow]{escape(printable(row.problem, newlines=False))}[/]"
            self.out.print(head)

    @staticmethod
    def _phone(info: "DeviceInfo") -> str:
        facts = [info.label, info.cores_label, f"{info.ram_mb} MB RAM" if info.ram_mb else "RAM ?",
                 info.abi or "ABI ?", f"Android {info.android_version}" if info.android_version else "Android ?"]
        text = escape(printable("  ".join(facts), newlines=False))
        return text + (f"  [yellow]unknown: {escape(printable('; '.join(info.unknown), newlines=False))}[/]"
                       if info.unknown else "")

    def device_profile(self, path: Path, info: "DeviceInfo") -> None:
        """``device profile``: the file written and the phone it describes."""
        self.out.print(f"[green]✓[/] wrote {escape(str(path))}: {self._phone(info)}")
        self.out.print(f"use it with --profiles-dir {escape(str(path.parent))}")

    def predictions(self, items: Sequence[Any], as_json: bool, verbose: bool = False, layers: bool = False) -> None:
        """``predict``: the latency table and its legend (``verbose``: with every note), or the cells
        as JSON; ``layers``: then each cell's summary by node type (``report.layers``)."""
        from .console import latency_legend, latency_table

        if as_json:
            self.json(items)
            return
        self.out.print(latency_table(items))
        for line in latency_legend(items, verbose=verbose):
            self.out.print(line, markup=False, style="dim")
        if layers:
            from .layers import layers_tables

            for table in layers_tables(items):
                self.out.print(table)

    def calibration(self, outcome: "CalibrationOutcome", same_chipset: bool) -> None:
        """``calibrate add`` / ``from-log``: the records written, the profile's fit, its siblings."""
        self.warn(outcome.warnings)
        profile = escape(outcome.profile_id)
        for path, record in outcome.written:
            label = escape(printable(record.model_label, ENTRY_CHARS))
            self.out.print(f"[green]✓[/] {profile}: {label} measured "
                           f"{record.measured_ms:.4g} ms ({record.runtime}, {record.threads} thread(s)), predicted "
                           f"{record.predicted_ms:.4g} ms by {escape(printable(record.predictor))}: "
                           f"x{record.ratio:.3f}; [dim]{escape(str(path))}[/]")
        if outcome.fit is not None:
            self.out.print(f"{profile} is now calibrated for {outcome.runtime}, {outcome.threads} thread(s): "
                           f"{escape(outcome.fit)}"
                           + (f" [yellow]({escape(outcome.mismatch)})[/]" if outcome.mismatch else ""))
        if outcome.siblings:
            state = ("calibrated by these records too" if same_chipset else
                     "not calibrated by them (add --same-chipset to apply them there)")
            self.out.print(f"same chipset ({escape(outcome.chipset)}) and core: "
                           f"{escape(', '.join(outcome.siblings))}: {state}")

    def calibration_records(self, listing: "RecordListing") -> None:
        """``calibrate list``: one line per record; every field comes from the user's file."""
        self.warn(listing.warnings)
        folder = escape(str(listing.folder))
        if not listing.records:
            self.out.print(f"no calibration records in {folder}"
                           + (f" for {escape(listing.profile_id)}" if listing.profile_id else ""))
            return
        self.out.print(f"{len(listing.records)} calibration record(s) in {folder} (file: ID.json; times in ms)")

        def cell(text: str, limit: int = ENTRY_CHARS) -> str:
            return escape(printable(text, limit, newlines=False))

        for path, r in listing.records:
            note = f"; note: {cell(r.note)}" if r.note else ""
            scope = "; also same-chipset profiles" if r.scope == "same-chipset" else ""
            self.out.print(f"{cell(path.stem)}: {cell(r.profile_id)} {cell(r.model_label)} measured "
                           f"{r.measured_ms:.4g}, predicted {r.predicted_ms:.4g} (x{r.ratio:.3f}), {r.runtime}, "
                           f"{r.threads} thread(s), {cell(r.date[:10])}{scope}{note}", soft_wrap=True)

    def removed(self, warnings: Sequence[str], removed: Sequence["Removed"]) -> None:
        self.warn(warnings)
        for item in removed:
            record = item.record
            self.out.print(f"removed {escape(item.record_id)} ({escape(record.profile_id)}, "
                           f"{escape(printable(record.model_label, ENTRY_CHARS))} {record.measured_ms:.4g} ms)")

    def derived(self, variants: Sequence["ModelFile"]) -> None:
        for item in variants:
            note = f" [dim]({escape(item.note)})[/]" if item.note else ""
            params = f"{item.params:,}" if item.params is not None else "?"
            self.out.print(f"[green]✓[/] {item.level}: {escape(str(item.variant_path))} "
                           f"({item.size_bytes / 1e6:.1f} MB, {params} params){note}")

    def inspections(self, report: "InspectionReport", as_json: bool) -> None:
        """``inspect``: one fact per line per file (a ✗ line for a file that could not be
        inspected), and the eval data's shape against each model's input; or JSON."""
        if as_json:
            self.json(report.found)
            return
        from ..inspection import InspectionFailure
        from .console import inspection_lines

        for item in report.found:
            if isinstance(item, InspectionFailure):
                self.err.print(f"[red]✗[/] {escape(printable(item.error))}", soft_wrap=True)
                continue
            for line in inspection_lines(item):
                self.out.print(line, markup=False, highlight=False, soft_wrap=True)
            if report.data is not None:
                self.out.print(f"  eval data: {report.data_line(item)}", markup=False, highlight=False,
                               soft_wrap=True)

    # -- build-image (``sandbox.image.ImageEvents``) --------------------------------------------

    def image_kept(self, status: "ImageStatus") -> None:
        self.out.print(f"[green]✓[/] {status.tag} already built ({status.short_id}); --force rebuilds")

    def image_stale(self, status: "ImageStatus") -> None:
        self.out.print(f"[yellow]![/] {status.tag} was built from another recipe (Dockerfile, pins or "
                       "sources changed): rebuilding")

    @contextlib.contextmanager
    def images_building(self, tags: Sequence[str]) -> Iterator[Any]:
        """One spinner showing each running build's last log line."""
        last: dict[str, str] = {}
        with self.out.status(f"building {', '.join(tags)}") as spinner:
            def line(tag: str, text: str) -> None:
                last[tag] = text[:100 // max(1, min(2, len(tags)))]
                spinner.update("[dim]" + " | ".join(f"{t.split(':')[0]}: {escape(x)}" for t, x in last.items()) + "[/]")
            yield line

    def image_built(self, info: "ImageInfo") -> None:
        self.out.print(f"[green]✓[/] built {info.tag} ({info.short_id}, {info.size_mb:,.0f} MB, "
                       f"{info.build_s:.0f} s)")

    def fetched(self, name: str, folder: Path) -> None:
        self.out.print(f"[green]✓[/] {name} predictor data in {folder}")
