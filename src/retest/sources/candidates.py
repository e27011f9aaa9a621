"""Candidate sources: where new images come from (issue 3, SPEC §1).

Every source is registered in :data:`CANDIDATE_SOURCES` under its kind and offers
the same small surface (*describe → iterate*):

* :meth:`CandidateSource.describe` — kind, path, number of items, options;
* :meth:`CandidateSource.iter_batches` — :class:`SourceBatch` objects covering the
  source's items in one deterministic order, starting at any position, so an
  interrupted ingest resumes where it stopped.

Array-like sources (arrays, IDX, CIFAR pickles, TinyImages, small folder images)
deliver pixels; file sources (large folder images, Flickr downloads) deliver the
file bytes. Items that cannot be read are returned as :class:`SkippedItem` so the
ingest reports them instead of stopping. Persistence is the pipeline's job
(:mod:`retest.pipeline.ingest`).
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from retest.errors import ConfigError, DataIntegrityError, InputValidationError
from retest.registry import Registry
from retest.sources.cifar10 import (
    BATCH_DIR,
    META,
    TEST_BATCH,
    TRAIN_BATCHES,
    read_cifar_batch,
    read_cifar_meta,
)
from retest.sources.flickr import SIZE_DIRS, load_search_results
from retest.sources.idx import read_idx
from retest.sources.images import ImageDecodeError, decode_image, image_to_array
from retest.sources.tinyimages import KeywordIndex, TinyImages, decode_into

__all__ = [
    "CANDIDATE_SOURCES",
    "ArraySource",
    "CandidateSource",
    "CifarSource",
    "ColumnItems",
    "FlickrSource",
    "FolderSource",
    "IdxSource",
    "SkippedItem",
    "SourceBatch",
    "SourceItem",
    "TinyImagesSource",
    "make_source",
    "read_keywords_file",
]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One candidate as a source delivers it.

    ``ref`` is the source's own reference (TinyImages index, array row, file path
    relative to the source root, Flickr photo id). ``class_name`` or ``class_id``
    give the intended class when the source knows it. ``data`` holds file bytes
    for file sources; array sources put pixels in :attr:`SourceBatch.pixels`.
    """

    ref: str
    class_name: str | None = None
    class_id: int | None = None
    keyword: str | None = None
    data: bytes | None = field(default=None, repr=False)
    suffix: str = ""
    width: int | None = None
    height: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: Extra files of a file item (e.g. ``scaled_256``), stored next to ``data``.
    derived: Mapping[str, bytes] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class SkippedItem:
    """An item that could not be read, with the reason (goes to the ingest report)."""

    ref: str
    reason: str


class ColumnItems(Sequence[SourceItem]):
    """Items of an array batch kept as columns; :class:`SourceItem` built on access.

    Array sources with many small items (TinyImages) use this instead of a list so
    that a batch costs no Python object per item; the ingest reads the columns
    directly. Indexing, iteration and ``len`` behave like the equivalent list.
    """

    __slots__ = ("class_names", "height", "keywords", "refs", "width")

    def __init__(
        self,
        refs: Sequence[str],
        class_names: Sequence[str | None],
        keywords: Sequence[str | None],
        width: int,
        height: int,
    ) -> None:
        self.refs, self.class_names, self.keywords = refs, class_names, keywords
        self.width, self.height = width, height

    def __len__(self) -> int:
        return len(self.refs)

    def _item(self, i: int) -> SourceItem:
        return SourceItem(
            self.refs[i], class_name=self.class_names[i], keyword=self.keywords[i],
            width=self.width, height=self.height,
        )  # fmt: skip

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._item(j) for j in range(len(self))[i]]
        return self._item(range(len(self))[i])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """Items at source positions ``[start, stop)``.

    ``pixels`` (array sources) is aligned with ``items``: ``pixels[i]`` belongs to
    ``items[i]``; it is ``None`` for items carrying file ``data``. ``skipped``
    items are part of the range but not of ``items``.
    """

    start: int
    stop: int
    items: Sequence[SourceItem]
    pixels: NDArray[np.uint8] | None = field(default=None, repr=False)
    skipped: list[SkippedItem] = field(default_factory=list)


