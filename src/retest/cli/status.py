"""``retest status [REVISION]``: per-class counts of a project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["project_option", "register"]

project_option = typer.Option(
    "--project",
    "-p",
    envvar="RETEST_PROJECT",
    help="Project directory (default: the current directory or a parent).",
)


def status(
    revision: Annotated[
        str | None,
        typer.Argument(
            help="Revision for the sampled/reviewed columns (default: latest)."
        ),
    ] = None,
    project_dir: Annotated[Path | None, project_option] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per class: candidates, annotated, blacklisted, near-duplicates, sampled, reviewed."""
    from retest.cli._console import print_json, print_table
    from retest.pipeline.project import Project
    from retest.pipeline.status import project_status

    with Project.open(project_dir) as project:
        result = project_status(project, revision=revision)
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    cols = ["class", "candidates", "annotated", "blacklisted", "near-dups", "sampled"]
    rows = [
        [r["class"], r["candidates"], r["annotated"], r["blacklisted"],
         r["near_duplicates"], r["sampled"], r["reviewed"]]
        for r in data["classes"]
    ]  # fmt: skip
    title = f"{result.project} — revision {result.revision or '(none)'}"
    print_table([*cols, "reviewed"], rows, title=title)


def register(app: typer.Typer) -> None:
    app.command("status")(status)
