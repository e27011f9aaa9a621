"""Options shared by many commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["JsonOpt", "ProjectOpt"]

ProjectOpt = Annotated[
    Path | None,
    typer.Option(
        "--project",
        "-p",
        envvar="RETEST_PROJECT",
        help="Project directory (default: the current directory or a parent).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
