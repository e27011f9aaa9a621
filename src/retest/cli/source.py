"""``retest source add KIND PATH`` / ``retest source list``: candidate ingest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from retest.cli._options import JsonOpt, ProjectOpt

__all__ = ["register"]

source_app = typer.Typer(
    help="Ingest candidate images (arrays, idx, cifar, folder, tinyimages, flickr).",
    no_args_is_help=True,
)


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


@source_app.command("add")
def add(
    kind: Annotated[
        str, typer.Argument(help="Source kind (see `retest source kinds`).")
    ],
    path: Annotated[Path, typer.Argument(help="File or folder of the source.")],
    keywords: Annotated[
        str | None, typer.Option("--keywords", help="TinyImages keywords: a,b,c.")
    ] = None,
    keywords_file: Annotated[
        Path | None,
        typer.Option(
            "--keywords-file",
            help="Keywords, one per line, or JSON {class: [keyword, ...]}.",
        ),
    ] = None,
    class_name: Annotated[
        str | None, typer.Option("--class", help="Class of every item.")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Source name (default: the kind).")
    ] = None,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="IDX labels file.")
    ] = None,
    images: Annotated[
        Path | None, typer.Option("--images", help="Flickr download folder.")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Items per batch.")
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest a source's images as candidates (resumable; exact copies de-duplicated)."""
    from retest.cli._console import print_json, print_table, print_warning, progress_bar
    from retest.pipeline.ingest import add_source
    from retest.pipeline.project import Project

    with Project.open(project_dir) as project, progress_bar(disable=as_json) as bar:
        rep = add_source(
            project.store, project.root, kind, path,
            keywords=_split(keywords), keywords_file=keywords_file,
            class_name=class_name, name=name, labels_path=labels, images_dir=images,
            batch_size=batch_size, progress=bar,
        )  # fmt: skip
    if as_json:
        print_json(rep.to_json())
        return
    rows: list[list[Any]] = [
        ["source", rep.name], ["kind", rep.kind], ["path", rep.path],
        ["items", rep.total], ["new candidates", rep.new],
        ["exact duplicates", rep.duplicates], ["unreadable (skipped)", len(rep.skipped)],
    ]  # fmt: skip
    print_table(["ingest", "value"], rows, title=f"ingest {rep.job}")
    for s in rep.skipped[:20]:
        print_warning(f"skipped {s['ref']}: {s['reason']}")
    missing = rep.source.get("missing_keywords")
    if missing:
        print_warning(f"keywords not in TinyImages: {', '.join(missing)}")


@source_app.command("list")
def list_(project_dir: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """Ingest jobs of the project with their counts."""
    from retest.cli._console import print_json, print_table
    from retest.pipeline.ingest import list_ingests
    from retest.pipeline.project import Project

    with Project.open(project_dir) as project:
        jobs = list_ingests(project.store, project.root)
    if as_json:
        print_json(jobs)
        return
    cols = ["name", "kind", "path", "items", "new", "duplicates", "skipped", "complete"]
    rows = [
        [j["name"], j["kind"], j["path"], j["total"], j["new"], j["duplicates"],
         j["skipped"], "yes" if j["complete"] else f"no ({j['processed']} done)"]
        for j in jobs
    ]  # fmt: skip
    print_table(cols, rows, title="sources")


@source_app.command("kinds")
def kinds() -> None:
    """Registered source kinds."""
    from retest.cli._console import console
    from retest.sources.candidates import CANDIDATE_SOURCES

    for k in CANDIDATE_SOURCES.names():
        console.print(k)


def register(app: typer.Typer) -> None:
    app.add_typer(source_app, name="source")
