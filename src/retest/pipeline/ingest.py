"""The ingest stage: candidate sources → the project store (resumable, idempotent).

For each batch a source yields, in this order:

1. content ids (sha256 of the canonical pixel array, or of the file bytes); exact
   copies (already stored, or repeated within the batch) are counted as duplicates;
2. pixels of new items are appended to ``arrays/candidates_<shape>`` (durable
   before any row points at them), files are written to ``images/<sha256>``;
3. candidate rows are inserted (insert-or-ignore by id, one transaction);
4. a line with the batch's counts and unreadable items is appended to
   ``reports/ingest/<job>.log.jsonl`` (fsynced);
5. the batch's end position is checkpointed in the store.

A process killed anywhere resumes after the last checkpoint. The batch being
processed when it died is redone: its rows are already stored, and since those rows
carry this source's name and reference they are recognised as this job's own and
counted as new again, not as duplicates. Nothing is lost and nothing is stored
twice. The final report (``reports/ingest/<job>.json``) is recorded as an artifact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.errors import ConfigError, StageError
from retest.sources.candidates import (
    CandidateSource,
    ColumnItems,
    SourceBatch,
    SourceItem,
    make_source,
    read_keywords_file,
)
from retest.sources.tinyimages import KeywordIndex, build_keyword_index
from retest.store.artifacts import (
    PixelArray,
    atomic_write_bytes,
    dumps_json,
    record_artifact,
    write_image_file,
    write_json,
)
from retest.store.base import (
    CandidateRow,
    ClassRow,
    StageCheckpoint,
    Store,
    utc_now,
)

__all__ = [
    "INGEST_STAGE",
    "IngestReport",
    "add_source",
    "batch_content_ids",
    "ingest_job_key",
    "ingest_source",
    "list_ingests",
    "load_tinyimages_index",
    "resolve_class_ids",
]

INGEST_STAGE = "ingest"
REPORT_DIR = "reports/ingest"
ARRAY_DIR = "arrays"
IMAGE_DIR = "images"
# Test hook: SIGKILL this process right after the DB insert of batch N (1-based),
# before the batch is logged and checkpointed: the worst moment to die.
CRASH_ENV = "RETEST_INGEST_CRASH_AFTER"
_MAX_LISTED_DUPLICATES = 1000


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest job did (cumulative over resumed runs).

    Attributes
    ----------
    job : str
        Stable key of (source kind, path, options).
    name : str
        Source name stored on every candidate row (``CandidateRow.source``).
    total, processed : int
        Items in the source; items handled so far (all of them when complete).
    new, duplicates : int
        Candidates stored by this job; exact copies of stored candidates.
    skipped : tuple of dict
        Unreadable items: ``{"position", "ref", "reason"}``.
    resumed_from : int
        Position the last run started at (0 for a fresh job).
    """

    job: str
    name: str
    kind: str
    path: str
    total: int
    processed: int
    new: int
    duplicates: int
    skipped: tuple[Mapping[str, Any], ...] = ()
    duplicate_refs: tuple[str, ...] = ()
    resumed_from: int = 0
    complete: bool = False
    source: Mapping[str, Any] = field(default_factory=dict)
    started: str = ""
    finished: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "total": self.total,
            "processed": self.processed,
            "new": self.new,
            "duplicates": self.duplicates,
            "skipped": [dict(s) for s in self.skipped],
            "duplicate_refs": list(self.duplicate_refs),
            "resumed_from": self.resumed_from,
            "complete": self.complete,
            "source": dict(self.source),
            "started": self.started,
            "finished": self.finished,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IngestReport:
        return cls(
            d["job"], d["name"], d["kind"], d["path"], d["total"], d["processed"],
            d["new"], d["duplicates"], tuple(d.get("skipped", ())),
            tuple(d.get("duplicate_refs", ())), d.get("resumed_from", 0),
            d.get("complete", False), d.get("source", {}), d.get("started", ""),
            d.get("finished", ""),
        )  # fmt: skip


