"""``retest split``: the overlap-minimising train/test split (CIFAR-10.2 style)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest._validation import fmt_count
from retest.cli._options import JsonOpt, ProjectOpt, output_option, seed_option
from retest.errors import ConfigError

__all__ = ["register"]


def split(
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            callback=seed_option,
            help="Seed of the per-class split, ≥ 0 (default: `split` under "
            "\\[seeds] in retest.toml, else "
            "CIFAR-10.2's 200).",
        ),
    ] = None,
    per_class: Annotated[
        int, typer.Option("--per-class", help="Images per class before the split.")
    ] = 1000,
    train_fraction: Annotated[
        float,
        typer.Option("--train-fraction", help="Share of each class for training."),
    ] = 0.8,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="min_overlap (images not in the original training set first) or "
            "first (pool order only).",
        ),
    ] = "min_overlap",
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision", "-r", help="Split this revision instead of the candidates."
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export", help="Split an exported revision (folder with manifest.json)."
        ),
    ] = None,
    include_unreviewed: Annotated[
        bool,
        typer.Option(
            "--include-unreviewed",
            help="Candidates: let through those awaiting a near-duplicate review.",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        output_option(
            "split",
            "--out",
            help="JSON file to write (default reports/split_<source>_seed<seed>.json).",
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace the --out file if it exists."),
    ] = False,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build a class-balanced training and test set that avoids the original training set.

    Per class, images not in the original training set (not near-copies of a
    training image) come first, overlapping ones only fill up; each class is then
    split at random (seeded). The result is written atomically as JSON (an
    existing --out file only with --overwrite). Exits 1
    (after writing) when a class is short.
    """
    from retest.cli._console import print_json, print_table
    from retest.project import Project
    from retest.stages.split import split_pool

    if per_class < 1:
        raise ConfigError(f"--per-class must be at least 1. Got {per_class}.")
    if not 0.0 <= train_fraction <= 1.0:
        raise ConfigError(f"--train-fraction must lie in [0, 1]. Got {train_fraction}.")
    if policy not in ("min_overlap", "first"):
        raise ConfigError(f"--policy must be min_overlap or first. Got {policy!r}.")
    if out is not None:
        from retest.stages.split import check_split_out

        check_split_out(out, overwrite=overwrite)
    with Project.open(project_dir) as project:
        if seed is None:
            seed = project.config.seed("split")
            seed = 200 if seed is None else seed
        res = split_pool(
            project,
            seed=seed,
            per_class=per_class,
            train_fraction=train_fraction,
            policy=policy,  # type: ignore[arg-type]
            revision=revision,
            export=export,  # type: ignore[arg-type]
            include_unreviewed=include_unreviewed,
            out=out,
            overwrite=overwrite,
        )
    data = res.to_json()
    if as_json:
        print_json(data)
    else:
        rows = [
            [c, m["n_train"], m["n_test"], m["overlap"]]
            for c, m in data["per_class"].items()
        ]
        print_table(
            ["class", "train", "test", "overlap"],
            rows,
            title=f"{res.source}: {fmt_count(res.n_pool)} images, seed {seed}",
        )
        typer.echo(
            f"wrote {fmt_count(len(res.train))} train and {fmt_count(len(res.test))} "
            f"test ids to {res.path}"
        )
    if not res.result.is_valid:
        from retest.cli._console import print_error

        short = ", ".join(
            f"{s.class_name} {s.got}/{s.needed}" for s in res.result.shortfall
        )
        print_error(f"too few eligible images for --per-class {per_class}: {short}.")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("split")(split)
