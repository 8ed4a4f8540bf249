"""Tables that read at any terminal width: columns declared once, each with a priority, and a
layout chosen when the table is printed, at the width of the console printing it.

Why: rich squeezes every column of a table wider than the terminal, so at 120 columns the device
names of the results table were cut to ``I…`` and every row wrapped over four lines. Here no cell
is ever cut or wrapped; instead, at a given width:

1. **one table**, every column; if it is too wide, the optional columns (``priority`` > 0) are
   left out, the highest priority number first, until it fits;
2. if the promised columns alone (``priority`` 0) are too wide, a **stacked** layout: one table
   per model under the model's name (the model column's width is what no longer fits), again
   leaving optional columns out as needed;
3. a footer names every column left out and says that the CSV and the JSON have them all.

Only headers wrap (at spaces, ``Peak RAM (MB)`` over two lines), never a cell. Adding a column
to a table is one ``Column`` in its declaration (``report.console``) with a priority saying how
early it goes when space is short; nothing here changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "FittedTable", "Layout"]

T = TypeVar("T")

_PADDING = 2  # rich's default cell padding: one space each side
_RULE = 1  # one vertical line between and around columns (the default box draws edges)


@dataclass(frozen=True)
class Column(Generic[T]):
    """One column: its header, how a row becomes its cell, and how early it is left out.

    ``priority`` 0: always shown (a column the product promised); 1, 2, ...: optional, the
    highest number left out first when the table is too wide. ``model``: the column naming the
    row's model, shown on the first row of each model and replaced by a heading in the stacked
    layout.
    """

    header: str
    cell: Callable[[T], Text]
    priority: int = 0
    justify: JustifyMethod = "left"
    model: bool = False


@dataclass(frozen=True)
class Layout(Generic[T]):
    """What a width allows: the columns shown, whether stacked, and the columns left out."""

    columns: tuple[Column[T], ...]
    stacked: bool
    dropped: tuple[str, ...]
    width: int  # the table's own width in this layout


def _header_min(header: str) -> int:
    return max((len(word) for word in header.split()), default=0)


class FittedTable(Generic[T]):
    """A table of ``groups`` (model label -> its rows, in order) that picks its layout when
    printed (see the module docstring). ``title`` and ``caption`` are printed above and below at
    the console's full width, not the table's, so a narrow table never wraps its title.

    ``title``, ``caption`` and ``columns`` (every declared column) stay readable as attributes,
    so a test or a docs check can ask what the table would show.
    """

    def __init__(self, title: str, columns: Sequence[Column[T]], groups: dict[str, list[T]],
                 caption: Optional[Text] = None, complete: str = "the CSV and JSON have them all") -> None:
        self.title = title
        self.columns = tuple(columns)
        self.groups = groups
        self.caption = caption
        self.complete = complete  # where a reader finds every column (the footer says it)
        self._cells = {id(c): [[c.cell(row) for row in rows] for rows in groups.values()] for c in self.columns}

    # -- widths -------------------------------------------------------------------------------------

    def _cell_width(self, column: Column[T]) -> int:
        widths = [cell.cell_len for group in self._cells[id(column)] for cell in group]
        if column.model:
            widths = [len(label) for label in self.groups]
        return max(widths, default=0)

    def _min_width(self, column: Column[T]) -> int:
        """The narrowest the column can be: its widest cell, its header's longest word."""
        return max(self._cell_width(column), _header_min(column.header))

    def _natural_width(self, column: Column[T]) -> int:
        """The column with its header on one line."""
        return max(self._cell_width(column), len(column.header))

    def table_width(self, columns: Sequence[Column[T]]) -> int:
        return sum(self._min_width(c) + _PADDING + _RULE for c in columns) + _RULE

    def layout(self, width: int) -> Layout[T]:
        """The layout for a console ``width`` columns wide (see the module docstring)."""
        can_stack = any(c.model for c in self.columns)  # a table of one kind of row has nothing to stack by
        for stacked in (False, True) if can_stack else (False,):
            shown = [c for c in self.columns if not (stacked and c.model)]
            optional = sorted((c for c in shown if c.priority > 0), key=lambda c: -c.priority)
            while self.table_width(shown) > width and optional:
                shown.remove(optional.pop(0))
            if self.table_width(shown) <= width or stacked or not can_stack:
                dropped = tuple(c.header for c in self.columns if c not in shown and not c.model)
                return Layout(tuple(shown), stacked, dropped, self.table_width(shown))
        raise AssertionError("unreachable")  # pragma: no cover - the last pass always returns

    def full_width(self) -> int:
        """The width every column needs in one table (what the footer tells a reader to use)."""
        return self.table_width(self.columns)

    # -- rendering ----------------------------------------------------------------------------------

    def _widths(self, layout: Layout[T], width: int) -> list[int]:
        """Each column's minimum, then any room left given to headers that would wrap."""
        widths = [self._min_width(c) for c in layout.columns]
        room = width - layout.width
        for i, column in enumerate(layout.columns):
            extra = min(room, self._natural_width(column) - widths[i])
            if extra > 0:
                widths[i] += extra
                room -= extra
        return widths

    def _table(self, layout: Layout[T], widths: Sequence[int], groups: Sequence[int]) -> Table:
        table = Table()
        for column, w in zip(layout.columns, widths):
            table.add_column(column.header, justify=column.justify, width=w)
        for g in groups:
            rows = self._cells[id(self.columns[0])][g]
            for i in range(len(rows)):
                table.add_row(*(self._cell(column, g, i) for column in layout.columns),
                              end_section=i == len(rows) - 1)
        return table

    def _cell(self, column: Column[T], group: int, i: int) -> Text:
        if column.model:
            return Text(list(self.groups)[group] if i == 0 else "", style="bold", no_wrap=True)
        cell = self._cells[id(column)][group][i].copy()
        cell.no_wrap = True
        return cell

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        layout = self.layout(width)
        widths = self._widths(layout, width)
        yield Text(self.title, style="italic")
        if not layout.stacked:
            yield self._table(layout, widths, range(len(self.groups)))
        else:
            for g, label in enumerate(self.groups):
                yield Text(label, style="bold")
                yield self._table(layout, widths, [g])
        if layout.dropped or layout.stacked:
            yield Text(self.footer(layout), style="dim")
        if self.caption is not None:
            yield self.caption

    def footer(self, layout: Layout[T]) -> str:
        """What this width left out or rearranged, and where everything is."""
        parts = []
        if layout.stacked:
            parts.append("one table per model: the model column does not fit beside the others")
        if layout.dropped:
            parts.append(f"not shown at this width: {', '.join(layout.dropped)}")
        text = "; ".join(parts)
        return (f"{text[:1].upper()}{text[1:]} (a {self.full_width()}-column terminal shows one table with "
                f"every column; {self.complete}).")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, self.layout(options.max_width).width), options.max_width)
