"""File candidate sources: image folders and Flickr downloads."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.datasets.images import (
    IMAGE_MODES,
    ImageDecodeError,
    decode_image,
    image_to_mode_array,
)
from retest.errors import ConfigError, DataIntegrityError, InputValidationError
from retest.sources.base import (
    CANDIDATE_SOURCES,
    IMAGE_SUFFIXES,
    CandidateSource,
    SkippedItem,
    SourceBatch,
    SourceItem,
)
from retest.sources.flickr import SIZE_DIRS, load_search_results

__all__ = [
    "CLASS_INDEX_FILE",
    "FlickrSource",
    "FolderSource",
    "class_folder_map",
    "class_slug",
]


# ------------------------------------------------------------------ folders


#: The mapping file a folder source reads at its root: ``{folder: class name}``,
#: the ``class_index.json`` that ``retest export --format imagefolder`` writes.
CLASS_INDEX_FILE = "class_index.json"
#: Characters a folder name cannot hold on common file systems; a class name's
#: folder (its slug) has each replaced by ``_`` (``T-shirt/top`` → ``T-shirt_top``).
_NOT_IN_FOLDER_NAMES = '/\\:*?"<>|'


def class_slug(name: str) -> str:
    """The folder name of a class: ``/ \\ : * ? " < > |`` each become ``_``.

    >>> class_slug("T-shirt/top")
    'T-shirt_top'
    """
    return "".join("_" if ch in _NOT_IN_FOLDER_NAMES else ch for ch in name)


def class_folder_map(
    folders: set[str],
    classes: list[str] | tuple[str, ...],
    index: dict[str, str] | None = None,
) -> dict[str, str]:
    """Folder name → class name, for the folders that name a class.

    A folder names a class by, in this order: an entry of ``index`` (the source's
    ``class_index.json``), the class name itself, the class id in decimal (the
    folders ``export --format imagefolder`` writes) or the class's
    :func:`class_slug`. Folders that name no class are left out (the ingest
    refuses them, naming them).

    >>> class_folder_map({"0", "Trouser", "T-shirt_top", "x"}, ["T-shirt/top", "Trouser"])
    {'0': 'T-shirt/top', 'T-shirt_top': 'T-shirt/top', 'Trouser': 'Trouser'}
    """
    slugs: dict[str, str] = {}
    for c in classes:
        slugs.setdefault(class_slug(c), c)
    out: dict[str, str] = {}
    for f in sorted(folders):
        if index is not None and f in index:
            out[f] = index[f]
        elif f in classes:
            out[f] = f
        elif f.isdecimal() and int(f) < len(classes) and str(int(f)) == f:
            out[f] = classes[int(f)]
        elif f in slugs:
            out[f] = slugs[f]
    return out


def _read_class_index(path: Path) -> dict[str, str]:
    import json

    from retest._validation import decode_utf8

    try:
        doc = json.loads(decode_utf8(path.read_bytes(), str(path), "save it as UTF-8."))
    except InputValidationError:
        raise
    except (OSError, ValueError) as err:
        raise InputValidationError(
            f"{path}: cannot read the class mapping ({err}); expected JSON "
            '{"folder": "class name", ...} as `retest export --format imagefolder` '
            "writes it."
        ) from None
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in doc.items()
    ):
        raise InputValidationError(
            f'{path}: expected a JSON object {{"folder": "class name", ...}}; got '
            f"{json.dumps(doc)[:60]}."
        )
    return doc


@CANDIDATE_SOURCES.register("folder")
class FolderSource(CandidateSource):
    """Image files laid out as ``class/…`` or ``class/keyword/…``.

    The first folder below ``path`` is the class, the second (when there is one)
    the keyword; deeper folders only group files. Given the project's
    ``classes``, a class folder may be the class name, its id (``0``, as
    ``export --format imagefolder`` writes) or its :func:`class_slug`
    (``T-shirt_top`` for ``T-shirt/top``, whose ``/`` cannot be in a folder name),
    or be mapped by a ``class_index.json`` at ``path`` (``{folder: class}``).
    Files are visited in sorted path order; files without an image suffix and
    undecodable files become :class:`SkippedItem` (counted and reported).

    Images whose longer side is at most ``max_array_side`` (default 64) are
    delivered as upright pixels in ``mode`` (``RGB``: (H, W, 3); ``L``: (H, W),
    see :func:`~retest.datasets.images.image_to_mode_array`; a colour image is
    refused in ``L`` unless ``from_colour``), stored in arrays/, id = sha256 of
    the pixels; larger ones as the original file bytes (stored under
    ``images/<sha256>``, id = sha256 of the bytes; width/height are the upright
    size and readers apply the EXIF orientation via
    :func:`retest.datasets.images.decode_image`).
    """

    kind = "folder"
    storage = "mixed"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        class_name: str | None = None,
        max_array_side: int = 64,
        mode: str = "RGB",
        from_colour: bool = False,
        classes: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(path)
        if not self.path.is_dir():
            raise InputValidationError(
                f"folder source {self.path} is a file, not a directory; pass the "
                "folder that holds the images (one sub-folder per class), or add a "
                "single array file with `retest source add arrays`."
            )
        if mode not in IMAGE_MODES:
            raise ConfigError(
                f"--mode must be one of {', '.join(IMAGE_MODES)}. Got {mode!r}."
            )
        self.class_name = class_name
        self.max_array_side = max_array_side
        self.mode, self.from_colour = mode, from_colour
        index_path = self.path / CLASS_INDEX_FILE
        self.class_index = (
            _read_class_index(index_path) if index_path.is_file() else None
        )
        found = sorted(p for p in self.path.rglob("*") if p.is_file())
        self.files = [p.relative_to(self.path) for p in found if p != index_path]
        folders = {rel.parts[0] for rel in self.files if len(rel.parts) >= 2}
        self.folder_classes = (
            class_folder_map(folders, classes, self.class_index)
            if classes is not None
            else {}
        )

    def __len__(self) -> int:
        return len(self.files)

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "class_name": self.class_name,
            "max_array_side": self.max_array_side,
        }
        # only what changes the stored items, so earlier jobs keep their key
        if self.mode != "RGB" or self.from_colour:
            opts.update(mode=self.mode, from_colour=self.from_colour)
        renamed = {f: c for f, c in self.folder_classes.items() if f != c}
        if renamed:
            opts["class_folders"] = renamed
        return opts

    def class_names(self) -> set[str] | None:
        """The classes (or unmapped class folders) of the files that will be read."""
        if self.class_name is not None:
            return {self.class_name}
        return {
            cls
            for rel in self.files
            if (cls := self._labels(rel)[0]) is not None
            and _printable(rel) == rel.as_posix()  # a non-UTF-8 name is skipped
            and rel.suffix.lower() in IMAGE_SUFFIXES
        }

    def _labels(self, rel: Path) -> tuple[str | None, str | None]:
        parts = rel.parts
        folder = parts[0] if len(parts) >= 2 else None
        cls = self.class_name or (
            self.folder_classes.get(folder, folder) if folder is not None else None
        )
        kw = parts[1] if len(parts) >= 3 else None
        return cls, kw

    def _read(self, rel: Path) -> tuple[SourceItem, NDArray[np.uint8] | None]:
        data = (self.path / rel).read_bytes()
        where = str(self.path / rel)
        img = decode_image(data, source=where)
        cls, kw = self._labels(rel)
        w, h = img.size
        base = SourceItem(rel.as_posix(), class_name=cls, keyword=kw, width=w, height=h)
        if max(w, h) <= self.max_array_side:
            px = image_to_mode_array(
                img, self.mode, from_colour=self.from_colour, source=where
            )
            return base, px
        item = SourceItem(
            base.ref,
            class_name=cls,
            keyword=kw,
            data=data,
            suffix=rel.suffix.lower(),
            width=w,
            height=h,
        )
        return item, None

    def iter_batches(
        self, *, start: int = 0, batch_size: int = 256
    ) -> Iterator[SourceBatch]:
        for s in range(start, len(self), batch_size):
            e = min(len(self), s + batch_size)
            arrays: list[tuple[SourceItem, NDArray[np.uint8]]] = []
            files: list[SourceItem] = []
            skipped: list[SkippedItem] = []
            for rel in self.files[s:e]:
                ref = _printable(rel)
                if ref != rel.as_posix():
                    # The store and the reports hold text; such a name cannot be a ref.
                    skipped.append(SkippedItem(ref, _NOT_UTF8))
                    continue
                if rel.suffix.lower() not in IMAGE_SUFFIXES:
                    skipped.append(SkippedItem(ref, _NOT_IMAGE))
                    continue
                try:
                    item, px = self._read(rel)
                except (ImageDecodeError, OSError) as err:
                    skipped.append(SkippedItem(ref, str(err)))
                    continue
                if px is None:
                    files.append(item)
                else:
                    arrays.append((item, px))
            yield from _split_by_shape(s, e, arrays, files, skipped)


_NOT_IMAGE = (
    f"not an image file (the suffix is none of {' '.join(IMAGE_SUFFIXES)}); left out"
)
_NOT_UTF8 = (
    "file name is not valid UTF-8 (shown with \\x escapes); rename the file to "
    "ingest it"
)


def _printable(rel: Path) -> str:
    """The relative path as text; bytes that are not UTF-8 become ``\\xNN`` escapes.

    ``os`` decodes such bytes to lone surrogates, which no UTF-8 store, JSON file or
    terminal accepts, so they are escaped before the name goes anywhere.
    """
    text = rel.as_posix()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(text)
        return raw.decode("utf-8", "backslashreplace")
    return text


def _split_by_shape(
    s: int,
    e: int,
    arrays: list[tuple[SourceItem, NDArray[np.uint8]]],
    files: list[SourceItem],
    skipped: list[SkippedItem],
) -> Iterator[SourceBatch]:
    """One batch per pixel shape (arrays stack), then the files; the last carries
    the range end so the checkpoint covers the whole range."""
    groups: dict[tuple[int, ...], list[tuple[SourceItem, NDArray[np.uint8]]]] = {}
    for item, px in arrays:
        groups.setdefault(px.shape, []).append((item, px))
    parts: list[SourceBatch] = [
        SourceBatch(s, s, [it for it, _ in g], np.stack([px for _, px in g]))
        for g in groups.values()
    ]
    parts.append(SourceBatch(s, e, files, None, skipped))
    yield from parts


# ------------------------------------------------------------------ Flickr

_FLICKR_EXTRA = (
    "id_ours", "id_search_engine", "url_type", "wnid", "search_engine", "uploader",
    "date_upload_our_db", "min_taken_date", "max_taken_date", "min_uploaded_date",
    "max_uploaded_date", "search_sort", "max_images", "batch", "source_filename",
)  # fmt: skip


@CANDIDATE_SOURCES.register("flickr")
class FlickrSource(CandidateSource):
    """Flickr search-result records and their downloaded images.

    See docs/algorithms.md#flickr-search.

    ``path`` is a search-result JSON file or a folder of them (read with
    :func:`retest.sources.flickr.load_search_results`: sorted by file name,
    first ``id_ours`` wins, blacklisted ids dropped). ``images_dir`` is the
    downloader's output (``original/<id_ours>.jpg`` plus ``scaled_256`` and
    ``scaled_500``). A record whose image is not downloaded is skipped (and
    reported); a rerun after downloading more picks it up, since the ingest key
    includes the number of downloaded files.

    The class is the record's ``wnid``, the keyword its ``search_key``; the
    search parameters and Flickr ids go to the row's ``extra``; ``ref`` is the
    Flickr photo id.
    """

    kind = "flickr"
    storage = "file"
    global_refs = True  # the photo's id on the search engine

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        images_dir: str | os.PathLike[str],
        blacklist: str | os.PathLike[str] | None = None,
        class_name: str | None = None,
    ) -> None:
        super().__init__(path)
        self.images_dir = Path(images_dir)
        if not (self.images_dir / "original").is_dir():
            raise DataIntegrityError(
                f"{self.images_dir} has no original/ folder of downloaded images. "
                "Download the candidates first (retest.sources.flickr.download_candidates)."
            )
        self.blacklist = blacklist
        self.pool = load_search_results(self.path, blacklist=blacklist)
        self.records = list(self.pool.candidates.values())
        self.class_name = class_name

    def __len__(self) -> int:
        return len(self.records)

    def options(self) -> dict[str, Any]:
        n_files = sum(1 for _ in (self.images_dir / "original").glob("*.jpg"))
        return {
            "images_dir": str(self.images_dir.resolve()),
            "blacklist": str(self.blacklist) if self.blacklist else None,
            "class_name": self.class_name,
            "downloaded": n_files,
        }

    def _item(self, rec: Mapping[str, Any]) -> SourceItem | SkippedItem:
        ref = str(rec.get("id_search_engine") or rec["id_ours"])
        paths = {d: self.images_dir / d / f"{rec['id_ours']}.jpg" for d in SIZE_DIRS}
        if not paths["original"].is_file():
            return SkippedItem(ref, f"image {paths['original']} not downloaded")
        data = paths["original"].read_bytes()
        try:
            img = decode_image(data, source=str(paths["original"]))
        except ImageDecodeError as err:
            return SkippedItem(ref, str(err))
        derived = {
            d: p.read_bytes()
            for d, p in paths.items()
            if d != "original" and p.is_file()
        }
        extra = {k: rec[k] for k in _FLICKR_EXTRA if rec.get(k) is not None}
        fields = {
            "date_taken": rec.get("date_taken"),
            "date_uploaded": rec.get("date_upload_search_engine"),
            "url": rec.get("url"),
            "license": rec.get("license"),
            "extra": extra,
        }
        return SourceItem(
            ref,
            class_name=self.class_name or rec.get("wnid"),
            keyword=rec.get("search_key"),
            data=data,
            suffix=".jpg",
            width=img.size[0],
            height=img.size[1],
            fields=fields,
            derived=derived,
        )

    def iter_batches(
        self, *, start: int = 0, batch_size: int = 256
    ) -> Iterator[SourceBatch]:
        for s in range(start, len(self), batch_size):
            e = min(len(self), s + batch_size)
            got = [self._item(r) for r in self.records[s:e]]
            items = [g for g in got if isinstance(g, SourceItem)]
            skipped = [g for g in got if isinstance(g, SkippedItem)]
            yield SourceBatch(s, e, items, None, skipped)
