"""``retest reference add|keywords|show``: the original dataset and its keywords."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest.cli._options import JsonOpt, ProjectOpt

__all__ = ["register"]

reference_app = typer.Typer(
    help="Register the original dataset's splits and recover their keywords.",
    no_args_is_help=True,
)


@reference_app.command("add")
def add(
    kind: Annotated[
        str,
        typer.Argument(
            help="cifar, idx, arrays, or a dataset name (cifar10, fashion_mnist)."
        ),
    ],
    path: Annotated[Path, typer.Argument(help="File or folder (dataset root).")],
    split: Annotated[str, typer.Option("--split", help="train or test.")],
    labels: Annotated[
        Path | None, typer.Option("--labels", help="IDX labels file.")
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register one split of the original dataset (pixels, labels, keywords if known)."""
    from retest.cli._console import print_json, print_table, progress_bar
    from retest.pipeline.project import Project
    from retest.pipeline.reference import register_reference

    with Project.open(project_dir) as project, progress_bar(disable=as_json) as bar:
        rep = register_reference(
            project.store, project.root, kind, path, split=split, labels_path=labels,
            progress=bar,
        )  # fmt: skip
    if as_json:
        print_json(rep.to_json())
        return
    rows = [[c, n] for c, n in rep.class_counts.items()]
    title = f"reference {rep.split}: {rep.n} images ({rep.new} new), {rep.with_keyword} with keyword"
    print_table(["class", "images"], rows, title=title)


@reference_app.command("keywords")
def keywords(
    tinyimages: Annotated[
        Path, typer.Argument(help="Folder with the TinyImages files.")
    ],
    only: Annotated[
        str | None,
        typer.Option("--only", help="Scan only these keywords' records: a,b,c."),
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recover each reference image's keyword by exact match to TinyImages (SPEC §1.2)."""
    from retest.cli._console import print_json, print_table, progress_bar
    from retest.pipeline.project import Project
    from retest.pipeline.reference import recover_keywords

    kws = [k.strip() for k in only.split(",") if k.strip()] if only else None
    with Project.open(project_dir) as project, progress_bar(disable=as_json) as bar:
        rep = recover_keywords(
            project.store, project.root, tinyimages, keywords=kws, progress=bar
        )
    if as_json:
        print_json(rep.to_json())
        return
    rows = [[c, sum(h.values()), len(h)] for c, h in rep.histogram.items()]
    title = f"{rep.matched}/{rep.n_reference} reference images matched ({rep.scanned} scanned)"
    print_table(["class", "images with keyword", "keywords"], rows, title=title)


@reference_app.command("show")
def show(
    top: Annotated[int, typer.Option("--top", min=1, help="Keywords per class.")] = 10,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The per-class keyword histogram of the reference dataset."""
    from retest.cli._console import print_json, print_table
    from retest.pipeline.project import Project
    from retest.pipeline.reference import reference_keyword_histogram

    with Project.open(project_dir) as project:
        hist = reference_keyword_histogram(project.store)
        n = project.store.references.count()
    if as_json:
        print_json({"n_reference": n, "histogram": hist})
        return
    rows = []
    for cls, h in hist.items():
        best = sorted(h.items(), key=lambda kv: kv[1], reverse=True)[:top]
        rows.append([cls, sum(h.values()), ", ".join(f"{k} {v}" for k, v in best)])
    print_table(
        ["class", "images", f"top {top} keywords"], rows, title=f"{n} reference images"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(reference_app, name="reference")
