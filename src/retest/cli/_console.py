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
    and is never cut with an ellipsis: when it does not fit beside the others it
    folds onto further lines, every character kept."""
    cells = [[str(x) for x in r] for r in rows]
    table = Table(title=title, show_lines=False)
    first = max((len(x) for r in cells if r for x in r[0].splitlines()), default=0)
    # short columns (counts, names, distances) are kept whole on one line;
    # longer text (messages) wraps within _WRAPPED characters
    others = [
        max([len(c), *(len(r[i]) for r in cells if len(r) > i)])
        for i, c in enumerate(columns)
        if i
    ]
    # each column has a space either side and a border after it, plus one before
    room = console.width - 3 * len(columns) - 1 - sum(min(w, _WRAPPED) for w in others)
    # the other columns whole, and the first beside them (folded if need be);
    # when even the others alone are too wide, rich shares the width out
    protect = room >= min(first, 12)
    for i, c in enumerate(columns):
        if i == 0:
            width = min(first, 72) if first <= room or not protect else room
            table.add_column(c, justify="left", min_width=width, overflow="fold")
        else:
            short = protect and others[i - 1] <= _WRAPPED
            table.add_column(
                c,
                justify="right",
                no_wrap=short,
                min_width=others[i - 1] if short else None,
            )
    for r in cells:
        table.add_row(*r)
    console.print(table)


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
