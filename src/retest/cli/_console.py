"""All terminal rendering: the only module that imports rich.

Tables, progress bars (as :class:`~retest._progress.ProgressCallback`), JSON
output and one-line errors.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from retest._progress import ProgressCallback

__all__ = [
    "console",
    "escape",
    "print_error",
    "print_json",
    "print_table",
    "print_warning",
    "progress_bar",
]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def print_error(message: str) -> None:
    """``error: <message>`` on stderr, one line."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def print_warning(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)


def print_json(data: Any) -> None:
    """Machine-readable output on stdout (no colour, no wrapping)."""
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


_WRAPPED = 24
"""Table cells longer than this may wrap (see :func:`print_table`)."""


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    """A table whose every column shows on the console, piped output (80
    columns) included. The first column names things (revisions, classes, ids)
    and is never cut with an ellipsis: it stays whole on one line if the other
    columns fit beside it with their headers, else it folds onto further lines
    (every character kept) beside the others whole. Columns that cannot all
    fit even so (``status``'s counts, ``revisions`` at 80) are printed as
    several tables one under the other, each repeating the first column, every
    cell whole: only a two-column table cuts a cell longer than its header."""
    cells = [[str(x) for x in r] for r in rows]
    first = max((len(x) for r in cells if r for x in r[0].splitlines()), default=0)
    # the other columns: whole (header and every cell), or at least their header
    # (a longer cell then cut); long text (messages) wraps within _WRAPPED
    whole = [
        min(_WRAPPED, max([len(c), *(len(r[i]) for r in cells if len(r) > i)]))
        for i, c in enumerate(columns)
        if i
    ]
    least = [min(_WRAPPED, len(c)) for c in columns[1:]]
    # each column has a space either side and a border after it, plus one before
    free = console.width - 3 * len(columns) - 1
    if first + sum(whole) <= free:  # everything whole, one line per row
        lead, others, cut = min(first, 72), whole, False
    elif len(columns) == 2 and first + sum(least) <= free:  # a longer cell cut
        lead, others, cut = min(first, 72), least, True
    elif free - sum(whole) >= 12:  # the others whole; the first folds
        lead, others, cut = free - sum(whole), whole, False
    elif len(columns) > 2:  # even the headers are too wide: split the columns
        for n, part in enumerate(_column_groups(min(first, 72), whole)):
            print_table(
                [columns[0], *(columns[i] for i in part)],
                [[r[0], *(r[i] if len(r) > i else "" for i in part)] for r in cells],
                title=title if n == 0 else None,
            )
        return
    else:  # two columns that do not fit: rich shares the width out
        lead, others, cut = min(first, 72), [0] * len(least), True
    table = Table(title=title, show_lines=False)
    for i, c in enumerate(columns):
        if i == 0:
            table.add_column(c, justify="left", min_width=lead, overflow="fold")
        else:
            w = others[i - 1]
            short = bool(w) and not cut and w < _WRAPPED  # a message may wrap
            # a long cell (a message, a path) folds, never cut; a column of
            # messages reads from the left, one with numbers keeps them aligned
            col = [r[i] for r in cells if len(r) > i]
            long = any(len(x) > _WRAPPED for x in col)
            text = long and not any(_numeric(x) for x in col)
            table.add_column(
                c,
                justify="left" if text else "right",
                min_width=w or None,
                no_wrap=short,
                overflow="fold" if long else "ellipsis",
            )
    for r in cells:
        table.add_row(*r)
    console.print(table)


def _numeric(cell: str) -> bool:
    """A count or a measure as the tables print them (``1,234``, ``-0.5``)."""
    return cell.replace(",", "").replace(".", "", 1).lstrip("+-").isdigit()


def _column_groups(first: int, widths: Sequence[int]) -> list[list[int]]:
    """Consecutive groups of the columns after the first (1-based indexes into
    the table's columns, ``widths`` their whole widths) that each fit the console
    beside a ``first`` column: the fewest tables, columns in their order. A
    column too wide for any group gets one of its own."""
    groups: list[list[int]] = [[]]
    used = first
    for i, w in enumerate(widths, start=1):
        g = groups[-1]
        if g and used + w > console.width - 3 * (len(g) + 2) - 1:
            groups.append([])
            g, used = groups[-1], first
        g.append(i)
        used += w
    return groups


class _RateColumn(TextColumn):
    def __init__(self) -> None:
        super().__init__("")

    def render(self, task: Any) -> Any:
        from rich.text import Text

        speed = task.finished_speed or task.speed
        return Text(
            "" if speed is None else f"{speed:,.1f}/s", style="progress.data.speed"
        )


@contextmanager
def progress_bar(*, disable: bool = False) -> Iterator[ProgressCallback]:
    """A progress callback that draws one bar per task name, with counts and rates."""
    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=disable,
        transient=False,
    )
    tasks: dict[str, TaskID] = {}

    def callback(task: str, done: int, total: int | None) -> None:
        if not tasks:
            prog.start()
        if task not in tasks:
            tasks[task] = prog.add_task(task, total=total)
        prog.update(tasks[task], completed=done, total=total)

    # started on the first report only: a bar stopped before it drew anything
    # still writes an empty line, which would come before an ``error:`` line
    try:
        yield callback
    finally:
        if tasks:
            prog.stop()
