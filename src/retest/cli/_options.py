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
    "batch_size_option",
    "bootstrap_option",
    "cluster_option",
    "live_help",
    "name_option",
    "output_argument",
    "output_option",
    "person_option",
    "port_option",
    "read_only_option",
    "seed_option",
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


def _output_path(value: Any) -> Path:
    """A path a command writes, as typed: an empty one is refused (``Path("")``
    is ``.``, so ``--out ''`` would silently write to the current folder)."""
    from typer._click.exceptions import BadParameter

    if isinstance(value, Path):
        return value
    if not str(value).strip():
        raise BadParameter(
            "an empty path; pass the folder or file to write (use . for the "
            "current folder)."
        )
    return Path(value)


def output_option(command: str, *decls: str, **kwargs: Any) -> Any:
    """A ``typer.Option`` for a path ``command`` writes, tagged with its
    :data:`~retest._output.RULES` entry: a test walks the app for these tags, so a
    new path-writing option cannot skip the output guard."""
    from retest._output import RULES

    info = typer.Option(*decls, parser=_output_path, **kwargs)
    info.retest_output = RULES[command]  # type: ignore[attr-defined]
    return info


def output_argument(command: str, **kwargs: Any) -> Any:
    """:func:`output_option` for an argument (``retest init DIRECTORY``)."""
    from retest._output import RULES

    info = typer.Argument(parser=_output_path, **kwargs)
    info.retest_output = RULES[command]  # type: ignore[attr-defined]
    return info


def read_only_option(*decls: str, **kwargs: Any) -> Any:
    """A ``typer.Option`` for a folder the command only reads, though its name
    (``--root``, ``--…-dir``) looks like an output: tagged so the test knows."""
    info = typer.Option(*decls, **kwargs)
    info.retest_output = None  # type: ignore[attr-defined]
    return info


def _checked(check: Callable[[Any, str], Any]) -> Callable[[Any, Any, Any], Any]:
    """A Typer option callback that runs one of retest's value checks, named by
    the option's flag, so the CLI refuses exactly what the Python API refuses."""

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if value is None or getattr(ctx, "resilient_parsing", False):
            return value
        flag = max(getattr(param, "opts", None) or [param.name], key=len)
        return check(value, flag)

    return callback


def _seed(value: Any, flag: str) -> int:
    from retest._validation import check_seed

    return check_seed(value, flag)


def _port(value: Any, flag: str) -> int:
    from retest._validation import check_port

    return check_port(value, flag)


def _batch_size(value: Any, flag: str) -> int | None:
    from retest._validation import check_batch_size

    return check_batch_size(value, flag)


def _n_boot(value: Any, flag: str) -> int:
    from retest._validation import check_n_boot

    return check_n_boot(value, flag)


def _cluster(value: Any, flag: str) -> str:
    from retest._validation import check_cluster_address

    return check_cluster_address(value, flag)


def _person(value: Any, flag: str) -> str:
    from retest.errors import ConfigError, InputValidationError
    from retest.names import validate_person_name

    try:
        return validate_person_name(value)
    except InputValidationError as err:  # an option value: exit 2
        raise ConfigError(f"{flag}: {err}") from None


def name_option(kind: str) -> Callable[[Any, Any, Any], Any]:
    """An option callback: :func:`retest.names.validate_name` for a ``kind`` name
    (``"project"``, ``"revision"``…). A name the user typed as an option value is
    a bad option value (exit 2), not bad input."""

    def check(value: Any, flag: str) -> str:
        from retest.errors import ConfigError, InputValidationError
        from retest.names import validate_name

        try:
            return validate_name(value, kind)
        except InputValidationError as err:
            raise ConfigError(f"{flag}: {err}") from None

    return _checked(check)


#: ``typer.Option(..., callback=seed_option)``: ``retest._validation.check_seed``.
seed_option = _checked(_seed)
#: ``retest._validation.check_port``.
port_option = _checked(_port)
#: ``retest._validation.check_batch_size``.
batch_size_option = _checked(_batch_size)
#: ``retest._validation.check_n_boot``.
bootstrap_option = _checked(_n_boot)
#: ``retest._validation.check_cluster_address``.
cluster_option = _checked(_cluster)
#: ``retest.names.validate_person_name``.
person_option = _checked(_person)
