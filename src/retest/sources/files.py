"""File candidate sources: image folders and Flickr downloads."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.errors import DataIntegrityError, InputValidationError
from retest.sources.base import (
    CANDIDATE_SOURCES,
    IMAGE_SUFFIXES,
    CandidateSource,
    SkippedItem,
    SourceBatch,
    SourceItem,
)
from retest.sources.flickr import SIZE_DIRS, load_search_results
from retest.sources.images import ImageDecodeError, decode_image, image_to_array

__all__ = ["FlickrSource", "FolderSource"]


# ------------------------------------------------------------------ folders


@CANDIDATE_SOURCES.register("folder")
class FolderSource(CandidateSource):
    """Image files laid out as ``class/…`` or ``class/keyword/…``.

    Files are visited in sorted path order. Each file is decoded (EXIF orientation
    applied, converted to RGB); undecodable files become :class:`SkippedItem`.
    Images whose longer side is at most ``max_array_side`` (default 64) are
    delivered as upright RGB pixels (stored in arrays/, id = sha256 of the
    pixels); larger ones as the original file bytes (stored under
    ``images/<sha256>``, id = sha256 of the bytes; width/height are the upright
    size and readers apply the EXIF orientation via
    :func:`retest.sources.images.decode_image`).
    """

    kind = "folder"
    storage = "mixed"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        class_name: str | None = None,
        max_array_side: int = 64,
    ) -> None:
        super().__init__(path)
        if not self.path.is_dir():
            raise InputValidationError(
                f"folder source {self.path} is a file, not a directory; pass the "
                "folder that holds the images (one sub-folder per class), or add a "
                "single array file with `retest source add arrays`."
            )
        self.class_name = class_name
        self.max_array_side = max_array_side
        self.files = sorted(
            p.relative_to(self.path)
            for p in self.path.rglob("*")
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
        )

    def __len__(self) -> int:
        return len(self.files)

    def options(self) -> dict[str, Any]:
        return {"class_name": self.class_name, "max_array_side": self.max_array_side}

    def class_names(self) -> set[str] | None:
        """The class folders (or ``--class``) of the files that will be read."""
        if self.class_name is not None:
            return {self.class_name}
        return {
            cls
            for rel in self.files
            if (cls := self._labels(rel)[0]) is not None
            and _printable(rel) == rel.as_posix()  # a non-UTF-8 name is skipped
        }

    def _labels(self, rel: Path) -> tuple[str | None, str | None]:
        parts = rel.parts
        cls = self.class_name or (parts[0] if len(parts) >= 2 else None)
        kw = parts[1] if len(parts) >= 3 else None
        return cls, kw

    def _read(self, rel: Path) -> tuple[SourceItem, NDArray[np.uint8] | None]:
        data = (self.path / rel).read_bytes()
        img = decode_image(data, source=str(self.path / rel))
        cls, kw = self._labels(rel)
        w, h = img.size
        base = SourceItem(rel.as_posix(), class_name=cls, keyword=kw, width=w, height=h)
        if max(w, h) <= self.max_array_side:
            return base, image_to_array(img)
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
