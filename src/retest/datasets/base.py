"""Dataset sources: describe → fetch (sha256-checked, idempotent) → load.

Each source declares where its files come from as data (``RemoteFile``: URL,
sha256, size), like torchvision's dataset classes, and implements ``load(split)``
returning a :class:`~retest.records.LabeledSet`. ``fetch()`` downloads only what
is missing or fails its checksum ("Using downloaded and verified file" otherwise),
so a second call makes no request. Any directory holding the files can be used as
``root`` (the local path option).

Verified hashes are remembered per file in ``<root>/.retest-sha256.json``
together with the file's size and mtime, so loading does not re-hash unchanged
files; a file whose size or mtime changes is hashed again.

Registry
--------
``DATASETS`` maps a name to a factory ``(**options) -> DatasetSource``. Built-ins
are registered lazily (their modules import only when used)::

    src = DATASETS.get("cifar10_1")(root="data/c101", version="v4")
    src.fetch(); test = src.load("test")
"""

from __future__ import annotations

import importlib
import json
import os
import time
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retest._atomic import atomic_write_bytes
from retest._output import RULES, check_location
from retest._progress import ProgressCallback
from retest.datasets.download import HashCache as _HashCache
from retest.datasets.download import download_url, extract_archive
from retest.errors import ConfigError, DataIntegrityError
from retest.records import LabeledSet
from retest.registry import Registry

__all__ = [
    "DATASETS",
    "DatasetSource",
    "RemoteFile",
    "dataset_name",
    "dataset_names",
    "default_data_root",
    "fetch_dataset",
    "get_dataset",
    "load_dataset",
]

_EXTRACT_RECORD = ".retest-extracted.json"


def default_data_root() -> Path:
    """``$RETEST_DATA_DIR`` or ``~/.cache/retest/datasets``."""
    env = os.environ.get("RETEST_DATA_DIR")
    return Path(env) if env else Path.home() / ".cache" / "retest" / "datasets"


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """One published file: where it lives and what it hashes to.

    ``sha256=None`` means no published checksum is known; the file is then
    accepted if it exists and its format checks pass on load.
    ``alt_sha256`` lists other known-good copies (e.g. a distribution's
    re-compressed package of the same data).
    """

    filename: str
    url: str
    sha256: str | None
    size: int | None = None
    alt_sha256: tuple[str, ...] = ()

    def accepts(self, digest: str) -> bool:
        if self.sha256 is None:
            return True
        return digest in (self.sha256, *self.alt_sha256)


_MIRROR_SCHEMES = ("http", "https", "ftp", "file")


def _check_mirror(mirror: str) -> str:
    """A mirror must be a URL the downloader can open (``http(s)://host/...``)."""
    parts = urllib.parse.urlsplit(mirror)
    ok = parts.scheme.lower() in _MIRROR_SCHEMES and (
        bool(parts.netloc) or parts.scheme.lower() == "file"
    )
    if not ok:
        raise ConfigError(
            f"mirror {mirror!r} is not a URL; expected a base URL such as "
            "https://example.org/datasets (schemes: http, https, ftp, file)."
        )
    return mirror


