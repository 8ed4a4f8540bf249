"""Progress reporting for long runs, kept apart from the runner so the runner never prints.

The runner talks to a ``ProgressSink``; the CLI passes a rich progress bar (pairs done / total,
current model and device, elapsed, ETA), tests pass ``NullProgress``.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressSink(Protocol):
    def stage(self, text: str) -> None:
        """A preparatory step (ONNX export, prediction) is starting."""

    def start_pairs(self, total: int, done: int) -> None:
        """``total`` (model x device) pairs are planned, ``done`` of them already finished."""

    def working_on(self, text: str) -> None:
        """What the measurement is busy with now (model and memory limit)."""

    def pair_done(self, model_label: str, profile_label: str) -> None:
        """One more (model x device) pair has its row."""


class NullProgress:
    """A sink that ignores everything (tests, library use)."""

    def stage(self, text: str) -> None:
        pass

    def start_pairs(self, total: int, done: int) -> None:
        pass

    def working_on(self, text: str) -> None:
        pass

    def pair_done(self, model_label: str, profile_label: str) -> None:
        pass


class RichProgress:
    """A live rich progress bar on stderr; a context manager so the bar always stops."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("pairs"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self._task: Optional[TaskID] = None

    def __enter__(self) -> "RichProgress":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self._task is not None:
            if exc_type is not None:  # an error message follows: do not leave a half-done bar above it
                self._progress.live.transient = True
            self._progress.stop()

    def _update(self, **fields: Any) -> None:
        # Started on first use, so input errors found before any work leave no empty bar behind.
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task("preparing", total=None)
        self._progress.update(self._task, **fields)

    def stage(self, text: str) -> None:
        self._update(description=text)

    def start_pairs(self, total: int, done: int) -> None:
        self._update(total=total, completed=done, description="measuring")

    def working_on(self, text: str) -> None:
        self._update(description=text)

    def pair_done(self, model_label: str, profile_label: str) -> None:
        self._update(advance=1, description=f"{model_label} on {profile_label}")
