"""The ``retest`` command.

Commands live one per module in this package (any module not starting with ``_``
that defines ``register(app)``), so adding a command never touches this file.
One handler (:class:`_RetestGroup`) is the only map from errors to exit codes:
a :class:`~retest.errors.RetestError` becomes ``error: …`` on stderr with exit
code 1 (2 for configuration errors and unknown names), a usage error (unknown
option, missing argument, a value click's own type checks refuse) the same one
line with exit code 2, an :class:`OSError` nobody turned into a retest error
one line naming the path with exit code 1, and Ctrl-C one line naming the command
to rerun with exit code 130. ``--debug`` shows the traceback.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shlex
import sys
import warnings
from typing import Annotated, Any

import typer
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

import retest.cli
from retest._version import __version__
from retest.errors import ConfigError, RetestError, RetestWarning, UnknownNameError

__all__ = ["app", "main"]


class _RetestGroup(TyperGroup):
    """Click group that renders errors as one line instead of a traceback."""

    def invoke(self, ctx: Any) -> Any:
        _printable_streams()
        # the subcommand and its arguments, read before click consumes them
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # every stage keeps a checkpoint: the same command picks up from it
            from retest.cli._console import err_console, escape

            command = shlex.join(["retest", *rest])
            err_console.print(
                f"interrupted: rerun `{escape(command)}` to resume", soft_wrap=True
            )
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise typer.Exit(130) from None
        except (RetestError, UsageError, OSError) as err:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            if type(err).__name__ == "NoArgsIsHelpError":  # a group's help page
                raise
            from retest.cli._console import print_error

            message, code = _one_line(err, ctx)
            print_error(message)
            raise typer.Exit(code) from None


def _printable_streams() -> None:
    """Paths that are not UTF-8 print as escapes instead of aborting the output.

    A file name with bytes that are not UTF-8 reaches Python as surrogate
    escapes, which a strict UTF-8 stream refuses to write (UnicodeEncodeError
    after the work is done).
    """
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(
            stream, "reconfigure"
        ):
            stream.reconfigure(errors="backslashreplace")


def _one_line(err: Exception, ctx: Any = None) -> tuple[str, int]:
    """The ``error:`` text and exit code of an error: the one place that maps them."""
    if isinstance(err, RetestError):
        return str(err), 2 if isinstance(err, (ConfigError, UnknownNameError)) else 1
    if isinstance(err, UsageError):
        if err.ctx is not None:
            sub = err.ctx.command_path
        elif ctx is not None and ctx.invoked_subcommand:
            sub = f"{ctx.command_path} {ctx.invoked_subcommand}"
        else:
            sub = ctx.command_path if ctx is not None else "retest"
        text = " ".join(err.format_message().split())
        text += "" if text.endswith((".", "?", "!")) else "."
        return f"{text} See '{sub} --help'.", err.exit_code
    assert isinstance(err, OSError)
    what = err.strerror or type(err).__name__
    if err.filename is None:
        return (
            f"{what} ({type(err).__name__}). Check free disk space and the "
            "permissions of the files involved; --debug shows where it happened."
        ), 1
    where = os.fsdecode(err.filename)
    if err.filename2 is not None:
        where += f" -> {os.fsdecode(err.filename2)}"
    return (
        f"{where}: {what}. Check that this path exists, is a file or a folder as "
        "the command expects, and is writable; --debug shows where it happened."
    ), 1


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


def main(prog_name: str | None = None) -> None:
    """Console-script entry point (``python -m retest`` passes ``prog_name``)."""
    warnings.showwarning = _show_warning
    app(prog_name=prog_name)
