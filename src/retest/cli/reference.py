"""``retest reference add|keywords|show``: the original dataset and its keywords."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest._validation import check_input_path, fmt_count
from retest.cli._options import JsonOpt, ProjectOpt
from retest.errors import ConfigError, UnknownNameError
from retest.registry import close_matches

__all__ = ["REFERENCE_FORMATS", "REFERENCE_SPLITS", "register"]

#: Splits of an original dataset a project keeps (ids ``train:i`` / ``test:i``).
REFERENCE_SPLITS = ("train", "test")
#: File formats a reference split can be read from (besides dataset names).
REFERENCE_FORMATS = ("cifar", "idx", "arrays")

reference_app = typer.Typer(
    help="Register the original dataset's splits and recover their keywords.",
    no_args_is_help=True,
)


def _choice(value: str, allowed: tuple[str, ...] | list[str], what: str) -> str:
    if value not in allowed:
        close = close_matches(value, list(allowed), n=3)
        raise UnknownNameError(what, value, close, list(allowed))
    return value


def _check_add(kind: str, split: str, labels: Path | None) -> str:
    """``kind`` as registered (a dataset may be typed with hyphens), checked."""
    from retest.datasets.base import DATASETS, dataset_name

    kind = dataset_name(kind)
    _choice(kind, [*REFERENCE_FORMATS, *DATASETS.names()], "reference kind")
    if split not in REFERENCE_SPLITS:
        raise ConfigError(
            f"--split must be one of {', '.join(REFERENCE_SPLITS)}. Got {split!r}."
        )
    if labels is not None and kind != "idx":
        raise ConfigError(
            f"--labels applies to kind 'idx' only; {kind!r} holds its own labels."
        )
    return kind


@reference_app.command("add")
def add(
    kind: Annotated[
        str,
        typer.Argument(
            help="cifar, idx, arrays, or a dataset name (cifar10, fashion-mnist)."
        ),
    ],
    path: Annotated[Path, typer.Argument(help="File or folder (dataset root).")],
    split: Annotated[
        str, typer.Option("--split", help=f"{' or '.join(REFERENCE_SPLITS)}.")
    ],
    labels: Annotated[
        Path | None, typer.Option("--labels", help="IDX labels file.")
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register one split of the original dataset (pixels, labels, keywords if known)."""
    from retest.cli._console import console, print_json, print_table, progress_bar
    from retest.project import Project
    from retest.stages.reference import register_reference

    kind = _check_add(kind, split, labels)
    check_input_path(path, f"{kind} reference PATH")
    if labels is not None:
        check_input_path(labels, "--labels", kind="file")
    with Project.open(project_dir) as project, progress_bar(disable=as_json) as bar:
        rep = register_reference(
            project, kind, path, split=split, labels_path=labels, progress=bar
        )
    if as_json:
        print_json(rep.to_json())
        return
    rows = [[c, fmt_count(n)] for c, n in rep.class_counts.items()]
    print_table(["class", "images"], rows, title=f"reference {rep.split}")
    # a line, not the title: a title wraps to the width of this narrow table
    console.print(
        f"reference {rep.split}: {fmt_count(rep.n)} images ({fmt_count(rep.new)} "
        f"new), {fmt_count(rep.with_keyword)} with keyword",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


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
    """Recover each reference image's keyword by exact match to TinyImages.

    See docs/algorithms.md#keyword-recovery.
    """
    from retest.cli._console import print_json, print_table, progress_bar
    from retest.project import Project
    from retest.stages.reference import recover_keywords

    kws = None
    if only is not None:
        kws = [k.strip() for k in only.split(",") if k.strip()]
        if not kws:
            raise ConfigError(f"--only needs at least one keyword, a,b. Got {only!r}.")
    check_input_path(tinyimages, "TINYIMAGES folder", kind="dir")
    with Project.open(project_dir) as project, progress_bar(disable=as_json) as bar:
        rep = recover_keywords(project, tinyimages, keywords=kws, progress=bar)
    if as_json:
        print_json(rep.to_json())
        return
    rows = [[c, sum(h.values()), len(h)] for c, h in rep.histogram.items()]
    title = (
        f"{fmt_count(rep.matched)}/{fmt_count(rep.n_reference)} reference images "
        f"matched ({fmt_count(rep.scanned)} scanned)"
    )
    print_table(["class", "images with keyword", "keywords"], rows, title=title)


@reference_app.command("show")
def show(
    top: Annotated[int, typer.Option("--top", help="Keywords per class (>= 1).")] = 10,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The per-class keyword histogram of the reference dataset."""
    from retest.cli._console import print_json, print_table
    from retest.project import Project
    from retest.stages.reference import reference_keyword_histogram

    if top < 1:
        raise ConfigError(f"--top must be an integer >= 1. Got {top}.")
    with Project.open(project_dir) as project:
        hist = reference_keyword_histogram(project)
        n = project.store.references.count()
    if as_json:
        print_json({"n_reference": n, "histogram": hist})
        return
    rows = []
    for cls, h in hist.items():
        best = sorted(h.items(), key=lambda kv: kv[1], reverse=True)[:top]
        rows.append([cls, sum(h.values()), ", ".join(f"{k} {v}" for k, v in best)])
    print_table(
        ["class", "images", f"top {top} keywords"],
        rows,
        title=f"{fmt_count(n)} reference images",
    )


def register(app: typer.Typer) -> None:
    app.add_typer(reference_app, name="reference")
