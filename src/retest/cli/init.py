"""``retest init DIR``: create a project (retest.toml, retest.db, data folders)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest.cli._options import name_option, output_argument
from retest.errors import ConfigError, InputValidationError
from retest.names import suggest_name

__all__ = ["register"]


def _split_classes(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",")]
    if any(not n for n in names):
        raise ConfigError(
            f"--classes must be a comma-separated list of class names. Got {value!r}."
        )
    return names


def init(
    directory: Annotated[
        Path, output_argument("init", help="Project directory (created).")
    ],
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            callback=name_option("project"),
            help="Project name (default: DIR's name).",
        ),
    ] = None,
    classes: Annotated[
        str | None,
        typer.Option("--classes", help="Class names in id order, e.g. cat,dog,bird."),
    ] = None,
    classes_from: Annotated[
        str | None,
        typer.Option(
            "--classes-from",
            help="Class names of a known dataset: cifar10, fashion-mnist.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Make the project in a folder that holds other files."
        ),
    ] = False,
) -> None:
    """Create a replication project in DIR (a new or empty folder)."""
    from retest.cli._console import console
    from retest.project import Project

    if classes is None and classes_from is None:
        raise ConfigError(
            "retest init needs the classes: pass --classes a,b,c or "
            "--classes-from cifar10|fashion-mnist."
        )
    names = _split_classes(classes) if classes is not None else ()
    root = directory.resolve()
    blocker = next((p for p in (root, *root.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        # a path the command writes that is a file: a bad value (exit 2), as --out
        raise ConfigError(
            f"{blocker} is a file, not a folder: retest init needs a directory that "
            "does not exist yet or is a folder. Choose another DIR."
        )
    # an explicit name is checked by its option; the folder's name is made valid
    name = name if name is not None else suggest_name(root.name)
    try:
        project = Project.init(
            root, name=name, classes=names, classes_from=classes_from, force=force
        )
    except OSError as err:
        raise InputValidationError(
            f"cannot create a project in {root}: {err.strerror or err}. Choose "
            "another DIR or fix its permissions."
        ) from None
    with project:
        console.print(
            f"Created project {project.config.name!r} with "
            f"{len(project.class_names)} classes in {project.root}"
        )


def register(app: typer.Typer) -> None:
    app.command("init")(init)
