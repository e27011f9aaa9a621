"""``retest status [REVISION]``: per-class counts of a project."""

from __future__ import annotations

from typing import Annotated

import typer

from retest._validation import fmt_count
from retest.cli._options import JsonOpt, ProjectOpt

__all__ = ["register"]


def status(
    revision: Annotated[
        str | None,
        typer.Argument(
            help="Revision for the sampled/reviewed columns (default: latest)."
        ),
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            "--candidate", help="Show one candidate: why it may or may not be sampled."
        ),
    ] = None,
    include_unreviewed: Annotated[
        bool,
        typer.Option(
            "--include-unreviewed",
            help="Count candidates with pending reviews as eligible (as `retest "
            "sample --include-unreviewed` does).",
        ),
    ] = False,
    per_class: Annotated[
        int,
        typer.Option(
            "--per-class",
            min=1,
            help="Images per class a revision would take (for what each strategy "
            "needs).",
        ),
    ] = 10,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per-class counts and who may be sampled (the eligibility `retest sample` uses).

    Columns: candidates, annotated, blacklisted, near-duplicates, unreviewed,
    eligible, sampled and reviewed (of REVISION, default the latest). A second
    table shows what each strategy needs per class against what the project has:
    eligible candidates, those with ≥ 10 valid crowd assignments, originals
    with ≥ 10 valid assignments (matched-frequency needs 20 per class) and the
    originals its crowd tasks show; each strategy's cell is ok or what is short.
    """
    from retest.cli._console import console, print_json, print_table
    from retest.project import Project
    from retest.stages.status import candidate_status, project_status

    if candidate is not None:
        with Project.open(project_dir) as project:
            info = candidate_status(project, candidate)
        if as_json:
            print_json(info)
            return
        state = (
            "eligible"
            if info["eligible"]
            else "excluded: " + ", ".join(info["reasons"])
        )
        console.print(
            f"{info['id']} ({info['class']}, {info['source']}): {state}",
            markup=False,
            highlight=False,
            soft_wrap=True,  # the whole id on one line, to copy
        )
        console.print(
            f"  from {info['source']}: {info['source_ref']}"
            + (f" (keyword {info['keyword']})" if info.get("keyword") else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        for metric, near in info["nearest"].items():
            first = ", ".join(  # whole ids: each pastes back into --candidate
                f"{n['reference']} {max(n['distance'], 0.0):.4g}" for n in near[:3]
            )
            console.print(
                f"  nearest by {metric}: {first}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if info["revisions"]:
            console.print(
                f"  in revisions: {', '.join(info['revisions'])}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return
    from retest.errors import StageError
    from retest.project import (
        candidate_eligibility,
        check_fresh,
        missing_index_problem,
    )
    from retest.stages.sample import class_feasibility

    with Project.open(project_dir) as project:
        result = project_status(
            project, revision=revision, include_unreviewed=include_unreviewed
        )
        feasible = class_feasibility(
            project,
            per_class=per_class,
            eligibility=candidate_eligibility(
                project, include_unreviewed=include_unreviewed
            ),
        )
        try:  # the same refusal `retest sample` would give
            check_fresh(project)
            stale = None
        except StageError as err:
            stale = str(err)
        indexes = missing_index_problem(project)
        rev_stats = None
        if revision is not None:  # revision statistics (docs/algorithms.md#revisions)
            from retest.cli.sample import revision_statistics_data

            rev_stats = revision_statistics_data(project, revision)
    data = {
        **result.to_dict(),
        "stale": stale,
        "missing_indexes": indexes,
        "feasibility": [f.to_dict() for f in feasible],
    }
    if rev_stats is not None:
        data["revision_statistics"] = rev_stats
    if as_json:
        print_json(data)
        return
    cols = ["class", "candidates", "annotated", "blacklisted", "near-dups",
            "unreviewed", "eligible", "sampled", "reviewed"]  # fmt: skip
    keys = ("candidates", "annotated", "blacklisted", "near_duplicates",
            "unreviewed", "eligible", "sampled", "reviewed")  # fmt: skip
    rows = [
        [r["class"], *(fmt_count(r[k]) if type(r[k]) is int else r[k] for k in keys)]
        for r in data["classes"]
    ]
    title = f"{result.project} — revision {result.revision or '(none)'}"
    print_table(cols, rows, title=title)
    counts = result.eligibility["counts"]
    why = ", ".join(
        f"{fmt_count(v)} {k.replace('_', ' ')}"
        for k, v in counts.items()
        if v and k != "eligible"
    )
    console.print(
        f"eligible for sampling: {fmt_count(counts['eligible'])}"
        + (f"; excluded: {why}" if why else "")
    )
    from retest.cli._feasibility import print_feasibility

    print_feasibility(feasible, per_class)
    from retest.cli._console import print_warning

    if stale:
        print_warning(f"`retest sample` would refuse: {stale}")
    if indexes:
        print_warning(f"{indexes}.")
    heavy = result.eligibility.get("heavy_automatic_losses") or {}
    if heavy:
        shown = ", ".join(f"{k} {v:.0%}" for k, v in list(heavy.items())[:5])
        th = result.eligibility.get("near_original_threshold")
        print_warning(
            f"the automatic near-original rule (squared L2 ≤ {th:,.0f}) excludes "
            f"over 10 % of the candidates of: {shown}; originals of these classes "
            "lie close together. Consider a lower `near_original` under "
            "[thresholds] in retest.toml and reviewing the pairs instead."
        )
    if rev_stats is not None:
        from retest.cli.sample import print_revision_statistics

        print_revision_statistics(rev_stats)


def register(app: typer.Typer) -> None:
    app.command("status")(status)