def _check_root(root: Path) -> Path:
    """The data root is a folder (or not yet created) — never a file."""
    if root.exists() and not root.is_dir():
        raise ConfigError(
            f"dataset root {root} is a file, not a folder; pass a folder with --root "
            "(it is created when missing)."
        )
    blocker = next((q for q in root.absolute().parents if q.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ConfigError(
            f"dataset root {root}: {blocker} is a file, so the folder cannot be "
            "created; pass another folder with --root."
        )
    return root


class DatasetSource(ABC):
    """Base of every dataset source.

    Parameters
    ----------
    root : path, optional
        Directory holding (or receiving) the files; defaults to
        ``default_data_root() / name``. Point it at an existing copy to use it
        without downloading.
    version : str, optional
        For sources with versions/variants (``versions``).
    mirror : str, optional
        Base URL replacing the published one (``<mirror>/<filename>``).
    checksums : mapping, optional
        ``{filename: sha256 or None}`` overriding the published checksums.
    retries, timeout, sleep
        Passed to :func:`~retest.datasets.download.download_url`.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    homepage: ClassVar[str] = ""
    license: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    splits: ClassVar[tuple[str, ...]] = ("test",)
    versions: ClassVar[tuple[str, ...]] = ()
    default_version: ClassVar[str | None] = None

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        version: str | None = None,
        mirror: str | None = None,
        checksums: Mapping[str, str | None] | None = None,
        retries: int = 3,
        timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if version is not None and version not in self.versions:
            have = ", ".join(self.versions) if self.versions else "none"
            raise ConfigError(
                f"{self.name} has no version {version!r}; available versions: {have}."
            )
        self.version = version or self.default_version
        self.root = _check_root(
            Path(root) if root is not None else self._default_root()
        )
        self._mirror = _check_mirror(mirror) if mirror is not None else None
        self._checksums = dict(checksums or {})
        self._download_opts: dict[str, Any] = {
            "retries": retries,
            "timeout": timeout,
            "sleep": sleep,
        }

    # ------------------------------------------------------------------ description
    @property
    def class_names(self) -> tuple[str, ...]:
        return ()

    @abstractmethod
    def _remote_files(self) -> list[RemoteFile]:
        """The published files for this instance's version."""

    @property
    def files(self) -> dict[str, RemoteFile]:
        """``{filename: RemoteFile}`` after mirror / checksum overrides."""
        out: dict[str, RemoteFile] = {}
        for f in self._remote_files():
            if self._mirror is not None:
                f = replace(f, url=f"{self._mirror.rstrip('/')}/{f.filename}")
            if f.filename in self._checksums:
                f = replace(f, sha256=self._checksums[f.filename], alt_sha256=())
            out[f.filename] = f
        return out

    def _default_root(self) -> Path:
        return default_data_root() / self.name

    def fetch_hint(self) -> str:
        """The command that (re)creates the files."""
        cmd = f"retest datasets fetch {self.name} --root {self.root}"
        if self.versions and self.version:
            cmd += f" --version {self.version}"
        return cmd

    # ------------------------------------------------------------------ integrity
    def _file_state(self, f: RemoteFile, cache: _HashCache) -> str:
        path = self.root / f.filename
        if not path.is_file():
            return "missing"
        if f.sha256 is None:
            return "unverified"
        return "ok" if f.accepts(cache.sha256(path)) else "corrupt"

    def status(self) -> dict[str, str]:
        """``{filename: "ok" | "unverified" | "missing" | "corrupt"}``.

        ``unverified`` = present, but no published sha256 to compare with.
        """
        cache = _HashCache(self.root)
        out = {name: self._file_state(f, cache) for name, f in self.files.items()}
        cache.save()
        return out

    def _integrity_error(self, problems: Mapping[str, str]) -> DataIntegrityError:
        listed = ", ".join(f"{n}: {s}" for n, s in sorted(problems.items()))
        return DataIntegrityError(
            f"{self.name} files missing or corrupted under {self.root} ({listed}). "
            f"Run `{self.fetch_hint()}`."
        )

    def _require_files(self, names: list[str] | None = None) -> None:
        """Raise DataIntegrityError unless the named (default: all remote) files are good."""
        wanted = set(self.files) if names is None else set(names)
        states = DatasetSource.status(self)
        bad = {
            n: ("sha256 mismatch" if s == "corrupt" else s)
            for n, s in states.items()
            if s in ("missing", "corrupt") and n in wanted
        }
        if bad:
            raise self._integrity_error(bad)

    def is_ready(self) -> bool:
        """True when ``load`` can run without downloading anything."""
        states = DatasetSource.status(self)
        return all(s in ("ok", "unverified") for s in states.values())

    # ------------------------------------------------------------------ fetch
    def fetch(self, *, progress: ProgressCallback | None = None) -> Path:
        """Download what is missing or corrupt, then prepare (e.g. extract).

        Idempotent: when everything is present and verified nothing is requested.
        Returns ``root``, which is never inside a retest project (its files would
        be strays there).
        """
        check_location(self.root, RULES["datasets fetch"], "--root")
        if self.is_ready():
            return self.root
        self.root.mkdir(parents=True, exist_ok=True)
        cache = _HashCache(self.root)
        for f in self.files.values():
            if self._file_state(f, cache) in ("ok", "unverified"):
                continue
            (self.root / f.filename).unlink(missing_ok=True)
            download_url(
                f.url,
                self.root,
                f.filename,
                f.sha256,
                progress=progress,
                **self._download_opts,
            )
            cache.sha256(self.root / f.filename)
        cache.save()
        self._prepare(progress)
        return self.root

    def _prepare(self, progress: ProgressCallback | None) -> None:
        """Post-download step (extraction); default: nothing."""
        return None

    # ------------------------------------------------------------------ archives
    def _extract(self, archive: str, marker_dir: str) -> None:
        """Extract ``root/archive`` and record each member's sha256."""
        src = self.root / archive
        names = extract_archive(src, self.root)
        cache = _HashCache(self.root)
        record = {
            "archive": archive,
            "files": {n: cache.sha256(self.root / n) for n in sorted(names)},
        }
        cache.save()
        atomic_write_bytes(
            self.root / marker_dir / _EXTRACT_RECORD,
            json.dumps(record, indent=1).encode(),
        )

    def _extracted_problems(
        self, marker_dir: str, *, hash_files: bool
    ) -> dict[str, str]:
        """Problems with an extracted tree, judged against its extraction record.

        A tree without a record (a copy the user unpacked) is trusted as is.
        """
        record_path = self.root / marker_dir / _EXTRACT_RECORD
        if not record_path.is_file():
            return {} if (self.root / marker_dir).is_dir() else {marker_dir: "missing"}
        record = json.loads(record_path.read_text())
        cache = _HashCache(self.root)
        bad: dict[str, str] = {}
        for name, digest in record["files"].items():
            p = self.root / name
            if not p.is_file():
                bad[name] = "missing"
            elif hash_files and cache.sha256(p) != digest:
                bad[name] = "sha256 mismatch"
        cache.save()
        return bad

    # ------------------------------------------------------------------ loading
    def _check_split(self, split: str) -> None:
        if split not in self.splits:
            raise ConfigError(
                f"{self.name} has no split {split!r}; available: {', '.join(self.splits)}."
            )

    @abstractmethod
    def load(self, split: str = "test") -> LabeledSet:
        """Load one split as a LabeledSet (raises DataIntegrityError when not fetched)."""

    def info(self, *, counts: bool = True) -> dict[str, Any]:
        """Provenance, file status and (when the data is present) per-split counts."""
        status = self.status()
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "versions": list(self.versions),
            "description": self.description,
            "homepage": self.homepage,
            "license": self.license,
            "citation": self.citation,
            "root": str(self.root),
            "splits": list(self.splits),
            "classes": list(self.class_names),
            "files": [
                {
                    "filename": f.filename,
                    "url": f.url,
                    "sha256": f.sha256,
                    "size": f.size,
                    "status": status[f.filename],
                }
                for f in self.files.values()
            ],
            "ready": self.is_ready(),
            "counts": {},
        }
        if counts and out["ready"]:
            for split in self.splits:
                ls = self.load(split)
                per_class = np.bincount(ls.labels, minlength=ls.n_classes)
                out["counts"][split] = {"n": ls.n, "per_class": per_class.tolist()}
        return out


# ---------------------------------------------------------------------- registry

DATASETS: Registry[Callable[..., DatasetSource]] = Registry(
    "dataset", entry_point_group="retest.datasets"
)

_BUILTINS = {
    "cifar10": ("retest.datasets.cifar10", "CIFAR10"),
    "cifar10_1": ("retest.datasets.cifar10_1", "CIFAR10_1"),
    "fashion_mnist": ("retest.datasets.fashion_mnist", "FashionMNIST"),
    "imagenet_v2": ("retest.datasets.imagenet_v2", "ImageNetV2"),
}


def _lazy(module: str, attr: str) -> Callable[..., DatasetSource]:
    def factory(**options: Any) -> DatasetSource:
        cls: type[DatasetSource] = getattr(importlib.import_module(module), attr)
        try:
            return cls(**options)
        except TypeError as err:
            raise ConfigError(f"{cls.name}: {err}.") from err

    factory.__name__ = attr
    factory.__qualname__ = attr
    return factory


for _name, (_mod, _attr) in _BUILTINS.items():
    DATASETS.add(_name, _lazy(_mod, _attr))


def dataset_names() -> list[str]:
    """Registered dataset names."""
    return DATASETS.names()


def dataset_name(name: str) -> str:
    """The registered name ``name`` means: names a user types are spelled with
    hyphens (``fashion-mnist``, ``cifar10-1``), the registry's with underscores.
    An unknown name is returned as given (the lookup then suggests)."""
    if name not in DATASETS and name.replace("-", "_") in DATASETS:
        return name.replace("-", "_")
    return name


def get_dataset(name: str, **options: Any) -> DatasetSource:
    """Instantiate the source ``name`` (unknown names get suggestions)."""
    return DATASETS.get(dataset_name(name))(**options)


def fetch_dataset(
    name: str,
    *,
    root: str | os.PathLike[str] | None = None,
    version: str | None = None,
    progress: ProgressCallback | None = None,
    **options: Any,
) -> DatasetSource:
    """Fetch dataset ``name`` (idempotent) and return its source, ready to load."""
    src = get_dataset(name, root=root, version=version, **options)
    src.fetch(progress=progress)
    return src


def load_dataset(
    name: str,
    split: str = "test",
    *,
    root: str | os.PathLike[str] | None = None,
    version: str | None = None,
    download: bool = False,
    progress: ProgressCallback | None = None,
    **options: Any,
) -> LabeledSet:
    """Load one split of dataset ``name``; with ``download=True`` fetch it first.

    Parameters
    ----------
    name : str
        A registered dataset: ``cifar10``, ``cifar10_1``, ``fashion_mnist``,
        ``imagenet_v2`` (:func:`dataset_names`).
    split : str
        ``"test"`` or, where the dataset has one, ``"train"``.
    root : path-like, optional
        Folder holding the files; default the dataset's own (Debian's copy of
        Fashion-MNIST when installed, else under :func:`default_data_root`).
    version : str, optional
        Version or variant (``cifar10_1``: v4, v6; ``imagenet_v2``: three).
    download : bool
        Fetch the files first (idempotent, sha256-checked).
    progress : ProgressCallback, optional
        Download progress.
    **options
        Passed to the dataset source (mirror, checksums, retries, timeout).

    Returns
    -------
    LabeledSet
        ``labels`` (int64), ``class_names`` and uint8 ``images`` (N, H, W[, C]).

    Raises
    ------
    UnknownNameError
        No dataset called ``name`` (with close matches).
    ConfigError
        An unknown split or version.
    DataIntegrityError
        The files are missing or fail their checksum (the message gives the
        ``retest datasets fetch`` command).

    Examples
    --------
    >>> from retest import load_dataset
    >>> test = load_dataset("fashion_mnist", "test")  # dataset-fashion-mnist
    >>> test.images.shape, test.labels[:5].tolist(), test.class_names[9]
    ((10000, 28, 28), [9, 2, 1, 1, 6], 'Ankle boot')
    """
    src = get_dataset(name, root=root, version=version, **options)
    if download:
        src.fetch(progress=progress)
    return src.load(split)
