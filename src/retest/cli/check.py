"""``retest check [--repair]``: verify the database, the pixels and find leftovers."""

from __future__ import annotations

from typing import Annotated

import typer

from retest._validation import fmt_count
from retest.cli._options import JsonOpt, ProjectOpt

__all__ = ["register"]


def check(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Give back orphan pixel rows and files, remove leftovers of killed "
            "processes (never touches anything in use).",
        ),
    ] = False,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the project: database integrity, pixels, orphans, leftovers.

    SQLite's integrity check and the schema version, every pixel row and image
    file against its content hash, orphaned pixel rows, leftovers of killed
    processes and interrupted ingests. Exit 1 when a problem remains (with
    --repair: one it did not repair); the last line says what was found,
    repaired and remains.
    """
    from retest.cli._console import console, print_json, print_table
    from retest.stages.check import check_project

    rep = check_project(project_dir, repair=repair)
    if as_json:
        print_json(rep.to_json())
    else:
        if rep.problems:
            rows = [
                [p.kind, fmt_count(p.count), "yes" if p.repaired else "no", p.detail]
                for p in rep.problems
            ]
            print_table(
                ["problem", "count", "repaired", "detail"],
                rows,
                title=f"check {rep.root}",
            )
        for note in rep.notes:
            console.print(f"note: {note}")
        stats = ", ".join(
            f"{k} {fmt_count(v) if type(v) is int else v}" for k, v in rep.stats.items()
        )
        verdict = _verdict(len(rep.problems), rep.remaining, repair=repair)
        console.print(f"{verdict} (checked: {stats})" if stats else verdict)
    if not rep.ok:
        raise typer.Exit(1)


def _verdict(found: int, remaining: int, *, repair: bool) -> str:
    """The summary line: what was found, and after --repair what was repaired
    and what remains (the exit code is 1 exactly when something remains)."""
    if not found:
        return "ok"
    text = f"{found} problem{'s' * (found != 1)} found"
    if not repair:
        return text
    repaired = found - remaining
    if not remaining:
        return f"ok: {text}, {'all ' if found > 1 else ''}repaired"
    done = f"{repaired} repaired" if repaired else "none repaired"
    return f"{text}, {done}, {remaining} remain{'s' * (remaining == 1)}"


def register(app: typer.Typer) -> None:
    app.command("check")(check)
