"""``retest export REVISION --format npy|cifar|imagefolder|parquet --out DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest.cli._options import JsonOpt, ProjectOpt

__all__ = ["register"]


def export(
    revision: Annotated[str, typer.Argument(help="Revision to export.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="npy, cifar, imagefolder or parquet.")
    ] = "npy",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Output folder (default: revisions/REVISION/FORMAT)."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="File-name prefix (npy, parquet).")
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Images per CIFAR batch file.")
    ] = 10_000,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a non-empty output folder.")
    ] = False,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a revision as a dataset release with manifest.json and checksums."""
    from retest.cli._console import console, print_json, progress_bar
    from retest.pipeline.export import export_revision
    from retest.pipeline.project import Project

    with Project.open(project_dir) as project, progress_bar(disable=as_json) as cb:
        res = export_revision(
            project,
            revision,
            format=fmt,
            out=out,
            name=name,
            batch_size=batch_size,
            overwrite=overwrite,
            progress=cb,
        )
    if as_json:
        print_json(
            {
                "out": str(res.out),
                "format": res.format,
                "n_images": res.n_images,
                "files": res.files,
            }
        )
    else:
        console.print(
            f"Exported {res.n_images} images of {revision!r} as {res.format} to "
            f"{res.out} ({len(res.files)} files, manifest.json)"
        )


def register(app: typer.Typer) -> None:
    app.command("export")(export)
