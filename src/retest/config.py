"""``retest.toml``: a project's typed settings (nothing is read at import).

Layout::

    [project]
    name = "my-replication"
    format = 1                      # version of this file's layout

    classes = ["airplane", "automobile", ...]   # class id = position

    [keywords]                      # class name -> keywords (sub-classes)
    airplane = ["stealth_bomber", "airbus"]

    [sources.tiny]                  # source name -> kind + options
    kind = "tinyimages"
    path = "/data/tiny_images.bin"

    [thresholds]                    # named numbers, e.g. ssim = 0.75
    [seeds]                         # named seeds, e.g. split = 200

Read with :func:`load_config` (``tomllib``), write with :func:`save_config` (a tiny
writer for this layout: strings, numbers, booleans, lists of those, and tables).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retest.errors import ConfigError

__all__ = ["CONFIG_NAME", "ProjectConfig", "dumps_toml", "load_config", "save_config"]

CONFIG_NAME = "retest.toml"
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """Typed contents of ``retest.toml``.

    Parameters
    ----------
    name : str
        Project name.
    classes : tuple of str
        Class names; the class id is the position.
    keywords : mapping of str to tuple of str
        Keywords (sub-classes) per class name.
    sources : mapping of str to mapping
        Source name → options (at least ``kind``).
    thresholds : mapping of str to float
    seeds : mapping of str to int
    """

    name: str
    classes: tuple[str, ...]
    keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    thresholds: Mapping[str, float] = field(default_factory=dict)
    seeds: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(
                f"project name must be a non-empty string. Got {self.name!r}."
            )
        classes = tuple(self.classes)
        if not all(isinstance(c, str) and c for c in classes):
            raise ConfigError(f"classes must be non-empty strings. Got {classes!r}.")
        dup = sorted({c for c in classes if classes.count(c) > 1})
        if dup:
            raise ConfigError(f"class names must be unique. Got duplicates {dup}.")
        object.__setattr__(self, "classes", classes)
        unknown = sorted(set(self.keywords) - set(classes))
        if unknown:
            raise ConfigError(
                f"[keywords] names classes that are not in `classes`: {unknown}."
            )
        kws = {k: tuple(v) for k, v in self.keywords.items()}
        object.__setattr__(self, "keywords", kws)
        for src, opts in self.sources.items():
            if not isinstance(opts, Mapping) or "kind" not in opts:
                raise ConfigError(f"[sources.{src}] must be a table with a `kind` key.")

    def to_dict(self) -> dict[str, Any]:
        """The TOML document as plain data (what :func:`save_config` writes)."""
        return {
            "project": {"name": self.name, "format": _FORMAT},
            "classes": list(self.classes),
            "keywords": {k: list(v) for k, v in self.keywords.items()},
            "sources": {k: dict(v) for k, v in self.sources.items()},
            "thresholds": dict(self.thresholds),
            "seeds": dict(self.seeds),
        }


def _typed(doc: Mapping[str, Any], key: str, kind: type, path: Path) -> Any:
    value = doc.get(key, {})
    if not isinstance(value, kind):
        raise ConfigError(
            f"{path}: `{key}` must be a {kind.__name__}. Got {type(value).__name__}."
        )
    return value


def load_config(path: str | Path) -> ProjectConfig:
    """Read and validate ``retest.toml``; errors name the file and the key."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p} does not exist. Run `retest init DIR` first.") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{p} is not valid TOML: {err}. Fix the file.") from err
    project = _typed(doc, "project", dict, p)
    fmt = project.get("format", _FORMAT)
    if fmt != _FORMAT:
        raise ConfigError(
            f"{p}: [project] format {fmt!r} is not supported (expected {_FORMAT}). "
            "Upgrade retest."
        )
    thresholds = _typed(doc, "thresholds", dict, p)
    seeds = _typed(doc, "seeds", dict, p)
    bad = [k for k, v in seeds.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise ConfigError(f"{p}: [seeds] values must be integers. Got {bad}.")
    bad = [k for k, v in thresholds.items() if not isinstance(v, (int, float))]
    if bad:
        raise ConfigError(f"{p}: [thresholds] values must be numbers. Got {bad}.")
    try:
        return ProjectConfig(
            name=project.get("name", ""),
            classes=tuple(_typed(doc, "classes", list, p)),
            keywords=_typed(doc, "keywords", dict, p),
            sources=_typed(doc, "sources", dict, p),
            thresholds={k: float(v) for k, v in thresholds.items()},
            seeds=dict(seeds),
        )
    except ConfigError as err:
        raise ConfigError(f"{p}: {err}") from None


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ConfigError(f"cannot write non-finite number {v} to TOML.")
        return repr(v)
    if isinstance(v, str):
        # JSON string escapes are valid TOML basic-string escapes; TOML also bans DEL
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    raise ConfigError(f"cannot write {type(v).__name__} value {v!r} to TOML.")


def _key(k: str) -> str:
    bare = k and all(c.isalnum() or c in "-_" for c in k) and k.isascii()
    return k if bare else _scalar(k)


def _table(prefix: str, doc: Mapping[str, Any], lines: list[str]) -> None:
    subs = {k: v for k, v in doc.items() if isinstance(v, Mapping)}
    for k, v in doc.items():
        if k not in subs:
            lines.append(f"{_key(k)} = {_scalar(v)}")
    for k, v in subs.items():
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        lines.extend(["", f"[{name}]"])
        _table(name, v, lines)


def dumps_toml(doc: Mapping[str, Any]) -> str:
    """Serialize nested dicts of TOML scalars/lists (keys kept in order)."""
    lines: list[str] = []
    _table("", doc, lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def save_config(path: str | Path, config: ProjectConfig) -> None:
    """Write ``retest.toml`` atomically (temp file in the same directory + rename)."""
    p = Path(path)
    d = config.to_dict()
    # top-level keys must precede tables in TOML
    doc = {"classes": d.pop("classes"), **d}
    text = dumps_toml(doc)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
