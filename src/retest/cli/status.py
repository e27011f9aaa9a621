"""``retest status [REVISION]``: per-class counts of a project."""

from __future__ import annotations

from typing import Annotated

import typer

from retest.cli._options import JsonOpt, ProjectOpt

__all__ = ["register"]


def status(
    revision: Annotated[
        str | None,
        typer.Argument(
            help="Revision for the sampled/reviewed columns (default: latest)."
        ),
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per class: candidates, annotated, blacklisted, near-duplicates, sampled, reviewed."""
    from retest.cli._console import print_json, print_table
    from retest.pipeline.project import Project
    from retest.pipeline.status import project_status

    with Project.open(project_dir) as project:
        result = project_status(project, revision=revision)
        rev_stats = None
        if revision is not None:  # revision statistics (sampling, SPEC §5.7)
            from retest.cli.sample import revision_statistics_data

            rev_stats = revision_statistics_data(project, revision)
    data = result.to_dict()
    if rev_stats is not None:
        data["revision_statistics"] = rev_stats
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
    if rev_stats is not None:
        from retest.cli.sample import print_revision_statistics

        print_revision_statistics(rev_stats)


def register(app: typer.Typer) -> None:
    app.command("status")(status)
