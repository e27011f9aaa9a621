"""``retest review``: queue items for review in the web app, list the queue."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest._validation import fmt_count
from retest.cli._options import JsonOpt, ProjectOpt, name_option

review_app = typer.Typer(
    help="Review queues shown in the web app (retest serve).", no_args_is_help=True
)


@review_app.command("queue-label-errors")
def queue_label_errors_cmd(
    file: Annotated[
        Path, typer.Argument(help="label_errors.json or .csv of `retest label-errors`.")
    ],
    project: ProjectOpt = None,
    split: Annotated[
        str | None,
        typer.Option(
            callback=name_option("split"),
            help="Original split the list's indices point into (default test).",
        ),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option(
            help="Revision the list's indices point into (its members in export "
            "order). Lists of `retest label-errors --revision` name their images "
            "and need neither."
        ),
    ] = None,
    top: Annotated[
        int | None, typer.Option(min=1, help="Queue only the top N suspects.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Queue ranked label-error suspects as "possible label error" items."""
    from retest.cli._console import console, print_json
    from retest.cli.reference import REFERENCE_SPLITS
    from retest.errors import ConfigError
    from retest.project import (
        Project,
        label_error_queue,
        load_suspects,
        queue_label_errors,
    )
    from retest.stages.label_errors import revision_item_ids

    if split is not None and revision is not None:
        raise ConfigError(
            "give --split or --revision (what the list's indices point into), not both."
        )
    split = split or "test"
    if split not in REFERENCE_SPLITS:
        raise ConfigError(
            f"--split must be one of {', '.join(REFERENCE_SPLITS)} (the original "
            f"split the list's indices point into; a revision: --revision). "
            f"Got {split!r}."
        )
    with Project.open(project) as proj:
        ids = revision_item_ids(proj, revision) if revision is not None else None
        suspects, method = load_suspects(file, split=split, top=top, ids=ids)
        new = queue_label_errors(proj, suspects, method=method, source=str(file))
        queue = label_error_queue(proj)
    pending = sum(1 for q in queue if q.pending)
    if as_json:
        print_json({"queued": new, "in_queue": len(queue), "pending": pending})
    else:
        console.print(
            f"{fmt_count(new)} new items queued; {fmt_count(pending)} of "
            f"{fmt_count(len(queue))} pending review "
            "(web app: /label-errors)"
        )


@review_app.command("label-errors")
def label_errors_cmd(project: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """List the label-error queue with the latest verdicts."""
    from dataclasses import asdict

    from retest.cli._console import print_json, print_table
    from retest.project import Project, label_error_queue

    with Project.open(project) as proj:
        items = label_error_queue(proj)
    if as_json:
        print_json([asdict(i) for i in items])
        return
    print_table(
        ["rank", "item", "given", "suggested", "verdict", "who"],
        [
            [
                i.rank,
                i.item_id,
                i.given,
                i.suggested,
                i.verdict or "pending",
                i.who or "",
            ]
            for i in items
        ],
        title=f"{len(items)} possible label errors",
    )


def register(app: typer.Typer) -> None:
    app.add_typer(review_app, name="review")
