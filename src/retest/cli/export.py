"""``retest export REVISION --format npy|cifar|imagefolder|parquet --out DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest._validation import check_batch_size, fmt_count
from retest.cli._options import JsonOpt, ProjectOpt, name_option, output_option

__all__ = ["register"]


def export(
    revision: Annotated[str, typer.Argument(help="Revision to export.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="npy, cifar, imagefolder or parquet.")
    ] = "npy",
    out: Annotated[
        Path | None,
        output_option(
            "export",
            "--out",
            help="Output folder (default: revisions/REVISION/FORMAT).",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            callback=name_option("export"),
            help="File-name prefix (npy, parquet).",
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Images per CIFAR batch file.")
    ] = 10_000,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace an output folder that retest exported and that holds "
            "nothing else.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Export an invalid or empty revision, or one with members that "
            "are no longer eligible.",
        ),
    ] = False,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a revision as a dataset release with manifest.json and checksums.

    Refuses (exit 1, nothing written) an invalid, empty or no-longer-eligible
    revision unless --force, and any image whose bytes no longer match its
    content hash.
    """
    from retest.cli._console import console, print_json, print_warning, progress_bar
    from retest.project import Project
    from retest.stages.export import export_revision

    check_batch_size(batch_size, "--batch-size")
    if out is not None:
        from retest._validation import check_writable

        check_writable(out.parent if out.is_dir() else out)
    with Project.open(project_dir) as project, progress_bar(disable=as_json) as cb:
        res = export_revision(
            project,
            revision,
            format=fmt,
            out=out,
            name=name,
            batch_size=batch_size,
            overwrite=overwrite,
            strict=not force,
            progress=cb,
        )
    if as_json:
        print_json(
            {
                "out": str(res.out),
                "format": res.format,
                "n_images": res.n_images,
                "files": res.files,
                "cleaned": list(res.cleaned),
            }
        )
    else:
        console.print(
            f"Exported {fmt_count(res.n_images)} images of {revision!r} as {res.format} to "
            f"{res.out} ({fmt_count(len(res.files))} files, manifest.json)"
        )
    if res.cleaned and not as_json:
        print_warning(
            f"cleaned up {len(res.cleaned)} leftovers of killed exports: "
            + ", ".join(res.cleaned)
        )


def register(app: typer.Typer) -> None:
    app.command("export")(export)