class CandidateSource(ABC):
    """A source of candidate images.

    Subclasses set :attr:`kind` and implement :meth:`__len__`,
    :meth:`iter_batches` and (optionally) extend :meth:`describe`.
    """

    kind: ClassVar[str]
    #: ``"array"`` (pixels into arrays/) or ``"file"`` (bytes into images/).
    storage: ClassVar[str] = "array"
    #: Class names in label-id order when the source knows them (CIFAR meta).
    label_names: list[str] | None = None
    #: Items per ingest batch when the caller does not say (None: the stage default).
    default_batch_size: ClassVar[int | None] = None

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise DataIntegrityError(
                f"{self.kind} source {self.path} does not exist. Check the path."
            )

    @abstractmethod
    def __len__(self) -> int:
        """Number of positions (items + unreadable items)."""

    @abstractmethod
    def iter_batches(
        self, *, start: int = 0, batch_size: int = 4096
    ) -> Iterator[SourceBatch]:
        """Batches covering positions ``[start, len(self))`` in order."""

    def iter_batches_recycled(
        self, *, start: int = 0, batch_size: int = 4096, depth: int = 2
    ) -> Iterator[SourceBatch]:
        """:meth:`iter_batches` for a consumer that drops batches promptly.

        The caller promises to be done with batch *k*'s ``pixels`` before it asks
        for batch *k + depth*, so a source may decode batch *k + depth* into the
        same array (a fresh 200 MB array per batch costs more in page faults than
        the decode itself). Same batches as :meth:`iter_batches` otherwise; this
        default reuses nothing.
        """
        return self.iter_batches(start=start, batch_size=batch_size)

    def options(self) -> dict[str, Any]:
        """Options that change what the source yields (part of the ingest key)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Kind, resolved path, item count and options."""
        return {
            "kind": self.kind,
            "path": str(self.path.resolve()),
            "n_items": len(self),
            "storage": self.storage,
            **self.options(),
        }


CANDIDATE_SOURCES: Registry[type[CandidateSource]] = Registry(
    "candidate source", entry_point_group="retest.sources"
)


def make_source(
    kind: str, path: str | os.PathLike[str], **options: Any
) -> CandidateSource:
    """Build the source registered as ``kind`` (unknown kinds get suggestions)."""
    cls = CANDIDATE_SOURCES.get(kind)
    return cls(path, **options)


