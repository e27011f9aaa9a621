"""The ingest stage's writer: content ids, exact-copy dedup, pixel arrays, rows."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._atomic import pid_alive, temporary_of
from retest.errors import StageError
from retest.project import Project
from retest.sources.base import ColumnItems, SourceBatch, SourceItem
from retest.store.artifacts import (
    PixelArray,
    write_image_file,
)
from retest.store.base import Store
from retest.store.rows import CandidateRow, ClassRow

__all__ = [
    "ARRAY_DIR",
    "IMAGE_DIR",
    "AppendPixels",
    "BatchWriter",
    "InsertRows",
    "PreparedBatch",
    "batch_content_ids",
    "content_ids",
    "remove_stale_temporaries",
    "resolve_class_ids",
]

ARRAY_DIR = "arrays"
IMAGE_DIR = "images"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def resolve_class_ids(
    project: Project, names: Iterable[str | None], *, add: bool = False
) -> dict[str, int]:
    """Class name → id for the project's classes.

    Parameters
    ----------
    project : Project
    names : iterable of (str or None)
        Class names to resolve (None is skipped).
    add : bool
        Add unknown names with the next ids instead of refusing them.

    Returns
    -------
    dict of str to int
        Every class of the project (with the added ones).

    Raises
    ------
    StageError
        A name is not a class of the project and ``add`` is false.
    """
    store = project.store
    rows = store.classes.list()
    known = {c.name: c.id for c in rows}
    nxt = max((c.id for c in rows), default=-1) + 1
    new: list[ClassRow] = []
    for n in names:
        if n is None or n in known:
            continue
        if not add:
            raise StageError(
                f"class {n!r} is not a class of the project (classes: "
                f"{', '.join(known) or 'none'}). Pass --class with a project class, "
                "or fix the source's class folders / keyword file."
            )
        known[n] = nxt
        new.append(ClassRow(nxt, n))
        nxt += 1
    if new:
        store.classes.put(new)
    return known


def batch_content_ids(pixels: NDArray[np.uint8]) -> list[str]:
    """``[content_id(p) for p in pixels]``, with the shape prefix hashed once."""
    px = np.ascontiguousarray(pixels, dtype=np.uint8)
    if px.shape[0] == 0:
        return []
    head = hashlib.sha256(b"uint8:" + ",".join(map(str, px.shape[1:])).encode() + b":")
    step = px[0].nbytes
    flat = px.reshape(-1).data
    copy = head.copy
    out = []
    # memoryview slices of one buffer: no numpy row object per item
    for a in range(0, len(flat), step):
        h = copy()
        h.update(flat[a : a + step])
        out.append(h.hexdigest())
    return out


def content_ids(batch: SourceBatch) -> list[str]:
    """The candidate ids of a batch's items: of their pixels, else their file bytes."""
    if batch.pixels is not None:
        return batch_content_ids(batch.pixels)
    return [hashlib.sha256(it.data or b"").hexdigest() for it in batch.items]


AppendPixels = Callable[[], Sequence[int]]
InsertRows = Callable[[Sequence[int]], int]


@dataclasses.dataclass
class PreparedBatch:
    """One batch, checked and de-duplicated, ready to be written.

    ``append()`` stores the kept items' pixels durably and returns their array
    rows; ``insert(rows)`` then stores the candidate rows pointing at them and
    returns how many the store actually added (fewer when another process stored
    some of the same images meanwhile). ``unreferenced(rows)`` lists the rows of
    ``rows`` no candidate points at after the insert, so they can be released.
    """

    kept: int
    own: int
    dups: list[str]
    append: AppendPixels
    insert: InsertRows
    array: PixelArray | None = None
    ids: list[str] = dataclasses.field(default_factory=list)

    def unreferenced(self, store: Store, rows: Sequence[int]) -> list[int]:
        if self.array is None or not len(rows):
            return []
        stored = dict(self._stored(store))
        return [
            r
            for i, r in zip(self.ids, rows, strict=True)
            if stored.get(i) != (self.array.name, r)
        ]

    def _stored(
        self, store: Store
    ) -> Iterable[tuple[str, tuple[str | None, int | None]]]:
        found = store.candidates.existing(self.ids)
        for row in store.candidates.get_many(sorted(found)):
            yield row.id, (row.array_name, row.array_row)


def _first_of(
    names: Sequence[str | None], keep: Sequence[int]
) -> list[tuple[int, str | None]]:
    """``(index, name)`` of the first kept item of each distinct name."""
    first: dict[str | None, int] = {}
    for i in keep:
        first.setdefault(names[i], i)
    return [(i, n) for n, i in first.items()]


