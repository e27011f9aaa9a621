"""``retest.toml``: a project's typed settings (nothing is read at import).

Every key below is used by some command; any other key is refused when the file
is read, with a "did you mean" suggestion, so a misspelt setting never goes
silently unused. Layout::

    classes = ["airplane", "automobile", ...]   # class id = position (required)

    [project]
    name = "my-replication"     # project name, prefixes revision names (required)
    format = 1                  # version of this file's layout

    [keywords]                  # class name -> keywords (sub-classes)
    airplane = ["stealth_bomber", "airbus"]

    [sources.tiny]              # `retest source add tiny` ingests this source
    kind = "tinyimages"         # source kind, see `retest source kinds` (required)
    path = "/data/tiny"         # file or folder, relative to the project (required)
    keywords = ["airbus"]       # tinyimages: keywords to ingest (default: [keywords])
    keywords_file = "kw.json"   # tinyimages: keywords file instead of `keywords`
    class = "airplane"          # class of every item
    labels = "labels.idx"       # idx: labels file
    images = "flickr/"          # flickr: download folder
    mode = "L"                  # folder: L converts colour images to grey (default: as the originals)
    batch_size = 4096           # items per batch

    [thresholds]                # numbers; unset ones take the default shown
    l2 = 1.9e6                  # dedup review target, squared pixel L2 (scaled to size)
    features = 1.32e4           # dedup review target, squared feature L2
    dssim = 0.2205              # dedup review target, (1 - SSIM) / 2
    warp = 1e6                  # dedup review target, squared L2 after best warp
    near_original = 1e6         # squared L2 to the nearest original under which a
                                # candidate is excluded automatically (CIFAR's plain
                                # L2 <= 1000 on 32x32x3, scaled to the image size)
    selection_frequency = 0.7   # the threshold sampler's tau

    [seeds]                     # integers >= 0; a command's --seed overrides them
    sample = 0                  # retest sample: every draw of a new revision
    split = 200                 # train/test builder: each class's random split
    features = 0                # dedup: seed of the random-projection embedder
    tasks = 0                   # retest crowd tasks: grid composition and shuffles
    dedup = 0                   # which image of a near-duplicate group is kept

    [instructions]              # Markdown shown to labelers (web pages, MTurk question)
    default = "Check every **photograph** of the class."
    airplane = "Toy planes count."  # per class name, or per keyword
    airbus = "Only the aircraft, not the company's logo."

    [quality]                   # labelers' quality on the controls of grid tasks
    min_control_accuracy = 0.8  # below it a worker is flagged for exclusion
    min_controls = 10           # controls answered before a worker is judged

The known names and their meanings live in one place, :data:`KNOWN_KEYS`; read
thresholds and seeds with :meth:`ProjectConfig.threshold` and
:meth:`ProjectConfig.seed`. Read the file with :func:`load_config` (``tomllib``),
write it with :func:`save_config` (a tiny writer for this layout: strings,
numbers, booleans, lists of those, and tables).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from retest._atomic import atomic_write_bytes
from retest._validation import check_seed, decode_utf8
from retest.errors import ConfigError, UnknownNameError
from retest.registry import close_matches

__all__ = [
    "CONFIG_NAME",
    "KNOWN_KEYS",
    "PROJECT_KEYS",
    "QUALITY_KEYS",
    "SEED_KEYS",
    "SOURCE_KEYS",
    "THRESHOLD_DEFAULTS",
    "THRESHOLD_KEYS",
    "TOP_LEVEL_KEYS",
    "ProjectConfig",
    "dumps_toml",
    "load_config",
    "save_config",
]

CONFIG_NAME = "retest.toml"
_FORMAT = 1

# -- every key retest.toml may hold, with what it means (the one definition)
TOP_LEVEL_KEYS: dict[str, str] = {
    "classes": "class names; a class id is its position",
    "project": "table: the project's name and the file format",
    "keywords": "table: class name -> keywords (sub-classes); `retest plan` input",
    "sources": "tables [sources.NAME]: sources `retest source add NAME` ingests",
    "thresholds": "table: named numbers (THRESHOLD_KEYS)",
    "seeds": "table: named seeds (SEED_KEYS)",
    "instructions": "table: Markdown shown to labelers (web pages and the MTurk "
    "question): `default`, per class name "
    "or per keyword",
    "quality": "table: labelers' quality on the controls (QUALITY_KEYS)",
}
PROJECT_KEYS: dict[str, str] = {
    "name": "project name; prefixes revision names",
    "format": f"version of this file's layout ({_FORMAT})",
}
THRESHOLD_KEYS: dict[str, str] = {
    "l2": "dedup review target: squared pixel L2 (default scaled to the image size)",
    "features": "dedup review target: squared L2 between feature embeddings",
    "dssim": "dedup review target: structural dissimilarity (1 - SSIM) / 2",
    "warp": "dedup review target: squared pixel L2 after the best small warp",
    "near_original": "squared L2 to the nearest original under which a candidate "
    "is excluded automatically (default: CIFAR's plain L2 <= 1000 on 32x32x3, "
    "scaled to the image size)",
    "selection_frequency": "the threshold sampler's tau: minimum selection frequency",
}
#: Thresholds whose default does not depend on the data (others: None → the
#: command computes it, e.g. from the image size).
THRESHOLD_DEFAULTS: dict[str, float] = {"selection_frequency": 0.7}
SEED_KEYS: dict[str, str] = {
    "sample": "retest sample: every random draw of a new revision",
    "split": "train/test builder: the random split of each class",
    "features": "dedup: seed of the reference-mlp training and calibration subsamples",
    "tasks": "retest crowd tasks: grid composition and shuffles",
    "dedup": "which image of a near-duplicate group is kept",
}
QUALITY_KEYS: dict[str, str] = {
    "min_control_accuracy": "a worker whose accuracy on the controls of grid tasks "
    "is below this share (0-1) is flagged for exclusion from the counts",
    "min_controls": "controls a worker must have answered before being judged "
    "(default 10)",
}
SOURCE_KEYS: dict[str, str] = {
    "kind": "source kind (`retest source kinds`); required",
    "path": "file or folder of the source, relative to the project; required",
    "keywords": "tinyimages: keywords to ingest (default: every keyword of [keywords])",
    "keywords_file": "tinyimages: file of keywords (one a line, or JSON {class: [...]})",
    "class": "class of every item",
    "labels": "idx: labels file",
    "images": "flickr: the downloader's output folder",
    "mode": "folder: L or RGB, the originals' form (default); L converts colour to grey",
    "batch_size": "items per batch (one transaction, one checkpoint)",
}
#: Section → its known keys. ``[keywords]`` keys are class names and
#: ``[sources]`` keys are source names: checked against `classes` / free.
KNOWN_KEYS: dict[str, dict[str, str]] = {
    "": TOP_LEVEL_KEYS,
    "project": PROJECT_KEYS,
    "thresholds": THRESHOLD_KEYS,
    "seeds": SEED_KEYS,
    "sources.*": SOURCE_KEYS,
    "quality": QUALITY_KEYS,
}


def _unknown_key(key: str, section: str, known: Mapping[str, str]) -> ConfigError:
    """One line: the key, where it is, the closest known key(s) and all of them."""
    where = "at the top level" if not section else f"in [{section}]"
    names = list(known)
    close = close_matches(key, names, n=1)
    hint = f" Did you mean `{close[0]}`?" if close else ""
    return ConfigError(
        f"unknown key `{key}` {where}.{hint} Known keys: {', '.join(names)}."
    )


def _check_keys(
    table: Mapping[str, Any], section: str, known: Mapping[str, str]
) -> None:
    for key, value in table.items():
        if key not in known:
            if not section and isinstance(value, Mapping):
                raise _unknown_section(key)
            raise _unknown_key(key, section, known)


def _unknown_section(name: str) -> ConfigError:
    tables = [k for k in TOP_LEVEL_KEYS if k != "classes"]
    close = close_matches(name, tables, n=1)
    hint = f" Did you mean [{close[0]}]?" if close else ""
    known = ", ".join(f"[{t}]" for t in tables)
    return ConfigError(f"unknown section [{name}].{hint} Known sections: {known}.")


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _plugin_threshold_keys() -> dict[str, str]:
    """Review targets of the dedup metrics installed packages provide: the names of
    their ``retest.dedup_metrics`` entry points (read without importing them)."""
    return {
        ep.name: "dedup review target of a plug-in metric"
        for ep in entry_points(group="retest.dedup_metrics")
    }


def _check_thresholds(values: Mapping[str, Any]) -> dict[str, float]:
    _check_keys(values, "thresholds", {**THRESHOLD_KEYS, **_plugin_threshold_keys()})
    out = {}
    for k, v in values.items():
        if not _is_number(v) or not math.isfinite(v) or v < 0:
            raise ConfigError(
                f"[thresholds] {k} must be a finite number >= 0. Got {v!r}."
            )
        out[k] = float(v)
    tau = out.get("selection_frequency")
    if tau is not None and tau > 1:
        raise ConfigError(
            f"[thresholds] selection_frequency is a fraction in [0, 1]. Got {tau!r}."
        )
    return out


def _check_seeds(values: Mapping[str, Any]) -> dict[str, int]:
    _check_keys(values, "seeds", SEED_KEYS)
    for k, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ConfigError(f"[seeds] {k} must be an integer >= 0. Got {v!r}.")
        check_seed(v, f"[seeds] {k}")  # and one that SQLite can store
    return dict(values)


def _check_instructions(
    values: Mapping[str, Any], classes: tuple[str, ...]
) -> dict[str, str]:
    """``default``, class names and keywords → Markdown text. A key that is a
    class name in another case is refused (it would be taken for a keyword)."""
    out = {}
    for k, v in values.items():
        if not isinstance(v, str):
            raise ConfigError(f"[instructions] {k} must be Markdown text. Got {v!r}.")
        if k != "default" and k not in classes:
            same = [c for c in (*classes, "default") if c.casefold() == k.casefold()]
            if same:
                raise ConfigError(
                    f"[instructions] key `{k}` would be taken for a keyword: "
                    f"did you mean `{same[0]}`?"
                )
        out[str(k)] = v
    return out


def _check_quality(values: Mapping[str, Any]) -> dict[str, float]:
    _check_keys(values, "quality", QUALITY_KEYS)
    out = {}
    for k, v in values.items():
        ok = _is_number(v) and (
            0.0 <= v <= 1.0 if k == "min_control_accuracy" else v >= 1 and v == int(v)
        )
        if not ok:
            want = (
                "a share from 0 to 1"
                if k == "min_control_accuracy"
                else "a whole number >= 1"
            )
            raise ConfigError(f"[quality] {k} must be {want}. Got {v!r}.")
        out[k] = float(v)
    return out


def _check_source(name: str, opts: Any) -> dict[str, Any]:
    section = f"sources.{name}"
    if not isinstance(opts, Mapping):
        raise ConfigError(f"[{section}] must be a table with `kind` and `path` keys.")
    _check_keys(opts, section, SOURCE_KEYS)
    for key in ("kind", "path"):
        if key not in opts:
            raise ConfigError(f"[{section}] needs `{key}` ({SOURCE_KEYS[key]}).")
    for key, v in opts.items():
        if key == "batch_size":
            ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
            what = "an integer >= 1"
        elif key == "keywords":
            ok = isinstance(v, (list, tuple)) and bool(v)
            ok = ok and all(isinstance(x, str) and x for x in v)
            what = "a non-empty list of keywords"
        else:
            ok, what = isinstance(v, str) and bool(v), "a non-empty string"
        if not ok:
            raise ConfigError(f"[{section}] {key} must be {what}. Got {v!r}.")
    return dict(opts)


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
        Source name → options (:data:`SOURCE_KEYS`; ``kind`` and ``path`` required).
    thresholds : mapping of str to float
        Keys of :data:`THRESHOLD_KEYS`; read with :meth:`threshold`.
    seeds : mapping of str to int
        Keys of :data:`SEED_KEYS`; read with :meth:`seed`.
    instructions : mapping of str to str
        Markdown for labelers: key ``default``, a class name or a keyword.
    quality : mapping of str to float
        Keys of :data:`QUALITY_KEYS`.
    """

    name: str
    classes: tuple[str, ...]
    keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    thresholds: Mapping[str, float] = field(default_factory=dict)
    seeds: Mapping[str, int] = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)
    quality: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(
                f"[project] name must be a non-empty string. Got {self.name!r}."
            )
        classes = tuple(self.classes)
        if not all(isinstance(c, str) and c for c in classes):
            raise ConfigError(f"classes must be non-empty strings. Got {classes!r}.")
        dup = sorted({c for c in classes if classes.count(c) > 1})
        if dup:
            raise ConfigError(f"class names must be unique. Got duplicates {dup}.")
        object.__setattr__(self, "classes", classes)
        kws = {}
        for k, v in self.keywords.items():
            if k not in classes:
                close = close_matches(k, classes, n=1)
                hint = f" Did you mean `{close[0]}`?" if close else ""
                raise ConfigError(
                    f"[keywords] names class `{k}`, which is not in `classes`.{hint}"
                )
            if isinstance(v, str) or not all(isinstance(x, str) and x for x in v):
                raise ConfigError(
                    f"[keywords] {k} must be a list of keywords. Got {v!r}."
                )
            kws[k] = tuple(v)
        object.__setattr__(self, "keywords", kws)
        srcs = {k: _check_source(k, v) for k, v in self.sources.items()}
        object.__setattr__(self, "sources", srcs)
        object.__setattr__(self, "thresholds", _check_thresholds(self.thresholds))
        object.__setattr__(self, "seeds", _check_seeds(self.seeds))
        object.__setattr__(
            self, "instructions", _check_instructions(self.instructions, classes)
        )
        object.__setattr__(self, "quality", _check_quality(self.quality))

    def threshold(self, name: str) -> float | None:
        """``[thresholds] name``, else its fixed default, else None.

        None means "derive it from the data" (e.g. the dedup targets scale with
        the image size). A name outside :data:`THRESHOLD_KEYS` is a programming
        error and raises :class:`~retest.errors.UnknownNameError`.
        """
        _known(name, THRESHOLD_KEYS, "threshold")
        v = self.thresholds.get(name)
        return v if v is not None else THRESHOLD_DEFAULTS.get(name)

    def seed(self, name: str) -> int | None:
        """``[seeds] name``, or None when unset (the command's own default applies).

        A name outside :data:`SEED_KEYS` raises :class:`~retest.errors.UnknownNameError`.
        """
        _known(name, SEED_KEYS, "seed")
        return self.seeds.get(name)

    def source(self, name: str) -> dict[str, Any]:
        """The options of ``[sources.NAME]`` (unknown names get suggestions)."""
        if name not in self.sources:
            names = list(self.sources)
            close = close_matches(name, names, n=3)
            raise UnknownNameError("configured source", name, close, names)
        return dict(self.sources[name])

    def to_dict(self) -> dict[str, Any]:
        """The TOML document as plain data (what :func:`save_config` writes)."""
        return {
            "project": {"name": self.name, "format": _FORMAT},
            "classes": list(self.classes),
            "keywords": {k: list(v) for k, v in self.keywords.items()},
            "sources": {k: dict(v) for k, v in self.sources.items()},
            "thresholds": dict(self.thresholds),
            "seeds": dict(self.seeds),
            **({"instructions": dict(self.instructions)} if self.instructions else {}),
            **({"quality": dict(self.quality)} if self.quality else {}),
        }


