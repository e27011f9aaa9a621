"""Options shared by many commands, declared once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

__all__ = [
    "CompatOpt",
    "JsonOpt",
    "ProjectOpt",
    "SharedClassOpt",
    "live_help",
    "output_argument",
    "output_option",
    "read_only_option",
    "shared_classes",
]

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
CompatOpt = Annotated[
    str,
    typer.Option(
        "--compat",
        help="exact (default) or authors: the published code's float arithmetic, "
        "assignment counting and invalid-class handling, digit for digit.",
    ),
]
SharedClassOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--shared-class",
        help="KEYWORD=CLASS: the class that images of KEYWORD verified for several "
        "classes count for (default: the class with the fewest verified images of "
        "the keyword, as CIFAR-10.1 v6).",
    ),
]


def shared_classes(values: list[str] | None) -> dict[str, str]:
    """``--shared-class KEYWORD=CLASS`` values as ``{keyword: class}``."""
    from retest.errors import ConfigError

    out = {}
    for v in values or []:
        kw, sep, cls = v.partition("=")
        if not sep or not kw.strip() or not cls.strip():
            raise ConfigError(
                f"--shared-class must look like KEYWORD=CLASS, e.g. cruiser=ship. "
                f"Got {v!r}."
            )
        out[kw.strip().lower()] = cls.strip()
    return out


def live_help(**helps: Callable[[], str]) -> type[TyperCommand]:
    """A command class whose named parameters' help is computed when shown.

    Help that lists registered names (samplers, dedup metrics) then includes the
    plug-ins registered after this package was imported, e.g.
    ``app.command("sample", cls=live_help(strategy=describe))``.
    """

    class _LiveHelp(TyperCommand):
        def get_params(self, ctx: Any) -> list[Any]:
            for param in self.params:
                if param.name in helps:
                    param.help = helps[param.name]()  # type: ignore[attr-defined]
            return super().get_params(ctx)  # type: ignore[no-any-return]

    return _LiveHelp


def output_option(command: str, *decls: str, **kwargs: Any) -> Any:
    """A ``typer.Option`` for a path ``command`` writes, tagged with its
    :data:`~retest._output.RULES` entry: a test walks the app for these tags, so a
    new path-writing option cannot skip the output guard."""
    from retest._output import RULES

    info = typer.Option(*decls, **kwargs)
    info.retest_output = RULES[command]  # type: ignore[attr-defined]
    return info


def output_argument(command: str, **kwargs: Any) -> Any:
    """:func:`output_option` for an argument (``retest init DIRECTORY``)."""
    from retest._output import RULES

    info = typer.Argument(**kwargs)
    info.retest_output = RULES[command]  # type: ignore[attr-defined]
    return info


def read_only_option(*decls: str, **kwargs: Any) -> Any:
    """A ``typer.Option`` for a folder the command only reads, though its name
    (``--root``, ``--…-dir``) looks like an output: tagged so the test knows."""
    info = typer.Option(*decls, **kwargs)
    info.retest_output = None  # type: ignore[attr-defined]
    return info
