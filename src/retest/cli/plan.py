"""``retest plan --rule v4|v6``: images needed per class and keyword."""

from __future__ import annotations

from typing import Annotated

import typer

from retest.cli._options import (
    CompatOpt,
    JsonOpt,
    ProjectOpt,
    SharedClassOpt,
    shared_classes,
)

__all__ = ["PLAN_RULES", "register"]

#: Keyword-allocation rules `retest plan` knows.
PLAN_RULES = ("v4", "v6")


def plan(
    rule: Annotated[
        str, typer.Option("--rule", help="v4 (ceil, 0.5 cut) or v6 (balanced).")
    ],
    size: Annotated[
        int, typer.Option("--size", min=1, help="Target dataset size.")
    ] = 2000,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", min=1, help="Keywords per class (v4: 25, v6: 50)."),
    ] = None,
    exclude: Annotated[
        str | None,
        typer.Option(
            "--exclude",
            help="v4: keywords forced to zero, kw1,kw2 (default: published list for CIFAR-10).",
        ),
    ] = None,
    compat: CompatOpt = "exact",
    shared_class: SharedClassOpt = None,
    per_class: Annotated[
        int | None,
        typer.Option(
            "--per-class",
            min=1,
            help="Images per class a revision would take, for what each sampling "
            "strategy needs (default --size / classes).",
        ),
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Plan how many new images each keyword needs (CIFAR-10.1 rules).

    Keywords come from the reference images (`retest reference keywords`); when
    they have none, from \\[keywords] in retest.toml (rule v6, equal weights).
    A second table shows, per class, what each sampling strategy needs against
    what the project has now (as `retest status` does).
    """
    from retest.cli._console import print_json, print_table, print_warning
    from retest.cli._feasibility import print_feasibility
    from retest.project import Project
    from retest.sampling.compat import check_compat
    from retest.stages.plan import make_plan
    from retest.stages.sample import class_feasibility

    compat = check_compat(compat)
    if rule not in PLAN_RULES:
        from retest.errors import ConfigError

        raise ConfigError(f"--rule must be {' or '.join(PLAN_RULES)}. Got {rule!r}.")
    excl = (
        [e.strip() for e in exclude.split(",") if e.strip()]
        if exclude is not None
        else None
    )
    with Project.open(project_dir) as project:
        result = make_plan(
            project,
            rule=rule,
            size=size,
            top_k=top_k,
            exclude=excl,
            compat=compat,
            shared_class=shared_classes(shared_class) or None,
        )
        n_classes = max(1, len(project.class_names))
        per_class = per_class or -(-size // n_classes)
        feasible = class_feasibility(project, per_class=per_class)
    if as_json:
        print_json({**result.to_json(), "feasibility": [f.to_dict() for f in feasible]})
        return
    rows = [
        [r["class"], r["keyword"], r["needed"], r["available"], r["missing"] or ""]
        for r in result.table
    ]
    title = (
        f"plan {rule} (keywords: {result.keyword_source}): {result.plan.total} "
        f"images, saved to {result.path}"
    )
    print_table(
        ["class", "keyword", "needed", "verified", "missing"], rows, title=title
    )
    totals = ", ".join(f"{c} {n}" for c, n in result.plan.totals().items())
    print_table(["per class"], [[totals]])
    for shared in result.shared:
        print_warning(shared["message"])
    for c in result.plan.conflicts:
        print_warning(
            f"keyword {c.keyword!r} is planned in {', '.join(c.classes)}: {c.resolution}"
        )
    print_feasibility(feasible, per_class)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
