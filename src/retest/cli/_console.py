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


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    table = Table(title=title, show_lines=False)
    # the first column names things (revisions, classes, ids): never cut it
    first = max((len(x) for r in rows if r for x in str(r[0]).splitlines()), default=0)
    for i, c in enumerate(columns):
        if i == 0:
            table.add_column(c, justify="left", min_width=min(first, 72))
        else:
            table.add_column(c, justify="right")
    for r in rows:
        table.add_row(*(str(x) for x in r))
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
