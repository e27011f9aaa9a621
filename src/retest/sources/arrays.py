"""Array-like candidate sources: ``.npy``/``.npz`` arrays, IDX, CIFAR pickles, TinyImages."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._validation import check_labels
from retest.datasets.cifar10 import (
    BATCH_DIR,
    META,
    TEST_BATCH,
    TRAIN_BATCHES,
    read_cifar_batch,
    read_cifar_meta,
)
from retest.datasets.idx import read_idx
from retest.datasets.npy import load_npy
from retest.datasets.tinyimages import KeywordIndex, TinyImages, decode_into
from retest.errors import ConfigError, DataIntegrityError, InputValidationError
from retest.sources.base import (
    CANDIDATE_SOURCES,
    CandidateSource,
    ColumnItems,
    SourceBatch,
    SourceItem,
)

__all__ = ["ArraySource", "CifarSource", "IdxSource", "TinyImagesSource"]


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

    def _check_class_over_labels(self, labels_from: str) -> None:
        """``class_name`` replaces every label: refused when the labels name
        several classes (``--class`` given by mistake would relabel them all)."""
        if self.class_name is None or self.labels is None:
            return
        distinct = np.unique(self.labels)
        if len(distinct) > 1:
            raise ConfigError(
                f"--class {self.class_name}: {labels_from} gives the {len(self)} "
                f"images labels of {len(distinct)} classes, and --class would give "
                "them all one class. Leave --class out to use the labels, or pass "
                "images without labels."
            )

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
    if 0 in arr.shape[1:]:
        raise InputValidationError(
            f"{where}: images of shape {arr.shape} have no pixels; expected "
            "(N, H, W) or (N, H, W, C) with every size at least 1."
        )
    return arr


def _aligned(values: Any, n: int, what: str, where: Path) -> Any:
    if values is not None and len(values) != n:
        raise InputValidationError(
            f"{where}: {len(values)} {what} for {n} images; they must align."
        )
    return values


def _require_file(path: Path, what: str) -> None:
    """A directory (or other non-file) given where a file is expected: one line."""
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise InputValidationError(
            f"{path} is {kind}; the {what} must be a file. Pass the file itself."
        )


def _read_npy(path: Path) -> NDArray[Any]:
    """Memory-map a ``.npy``; a truncated or corrupt file is one DataIntegrityError."""
    return load_npy(path, what="images array", mmap=True)


def _read_npz(
    path: Path,
) -> tuple[NDArray[Any], NDArray[Any] | None, list[str] | None, list[str] | None]:
    """Images, raw labels, keywords and class names of an ``.npz`` (all read eagerly).

    Members are decompressed here, inside one error boundary: a zip that is
    truncated or has a flipped byte fails on the member read, not at open.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            files = list(z.files)
            declared = _zip_entry_count(path)
            if declared is not None and declared != len(files):
                raise DataIntegrityError(
                    f"{path}: the .npz archive declares {declared} arrays but its "
                    f"directory lists {len(files)}; the file is corrupt. Re-create it."
                )
            for k in files:  # reading every member checks its CRC and its name in
                z[k]  # both zip headers: a damaged name must not hide an array
            key = next((k for k in ("images", "data", "x") if k in files), None)
            if key is None:
                raise InputValidationError(
                    f"{path}: no 'images', 'data' or 'x' array "
                    f"(found {', '.join(files) or 'nothing'})."
                )
            imgs = np.asarray(z[key])
            lk = next((k for k in ("labels", "y") if k in files), None)
            labels = None if lk is None else np.asarray(z[lk])
            kws = (
                _strings(z["keywords"], path, "keywords")
                if "keywords" in files
                else None
            )
            names = (
                _strings(z["class_names"], path, "class_names")
                if "class_names" in files
                else None
            )
    except (InputValidationError, DataIntegrityError):
        raise
    except Exception as err:  # zip and .npy parsing of damaged bytes fail in many
        # ways (BadZipFile, NotImplementedError for a flag bit, RuntimeError for
        # "encrypted", zlib.error, TokenError, ...); all mean "corrupt file":
        raise DataIntegrityError(
            f"{path}: not a readable .npz archive ({_one_line(err)}); the file is "
            "probably truncated or corrupt. Re-create it."
        ) from None
    return imgs, labels, kws, names


def _zip_entry_count(path: Path) -> int | None:
    """Entry count stated by the zip's end record (None: zip64 or not found).

    ``zipfile`` lists what the central directory parses to; a damaged length
    field there can swallow the next entry, so the count is checked separately.
    """
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - (1 << 16) - 22))
        tail = f.read()
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or len(tail) < i + 22:
        return None
    total = int.from_bytes(tail[i + 10 : i + 12], "little")
    return None if total == 0xFFFF else total


def _strings(values: NDArray[Any], path: Path, what: str) -> list[str]:
    if values.ndim != 1 or values.dtype.kind not in "US":
        raise InputValidationError(
            f"{path}: '{what}' must be a 1-d array of strings. Got {values.dtype} "
            f"{values.shape}."
        )
    if values.dtype.kind == "S":
        return [v.decode("utf-8", "backslashreplace") for v in values]
    return [str(v) for v in values]


def _one_line(err: BaseException) -> str:
    """An exception's text on one line (messages are printed as one line)."""
    return " ".join(str(err).split()) or type(err).__name__


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
        _require_file(self.path, "arrays source (.npy or .npz)")
        labels = kws = None
        if self.path.suffix == ".npz":
            imgs, raw_labels, kws, names = _read_npz(self.path)
            if names is not None:
                self.label_names = names
            if raw_labels is not None:
                labels = check_labels(
                    raw_labels,
                    n_classes=len(names) if names else None,
                    name=f"{self.path}: labels",
                )
        else:
            imgs = _read_npy(self.path)
        self.images = _check_images(imgs, self.path)
        n = len(self)
        self.labels = _aligned(labels, n, "labels", self.path)
        self.keywords = _aligned(keywords or kws, n, "keywords", self.path)
        self.class_name = class_name
        self._check_class_over_labels(str(self.path))

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
        labels = (
            None if lp is None else check_labels(read_idx(lp), name=f"{lp}: labels")
        )
        self.labels = _aligned(labels, len(self), "labels", self.path)
        self.class_name = class_name
        if labels_path is not None:  # a sibling found by name is not asked for
            self._check_class_over_labels(f"--labels {lp}")

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
    """CIFAR python pickle batches (channel-planar rows → HWC).

    See docs/algorithms.md#cifar-10-pickles.

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
        wanted = {
            None: (*TRAIN_BATCHES, TEST_BATCH),
            "train": TRAIN_BATCHES,
            "test": (TEST_BATCH,),
        }.get(split)
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
        self.filenames = [f for p in parts for f in p[2]]
        self.sizes = [len(p[1]) for p in parts]
        self.label_names = read_cifar_meta(meta) if meta.is_file() else None
        labels = np.concatenate([p[1] for p in parts])
        if self.label_names and labels.size:
            where = self.batch_files[0] if len(parts) == 1 else folder
            self.labels = check_labels(
                labels, n_classes=len(self.label_names), name=f"{where}: labels"
            )
        else:
            self.labels = labels
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
    """TinyImages records of a keyword list (docs/algorithms.md#tinyimages).

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
    global_refs = True  # the TinyImages index of the record
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