def ingest_job_key(source: CandidateSource) -> str:
    """16-hex key of the source's description (kind, resolved path, options)."""
    text = json.dumps(source.describe(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def resolve_class_ids(
    store: Store, names: Iterable[str | None], *, add: bool = False
) -> dict[str, int]:
    """Class name → id for the project's classes.

    Names not in the project raise :class:`~retest.errors.StageError`, or are added
    with the next ids when ``add`` is true.
    """
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


def load_tinyimages_index(
    store: Store,
    root: str | os.PathLike[str],
    metadata_path: str | os.PathLike[str],
    *,
    progress: ProgressCallback | None = None,
) -> KeywordIndex:
    """The keyword index of a ``tiny_metadata.bin``, built once and kept in the project.

    Stored as ``indexes/tinyimages-<key>.json`` (artifact ``tinyimages-index:<key>``)
    where the key covers the file's resolved path, size and modification time.
    """
    meta = Path(metadata_path).resolve()
    st = meta.stat()
    key = hashlib.sha256(f"{meta}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    rel = f"indexes/tinyimages-{key[:16]}.json"
    path = Path(root) / rel
    if path.is_file():
        return KeywordIndex.from_json(json.loads(path.read_text()))
    index = build_keyword_index(meta, progress=progress)
    sha = write_json(path, index.to_json())
    record_artifact(
        store, Path(root), path, name=f"tinyimages-index:{key[:16]}", stage=INGEST_STAGE,
        params={"metadata": str(meta), "records": index.n_records}, sha256=sha,
    )  # fmt: skip
    return index


@dataclass
class _Tally:
    processed: int = 0
    new: int = 0
    duplicates: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    dup_refs: list[str] = field(default_factory=list)

    def add(self, line: Mapping[str, Any]) -> None:
        self.processed = max(self.processed, int(line["stop"]))
        self.new += int(line["new"])
        self.duplicates += int(line["duplicates"])
        self.skipped.extend(line["skipped"])
        room = _MAX_LISTED_DUPLICATES - len(self.dup_refs)
        self.dup_refs.extend(line["duplicate_refs"][: max(room, 0)])


def _read_log(path: Path, resume: int) -> _Tally:
    """Counts of the batches before ``resume``.

    Lines at or after ``resume`` belong to work that is redone; a batch logged
    twice (logged, then killed before its checkpoint) counts once, last line wins.
    """
    tally = _Tally(processed=resume)
    if not path.is_file():
        return tally
    lines: dict[tuple[int, int, int], dict[str, Any]] = {}
    for raw in path.read_text().splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:  # a line cut by a crash
            continue
        if int(line["stop"]) <= resume and int(line["start"]) < resume:
            lines[(line["start"], line["stop"], line.get("part", 0))] = line
    for key in sorted(lines):
        tally.add(lines[key])
    return tally


def _append_line(path: Path, line: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


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


_Append = Callable[[], Sequence[int]]
_Insert = Callable[[Sequence[int]], Any]


def _first_of(
    names: Sequence[str | None], keep: Sequence[int]
) -> list[tuple[int, str | None]]:
    """``(index, name)`` of the first kept item of each distinct name."""
    first: dict[str | None, int] = {}
    for i in keep:
        first.setdefault(names[i], i)
    return [(i, n) for n, i in first.items()]


def _array_name(shape: Sequence[int]) -> str:
    return "candidates_" + "x".join(str(int(s)) for s in shape)


class _Writer:
    """Turns source batches into stored candidates."""

    def __init__(self, store: Store, root: Path, name: str, add_classes: bool) -> None:
        self.store, self.root, self.name = store, root, name
        self.add_classes = add_classes
        self.class_ids = {c.name: c.id for c in store.classes.list()}
        self.ids = set(self.class_ids.values())
        self.arrays: dict[tuple[int, ...], PixelArray] = {}
        self.check_own = False
        self.inflight: set[str] = set()

    def _class_id(self, item: SourceItem) -> int | None:
        if item.class_name is None:
            cid = item.class_id
            if cid is not None and self.ids and cid not in self.ids:
                raise StageError(
                    f"{self.name}: item {item.ref} has label {cid}, but the project's "
                    f"class ids are 0..{max(self.ids)}. Check the labels file."
                )
            return cid
        if item.class_name not in self.class_ids:
            self.class_ids = resolve_class_ids(
                self.store, [item.class_name], add=self.add_classes
            )
            self.ids = set(self.class_ids.values())
        return self.class_ids[item.class_name]

    def _row(self, item: SourceItem, cid: str, **where: Any) -> CandidateRow:
        f = item.fields
        return CandidateRow(
            cid, self.name, item.ref, self._class_id(item), item.keyword,
            f.get("date_taken"), f.get("date_uploaded"), f.get("url"),
            f.get("license"), item.width, item.height, extra=f.get("extra", {}),
            **where,
        )  # fmt: skip

    def _ids(self, batch: SourceBatch) -> list[str]:
        if batch.pixels is not None:
            return batch_content_ids(batch.pixels)
        return [hashlib.sha256(it.data or b"").hexdigest() for it in batch.items]

    def _fresh(self, batch: SourceBatch, ids: list[str]) -> tuple[list[int], list[str]]:
        """Indices of items to store; refs of duplicates."""
        stored = self.store.candidates.existing(ids)
        if self.check_own and stored:
            # Rows this job stored before a crash are its own, not duplicates.
            own = {
                r.id
                for r in self.store.candidates.get_many(sorted(stored))
                if r.source == self.name
                and r.source_ref in {it.ref for it in batch.items}
            }
            stored -= own
        # the previous batch's rows may still be on their way into the store
        stored |= self.inflight.intersection(ids)
        if not stored and len(set(ids)) == len(ids):
            return list(range(len(ids))), []
        seen: set[str] = set()
        keep, dups = [], []
        for i, cid in enumerate(ids):
            if cid in stored or cid in seen:
                dups.append(batch.items[i].ref)
            else:
                keep.append(i)
            seen.add(cid)
        return keep, dups

    def _column_insert(
        self, items: ColumnItems, pixels: NDArray[np.uint8], ids: list[str],
        keep: list[int],
    ) -> tuple[Callable[[], Sequence[int]], Callable[[Sequence[int]], Any]]:  # fmt: skip
        """Bulk path for column batches: one pixel append, then the rows as columns.

        Classes are resolved here (they may add class rows); the returned
        ``(append, insert)`` run later in the commit threads: ``append()`` writes
        and fsyncs the pixels and returns their array rows, ``insert(rows)``
        stores the candidate rows pointing at them.
        """
        if not keep:
            return (lambda: range(0)), (lambda rows: 0)
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
        cands, w, h, src = self.store.candidates, items.width, items.height, self.name

        def insert(rows: Sequence[int]) -> int:
            return cands.add_columns(
                k_ids, refs, classes, kws, rows,
                source=src, width=w, height=h, array_name=arr.name,
            )  # fmt: skip

        return (lambda: arr.append(px)), insert

    def prepare(self, batch: SourceBatch) -> tuple[int, list[str], _Append, _Insert]:
        """Ids and dedup (files written); returns ``(new, dups, append, insert)``.

        ``append()`` stores the batch's pixels durably and returns their array
        rows; ``insert(rows)`` then stores the candidate rows. Both may run in
        other threads while the next batch is prepared; the caller runs
        ``insert`` only after ``append`` has returned.
        """
        ids = self._ids(batch)
        keep, dups = self._fresh(batch, ids)
        self.inflight = {ids[i] for i in keep}
        cands = self.store.candidates
        if isinstance(batch.items, ColumnItems) and batch.pixels is not None:
            append, insert = self._column_insert(batch.items, batch.pixels, ids, keep)
            return len(keep), dups, append, insert
        rows: list[CandidateRow] = []
        if batch.pixels is not None and keep:
            px = batch.pixels[keep]
            arr = self._array(px.shape[1:])
            for i, r in zip(keep, arr.append(px), strict=True):
                rows.append(
                    self._row(batch.items[i], ids[i], array_name=arr.name, array_row=r)
                )
        elif keep:
            for i in keep:
                rows.append(self._file_row(batch.items[i]))
        # these pixels were appended above (rows already point at them)
        return len(rows), dups, (lambda: range(0)), (lambda _: cands.add(rows))

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


def _maybe_crash(n_batches: int) -> None:
    limit = os.environ.get(CRASH_ENV)
    if limit and n_batches >= int(limit):
        os.kill(os.getpid(), signal.SIGKILL)


def _resume_position(store: Store, job: str) -> int:
    keys = store.stages.done_keys(f"{INGEST_STAGE}:{job}")
    return max((int(k) for k in keys), default=0)


def ingest_source(
    store: Store,
    root: str | os.PathLike[str],
    source: CandidateSource,
    *,
    name: str | None = None,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
    add_classes: bool | None = None,
) -> IngestReport:
    """Ingest every item of ``source`` into the project at ``root``.

    Resumable and idempotent: a rerun after completion or after a crash continues
    from the last checkpoint and never stores a candidate twice.

    Parameters
    ----------
    store : Store
        The project store.
    root : path
        The project folder (``arrays/``, ``images/``, ``reports/`` live there).
    source : CandidateSource
    name : str, optional
        Name stored as each candidate's ``source``; defaults to the source kind.
    batch_size : int, optional
        Items per batch (one transaction, one checkpoint); default the source's
        ``default_batch_size`` (65,536 for TinyImages), else 16,384 for array
        sources and 256 for file sources.
    progress : ProgressCallback, optional
    add_classes : bool, optional
        Add class names the project does not know (default: only when the store
        has no classes at all, e.g. a bare store in a notebook). A project created
        by ``retest init`` fixes its classes, so unknown names are an error.

    Returns
    -------
    IngestReport

    Raises
    ------
    StageError
        An item's class is not a project class.
    """
    root = Path(root)
    job = ingest_job_key(source)
    name = name or source.kind
    desc = source.describe()
    log_path = root / REPORT_DIR / f"{job}.log.jsonl"
    report_rel = f"{REPORT_DIR}/{job}.json"
    resume = _resume_position(store, job)
    tally = _read_log(log_path, resume)
    started = utc_now()
    store.stages.mark(
        StageCheckpoint(INGEST_STAGE, job, done=False, artifact=report_rel)
    )
    fresh = not store.classes.list()
    if source.label_names and fresh:
        store.classes.put(ClassRow(i, n) for i, n in enumerate(source.label_names))
    writer = _Writer(store, root, name, fresh if add_classes is None else add_classes)
    redo = resume > 0 or log_path.is_file()
    total = len(source)

    def _report(complete: bool) -> IngestReport:
        rep = IngestReport(
            job, name, source.kind, desc["path"], total, tally.processed,
            tally.new, tally.duplicates, tuple(tally.skipped), tuple(tally.dup_refs),
            resume, complete, desc, started, utc_now() if complete else "",
        )  # fmt: skip
        atomic_write_bytes(root / report_rel, dumps_json(rep.to_json()).encode())
        return rep

    _report(False)
    bs = batch_size or source.default_batch_size
    bs = bs or (16_384 if source.storage == "array" else 256)
    task = f"ingest {name}"
    report(progress, task, resume, total)
    part, last_start = 0, -1

    def _commit(
        insert: _Insert, appended: Future[Sequence[int]], n_batches: int,
        line: dict[str, Any],
    ) -> None:  # fmt: skip
        insert(appended.result())  # rows only once their pixels are durable
        _maybe_crash(n_batches)
        _append_line(log_path, line)
        store.stages.mark(
            StageCheckpoint(f"{INGEST_STAGE}:{job}", f"{line['stop']:012d}")
        )

    def _finish(done: Future[None], line: dict[str, Any]) -> None:
        done.result()
        tally.add(line)
        report(progress, task, int(line["stop"]), total)

    # Three-stage pipeline (sqlite, hashlib, numpy and file writes release the
    # GIL): while batch k+1 is read, hashed and de-duplicated here, one thread
    # appends pixels (batch k+1 right after its preparation) and another commits
    # rows, log line and checkpoint (batch k, once its pixels are durable).
    # Batch k is committed before batch k+1's rows are submitted, so rows,
    # checkpoints and pixel rows all follow source order.
    pending: tuple[Future[None], dict[str, Any]] | None = None
    with (
        ThreadPoolExecutor(1, thread_name_prefix="retest-pixels") as pix_pool,
        ThreadPoolExecutor(1, thread_name_prefix="retest-rows") as pool,
    ):
        # depth 2: batch k's pixels are done with (committed) before batch k+2
        # is requested, so the source may decode batch k+2 into them
        batches = source.iter_batches_recycled(start=resume, batch_size=bs, depth=2)
        for n_batches, batch in enumerate(batches, 1):
            part = part + 1 if batch.start == last_start else 0
            last_start = batch.start
            # Only the batches at the resume position can hold this job's own rows.
            writer.check_own = redo and batch.start == resume
            new, dups, append, insert = writer.prepare(batch)
            appended = pix_pool.submit(append)
            skipped = [
                {"position": batch.start, "ref": s.ref, "reason": s.reason}
                for s in batch.skipped
            ]
            line = {"start": batch.start, "stop": batch.stop, "part": part, "new": new,
                    "duplicates": len(dups), "duplicate_refs": dups[:_MAX_LISTED_DUPLICATES],
                    "skipped": skipped}  # fmt: skip
            if pending is not None:
                _finish(*pending)
            pending = (pool.submit(_commit, insert, appended, n_batches, line), line)
        if pending is not None:
            _finish(*pending)
    tally.processed = max(tally.processed, total)
    result = _report(True)
    record_artifact(store, root, root / report_rel, name=f"ingest:{job}",
                    stage=INGEST_STAGE, params={"name": name, "kind": source.kind})  # fmt: skip
    store.stages.mark(
        StageCheckpoint(INGEST_STAGE, job, done=True, artifact=report_rel)
    )
    return result


def list_ingests(store: Store, root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One summary per ingest job: name, kind, path, counts, complete?"""
    out = []
    for cp in store.stages.list(INGEST_STAGE):
        path = Path(root) / (cp.artifact or "")
        if not path.is_file():
            continue
        rep = IngestReport.from_json(json.loads(path.read_text()))
        row = {
            k: v
            for k, v in rep.to_json().items()
            if k not in ("source", "duplicate_refs")
        }
        row["skipped"] = len(rep.skipped)
        if not cp.done:  # interrupted: the report on disk is from the run's start
            row["processed"] = _resume_position(store, cp.key)
            row["complete"] = False
        out.append(row)
    return out


def add_source(
    store: Store,
    root: str | os.PathLike[str],
    kind: str,
    path: str | os.PathLike[str],
    *,
    keywords: Sequence[str] | Mapping[str, str | None] | None = None,
    keywords_file: str | os.PathLike[str] | None = None,
    class_name: str | None = None,
    name: str | None = None,
    labels_path: str | os.PathLike[str] | None = None,
    images_dir: str | os.PathLike[str] | None = None,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
) -> IngestReport:
    """Build the source ``kind`` at ``path`` and ingest it (``retest source add``).

    ``keywords`` / ``keywords_file`` select TinyImages records (the file may map
    classes to keywords, see :func:`~retest.sources.candidates.read_keywords_file`);
    the TinyImages keyword index is built once and kept in the project.
    ``labels_path`` is the IDX labels file, ``images_dir`` the Flickr download
    folder. Options that do not apply to ``kind`` are refused.
    """
    opts: dict[str, Any] = {}
    if class_name is not None:
        opts["class_name"] = class_name
    kw = _keywords(keywords, keywords_file)
    extra = {"keywords": kw, "labels_path": labels_path, "images_dir": images_dir}
    allowed = {"tinyimages": "keywords", "idx": "labels_path", "flickr": "images_dir"}
    for opt, value in extra.items():
        if value is not None and allowed.get(kind) != opt:
            raise ConfigError(f"option {opt} does not apply to source kind {kind!r}.")
        if value is not None:
            opts[opt] = value
    if kind == "tinyimages":
        if kw is None:
            raise ConfigError("tinyimages needs --keywords a,b or --keywords-file F.")
        src_path = Path(path)
        folder = src_path if src_path.is_dir() else src_path.parent
        opts["index"] = load_tinyimages_index(
            store, root, folder / "tiny_metadata.bin", progress=progress
        )
    if kind == "flickr" and images_dir is None:
        raise ConfigError("flickr needs --images DIR, the downloader's output folder.")
    source = make_source(kind, path, **opts)
    return ingest_source(
        store, root, source, name=name, batch_size=batch_size, progress=progress
    )


def _keywords(
    keywords: Sequence[str] | Mapping[str, str | None] | None,
    keywords_file: str | os.PathLike[str] | None,
) -> Mapping[str, str | None] | None:
    if keywords is not None and keywords_file is not None:
        raise ConfigError("pass either --keywords or --keywords-file, not both.")
    if keywords_file is not None:
        return read_keywords_file(keywords_file)
    if keywords is None:
        return None
    return dict(keywords) if isinstance(keywords, Mapping) else dict.fromkeys(keywords)