def remove_stale_temporaries(root: Path) -> list[Path]:
    """Delete the temporaries that killed ingest writers left in ``arrays/`` and
    ``images/`` of the project at ``root``.

    Only files named as :func:`retest._atomic.atomic_write_bytes` names its
    temporaries, written by a process that no longer runs, of a file the ingest
    writes: a pixel array's header ``<array>.json`` (of an array that exists,
    its ``<array>.u8``) or an image file ``<sha256>``; any other file stays. Call
    it while holding :func:`~retest.store.artifacts.writers_lock` exclusively.

    Returns
    -------
    list of Path
        The files removed.
    """
    arrays, images = root / ARRAY_DIR, root / IMAGE_DIR

    def ingest_file(folder: Path, target: str) -> bool:
        if folder == images:
            return _SHA256.fullmatch(target) is not None
        return (
            target.endswith(".json")
            and (arrays / f"{target.removesuffix('.json')}.u8").is_file()
        )

    removed: list[Path] = []
    for folder in (arrays, images):
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            temp = temporary_of(p.name)
            if (
                temp is not None
                and ingest_file(folder, temp[0])
                and p.is_file()
                and not p.is_symlink()
                and not pid_alive(temp[1])
            ):
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def _array_name(shape: Sequence[int]) -> str:
    return "candidates_" + "x".join(str(int(s)) for s in shape)


