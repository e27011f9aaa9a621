"""The ``retest`` command.

Commands live one per module in this package (any module not starting with ``_``
that defines ``register(app)``), so adding a command never touches this file.
One handler turns :class:`~retest.errors.RetestError` into ``error: …`` on stderr
and exit code 1 (2 for configuration errors); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import retest.cli
from retest import __version__
from retest.errors import ConfigError, RetestError, RetestWarning, UnknownNameError

__all__ = ["app", "main"]


class _RetestGroup(TyperGroup):
    """Click group that renders retest errors as one line instead of a traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except RetestError as err:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from retest.cli._console import print_error

            print_error(str(err))
            code = 2 if isinstance(err, (ConfigError, UnknownNameError)) else 1
            raise typer.Exit(code) from None


app = typer.Typer(
    cls=_RetestGroup,
    help="Rebuild a benchmark's test set and measure how classifiers generalize to it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"retest {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    ctx.obj = {"debug": debug}


def _show_warning(
    message: Any,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    from retest.cli._console import print_warning

    if issubclass(category, RetestWarning):
        print_warning(str(message))
    else:  # pragma: no cover - third-party warnings keep their usual form
        sys.stderr.write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )


def _register_commands() -> None:
    for mod in sorted(pkgutil.iter_modules(retest.cli.__path__), key=lambda m: m.name):
        if mod.name.startswith("_") or mod.name == "main":
            continue
        module = importlib.import_module(f"retest.cli.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    warnings.showwarning = _show_warning
    app()