def read_keywords_file(path: str | os.PathLike[str]) -> dict[str, str | None]:
    """Keywords (and their class, when given) from a file.

    Accepted formats: JSON ``{class: [keyword, ...]}`` or ``{class: {keyword: n}}``
    (the keyword-plan / ``keyword_counts_v6.json`` layout), a JSON list of
    keywords, or text with one keyword per line (``#`` starts a comment).

    Returns
    -------
    dict of str to (str or None)
        ``keyword → class name`` (``None`` when the file does not say), in file
        order.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read keywords file {p}: {err}.") from err
    if p.suffix.lower() == ".json":
        data = json.loads(text)
        if isinstance(data, dict):
            return {str(kw): str(c) for c, kws in data.items() for kw in kws}
        if isinstance(data, list):
            return {str(kw): None for kw in data}
        raise ConfigError(
            f"keywords file {p} must hold a JSON object or list. Got {type(data).__name__}."
        )
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        kw = line.split("#", 1)[0].strip()
        if kw:
            out[kw] = None
    return out


# ------------------------------------------------------------------ array-like


class _ArrayLikeSource(CandidateSource):
    """Shared batching over an in-memory (or memory-mapped) image array."""

    images: NDArray[np.uint8]
    labels: NDArray[np.int64] | None = None
    keywords: Sequence[str | None] | None = None
    class_name: str | None = None

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def _ref(self, i: int) -> str:
        return str(i)

    def _fields(self, i: int) -> Mapping[str, Any]:
        return {}

    def _item(self, i: int) -> SourceItem:
        label = None if self.labels is None else int(self.labels[i])
        kw = None if self.keywords is None else self.keywords[i]
        return SourceItem(
            self._ref(i),
            class_name=self.class_name,
            class_id=None if self.class_name is not None else label,
            keyword=kw,
            height=int(self.images.shape[1]),
            width=int(self.images.shape[2]),
            fields=self._fields(i),
        )

    def iter_batches(
        self, *, start: int = 0, batch_size: int = 4096
    ) -> Iterator[SourceBatch]:
        n = len(self)
        for s in range(start, n, batch_size):
            e = min(n, s + batch_size)
            items = [self._item(i) for i in range(s, e)]
            pixels = np.ascontiguousarray(self.images[s:e], dtype=np.uint8)
            yield SourceBatch(s, e, items, pixels)


def _check_images(arr: NDArray[Any], where: Path) -> NDArray[np.uint8]:
    if arr.dtype != np.uint8 or arr.ndim not in (3, 4):
        raise InputValidationError(
            f"{where}: images must be uint8 of shape (N, H, W) or (N, H, W, C). "
            f"Got {arr.dtype} {arr.shape}. Convert them with .astype(np.uint8)."
        )
    return arr


def _aligned(values: Any, n: int, what: str, where: Path) -> Any:
    if values is not None and len(values) != n:
        raise InputValidationError(
            f"{where}: {len(values)} {what} for {n} images; they must align."
        )
    return values


@CANDIDATE_SOURCES.register("arrays")
class ArraySource(_ArrayLikeSource):
    """``.npy`` (images only) or ``.npz`` uint8 N×H×W[×C] + optional labels/keywords.

    In an ``.npz`` the images are the first of ``images``, ``data``, ``x``;
    labels ``labels`` / ``y``; keywords ``keywords``. Item ``ref`` = row index.
    """

    kind = "arrays"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        class_name: str | None = None,
        keywords: Sequence[str] | None = None,
    ) -> None:
        super().__init__(path)
        labels = kws = None
        if self.path.suffix == ".npz":
            with np.load(self.path, allow_pickle=False) as z:
                key = next((k for k in ("images", "data", "x") if k in z.files), None)
                if key is None:
                    raise InputValidationError(
                        f"{self.path}: no 'images', 'data' or 'x' array "
                        f"(found {', '.join(z.files)})."
                    )
                imgs = z[key]
                lk = next((k for k in ("labels", "y") if k in z.files), None)
                labels = None if lk is None else z[lk].astype(np.int64)
                kws = [str(k) for k in z["keywords"]] if "keywords" in z.files else None
                if "class_names" in z.files:
                    self.label_names = [str(c) for c in z["class_names"]]
        else:
            imgs = np.load(self.path, mmap_mode="r", allow_pickle=False)
        self.images = _check_images(imgs, self.path)
        n = len(self)
        self.labels = _aligned(labels, n, "labels", self.path)
        self.keywords = _aligned(keywords or kws, n, "keywords", self.path)
        self.class_name = class_name

    def options(self) -> dict[str, Any]:
        return {"class_name": self.class_name, "shape": list(self.images.shape[1:])}


@CANDIDATE_SOURCES.register("idx")
class IdxSource(_ArrayLikeSource):
    """IDX images (``.gz`` or raw, MNIST/Fashion-MNIST layout), labels optional.

    The labels file defaults to the sibling named like the images file with
    ``images-idx3`` replaced by ``labels-idx1`` when it exists.
    """

    kind = "idx"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        labels_path: str | os.PathLike[str] | None = None,
        class_name: str | None = None,
    ) -> None:
        super().__init__(path)
        self.images = _check_images(read_idx(self.path), self.path)
        lp = Path(labels_path) if labels_path else self._sibling_labels()
        self.labels_path = lp
        labels = None if lp is None else read_idx(lp).astype(np.int64)
        self.labels = _aligned(labels, len(self), "labels", self.path)
        self.class_name = class_name

    def _sibling_labels(self) -> Path | None:
        name = self.path.name.replace("images-idx3", "labels-idx1")
        cand = self.path.with_name(name)
        return cand if name != self.path.name and cand.exists() else None

    def options(self) -> dict[str, Any]:
        return {
            "labels_path": str(self.labels_path) if self.labels_path else None,
            "class_name": self.class_name,
        }


@CANDIDATE_SOURCES.register("cifar")
class CifarSource(_ArrayLikeSource):
    """CIFAR python pickle batches (channel-planar rows → HWC, SPEC §1.2).

    ``path`` is a batch file, or a folder (or its ``cifar-10-batches-py``
    child) with ``data_batch_1..5`` and ``test_batch``: train batches in order,
    then test, so ``ref`` is the global CIFAR index (test image j ↔ 50000 + j
    for the full dataset). Class names come from ``batches.meta`` when present.
    """

    kind = "cifar"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        class_name: str | None = None,
        split: str | None = None,
    ) -> None:
        super().__init__(path)
        folder = self.path
        if folder.is_dir() and (folder / BATCH_DIR).is_dir():
            folder = folder / BATCH_DIR
        wanted = {None: (*TRAIN_BATCHES, TEST_BATCH), "train": TRAIN_BATCHES,
                  "test": (TEST_BATCH,)}.get(split)  # fmt: skip
        if wanted is None:
            raise ConfigError(f"CIFAR split must be train or test. Got {split!r}.")
        self.split = split
        if folder.is_dir():
            names = [n for n in wanted if (folder / n).is_file()]
            if not names:
                raise DataIntegrityError(
                    f"{folder} holds no CIFAR batches (data_batch_1..5, test_batch)."
                )
            self.batch_files = [folder / n for n in names]
            meta = folder / META
        else:
            self.batch_files = [folder]
            meta = folder.with_name(META)
        parts = [read_cifar_batch(p) for p in self.batch_files]
        self.images = np.concatenate([p[0] for p in parts])
        self.labels = np.concatenate([p[1] for p in parts])
        self.filenames = [f for p in parts for f in p[2]]
        self.sizes = [len(p[1]) for p in parts]
        self.label_names = read_cifar_meta(meta) if meta.is_file() else None
        self.class_name = class_name

    def _item(self, i: int) -> SourceItem:
        item = super()._item(i)
        if self.class_name is None and self.label_names is not None:
            label = int(self.labels[i]) if self.labels is not None else -1
            if 0 <= label < len(self.label_names):
                return SourceItem(
                    item.ref,
                    class_name=self.label_names[label],
                    width=32,
                    height=32,
                    fields=item.fields,
                )
        return item

    def _fields(self, i: int) -> Mapping[str, Any]:
        b = int(np.searchsorted(np.cumsum(self.sizes), i, side="right"))
        row = i - sum(self.sizes[:b])
        return {
            "extra": {
                "batch": self.batch_files[b].name,
                "row": row,
                "filename": self.filenames[i],
            }
        }

    def options(self) -> dict[str, Any]:
        return {
            "batches": [p.name for p in self.batch_files],
            "class_name": self.class_name,
            "split": self.split,
        }


# ------------------------------------------------------------------ TinyImages


@CANDIDATE_SOURCES.register("tinyimages")
class TinyImagesSource(CandidateSource):
    """TinyImages records of a keyword list (SPEC §1.1).

    Positions run over the keywords in the given order, each keyword's records in
    file order. ``ref`` is the 0-based TinyImages index; the keyword is stored as
    the query (lower case), the class comes from ``keywords`` (a keyword → class
    mapping) or ``class_name``.

    Parameters
    ----------
    path : path
        Folder with the two ``.bin`` files (or the ``tiny_images.bin`` path).
    keywords : sequence of str or mapping of str to (str or None)
        Keywords to ingest (case-insensitive), optionally with their class.
    index : KeywordIndex, optional
        A previously built index (the pipeline keeps one in the project); built
        by one scan of the metadata file otherwise.
    class_name : str, optional
        Class of every item when ``keywords`` does not say.
    """

    kind = "tinyimages"
    # Candidate ids are random sha256 keys, so every commit rewrites most leaves of
    # the id index: 4x larger batches (~200 MB of pixels) mean 4x fewer rewrites.
    default_batch_size = 65_536

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keywords: Sequence[str] | Mapping[str, str | None],
        index: KeywordIndex | None = None,
        class_name: str | None = None,
    ) -> None:
        super().__init__(path)
        self.ti = TinyImages(self.path)
        kw_map = (
            dict(keywords) if isinstance(keywords, Mapping) else dict.fromkeys(keywords)
        )
        if not kw_map:
            raise ConfigError(
                "tinyimages needs a keyword list: pass --keywords a,b or --keywords-file."
            )
        self.keywords = {k.strip().lower(): c or class_name for k, c in kw_map.items()}
        self.class_name = class_name
        self.index = index if index is not None else self.ti.keyword_index()
        if self.index.n_records != len(self.ti):
            raise DataIntegrityError(
                f"keyword index covers {self.index.n_records} records but "
                f"{self.ti.metadata_path} holds {len(self.ti)}; rebuild the index."
            )
        # (keyword, start, end) spans in position order.
        self.spans = [
            (kw, s, e) for kw in self.keywords for s, e in self.index.ranges.get(kw, ())
        ]
        self.missing = [kw for kw in self.keywords if kw not in self.index.ranges]

    def __len__(self) -> int:
        return sum(e - s for _, s, e in self.spans)

    def options(self) -> dict[str, Any]:
        return {"keywords": self.keywords, "missing_keywords": self.missing}

    def _pieces(self, start: int) -> Iterator[tuple[str, int, int]]:
        """(keyword, first, end) record ranges from position ``start`` on."""
        pos = 0
        for kw, s, e in self.spans:
            if pos + e - s > start:
                yield kw, s + max(0, start - pos), e
            pos += e - s

    def iter_batches(
        self, *, start: int = 0, batch_size: int = 4096
    ) -> Iterator[SourceBatch]:
        return self._iter(start, batch_size, 0)

    def iter_batches_recycled(
        self, *, start: int = 0, batch_size: int = 4096, depth: int = 2
    ) -> Iterator[SourceBatch]:
        return self._iter(start, batch_size, depth)

    def _iter(self, start: int, batch_size: int, depth: int) -> Iterator[SourceBatch]:
        # Batches span keyword boundaries: real keyword runs are often short.
        # With depth > 0, batch k is decoded into the array of batch k - depth.
        bufs: list[NDArray[np.uint8]] = []
        n_batches = 0

        def buffer(n: int) -> NDArray[np.uint8]:
            nonlocal n_batches
            n_batches += 1
            if depth <= 0:
                return np.empty((n, 32, 32, 3), dtype=np.uint8)
            if len(bufs) < depth:
                bufs.append(np.empty((batch_size, 32, 32, 3), dtype=np.uint8))
            return bufs[(n_batches - 1) % depth][:n]

        pos = start
        todo: list[tuple[str, int, int]] = []
        room = batch_size
        for kw, a, e in self._pieces(start):
            while a < e:
                b = min(e, a + room)
                todo.append((kw, a, b))
                room -= b - a
                a = b
                if room == 0:
                    yield self._batch(pos, todo, buffer(batch_size))
                    pos += batch_size
                    todo, room = [], batch_size
        if todo:
            yield self._batch(pos, todo, buffer(batch_size - room))

    def _batch(
        self, pos: int, pieces: list[tuple[str, int, int]], pixels: NDArray[np.uint8]
    ) -> SourceBatch:
        n = sum(b - a for _, a, b in pieces)
        refs: list[str] = []
        kws: list[str | None] = []
        classes: list[str | None] = []
        k = 0
        for kw, a, b in pieces:
            # contiguous reads of the keyword's range, decoded straight into the batch
            decode_into(self.ti.records[a:b], pixels[k : k + b - a])
            k += b - a
            refs.extend(map(str, range(a, b)))
            kws.extend([kw] * (b - a))
            classes.extend([self.keywords[kw]] * (b - a))
        items = ColumnItems(refs, classes, kws, 32, 32)
        return SourceBatch(pos, pos + n, items, pixels)


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
            raise ConfigError(f"folder source {self.path} is not a directory.")
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
                try:
                    item, px = self._read(rel)
                except (ImageDecodeError, OSError) as err:
                    skipped.append(SkippedItem(rel.as_posix(), str(err)))
                    continue
                if px is None:
                    files.append(item)
                else:
                    arrays.append((item, px))
            yield from _split_by_shape(s, e, arrays, files, skipped)


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
    """Flickr search-result records (SPEC §1.4) and their downloaded images.

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