class BatchWriter:
    """Turns source batches into stored candidates."""

    def __init__(self, project: Project, name: str, add_classes: bool) -> None:
        self.project = project
        self.store, self.root, self.name = project.store, project.root, name
        self.where = ""  # the file the labels came from, for messages
        self.add_classes = add_classes
        self.class_ids = {c.name: c.id for c in self.store.classes.list()}
        self.ids = set(self.class_ids.values())
        self.arrays: dict[tuple[int, ...], PixelArray] = {}
        self.check_own = False
        # ids kept by prepared batches whose rows may not be committed yet,
        # oldest first (the stage drops a batch's set once it is committed)
        self.inflight: deque[set[str]] = deque()

    def _class_id(self, item: SourceItem) -> int | None:
        if item.class_name is None:
            cid = item.class_id
            if cid is not None and self.ids and cid not in self.ids:
                raise StageError(
                    f"{self.where or self.name}: item {item.ref} has label {cid}, but "
                    f"the project's class ids are 0..{max(self.ids)}. Check the labels "
                    "file."
                )
            return cid
        if item.class_name not in self.class_ids:
            self.class_ids = resolve_class_ids(
                self.project, [item.class_name], add=self.add_classes
            )
            self.ids = set(self.class_ids.values())
        return self.class_ids[item.class_name]

    def _row(self, item: SourceItem, cid: str, **where: Any) -> CandidateRow:
        f = item.fields
        return CandidateRow(
            cid,
            self.name,
            item.ref,
            self._class_id(item),
            item.keyword,
            f.get("date_taken"),
            f.get("date_uploaded"),
            f.get("url"),
            f.get("license"),
            item.width,
            item.height,
            extra=f.get("extra", {}),
            **where,
        )

    def _ids(self, batch: SourceBatch) -> list[str]:
        return content_ids(batch)

    def _fresh(
        self, batch: SourceBatch, ids: list[str]
    ) -> tuple[list[int], int, list[str], int | None]:
        """Indices of items to store, how many are this job's own, refs of
        duplicates, and the mark of the check (the insert's ``checked``).

        Rows this job stored before a crash (same source name and reference) are
        its own: counted as new again, but neither their pixels nor their rows
        are written a second time.
        """
        stored, mark = self.store.candidates.existing_mark(ids)
        own: set[str] = set()
        if self.check_own and stored:
            refs = {it.ref for it in batch.items}
            own = {
                r.id
                for r in self.store.candidates.get_many(sorted(stored))
                if r.source == self.name and r.source_ref in refs
            }
        # rows of the batches in flight may still be on their way into the store
        for batch_ids in self.inflight:
            stored |= batch_ids.intersection(ids)
        if not stored and len(set(ids)) == len(ids):
            return list(range(len(ids))), 0, [], mark
        seen: set[str] = set()
        keep, dups, n_own = [], [], 0
        for i, cid in enumerate(ids):
            if cid in own and cid not in seen:
                n_own += 1
            elif cid in stored or cid in seen:
                dups.append(batch.items[i].ref)
            else:
                keep.append(i)
            seen.add(cid)
        return keep, n_own, dups, mark

    def _column_insert(
        self,
        items: ColumnItems,
        pixels: NDArray[np.uint8],
        ids: list[str],
        keep: list[int],
        mark: int | None,
    ) -> tuple[AppendPixels, InsertRows, PixelArray | None, list[str]]:
        """Bulk path for column batches: one pixel append, then the rows as columns.

        Classes are resolved here (they may add class rows); the returned
        ``(append, insert)`` run later in the commit threads: ``append()`` writes
        and fsyncs the pixels and returns their array rows, ``insert(rows)``
        stores the candidate rows pointing at them.
        """
        if not keep:
            return (lambda: range(0)), (lambda rows: 0), None, []
        names = items.class_names
        cids = {n: self._class_id(items[i]) for i, n in _first_of(names, keep)}
        refs, kws = items.refs, items.keywords
        if len(keep) == len(ids):
            px, k_ids = pixels, ids
        else:
            px, k_ids = pixels[keep], [ids[i] for i in keep]
            refs, kws = [refs[i] for i in keep], [kws[i] for i in keep]
            names = [names[i] for i in keep]
        arr = self._array(px.shape[1:])
        if len(cids) == 1:
            classes: Sequence[int | None] = [*cids.values()] * len(k_ids)
        else:
            classes = [cids[n] for n in names]
        # the rows are encoded here, while the commit thread writes the batch
        # before: that thread, the ingest's bottleneck, only runs the insert
        prepared = self.store.candidates.prepare_columns(
            k_ids,
            refs,
            classes,
            kws,
            source=self.name,
            width=items.width,
            height=items.height,
            array_name=arr.name,
        )

        def insert(rows: Sequence[int]) -> int:
            return prepared(rows, mark)

        return (lambda: arr.append(px)), insert, arr, k_ids

    def prepare(self, batch: SourceBatch) -> PreparedBatch:
        """Ids, dedup and every check that can fail; nothing written but files.

        Classes are resolved (and so validated) here, before any pixel is
        appended: a batch that fails leaves no unreferenced pixel rows behind.
        The returned ``append`` / ``insert`` may run in other threads while the
        next batch is prepared; the caller runs ``insert`` only after ``append``
        has returned.
        """
        ids = self._ids(batch)
        keep, own, dups, mark = self._fresh(batch, ids)
        self.inflight.append({ids[i] for i in keep})
        cands = self.store.candidates
        if isinstance(batch.items, ColumnItems) and batch.pixels is not None:
            append, insert, arr, k_ids = self._column_insert(
                batch.items, batch.pixels, ids, keep, mark
            )
            return PreparedBatch(len(keep), own, dups, append, insert, arr, k_ids)
        if batch.pixels is not None and keep:
            px = batch.pixels[keep]
            arr = self._array(px.shape[1:])
            rows = [
                self._row(batch.items[i], ids[i], array_name=arr.name) for i in keep
            ]

            def insert_array(where: Sequence[int]) -> int:
                return cands.add(
                    (
                        dataclasses.replace(row, array_row=r)
                        for row, r in zip(rows, where, strict=True)
                    ),
                    checked=mark,
                )

            return PreparedBatch(
                len(keep),
                own,
                dups,
                (lambda: arr.append(px)),
                insert_array,
                arr,
                [ids[i] for i in keep],
            )
        files = [self._file_row(batch.items[i]) for i in keep]
        return PreparedBatch(
            len(keep),
            own,
            dups,
            (lambda: range(0)),
            (lambda _: cands.add(files, checked=mark)),
        )

    def _file_row(self, item: SourceItem) -> CandidateRow:
        sha, _ = write_image_file(self.root / IMAGE_DIR, item.data or b"")
        if item.derived:
            derived = {
                k: f"{IMAGE_DIR}/{write_image_file(self.root / IMAGE_DIR, v)[0]}"
                for k, v in sorted(item.derived.items())
            }
            extra = {**item.fields.get("extra", {}), "derived": derived}
            item = dataclasses.replace(item, fields={**item.fields, "extra": extra})
        return self._row(item, sha, file_path=f"{IMAGE_DIR}/{sha}")

    def _array(self, shape: tuple[int, ...]) -> PixelArray:
        if shape not in self.arrays:
            self.arrays[shape] = PixelArray.create(
                self.root / ARRAY_DIR, _array_name(shape), shape=shape
            )
        return self.arrays[shape]