def _known(name: str, known: Mapping[str, str], kind: str) -> None:
    if name not in known:
        close = close_matches(name, list(known), n=3)
        raise UnknownNameError(kind, name, close, list(known))


def _typed(doc: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = doc.get(key, default)
    if not isinstance(value, kind):
        what = "table" if kind is dict else kind.__name__
        raise ConfigError(f"`{key}` must be a {what}. Got {type(value).__name__}.")
    return value


def load_config(path: str | Path) -> ProjectConfig:
    """Read and validate ``retest.toml``; errors name the file and the key.

    Unknown sections and keys are refused (with the closest known name), so every
    setting in the file is one some command reads.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{p} does not exist. Run `retest init DIR` first.") from None
    except IsADirectoryError:
        raise ConfigError(
            f"{p} is a directory; expected the project's TOML settings file."
        ) from None
    except OSError as err:
        raise ConfigError(
            f"cannot read {p} ({err.strerror}); check its permissions."
        ) from None
    text = decode_utf8(
        data,
        str(p),
        "TOML files must be UTF-8. Save it as UTF-8 (e.g. `iconv -f latin1 -t "
        "utf-8`) and run again.",
        error=ConfigError,
    )
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{p} is not valid TOML: {err}. Fix the file.") from err
    try:
        _check_keys(doc, "", TOP_LEVEL_KEYS)
        project = _typed(doc, "project", dict, {})
        _check_keys(project, "project", PROJECT_KEYS)
        fmt = project.get("format", _FORMAT)
        if fmt != _FORMAT:
            raise ConfigError(
                f"[project] format {fmt!r} is not supported (expected {_FORMAT}). "
                "Upgrade retest."
            )
        if "classes" not in doc:
            raise ConfigError("`classes` is missing: list the class names.")
        return ProjectConfig(
            name=project.get("name", ""),
            classes=tuple(_typed(doc, "classes", list, [])),
            keywords=_typed(doc, "keywords", dict, {}),
            sources=_typed(doc, "sources", dict, {}),
            thresholds=_typed(doc, "thresholds", dict, {}),
            seeds=_typed(doc, "seeds", dict, {}),
            instructions=_typed(doc, "instructions", dict, {}),
            quality=_typed(doc, "quality", dict, {}),
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
    atomic_write_bytes(p, text.encode("utf-8"))
