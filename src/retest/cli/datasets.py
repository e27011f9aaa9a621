"""``retest datasets``: list, fetch (sha256-checked, idempotent) and describe datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from retest.cli._options import JsonOpt, output_option, read_only_option

__all__ = ["register"]

datasets_app = typer.Typer(
    help="Reference datasets: CIFAR-10, CIFAR-10.1, ImageNetV2, Fashion-MNIST.",
    no_args_is_help=True,
)

NameArg = Annotated[
    str, typer.Argument(help="Dataset name (see `retest datasets list`).")
]
RootOpt = Annotated[
    Path | None,
    read_only_option(
        "--root", help="Directory holding the files (default: cache dir)."
    ),
]
FetchRootOpt = Annotated[
    Path | None,
    output_option(
        "datasets fetch",
        "--root",
        help="Directory holding the files (default: cache dir; never in a project).",
    ),
]
VersionOpt = Annotated[
    str | None, typer.Option("--version", help="Version / variant, e.g. v4, v6.")
]


@datasets_app.command("list")
def list_datasets(as_json: JsonOpt = False) -> None:
    """List the available datasets."""
    from retest.cli._console import print_json, print_table
    from retest.datasets.base import dataset_names, get_dataset

    rows: list[dict[str, Any]] = []
    for name in dataset_names():
        src = get_dataset(name)
        rows.append(
            {
                "name": name,
                "versions": list(src.versions),
                "splits": list(src.splits),
                "description": src.description,
            }
        )
    if as_json:
        print_json(rows)
        return
    print_table(
        ["name", "versions", "splits", "description"],
        [
            [
                r["name"],
                ", ".join(r["versions"]) or "-",
                ", ".join(r["splits"]),
                r["description"],
            ]
            for r in rows
        ],
    )


@datasets_app.command("fetch")
def fetch(
    name: NameArg,
    root: FetchRootOpt = None,
    version: VersionOpt = None,
    mirror: Annotated[
        str | None, typer.Option("--mirror", help="Base URL of a mirror of the files.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Download (if needed), verify and unpack a dataset."""
    from retest.cli._console import console, print_json, progress_bar
    from retest.datasets.base import fetch_dataset

    with progress_bar(disable=as_json) as progress:
        src = fetch_dataset(
            name, root=root, version=version, mirror=mirror, progress=progress
        )
    status = src.status()
    if as_json:
        print_json(
            {
                "name": src.name,
                "version": src.version,
                "root": str(src.root),
                "files": status,
            }
        )
        return
    for fname, state in status.items():
        console.print(f"{state:>10}  {fname}")
    console.print(f"{src.name} ready in {src.root}")


@datasets_app.command("info")
def info(
    name: NameArg,
    root: RootOpt = None,
    version: VersionOpt = None,
    counts: Annotated[
        bool, typer.Option("--counts/--no-counts", help="Load splits to count images.")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Provenance, file checksums status, classes and per-split counts."""
    from retest.cli._console import console, print_json, print_table
    from retest.datasets.base import get_dataset

    data = get_dataset(name, root=root, version=version).info(counts=counts)
    if as_json:
        print_json(data)
        return
    version_txt = f" ({data['version']})" if data["version"] else ""
    console.print(f"[bold]{data['name']}[/]{version_txt}: {data['description']}")
    console.print(f"root: {data['root']}   license: {data['license']}")
    print_table(
        ["file", "status", "sha256", "url"],
        [
            [f["filename"], f["status"], (f["sha256"] or "unknown")[:16], f["url"]]
            for f in data["files"]
        ],
    )
    classes = data["classes"]
    if classes:
        shown = ", ".join(classes[:10]) + (
            f", … ({len(classes)})" if len(classes) > 10 else ""
        )
        console.print(f"classes: {shown}")
    for split, c in data["counts"].items():
        console.print(f"{split}: {c['n']} images")
    if not data["ready"]:
        console.print(
            f"not fetched: run `retest datasets fetch {data['name']} --root {data['root']}`"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(datasets_app, name="datasets")
