"""A user's project on disk: ``retest.toml``, ``retest.db`` and the data folders.

::

    my-replication/
      retest.toml        classes, keywords, sources, thresholds, seeds
      retest.db          SQLite store (candidates, annotations, decisions, revisions)
      arrays/            pixel and feature arrays (memory-mapped), predictions
      images/            content-addressed image files (images/<sha256>)
      revisions/<name>/  exported datasets + manifest.json
      reports/           tables and figures

:func:`init_project` creates one, :func:`open_project` finds one (in a directory
or any of its parents); ``Project.init`` and ``Project.open`` are the same functions. :meth:`Project.pixels` loads the pixels of any item id
(candidate or original image) wherever they are stored.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._output import DB_NAME, RULES, check_location
from retest.config import CONFIG_NAME, ProjectConfig, load_config, save_config
from retest.errors import (
    ConfigError,
    DataIntegrityError,
    InputValidationError,
    StoreError,
    UnknownNameError,
)
from retest.names import validate_class_name
from retest.store.artifacts import PixelArray
from retest.store.base import Store
from retest.store.rows import ClassRow, split_reference_id
from retest.store.sqlite import SQLiteStore

__all__ = ["CLASS_PRESETS", "DB_NAME", "Project", "init_project", "open_project"]

CLASS_PRESETS: dict[str, tuple[str, ...]] = {
    "cifar10": (
        "airplane", "automobile", "bird", "cat", "deer",
        "dog", "frog", "horse", "ship", "truck",
    ),
    "fashion-mnist": (
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
    ),
}  # fmt: skip
"""Class names in id order of known datasets (``retest init --classes-from``)."""

_DIRS = ("arrays", "images", "revisions", "reports")
#: Entries ``Project.init`` may find in its folder without ``force``: what an
#: interrupted init leaves behind (its database and still empty data folders).
_OWN_FILES = (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal")


def _check_root(root: object, what: str) -> Path:
    """``root`` as an absolute path; anything but a str or path-like is one line."""
    if isinstance(root, bytes) or not isinstance(root, (str, os.PathLike)):
        raise InputValidationError(
            f"{what} must be a path (str or pathlib.Path). Got {root!r} of type "
            f"{type(root).__name__}."
        )
    return Path(root).resolve()


def _check_classes(classes: object) -> tuple[str, ...]:
    """The class names as a tuple: a sequence of distinct, non-empty strings.

    A bare string is refused rather than read as a sequence of one-letter classes.
    """
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
        hint = (
            f" (split it first: {[c.strip() for c in classes.split(',')]!r})"
            if isinstance(classes, str)
            else ""
        )
        raise InputValidationError(
            f"classes must be a list of class names in class-id order, e.g. "
            f"['cat', 'dog']. Got {classes!r}{hint}."
        )
    names = tuple(classes)
    for c in names:
        if not isinstance(c, str):
            raise InputValidationError(
                f"classes must hold strings (class names). Got {c!r} of type "
                f"{type(c).__name__} in {list(names)!r}."
            )
    if not names:
        raise ConfigError(
            "classes is empty: pass the class names in class-id order, e.g. "
            "['cat', 'dog'], or classes_from='cifar10'."
        )
    if not all(c.strip() for c in names):
        raise ConfigError(f"classes must be non-empty names. Got {list(names)!r}.")
    for c in names:
        validate_class_name(c)
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        raise ConfigError(
            f"classes must be distinct; {', '.join(map(repr, dup))} appears more "
            f"than once in {list(names)!r}."
        )
    return names


def _refuse_occupied(root: Path) -> None:
    """Refuse to turn a folder holding other files into a project (``force`` allows).

    Hidden entries (``.git``, ``.DS_Store``) and the leftovers of an interrupted
    init do not count, so ``retest init`` can be run again on its own folder.
    """
    if not root.is_dir():
        return
    foreign = sorted(
        p.name
        for p in root.iterdir()
        if not p.name.startswith(".")
        and p.name not in _OWN_FILES
        and not (p.name in _DIRS and p.is_dir() and not any(p.iterdir()))
    )
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise ConfigError(
            f"{root} is not empty (it holds {', '.join(foreign[:3])}{more}); init a "
            "new or empty folder, or pass --force (force=True in Python) to make the "
            "project there anyway."
        )


def _find_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / CONFIG_NAME).is_file():
            return d
    return None


def _refuse_lost_database(root: Path) -> None:
    """Never create a fresh database next to the data of an existing one.

    A project whose ``retest.db`` is gone but whose ``arrays/`` or ``images/``
    hold pixels lost its index of them; a new empty database would hand out the
    same array rows again and mix old and new images.
    """
    db = root / DB_NAME
    if db.exists():
        return
    held = [
        d
        for d in ("arrays", "images")
        if (root / d).is_dir() and any(p.name[:1] != "." for p in (root / d).iterdir())
    ]
    if held:
        raise DataIntegrityError(
            f"{db} is missing but {' and '.join(f'{d}/' for d in held)} of {root} "
            "still hold stored images. Restore retest.db from a backup; a new empty "
            "database would not know those images (`retest check` shows the state)."
        )


def init_project(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    classes: Sequence[str] = (),
    classes_from: str | None = None,
    force: bool = False,
) -> Project:
    """Create a project in ``path`` (created if missing) and open it.

    Also :meth:`Project.init`.

    Parameters
    ----------
    path : path-like
        Project directory; must not already hold a ``retest.toml``, nor files
        other than hidden ones unless ``force``.
    name : str, optional
        Project name (letters, digits, ``_ . -``); default from the directory name.
    classes : sequence of str
        Distinct class names in class-id order (a list, not ``"cat,dog"``).
    classes_from : {"cifar10", "fashion-mnist"}, optional
        Take the class names of a known dataset instead of ``classes`` (its
        dataset name, ``fashion_mnist``, works too).
    force : bool
        Make the project in a folder that already holds other files.

    Returns
    -------
    Project
        The new, open project (close it, or use it as a context manager).

    Raises
    ------
    InputValidationError
        ``path`` is not a path or is a file, or ``classes`` is not a sequence of
        str (a comma-separated string is refused).
    ConfigError
        ``path`` is already a project or holds other files (without ``force``),
        ``classes`` is empty or repeats a name, both ``classes`` and
        ``classes_from`` are given, or the name is invalid.
    UnknownNameError
        ``classes_from`` names no known dataset.

    Examples
    --------
    >>> import tempfile
    >>> from retest import init_project
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with init_project(d, classes_from="cifar10") as project:
    ...         len(project.class_names), project.class_names[:2]
    (10, ('airplane', 'automobile'))
    """
    root = _check_root(path, "the project folder")
    if root.exists() and not root.is_dir():
        raise InputValidationError(
            f"{root} is a file, not a folder: a project needs a folder that does "
            "not exist yet or is empty. Choose another path."
        )
    check_location(root, RULES["init"], "the project folder")
    if (root / CONFIG_NAME).exists():
        raise ConfigError(
            f"{root} is already a retest project ({CONFIG_NAME} exists). "
            "Open it with --project, or init another directory."
        )
    if classes_from is not None:
        if isinstance(classes, str) or not isinstance(classes, Sequence) or classes:
            raise ConfigError("pass either classes or classes_from, not both.")
        if classes_from.replace("_", "-") in CLASS_PRESETS:
            classes_from = classes_from.replace("_", "-")  # the dataset's name
        if classes_from not in CLASS_PRESETS:
            raise UnknownNameError(
                "class preset", classes_from, (), list(CLASS_PRESETS)
            )
        classes = CLASS_PRESETS[classes_from]
    classes = _check_classes(classes)
    if not force:
        _refuse_occupied(root)
    from retest.names import suggest_name, validate_name

    name = validate_name(name, "project") if name else suggest_name(root.name)
    config = ProjectConfig(name=name, classes=tuple(classes))
    root.mkdir(parents=True, exist_ok=True)
    for d in _DIRS:
        (root / d).mkdir(exist_ok=True)
    store = SQLiteStore(root / DB_NAME)
    store.classes.put(ClassRow(i, c) for i, c in enumerate(config.classes))
    save_config(root / CONFIG_NAME, config)  # last: its presence marks a project
    return Project(root, config, store)


def open_project(path: str | os.PathLike[str] | None = None) -> Project:
    """Open the retest project in ``path`` or the nearest parent holding ``retest.toml``.

    Also :meth:`Project.open`.

    Parameters
    ----------
    path : path-like, optional
        A project directory or any folder inside one; default the current
        directory.

    Returns
    -------
    Project
        The open project (root, configuration, store). Use it as a context
        manager, or call ``close()``, to close its database.

    Raises
    ------
    ConfigError
        No ``retest.toml`` in ``path`` or its parents, or the file is invalid.
    DataIntegrityError
        ``retest.db`` is missing or damaged while the project still holds images.

    Examples
    --------
    >>> import tempfile
    >>> from retest import init_project, open_project
    >>> tmp = tempfile.TemporaryDirectory()
    >>> init_project(tmp.name, name="pets", classes=["cat", "dog"]).close()
    >>> with open_project(tmp.name) as project:
    ...     project.config.name, project.class_names
    ('pets', ('cat', 'dog'))
    >>> tmp.cleanup()
    """
    start = _check_root(path if path is not None else ".", "the project folder")
    found = _find_root(start)
    if found is None:
        raise ConfigError(
            f"{start} is not a retest project (no {CONFIG_NAME} in it or its "
            "parents). Run `retest init DIR` first, or pass --project DIR."
        )
    config = load_config(found / CONFIG_NAME)
    _refuse_lost_database(found)
    store = SQLiteStore(found / DB_NAME)
    project = Project(found, config, store)
    project._sync_classes()
    return project


@dataclass
class Project:
    """An open project: its root, its configuration and its store.

    Use as a context manager (closes the store) or call :meth:`close`.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with Project.init(d, name="demo", classes=["cat", "dog"]) as p:
    ...         [c.name for c in p.store.classes.list()]
    ['cat', 'dog']
    """

    root: Path
    config: ProjectConfig
    store: Store

    # -- paths
    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def arrays_dir(self) -> Path:
        return self.root / "arrays"

    @property
    def images_dir(self) -> Path:
        return self.root / "images"

    @property
    def revisions_dir(self) -> Path:
        return self.root / "revisions"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def class_names(self) -> tuple[str, ...]:
        return self.config.classes

    # -- lifecycle
    # the module's functions, one definition and one documentation
    # (public as ``retest.init_project`` and ``retest.open_project``)
    init = staticmethod(init_project)
    open = staticmethod(open_project)

    @classmethod
    def from_store(
        cls, root: str | os.PathLike[str], store: Store, *, name: str | None = None
    ) -> Project:
        """A handle on an already open ``store`` whose data folders are in ``root``.

        For a store opened without a ``retest.toml`` (a notebook, a test, a
        benchmark): the configuration is the default one with the store's
        classes. :meth:`close` closes the store.

        Parameters
        ----------
        root : path-like
            Folder of ``arrays/``, ``images/``, ``reports/`` (need not exist yet).
        store : Store
        name : str, optional
            Project name; defaults to the folder's name.

        Returns
        -------
        Project
        """
        from retest.names import suggest_name

        root = Path(root).resolve()
        classes = tuple(c.name for c in store.classes.list())
        config = ProjectConfig(name=name or suggest_name(root.name), classes=classes)
        return cls(root, config, store)

    def _sync_classes(self) -> None:
        stored = [c.name for c in self.store.classes.list()]
        if not stored:
            self.store.classes.put(
                ClassRow(i, c) for i, c in enumerate(self.class_names)
            )
        elif tuple(stored) != self.class_names:
            raise ConfigError(
                f"{self.config_path}: classes {list(self.class_names)} differ from the "
                f"classes in {self.db_path} {stored}. Restore the file's class list; "
                "class ids must not change within a project."
            )

    def close(self) -> None:
        self.store.close()

    def reader(self) -> Store | None:
        """A read-only store on its own connection, or None when the store has none.

        The read side of the store: reads on it never wait behind a write, and it
        stays usable after this project is closed. The caller closes it.
        """
        if not isinstance(self.store, SQLiteStore):
            return None
        from retest.store.sqlite_reader import SQLiteReadStore

        return SQLiteReadStore(self.db_path)

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- data access
    def pixel_array(self, name: str) -> PixelArray:
        """The append-only pixel array ``arrays/<name>``."""
        return PixelArray(self.arrays_dir, name)

    def _location(self, item_id: str) -> tuple[str | None, int | None, str | None]:
        if split_reference_id(item_id) is not None:
            ref = self.store.references.get(item_id)
            return ref.array_name, ref.array_row, None
        cand = self.store.candidates.get(item_id)
        return cand.array_name, cand.array_row, cand.file_path

    def pixels(self, item_ids: Sequence[str]) -> list[NDArray[np.uint8]]:
        """uint8 pixels (H×W×C, or H×W for grayscale arrays) of each item, in order.

        Rows of the same array are read together; files are decoded with PIL (EXIF
        orientation applied, converted to RGB).
        """
        locs = [self._location(i) for i in item_ids]
        out: list[Any] = [None] * len(item_ids)
        by_array: dict[str, list[tuple[int, int]]] = {}
        for k, (arr, row, path) in enumerate(locs):
            if arr is not None and row is not None:
                by_array.setdefault(arr, []).append((k, row))
            elif path is not None:
                out[k] = _decode_file(self.root / path)
            else:
                raise StoreError(
                    f"item {item_ids[k]!r} has no stored pixels (neither an array row "
                    "nor a file). Re-ingest its source."
                )
        for arr, pairs in by_array.items():
            imgs = self.pixel_array(arr).read([row for _, row in pairs])
            for (k, _), img in zip(pairs, imgs, strict=True):
                out[k] = img
        return out

    def file_bytes(self, item_id: str) -> bytes | None:
        """The stored image file of a file-backed item, or None for array-backed."""
        _, _, path = self._location(item_id)
        return None if path is None else (self.root / path).read_bytes()


def _decode_file(path: Path) -> NDArray[np.uint8]:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(path.read_bytes())) as im:
            return np.asarray(ImageOps.exif_transpose(im).convert("RGB"), np.uint8)
    except FileNotFoundError:
        raise DataIntegrityError(f"image file {path} is missing.") from None
    except (UnidentifiedImageError, OSError) as err:
        raise DataIntegrityError(f"{path} is not a readable image: {err}.") from err
