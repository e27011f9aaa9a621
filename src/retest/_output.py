"""Where a command may write: the one rule for every output path a user names.

Every option and API argument that writes a path (``--out``, ``--dir``,
``--root``, ``init DIR``) goes through :func:`check_output` before any work and,
for folders, :func:`claim_output_dir` just before the first write. The rule:

* Inside a retest project (a folder holding ``retest.toml`` or ``retest.db``, or
  below one) a command never writes the project folder itself nor its own
  entries (:data:`PROJECT_ENTRIES`: the database, the configuration,
  ``arrays/``, ``images/``, ``revisions/``, hidden folders), except the place
  it owns (``OutputRule.area``: ``revisions/`` for ``export``). A folder the user
  names there (``batch1/``, ``reports/mine/``) is the user's, as anywhere else.
* A file that exists is replaced only with ``--overwrite`` and only when it is
  what the command writes (``owned`` says so: a split JSON, a predictions file).
* A folder that exists and holds files is written into only when the command
  owns it: a marker file (:data:`OUTPUT_MARKER`) that :func:`claim_output_dir`
  left names the command, or it is the command's own place in a project. A
  user's folder holding other files is refused.

Paths are compared after resolving symlinks. Each refusal is one
:class:`~retest.errors.ConfigError` line naming the option and the path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from retest._atomic import atomic_write_bytes
from retest.config import CONFIG_NAME
from retest.errors import ConfigError, InputValidationError

__all__ = [
    "DB_NAME",
    "OUTPUT_MARKER",
    "PROJECT_ENTRIES",
    "RULES",
    "OutputRule",
    "check_location",
    "check_output",
    "claim_output_dir",
    "project_of",
]

DB_NAME = "retest.db"
#: What a project folder holds of its own (DESIGN.md's layout, the demo's steps):
#: no command output goes there, except a command's own ``area``. Hidden entries
#: (``.cache/``) count too.
PROJECT_ENTRIES = frozenset(
    {
        CONFIG_NAME,
        DB_NAME,
        f"{DB_NAME}-wal",
        f"{DB_NAME}-shm",
        f"{DB_NAME}-journal",
        f"{DB_NAME}-idorder",  # the store's derived id-order cache
        "arrays",
        "images",
        "revisions",
        "demo",
    }
)
#: Left in an output folder by the command that wrote it: proof that a rerun
#: replaces the command's own files, not a user's.
OUTPUT_MARKER = ".retest-output"
#: Files a file browser drops into any folder it shows: no one's data.
OS_METADATA = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})

OutputKind = Literal["file", "dir", "project", "data"]


@dataclass(frozen=True)
class OutputRule:
    """How one command writes one path.

    ``kind``: ``file`` (one file), ``dir`` (a folder of the command's outputs),
    ``project`` (the folder of a new project: ``init``, ``demo``), ``data`` (a
    shared dataset folder, which may already hold other files). ``area``: the
    project-relative folder the command owns inside a project (None: nowhere).
    """

    command: str
    kind: OutputKind
    area: str | None = None


#: Every command option that writes a path, by command: the CLI tags its option
#: with the rule and the writer (CLI and Python API) checks against it.
RULES: dict[str, OutputRule] = {
    r.command: r
    for r in (
        OutputRule("compare", "dir", "reports/compare"),
        OutputRule("crowd export", "dir", "reports/crowd"),
        OutputRule("datasets fetch", "data"),
        OutputRule("dedup-queue", "file", "reports/dedup"),
        OutputRule("demo", "project"),
        OutputRule("evaluate", "dir", "reports/evaluate"),
        OutputRule("export", "dir", "revisions"),
        OutputRule("flickr download", "dir", "reports/flickr"),
        OutputRule("flickr search", "dir", "reports/flickr"),
        OutputRule("init", "project"),
        OutputRule("label-errors", "dir", "reports/label-errors"),
        OutputRule("models predict", "file", "reports/predictions"),
        OutputRule("split", "file", "reports"),
    )
}


def project_of(path: Path) -> Path | None:
    """The project folder ``path`` is or lies in (the nearest folder, ``path``
    included, holding ``retest.toml`` or ``retest.db``), else None."""
    for d in (path, *path.parents):
        if (d / CONFIG_NAME).is_file() or (d / DB_NAME).exists():
            return d
    return None


def check_location(
    path: str | os.PathLike[str], rule: OutputRule, option: str = "--out"
) -> Path:
    """The location part of :func:`check_output` alone: ``path`` is not a project's
    own place (``export`` decides about existing folders with its manifest).
    Returns ``path`` resolved."""
    if not os.fspath(path).strip():
        raise ConfigError(f"{option} is empty; pass a path.")
    target = Path(path).resolve()
    _check_location(target, rule, option, Path(path))
    return target


def _check_location(target: Path, rule: OutputRule, option: str, shown: Path) -> None:
    root = project_of(target)
    if root is None:
        return
    if rule.kind == "project":
        if target != root:
            raise ConfigError(
                f"{option} {shown} lies inside the retest project {root}; a project "
                "is never made inside another. Choose a folder outside it."
            )
        return
    rel = target.relative_to(root)
    if rule.area is not None and rel.is_relative_to(rule.area):
        return
    top = rel.parts[0] if rel.parts else ""
    if rel.parts and top not in PROJECT_ENTRIES and not top.startswith("."):
        return  # a folder or file of the user's own inside the project folder
    own = f"its {top}/" if (root / top).is_dir() or "." not in top else f"its {top}"
    what = (
        f"is the retest project {root}"
        if not rel.parts
        else f"is inside the retest project {root} ({own})"
    )
    instead = root / (rule.area or "reports")
    raise ConfigError(
        f"{option} {shown} {what}; a command never writes the project's own files "
        f"and folders (retest.toml, retest.db, arrays/, images/, revisions/). Choose "
        f"another {option}, e.g. under {instead}."
    )


def _check_shape(p: Path, rule: OutputRule, option: str) -> None:
    """A file where a file is written, a folder (or creatable one) otherwise."""
    if rule.kind == "file":
        if p.is_dir():
            raise ConfigError(
                f"{option} {p} is a folder; pass the file to write (e.g. "
                f"{p / 'out.json'})."
            )
    elif p.exists() and not p.is_dir():
        raise ConfigError(
            f"{option} {p} is a file, not a folder; pass a folder (it is created "
            "when missing)."
        )
    start = p.absolute() if rule.kind == "file" else p.absolute() / "x"
    blocker = next((q for q in start.parents if q.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ConfigError(
            f"{option} {p}: {blocker} is a file, so the folder cannot be created; "
            f"pass another {option}."
        )
    here = next((q for q in (p.absolute(), *p.absolute().parents) if q.exists()), None)
    if here is not None and here.is_file():
        here = here.parent
    if here is not None and not os.access(here, os.W_OK | os.X_OK):
        raise InputValidationError(
            f"{option} {p}: the folder {here} is not writable. Choose another "
            f"{option} or make it writable (chmod u+w)."
        )


def _marked_by(folder: Path, command: str) -> bool:
    marker = folder / OUTPUT_MARKER
    if marker.is_symlink() or not marker.is_file():
        return False
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("command") == command


def _contents(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in OS_METADATA)


def check_output(
    path: str | os.PathLike[str],
    rule: OutputRule,
    *,
    option: str = "--out",
    overwrite: bool = False,
    owned: Callable[[Path], str | None] | None = None,
) -> Path:
    """Refuse ``path`` unless ``rule.command`` may write it (see the module doc).

    Parameters
    ----------
    path : path-like
    rule : OutputRule
    option : str
        How the user named the path, for the message (``--out``, ``--dir``).
    overwrite : bool
        ``--overwrite`` was given: an existing file may be replaced if ``owned``
        (for ``project`` rules: ``--force``, a folder holding other files).
    owned : callable, optional
        ``owned(existing) -> None`` when an existing file or non-empty folder is the
        command's own output, else a short reason why not. Folders default to the
        marker test; files are never replaced without it.

    Returns
    -------
    Path
        ``path`` as given (not resolved).

    Raises
    ------
    ConfigError
        A refused place; nothing was touched.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "retest.toml").write_text("")
    ...     check_output(Path(d) / "arrays", OutputRule("compare", "dir", "reports/compare"))
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --out ... is inside the retest project ... (its arrays/); ...
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise InputValidationError(
            f"{option} must be a path (str or pathlib.Path). Got {path!r}."
        )
    if not os.fspath(path).strip():  # Path("") is ".": test what was given
        raise ConfigError(f"{option} is empty; pass a path.")
    shown = Path(path)
    _check_shape(shown, rule, option)
    target = shown.resolve()  # symlinks resolved before any comparison
    _check_location(target, rule, option, shown)
    if not (target.exists() or target.is_symlink()):
        return shown
    if rule.kind == "file":
        if not overwrite:
            raise ConfigError(
                f"{option} file {shown} already exists. Choose another {option} or "
                "pass --overwrite."
            )
        why = owned(target) if owned is not None else "nothing is replaced"
        if why is not None:
            raise ConfigError(
                f"{option} {shown}: --overwrite replaces only a file retest "
                f"{rule.command} wrote, and this one is not ({why}). Choose another "
                f"{option}."
            )
        return shown
    if rule.kind == "project":
        held = [n for n in _contents(target) if not n.startswith(".")]
        if held and not overwrite and project_of(target) != target:
            raise ConfigError(
                f"{option} {shown} holds files ({', '.join(held[:3])}) and is not a "
                "retest project; a new project needs a new or empty folder. Choose "
                f"another {option}."
            )
        return shown
    if rule.kind == "data" or not _contents(target):
        return shown
    root = project_of(target)
    if (
        owned is None
        and root is not None
        and rule.area is not None
        and target.relative_to(root).is_relative_to(rule.area)
    ):
        return shown  # the command's own place in a project
    why = owned(target) if owned is not None else _default_owned(target, rule)
    if why is not None:
        raise ConfigError(
            f"{option} {shown} already holds files retest {rule.command} did not "
            f"write ({why}). Choose a new or empty folder."
        )
    return shown


def _default_owned(folder: Path, rule: OutputRule) -> str | None:
    if _marked_by(folder, rule.command):
        return None
    names = _contents(folder)
    more = f" and {len(names) - 1} more" if len(names) > 1 else ""
    return f"e.g. {names[0]}{more}; no {OUTPUT_MARKER} of retest {rule.command}"


def claim_output_dir(path: str | os.PathLike[str], rule: OutputRule) -> Path:
    """Create the output folder (checked by :func:`check_output`) and mark it as
    ``rule.command``'s, so a rerun may write there again. Returns the folder."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    if not _marked_by(p, rule.command):
        body = {"command": rule.command, "note": "written by retest; safe to delete"}
        atomic_write_bytes(p / OUTPUT_MARKER, json.dumps(body).encode(), fsync=False)
    return p
