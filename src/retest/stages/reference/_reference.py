"""The reference (original) dataset: its splits, original keywords, keyword histogram.

* :func:`register_reference` stores one split of the original dataset: pixels
  appended to ``arrays/reference_<split>`` and one row per image (id
  ``"<split>:<index>"``, class, content id, keyword when known). Resumable and
  idempotent: rows go in index order in chunks, each after its pixels are durable;
  pixels a killed run appended without rows are given back by the next run.
* :func:`recover_keywords` finds each original image's TinyImages keyword by exact
  pixel match (content id of the 32×32×3 HWC image after the canonical TinyImages
  decode) and makes it unique with the published rule
  (docs/algorithms.md#keyword-recovery).
* :func:`reference_keyword_histogram` counts keywords per class; it is also
  written to the store's keyword table (``original_count``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest._validation import check_labels
from retest.datasets.tinyimages import KeywordIndex, TinyImages, build_keyword_index
from retest.errors import ConfigError, StageError
from retest.labeling.keywords import choose_unique_keywords, keyword_histogram
from retest.project import INGEST_STAGE, Project
from retest.sources.base import CANDIDATE_SOURCES, make_source
from retest.store.artifacts import PixelArray, record_artifact, write_json, writers_lock
from retest.store.base import Store
from retest.store.rows import ClassRow, KeywordRow, ReferenceRow, content_id

__all__ = [
    "KeywordRecovery",
    "ReferenceReport",
    "describe_shape",
    "load_reference_arrays",
    "load_tinyimages_index",
    "recover_keywords",
    "reference_image_shape",
    "reference_keyword_histogram",
    "register_reference",
    "register_reference_arrays",
    "update_keyword_table",
]

_CHUNK = 10_000
_SPLIT_ORDER = {"train": 0, "test": 1}


@dataclass(frozen=True, slots=True)
class ReferenceReport:
    """One registered split: size, rows added now, pixel array, images per class."""

    split: str
    n: int
    new: int
    array_name: str
    class_counts: Mapping[str, int] = field(default_factory=dict)
    with_keyword: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "n": self.n,
            "new": self.new,
            "array_name": self.array_name,
            "class_counts": dict(self.class_counts),
            "with_keyword": self.with_keyword,
        }


@dataclass(frozen=True, slots=True)
class KeywordRecovery:
    """Result of :func:`recover_keywords`."""

    n_reference: int
    matched: int
    scanned: int
    histogram: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "n_reference": self.n_reference,
            "matched": self.matched,
            "unmatched": self.n_reference - self.matched,
            "scanned": self.scanned,
            "histogram": {c: dict(h) for c, h in self.histogram.items()},
        }


def reference_image_shape(project: Project) -> tuple[int, ...] | None:
    """Pixel shape of the project's original images: ``(H, W)`` grayscale or
    ``(H, W, C)``; None before any split is registered.

    Candidates are stored in this form (``retest source add``), so that exact
    copies hash alike, distances compare like with like and a revision exports
    and evaluates as the original does.
    """
    refs = project.store.references
    for split in ("test", "train"):
        if refs.count(split=split):
            first = refs.get(f"{split}:0")
            if first.array_name is not None:
                return project.pixel_array(first.array_name).shape
    if refs.count():  # other split names (API use): one row is enough
        first = refs.list()[0]
        if first.array_name is not None:
            return project.pixel_array(first.array_name).shape
    return None


def describe_shape(shape: Sequence[int]) -> str:
    """``28×28 grayscale (L)`` / ``32×32×3 RGB``: an image form as messages name it.

    >>> describe_shape((28, 28)), describe_shape((32, 32, 3))
    ('28×28 grayscale (L)', '32×32×3 RGB')
    """
    dims = "×".join(str(int(d)) for d in shape)
    if len(shape) == 2 or (len(shape) == 3 and shape[2] == 1):
        return f"{dims} grayscale (L)"
    return f"{dims} RGB" if len(shape) == 3 and shape[2] == 3 else dims


def load_reference_arrays(
    kind: str,
    path: str | os.PathLike[str],
    *,
    split: str,
    labels_path: str | os.PathLike[str] | None = None,
) -> tuple[NDArray[np.uint8], NDArray[np.int64], list[str] | None, list[str] | None]:
    """Images, labels, class names and keywords of one split of an original dataset.

    ``kind`` is a file-format source (``cifar``: the batches of ``split``;
    ``idx``; ``arrays``: an ``.npz`` with images, labels and optional keywords /
    class_names) or a dataset name of :mod:`retest.datasets.base` (``cifar10``,
    ``fashion_mnist``, …) with ``path`` as its data root.
    """
    if kind in ("cifar", "idx", "arrays"):
        opts: dict[str, Any] = {"split": split} if kind == "cifar" else {}
        if labels_path is not None:
            opts["labels_path"] = labels_path
        src: Any = make_source(kind, path, **opts)
        if src.labels is None:
            raise ConfigError(
                f"reference images need labels; {path} has none. Pass --labels "
                "(IDX) or store 'labels' in the .npz."
            )
        kws = list(src.keywords) if src.keywords is not None else None
        return np.asarray(src.images), src.labels, src.label_names, kws
    if kind in CANDIDATE_SOURCES:
        raise ConfigError(
            f"source kind {kind!r} cannot hold a reference dataset; use cifar, idx, "
            "arrays or a dataset name."
        )
    from retest.datasets.base import get_dataset

    ds = get_dataset(kind, root=path).load(split)
    if ds.images is None:
        raise ConfigError(f"dataset {kind!r} split {split!r} has no images.")
    names = list(ds.class_names) if ds.class_names is not None else None
    return ds.images, np.asarray(ds.labels, np.int64), names, None


def _check_classes(
    store: Store,
    labels: NDArray[np.int64],
    names: Sequence[str] | None,
    where: str = "the labels",
) -> None:
    rows = store.classes.list()
    if not rows:
        k = int(labels.max()) + 1 if labels.size else 0
        names = list(names) if names is not None else [str(i) for i in range(k)]
        store.classes.put(ClassRow(i, n) for i, n in enumerate(names))
        return
    by_id = {c.id: c.name for c in rows}
    if set(by_id) == set(range(len(by_id))):  # the 1-based diagnosis needs ids 0..K-1
        check_labels(labels, n_classes=len(by_id), name=f"reference labels of {where}")
    bad = sorted({int(x) for x in np.unique(labels)} - set(by_id))
    if bad:
        raise StageError(
            f"{where}: reference labels {bad[:5]} are not class ids of the project "
            f"(0..{max(by_id)}). Check the labels file."
        )
    if names is not None:
        diff = [
            (i, by_id[i], n)
            for i, n in enumerate(names)
            if i in by_id and by_id[i] != n
        ]
        if diff:
            i, ours, theirs = diff[0]
            raise StageError(
                f"class {i} is {ours!r} in the project but {theirs!r} in the reference "
                "dataset. Create the project with the dataset's classes in its order."
            )


def register_reference_arrays(
    project: Project,
    images: ArrayLike,
    labels: ArrayLike,
    *,
    split: str,
    class_names: Sequence[str] | None = None,
    keywords: Sequence[str | None] | None = None,
    progress: ProgressCallback | None = None,
    where: str = "the labels",
) -> ReferenceReport:
    """Register one split from arrays (what :func:`register_reference` calls).

    ``where`` names the labels' file in messages.

    Parameters
    ----------
    project : Project
    images : ndarray of shape (n, H, W[, C]), uint8
    labels : ndarray of shape (n,)
        Class ids of the project.
    split : str
        ``"train"``, ``"test"`` (or another name); index ``i`` → id ``"<split>:<i>"``.
    class_names : sequence of str, optional
        The dataset's names in id order, checked against the project's classes (and
        used to create them in a store that has none).
    keywords : sequence of (str or None), optional
        The original keyword of each image when known.
    progress : ProgressCallback, optional
    where : str
        Names the labels' file in messages.

    Returns
    -------
    ReferenceReport

    Raises
    ------
    ConfigError
        Images and labels do not match.
    StageError
        Class names differ from the project's, or the split holds other images.
    """
    store = project.store
    x = np.asarray(images)
    y = np.asarray(labels).astype(np.int64).reshape(-1)
    if x.dtype != np.uint8 or x.ndim not in (3, 4) or x.shape[0] != y.shape[0]:
        raise ConfigError(
            f"reference images must be uint8 (n, H, W[, C]) with n labels. Got {x.dtype} "
            f"{x.shape} and {y.shape[0]} labels."
        )
    if keywords is not None and len(keywords) != len(y):
        raise ConfigError(f"{len(keywords)} keywords for {len(y)} reference images.")
    _check_classes(store, y, class_names, where)
    from retest.project import reclaim_tail_orphans

    with writers_lock(project.arrays_dir, exclusive=True, wait=False) as alone:
        if alone:  # pixels a killed registration appended without their rows
            reclaim_tail_orphans(project)
    with writers_lock(project.arrays_dir):
        return _register(project, x, y, split, keywords, progress)


def _register(
    project: Project,
    x: NDArray[np.uint8],
    y: NDArray[np.int64],
    split: str,
    keywords: Sequence[str | None] | None,
    progress: ProgressCallback | None,
) -> ReferenceReport:
    store = project.store
    arr = PixelArray.create(project.arrays_dir, f"reference_{split}", shape=x.shape[1:])
    done = store.references.count(split=split)
    if done:
        first = store.references.get(f"{split}:0")
        if done > len(y) or first.content_id != content_id(x[0]):
            raise StageError(
                f"split {split!r} is already registered with other images ({done} rows). "
                "Use another split name or a new project."
            )
    new = 0
    for s in range(done, len(y), _CHUNK):
        e = min(len(y), s + _CHUNK)
        ids = [content_id(x[i]) for i in range(s, e)]  # before any pixel is written
        rows = arr.append(x[s:e])
        try:
            new += store.references.add(
                ReferenceRow(
                    split,
                    i,
                    int(y[i]),
                    ids[i - s],
                    None if keywords is None else keywords[i],
                    arr.name,
                    r,
                )
                for i, r in zip(range(s, e), rows, strict=True)
            )
        except BaseException:
            arr.release(rows)  # the insert was rolled back: nothing points at them
            raise
        report(progress, f"reference {split}", e, len(y))
    names = {c.id: c.name for c in store.classes.list()}
    counts = {
        names[int(c)]: int(n)
        for c, n in zip(*np.unique(y, return_counts=True), strict=True)
    }
    if keywords is not None:
        update_keyword_table(project)
    with_kw = 0 if keywords is None else sum(k is not None for k in keywords)
    return ReferenceReport(split, len(y), new, arr.name, counts, with_kw)


def register_reference(
    project: Project,
    kind: str,
    path: str | os.PathLike[str],
    *,
    split: str,
    labels_path: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
) -> ReferenceReport:
    """Load one split with :func:`load_reference_arrays` and register it.

    Parameters
    ----------
    project : Project
    kind : str
        Dataset format (a candidate source kind, e.g. ``cifar``, ``idx``).
    path : path
    split : str
    labels_path : path, optional
        Labels file of formats that keep them apart.
    progress : ProgressCallback, optional

    Returns
    -------
    ReferenceReport

    Raises
    ------
    ConfigError, StageError
        As :func:`register_reference_arrays`.
    """
    x, y, names, kws = load_reference_arrays(
        kind, path, split=split, labels_path=labels_path
    )
    return register_reference_arrays(
        project,
        x,
        y,
        split=split,
        class_names=names,
        keywords=kws,
        progress=progress,
        where=str(labels_path or path),
    )


def _ordered_refs(store: Store) -> list[ReferenceRow]:
    """All reference rows, train before test (CIFAR's global order), then others."""
    rows = store.references.list()
    return sorted(rows, key=lambda r: (_SPLIT_ORDER.get(r.split, 2), r.split, r.index))


def reference_keyword_histogram(project: Project) -> dict[str, dict[str, int]]:
    """Keyword counts per class over all reference images.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of class name to {keyword: count}
        Keywords in first-occurrence order (train before test), as the v6
        plan's tie-break needs.
    """
    store = project.store
    rows = _ordered_refs(store)
    names = [c.name for c in sorted(store.classes.list(), key=lambda c: c.id)]
    return keyword_histogram(
        [r.class_id for r in rows], [r.keyword for r in rows], names
    )


def update_keyword_table(project: Project) -> dict[str, dict[str, int]]:
    """Write :func:`reference_keyword_histogram` to the store's keyword table
    (``original_count``) and return it.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of class name to {keyword: count}
    """
    hist = reference_keyword_histogram(project)
    ids = {c.name: c.id for c in project.store.classes.list()}
    project.store.classes.put_keywords(
        KeywordRow(ids[c], kw, n) for c, kws in hist.items() for kw, n in kws.items()
    )
    return hist


def _keyword_lookup(index: KeywordIndex) -> tuple[NDArray[np.int64], list[str]]:
    spans = sorted((s, e, kw) for kw, rs in index.ranges.items() for s, e in rs)
    return np.array([s for s, _, _ in spans], dtype=np.int64), [
        kw for _, _, kw in spans
    ]


def _scan(
    ti: TinyImages, index: KeywordIndex, keywords: Sequence[str] | None, chunk: int
) -> Iterator[tuple[int, int]]:
    """(start, end) record ranges to scan: everything, or the keywords' ranges."""
    if keywords is None:
        spans = [(0, len(ti))]
    else:
        spans = sorted(
            r for kw in keywords for r in index.ranges.get(kw.strip().lower(), ())
        )
    for s, e in spans:
        for a in range(s, e, chunk):
            yield a, min(e, a + chunk)


def load_tinyimages_index(
    project: Project,
    metadata_path: str | os.PathLike[str],
    *,
    progress: ProgressCallback | None = None,
) -> KeywordIndex:
    """The keyword index of a ``tiny_metadata.bin``, built once and kept in the project.

    Read by ``retest source add tinyimages`` and :func:`recover_keywords`.

    Stored as ``indexes/tinyimages-<key>.json`` (artifact ``tinyimages-index:<key>``)
    where the key covers the file's resolved path, size and modification time.

    Parameters
    ----------
    project : Project
    metadata_path : path
        The TinyImages ``tiny_metadata.bin``.
    progress : ProgressCallback, optional

    Returns
    -------
    KeywordIndex
    """
    meta = Path(metadata_path).resolve()
    st = meta.stat()
    key = hashlib.sha256(f"{meta}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    rel = f"indexes/tinyimages-{key[:16]}.json"
    path = project.root / rel
    if path.is_file():
        return KeywordIndex.from_json(json.loads(path.read_text()))
    index = build_keyword_index(meta, progress=progress)
    sha = write_json(path, index.to_json())
    record_artifact(
        project.store,
        project.root,
        path,
        name=f"tinyimages-index:{key[:16]}",
        stage=INGEST_STAGE,
        params={"metadata": str(meta), "records": index.n_records},
        sha256=sha,
    )
    return index


def recover_keywords(
    project: Project,
    tinyimages_path: str | os.PathLike[str],
    *,
    keywords: Sequence[str] | None = None,
    chunk: int = 65_536,
    progress: ProgressCallback | None = None,
) -> KeywordRecovery:
    """Original keyword of every reference image by exact match to TinyImages.

    Scans the whole image file (or only the records of ``keywords``), hashes each
    decoded record and looks it up among the reference images' content ids
    (docs/algorithms.md#keyword-recovery: any exact-duplicate finder will do). The
    unique keyword per image maximises (class count over all matches, keyword); images
    without a match keep no keyword. Updates the reference rows and the keyword table.

    Parameters
    ----------
    project : Project
    tinyimages_path : path
        The TinyImages folder (or its image file).
    keywords : sequence of str, optional
        Scan only these keywords' records.
    chunk : int
        Records decoded at a time.
    progress : ProgressCallback, optional

    Returns
    -------
    KeywordRecovery

    Raises
    ------
    StageError
        No reference images are registered.
    """

    store = project.store
    ti = TinyImages(tinyimages_path)
    index = load_tinyimages_index(project, ti.metadata_path, progress=progress)
    refs = _ordered_refs(store)
    if not refs:
        raise StageError("no reference images yet: run `retest reference add` first.")
    where: dict[str, list[int]] = {}
    for i, r in enumerate(refs):
        where.setdefault(r.content_id, []).append(i)
    starts, kw_of = _keyword_lookup(index)
    matches: list[list[str]] = [[] for _ in refs]
    scanned = 0
    ranges = list(_scan(ti, index, keywords, chunk))
    total = sum(e - s for s, e in ranges)
    for s, e in ranges:
        for j, img in enumerate(ti.image_range(s, e)):
            hits = where.get(content_id(img))
            if hits:
                kw = kw_of[int(np.searchsorted(starts, s + j, side="right")) - 1]
                for i in hits:
                    matches[i].append(kw)
        scanned += e - s
        report(progress, "match TinyImages", scanned, total)
    unique = choose_unique_keywords(matches, [r.class_id for r in refs])
    for split in sorted({r.split for r in refs}):
        store.references.set_keywords(
            {
                r.index: kw
                for r, kw in zip(refs, unique, strict=True)
                if r.split == split
            },
            split=split,
        )
    hist = update_keyword_table(project)
    return KeywordRecovery(len(refs), sum(k is not None for k in unique), scanned, hist)
