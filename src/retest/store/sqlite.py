"""SQLite implementation of the project store (``retest.db``).

One file, WAL journal, ``busy_timeout`` so several processes (an ingest, the web
app, a crowd poller) can write at once: every write is one ``BEGIN IMMEDIATE``
transaction, bulk inserts go through ``executemany``. The schema is versioned: the
``schema_version`` table holds the version and :data:`MIGRATIONS` are applied in
order when a store is opened (a database from a newer retest is refused).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from retest.errors import NotFoundError, StoreError
from retest.store.base import (
    AnnotationEvent,
    AnnotationRepo,
    ArtifactRecord,
    ArtifactRepo,
    BlacklistEvent,
    BlacklistRepo,
    CandidateRepo,
    CandidateRow,
    ClassRepo,
    ClassRow,
    DuplicateVerdict,
    KeywordRow,
    NearDupRepo,
    NeighbourList,
    NeighbourReview,
    PredictionRecord,
    PredictionRepo,
    ReferenceRepo,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    RevisionRepo,
    StageCheckpoint,
    StageRepo,
    Store,
    TaskRepo,
    TaskRow,
    utc_now,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]

_V1 = """
CREATE TABLE classes(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '', links TEXT NOT NULL DEFAULT '[]');
CREATE TABLE keywords(
  class_id INTEGER NOT NULL, keyword TEXT NOT NULL,
  original_count INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(class_id, keyword));
CREATE TABLE refs(
  split TEXT NOT NULL, idx INTEGER NOT NULL, class_id INTEGER NOT NULL,
  content_id TEXT NOT NULL, keyword TEXT, array_name TEXT, array_row INTEGER,
  PRIMARY KEY(split, idx));
CREATE INDEX refs_content ON refs(content_id);
CREATE TABLE candidates(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, source TEXT NOT NULL,
  source_ref TEXT NOT NULL, class_id INTEGER, keyword TEXT, date_taken TEXT,
  date_uploaded TEXT, url TEXT, license TEXT, width INTEGER, height INTEGER,
  array_name TEXT, array_row INTEGER, file_path TEXT, extra TEXT);
CREATE INDEX candidates_class ON candidates(class_id);
CREATE INDEX candidates_keyword ON candidates(keyword);
CREATE TABLE tasks(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, class_id INTEGER NOT NULL,
  items TEXT NOT NULL, controls TEXT NOT NULL, seed INTEGER, kind TEXT NOT NULL,
  created TEXT NOT NULL, extra TEXT);
CREATE TABLE annotations(
  id INTEGER PRIMARY KEY, who TEXT NOT NULL, kind TEXT NOT NULL,
  class_id INTEGER NOT NULL, item_id TEXT NOT NULL, value INTEGER NOT NULL,
  at TEXT NOT NULL, ui_version TEXT NOT NULL, task_id TEXT, assignment_id TEXT,
  assignment_status TEXT, worker TEXT, extra TEXT);
CREATE INDEX annotations_item ON annotations(item_id);
CREATE INDEX annotations_task ON annotations(task_id);
CREATE INDEX annotations_assignment ON annotations(assignment_id);
CREATE INDEX annotations_class_kind ON annotations(class_id, kind);
CREATE TABLE blacklist(
  id INTEGER PRIMARY KEY, item_id TEXT NOT NULL, reason TEXT NOT NULL,
  who TEXT NOT NULL, at TEXT NOT NULL, undo INTEGER NOT NULL);
CREATE INDEX blacklist_item ON blacklist(item_id);
CREATE TABLE neighbours(
  candidate_id TEXT NOT NULL, metric TEXT NOT NULL, ref_ids TEXT NOT NULL,
  distances BLOB NOT NULL, PRIMARY KEY(candidate_id, metric));
CREATE TABLE verdicts(
  id INTEGER PRIMARY KEY, candidate_id TEXT NOT NULL, ref_id TEXT NOT NULL,
  metric TEXT NOT NULL, is_duplicate INTEGER NOT NULL, who TEXT NOT NULL,
  at TEXT NOT NULL);
CREATE INDEX verdicts_candidate ON verdicts(candidate_id);
CREATE TABLE neighbour_reviews(
  id INTEGER PRIMARY KEY, candidate_id TEXT NOT NULL, metric TEXT NOT NULL,
  reviewer TEXT NOT NULL, refs TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX neighbour_reviews_candidate ON neighbour_reviews(candidate_id);
CREATE TABLE revisions(
  seq INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, strategy TEXT NOT NULL,
  params TEXT NOT NULL, seed INTEGER, parent TEXT REFERENCES revisions(name),
  valid INTEGER NOT NULL, created TEXT NOT NULL, shortfall TEXT NOT NULL);
CREATE TABLE revision_members(
  revision TEXT NOT NULL REFERENCES revisions(name), pos INTEGER NOT NULL,
  item_id TEXT NOT NULL, class_id INTEGER NOT NULL, bin INTEGER,
  origin TEXT NOT NULL, from_bin INTEGER, PRIMARY KEY(revision, pos));
CREATE TABLE review_states(
  id INTEGER PRIMARY KEY, revision TEXT NOT NULL REFERENCES revisions(name),
  class_id INTEGER NOT NULL, reviewed INTEGER NOT NULL,
  problematic INTEGER NOT NULL, who TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX review_states_revision ON review_states(revision);
CREATE TABLE artifacts(
  name TEXT PRIMARY KEY, path TEXT NOT NULL, sha256 TEXT NOT NULL,
  stage TEXT NOT NULL, params TEXT NOT NULL, version TEXT NOT NULL,
  created TEXT NOT NULL);
CREATE TABLE stages(
  stage TEXT NOT NULL, key TEXT NOT NULL, done INTEGER NOT NULL, artifact TEXT,
  at TEXT NOT NULL, PRIMARY KEY(stage, key));
CREATE TABLE predictions(
  model TEXT NOT NULL, dataset TEXT NOT NULL, path TEXT NOT NULL,
  sha256 TEXT NOT NULL, created TEXT NOT NULL, extra TEXT,
  PRIMARY KEY(dataset, model));
"""

MIGRATIONS: tuple[str, ...] = (_V1,)
"""SQL scripts; migration ``i`` takes the schema from version ``i`` to ``i + 1``."""
SCHEMA_VERSION = len(MIGRATIONS)

_BATCH = 5000
T = TypeVar("T")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _extra(obj: Mapping[str, Any]) -> str | None:
    return _dumps(dict(obj)) if obj else None


def _loads_extra(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def _batches(it: Iterable[T], n: int = _BATCH) -> Iterator[list[T]]:
    it = iter(it)
    while chunk := builtins.list(islice(it, n)):
        yield chunk


def _where(**conds: Any) -> tuple[str, list[Any]]:
    """``WHERE a = ? AND …`` over the non-None conditions."""
    keys = [k for k, v in conds.items() if v is not None]
    if not keys:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k in keys), [conds[k] for k in keys]


class _DB:
    """A connection plus a lock; ``tx()`` is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.conn = sqlite3.connect(
            str(path), timeout=timeout, isolation_level=None, check_same_thread=False
        )
        c = self.conn
        c.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")
        c.execute("PRAGMA foreign_keys = ON")
        # random 64-hex ids make index inserts cache-bound: a bigger page cache
        # roughly doubles bulk-ingest speed
        c.execute("PRAGMA cache_size = -65536")
        c.execute("PRAGMA temp_store = MEMORY")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self.lock:
            return self.conn.execute(sql, params).fetchone()

    def append(self, table: str, sql: str, rows: Iterable[Sequence[Any]]) -> list[int]:
        """Insert event rows (first column is the id) and return the ids given."""
        with self.tx() as c:
            start = c.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0]
            n0 = c.total_changes
            c.executemany(sql, rows)
            n = c.total_changes - n0
        # ids are max+1 … max+n: the table is append-only and we held the write lock
        return builtins.list(range(start + 1, start + n + 1))

    def insert_count(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run an insert-or-ignore for batches of rows; returns rows inserted."""
        with self.tx() as c:
            n0 = c.total_changes
            for batch in _batches(rows):
                c.executemany(sql, batch)
            return c.total_changes - n0


class _Repo:
    def __init__(self, db: _DB) -> None:
        self._db = db


class _Classes(_Repo, ClassRepo):
    def put(self, rows: Iterable[ClassRow]) -> None:
        sql = (
            "INSERT INTO classes VALUES (?,?,?,?) ON CONFLICT(id) DO UPDATE SET "
            "name=excluded.name, description=excluded.description, links=excluded.links"
        )
        data = [
            (r.id, r.name, r.description, _dumps(builtins.list(r.links))) for r in rows
        ]
        with self._db.tx() as c:
            c.executemany(sql, data)

    def list(self) -> list[ClassRow]:
        rows = self._db.rows(
            "SELECT id, name, description, links FROM classes ORDER BY id"
        )
        return [ClassRow(i, n, d, tuple(json.loads(lk))) for i, n, d, lk in rows]

    def put_keywords(self, rows: Iterable[KeywordRow]) -> None:
        data = [(r.class_id, r.keyword, r.original_count) for r in rows]
        with self._db.tx() as c:
            c.executemany("INSERT OR REPLACE INTO keywords VALUES (?,?,?)", data)

    def keywords(self, *, class_id: int | None = None) -> builtins.list[KeywordRow]:
        where, params = _where(class_id=class_id)
        rows = self._db.rows(
            f"SELECT * FROM keywords{where} ORDER BY class_id, original_count DESC, keyword",
            params,
        )
        return [KeywordRow(*r) for r in rows]


class _References(_Repo, ReferenceRepo):
    _COLS = "split, idx, class_id, content_id, keyword, array_name, array_row"

    def add(self, rows: Iterable[ReferenceRow]) -> int:
        data = (
            (
                r.split,
                r.index,
                r.class_id,
                r.content_id,
                r.keyword,
                r.array_name,
                r.array_row,
            )
            for r in rows
        )
        return self._db.insert_count(
            f"INSERT OR IGNORE INTO refs({self._COLS}) VALUES (?,?,?,?,?,?,?)", data
        )

    def get(self, item_id: str) -> ReferenceRow:
        split, _, idx = item_id.partition(":")
        row = None
        if idx.isdigit():
            row = self._db.one(
                f"SELECT {self._COLS} FROM refs WHERE split = ? AND idx = ?",
                (split, int(idx)),
            )
        if row is None:
            raise NotFoundError(f"reference image {item_id!r} is not in the project.")
        return ReferenceRow(*row)

    def list(
        self, *, split: str | None = None, class_id: int | None = None
    ) -> list[ReferenceRow]:
        where, params = _where(split=split, class_id=class_id)
        rows = self._db.rows(
            f"SELECT {self._COLS} FROM refs{where} ORDER BY split, idx", params
        )
        return [ReferenceRow(*r) for r in rows]

    def count(self, *, split: str | None = None) -> int:
        where, params = _where(split=split)
        return int(self._db.one(f"SELECT COUNT(*) FROM refs{where}", params)[0])

    def set_keywords(self, keywords: Mapping[int, str | None], *, split: str) -> None:
        data = [(kw, split, int(i)) for i, kw in keywords.items()]
        with self._db.tx() as c:
            c.executemany(
                "UPDATE refs SET keyword = ? WHERE split = ? AND idx = ?", data
            )


_CAND_COLS = (
    "id, source, source_ref, class_id, keyword, date_taken, date_uploaded, url, "
    "license, width, height, array_name, array_row, file_path, extra"
)


def _cand_row(r: Sequence[Any]) -> CandidateRow:
    a = r
    return CandidateRow(
        a[0],
        a[1],
        a[2],
        a[3],
        a[4],
        a[5],
        a[6],
        a[7],
        a[8],
        a[9],
        a[10],
        a[11],
        a[12],
        a[13],
        _loads_extra(a[14]),
    )


class _Candidates(_Repo, CandidateRepo):
    def add(self, rows: Iterable[CandidateRow]) -> int:
        data = (
            (
                r.id,
                r.source,
                r.source_ref,
                r.class_id,
                r.keyword,
                r.date_taken,
                r.date_uploaded,
                r.url,
                r.license,
                r.width,
                r.height,
                r.array_name,
                r.array_row,
                r.file_path,
                _extra(r.extra),
            )
            for r in rows
        )
        return self._db.insert_count(
            f"INSERT OR IGNORE INTO candidates({_CAND_COLS}) VALUES ({','.join('?' * 15)})",
            data,
        )

    def get(self, item_id: str) -> CandidateRow:
        row = self._db.one(
            f"SELECT {_CAND_COLS} FROM candidates WHERE id = ?", (item_id,)
        )
        if row is None:
            raise NotFoundError(f"candidate {item_id!r} is not in the project.")
        return _cand_row(row)

    def _fetch(self, cols: str, ids: Iterable[str]) -> Iterator[Any]:
        for batch in _batches(ids, 900):
            marks = ",".join("?" * len(batch))
            yield from self._db.rows(
                f"SELECT {cols} FROM candidates WHERE id IN ({marks})", batch
            )

    def get_many(self, item_ids: Sequence[str]) -> list[CandidateRow]:
        found = {r[0]: r for r in self._fetch(_CAND_COLS, item_ids)}
        missing = [i for i in item_ids if i not in found]
        if missing:
            raise NotFoundError(
                f"{len(missing)} candidate(s) are not in the project, e.g. {missing[0]!r}."
            )
        return [_cand_row(found[i]) for i in item_ids]

    def existing(self, item_ids: Iterable[str]) -> set[str]:
        return {r[0] for r in self._fetch("id", item_ids)}

    def iter(
        self,
        *,
        class_id: int | None = None,
        source: str | None = None,
        keyword: str | None = None,
        batch_size: int = 10_000,
    ) -> Iterator[CandidateRow]:
        where, params = _where(class_id=class_id, source=source, keyword=keyword)
        cond = (where + " AND" if where else " WHERE") + " seq > ?"
        last = 0
        while True:
            rows = self._db.rows(
                f"SELECT seq, {_CAND_COLS} FROM candidates{cond} ORDER BY seq LIMIT ?",
                [*params, last, batch_size],
            )
            if not rows:
                return
            last = rows[-1][0]
            for r in rows:
                yield _cand_row(r[1:])

    def count(
        self,
        *,
        class_id: int | None = None,
        source: str | None = None,
        keyword: str | None = None,
    ) -> int:
        where, params = _where(class_id=class_id, source=source, keyword=keyword)
        return int(self._db.one(f"SELECT COUNT(*) FROM candidates{where}", params)[0])

    def count_by_class(self) -> dict[int | None, int]:
        rows = self._db.rows(
            "SELECT class_id, COUNT(*) FROM candidates GROUP BY class_id"
        )
        return {c: int(n) for c, n in rows}

    def class_map(self) -> dict[str, int | None]:
        return dict(self._db.rows("SELECT id, class_id FROM candidates ORDER BY seq"))


class _Tasks(_Repo, TaskRepo):
    _COLS = "id, class_id, items, controls, seed, kind, created, extra"

    def add(self, rows: Iterable[TaskRow]) -> int:
        data = (
            (
                r.id,
                r.class_id,
                _dumps(builtins.list(r.items)),
                _dumps({k: builtins.list(v) for k, v in r.controls.items()}),
                r.seed,
                r.kind,
                r.created or utc_now(),
                _extra(r.extra),
            )
            for r in rows
        )
        return self._db.insert_count(
            f"INSERT OR IGNORE INTO tasks({self._COLS}) VALUES (?,?,?,?,?,?,?,?)", data
        )

    @staticmethod
    def _row(r: Sequence[Any]) -> TaskRow:
        controls = {k: tuple(v) for k, v in json.loads(r[3]).items()}
        return TaskRow(
            r[0],
            r[1],
            tuple(json.loads(r[2])),
            controls,
            r[4],
            r[5],
            r[6],
            _loads_extra(r[7]),
        )

    def get(self, task_id: str) -> TaskRow:
        row = self._db.one(f"SELECT {self._COLS} FROM tasks WHERE id = ?", (task_id,))
        if row is None:
            raise NotFoundError(f"task {task_id!r} is not in the project.")
        return self._row(row)

    def list(self, *, class_id: int | None = None) -> list[TaskRow]:
        where, params = _where(class_id=class_id)
        rows = self._db.rows(
            f"SELECT {self._COLS} FROM tasks{where} ORDER BY seq", params
        )
        return [self._row(r) for r in rows]


_ANN_COLS = (
    "id, who, kind, class_id, item_id, value, at, ui_version, task_id, "
    "assignment_id, assignment_status, worker, extra"
)


class _Annotations(_Repo, AnnotationRepo):
    def add(self, events: Iterable[AnnotationEvent]) -> list[int]:
        now = utc_now()
        data = (
            (
                None,
                e.who,
                e.kind,
                e.class_id,
                e.item_id,
                int(e.value),
                e.when or now,
                e.ui_version,
                e.task_id,
                e.assignment_id,
                e.assignment_status,
                e.worker,
                _extra(e.extra),
            )
            for e in events
        )
        sql = f"INSERT INTO annotations({_ANN_COLS}) VALUES ({','.join('?' * 13)})"
        return self._db.append("annotations", sql, data)

    def list(
        self,
        *,
        kind: str | None = None,
        class_id: int | None = None,
        item_id: str | None = None,
        who: str | None = None,
        task_id: str | None = None,
        assignment_id: str | None = None,
        after_id: int = 0,
    ) -> list[AnnotationEvent]:
        where, params = _where(
            kind=kind,
            class_id=class_id,
            item_id=item_id,
            who=who,
            task_id=task_id,
            assignment_id=assignment_id,
        )
        cond = (where + " AND" if where else " WHERE") + " id > ?"
        rows = self._db.rows(
            f"SELECT {_ANN_COLS} FROM annotations{cond} ORDER BY id",
            [*params, after_id],
        )
        return [
            AnnotationEvent(
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                r[7],
                r[8],
                r[9],
                r[10],
                r[11],
                _loads_extra(r[12]),
                r[0],
            )
            for r in rows
        ]

    def count(self, *, kind: str | None = None) -> int:
        where, params = _where(kind=kind)
        return int(self._db.one(f"SELECT COUNT(*) FROM annotations{where}", params)[0])

    def set_assignment_status(self, assignment_id: str, *, status: str) -> int:
        with self._db.tx() as c:
            cur = c.execute(
                "UPDATE annotations SET assignment_status = ? WHERE assignment_id = ?",
                (status, assignment_id),
            )
            return int(cur.rowcount)

    def item_counts(
        self, *, kinds: Sequence[str] | None = None, valid_only: bool = True
    ) -> dict[str, tuple[int, int]]:
        conds: builtins.list[str] = []
        params: builtins.list[Any] = []
        if kinds is not None:
            conds.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        if valid_only:
            conds.append("COALESCE(assignment_status, '') != 'Rejected'")
        where = " WHERE " + " AND ".join(conds) if conds else ""
        rows = self._db.rows(
            "SELECT item_id, COUNT(*), SUM(value > 0) FROM annotations"
            f"{where} GROUP BY item_id",
            params,
        )
        return {i: (int(n), int(p)) for i, n, p in rows}


class _Blacklist(_Repo, BlacklistRepo):
    def add(self, events: Iterable[BlacklistEvent]) -> list[int]:
        now = utc_now()
        data = (
            (None, e.item_id, e.reason, e.who, e.when or now, int(e.undo))
            for e in events
        )
        return self._db.append(
            "blacklist", "INSERT INTO blacklist VALUES (?,?,?,?,?,?)", data
        )

    def events(self, *, item_id: str | None = None) -> list[BlacklistEvent]:
        where, params = _where(item_id=item_id)
        rows = self._db.rows(f"SELECT * FROM blacklist{where} ORDER BY id", params)
        return [BlacklistEvent(r[1], r[2], r[3], r[4], bool(r[5]), r[0]) for r in rows]

    def current(self) -> dict[str, str]:
        rows = self._db.rows(
            "SELECT b.item_id, b.reason, b.undo FROM blacklist b JOIN "
            "(SELECT item_id, MAX(id) AS m FROM blacklist GROUP BY item_id) l "
            "ON b.id = l.m ORDER BY b.item_id"
        )
        return {i: r for i, r, u in rows if not u}


def _nl_row(r: Sequence[Any]) -> NeighbourList:
    dists = tuple(np.frombuffer(r[3], dtype="<f8").tolist())
    return NeighbourList(r[0], r[1], tuple(json.loads(r[2])), dists)


class _NearDup(_Repo, NearDupRepo):
    def put_neighbours(self, lists: Iterable[NeighbourList]) -> int:
        def rows() -> Iterator[tuple[Any, ...]]:
            for nl in lists:
                if len(nl.ref_ids) != len(nl.distances):
                    raise StoreError(
                        f"neighbour list of {nl.candidate_id!r} ({nl.metric}) has "
                        f"{len(nl.ref_ids)} ids but {len(nl.distances)} distances."
                    )
                blob = np.asarray(nl.distances, dtype="<f8").tobytes()
                yield (
                    nl.candidate_id,
                    nl.metric,
                    _dumps(builtins.list(nl.ref_ids)),
                    blob,
                )

        return self._db.insert_count(
            "INSERT OR REPLACE INTO neighbours VALUES (?,?,?,?)", rows()
        )

    def neighbours(
        self, candidate_id: str, *, metric: str | None = None
    ) -> list[NeighbourList]:
        where, params = _where(candidate_id=candidate_id, metric=metric)
        rows = self._db.rows(f"SELECT * FROM neighbours{where} ORDER BY metric", params)
        return [_nl_row(r) for r in rows]

    def iter_neighbours(self, *, metric: str) -> Iterator[NeighbourList]:
        last = ""
        while True:
            rows = self._db.rows(
                "SELECT * FROM neighbours WHERE metric = ? AND candidate_id > ? "
                "ORDER BY candidate_id LIMIT ?",
                (metric, last, _BATCH),
            )
            if not rows:
                return
            last = rows[-1][0]
            yield from (_nl_row(r) for r in rows)

    def add_verdicts(self, verdicts: Iterable[DuplicateVerdict]) -> list[int]:
        now = utc_now()
        data = (
            (
                None,
                v.candidate_id,
                v.ref_id,
                v.metric,
                int(v.is_duplicate),
                v.who,
                v.when or now,
            )
            for v in verdicts
        )
        return self._db.append(
            "verdicts", "INSERT INTO verdicts VALUES (?,?,?,?,?,?,?)", data
        )

    def verdicts(self, *, candidate_id: str | None = None) -> list[DuplicateVerdict]:
        where, params = _where(candidate_id=candidate_id)
        rows = self._db.rows(f"SELECT * FROM verdicts{where} ORDER BY id", params)
        return [
            DuplicateVerdict(r[1], r[2], r[3], bool(r[4]), r[5], r[6], r[0])
            for r in rows
        ]

    def add_reviews(self, reviews: Iterable[NeighbourReview]) -> list[int]:
        now = utc_now()
        data = (
            (
                None,
                r.candidate_id,
                r.metric,
                r.reviewer,
                _dumps(builtins.list(r.references)),
                r.when or now,
            )
            for r in reviews
        )
        return self._db.append(
            "neighbour_reviews",
            "INSERT INTO neighbour_reviews VALUES (?,?,?,?,?,?)",
            data,
        )

    def reviews(
        self, *, candidate_id: str | None = None, metric: str | None = None
    ) -> list[NeighbourReview]:
        where, params = _where(candidate_id=candidate_id, metric=metric)
        rows = self._db.rows(
            f"SELECT * FROM neighbour_reviews{where} ORDER BY id", params
        )
        return [
            NeighbourReview(r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[0])
            for r in rows
        ]


_REV_COLS = "name, strategy, params, seed, parent, valid, created, shortfall"


def _rev_row(r: Sequence[Any]) -> Revision:
    return Revision(
        r[0], r[1], json.loads(r[2]), r[3], r[4], bool(r[5]), r[6], json.loads(r[7])
    )


class _Revisions(_Repo, RevisionRepo):
    def create(self, revision: Revision, members: Sequence[RevisionMember]) -> Revision:
        rev = revision
        if rev.created is None:
            rev = dataclasses.replace(rev, created=utc_now())
        with self._db.tx() as c:
            if c.execute(
                "SELECT 1 FROM revisions WHERE name = ?", (rev.name,)
            ).fetchone():
                raise StoreError(
                    f"revision {rev.name!r} already exists; revisions are immutable. "
                    "Choose a new name."
                )
            if (
                rev.parent is not None
                and not c.execute(
                    "SELECT 1 FROM revisions WHERE name = ?", (rev.parent,)
                ).fetchone()
            ):
                raise NotFoundError(
                    f"parent revision {rev.parent!r} of {rev.name!r} does not exist."
                )
            c.execute(
                f"INSERT INTO revisions({_REV_COLS}) VALUES (?,?,?,?,?,?,?,?)",
                (
                    rev.name,
                    rev.strategy,
                    _dumps(dict(rev.params)),
                    rev.seed,
                    rev.parent,
                    int(rev.valid),
                    rev.created,
                    _dumps(dict(rev.shortfall)),
                ),
            )
            c.executemany(
                "INSERT INTO revision_members VALUES (?,?,?,?,?,?,?)",
                (
                    (rev.name, i, m.item_id, m.class_id, m.bin, m.origin, m.from_bin)
                    for i, m in enumerate(members)
                ),
            )
        return self.get(rev.name)

    def get(self, name: str) -> Revision:
        row = self._db.one(f"SELECT {_REV_COLS} FROM revisions WHERE name = ?", (name,))
        if row is None:
            known = ", ".join(r.name for r in self.list()) or "none"
            raise NotFoundError(
                f"revision {name!r} does not exist (revisions: {known})."
            )
        return _rev_row(row)

    def list(self) -> list[Revision]:
        return [
            _rev_row(r)
            for r in self._db.rows(f"SELECT {_REV_COLS} FROM revisions ORDER BY seq")
        ]

    def members(self, name: str) -> builtins.list[RevisionMember]:
        self.get(name)
        rows = self._db.rows(
            "SELECT item_id, class_id, bin, origin, from_bin FROM revision_members "
            "WHERE revision = ? ORDER BY pos",
            (name,),
        )
        return [RevisionMember(*r) for r in rows]

    def set_review(self, state: ReviewState) -> None:
        self.get(state.revision)
        with self._db.tx() as c:
            c.execute(
                "INSERT INTO review_states VALUES (?,?,?,?,?,?,?)",
                (
                    None,
                    state.revision,
                    state.class_id,
                    int(state.reviewed),
                    int(state.problematic),
                    state.who,
                    state.when or utc_now(),
                ),
            )

    def review_events(self, name: str) -> builtins.list[ReviewState]:
        self.get(name)
        rows = self._db.rows(
            "SELECT revision, class_id, reviewed, problematic, who, at "
            "FROM review_states WHERE revision = ? ORDER BY id",
            (name,),
        )
        return [
            ReviewState(r[0], r[1], bool(r[2]), bool(r[3]), r[4], r[5]) for r in rows
        ]


class _Artifacts(_Repo, ArtifactRepo):
    def put(self, record: ArtifactRecord) -> None:
        r = record
        with self._db.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO artifacts VALUES (?,?,?,?,?,?,?)",
                (
                    r.name,
                    r.path,
                    r.sha256,
                    r.stage,
                    _dumps(dict(r.params)),
                    r.version,
                    r.created or utc_now(),
                ),
            )

    @staticmethod
    def _row(r: Sequence[Any]) -> ArtifactRecord:
        return ArtifactRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6])

    def get(self, name: str) -> ArtifactRecord:
        row = self._db.one("SELECT * FROM artifacts WHERE name = ?", (name,))
        if row is None:
            raise NotFoundError(f"artifact {name!r} is not in the manifest.")
        return self._row(row)

    def list(self, *, stage: str | None = None) -> list[ArtifactRecord]:
        where, params = _where(stage=stage)
        rows = self._db.rows(f"SELECT * FROM artifacts{where} ORDER BY name", params)
        return [self._row(r) for r in rows]


class _Stages(_Repo, StageRepo):
    def mark(self, checkpoint: StageCheckpoint) -> None:
        k = checkpoint
        with self._db.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO stages VALUES (?,?,?,?,?)",
                (k.stage, k.key, int(k.done), k.artifact, k.when or utc_now()),
            )

    def get(self, stage: str, *, key: str) -> StageCheckpoint | None:
        r = self._db.one(
            "SELECT * FROM stages WHERE stage = ? AND key = ?", (stage, key)
        )
        return (
            None if r is None else StageCheckpoint(r[0], r[1], bool(r[2]), r[3], r[4])
        )

    def list(self, stage: str) -> list[StageCheckpoint]:
        rows = self._db.rows(
            "SELECT * FROM stages WHERE stage = ? ORDER BY key", (stage,)
        )
        return [StageCheckpoint(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def reset(self, stage: str) -> int:
        with self._db.tx() as c:
            return int(
                c.execute("DELETE FROM stages WHERE stage = ?", (stage,)).rowcount
            )


class _Predictions(_Repo, PredictionRepo):
    def put(self, record: PredictionRecord) -> None:
        r = record
        with self._db.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO predictions VALUES (?,?,?,?,?,?)",
                (
                    r.model,
                    r.dataset,
                    r.path,
                    r.sha256,
                    r.created or utc_now(),
                    _extra(r.extra),
                ),
            )

    @staticmethod
    def _row(r: Sequence[Any]) -> PredictionRecord:
        return PredictionRecord(r[0], r[1], r[2], r[3], r[4], _loads_extra(r[5]))

    def get(self, model: str, *, dataset: str) -> PredictionRecord:
        row = self._db.one(
            "SELECT * FROM predictions WHERE model = ? AND dataset = ?",
            (model, dataset),
        )
        if row is None:
            raise NotFoundError(
                f"no cached predictions of model {model!r} on {dataset!r}."
            )
        return self._row(row)

    def list(
        self, *, model: str | None = None, dataset: str | None = None
    ) -> list[PredictionRecord]:
        where, params = _where(model=model, dataset=dataset)
        rows = self._db.rows(
            f"SELECT * FROM predictions{where} ORDER BY dataset, model", params
        )
        return [self._row(r) for r in rows]


def _migrate(db: _DB) -> int:
    with db.tx() as c:
        c.execute("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)")
        row = c.execute("SELECT version FROM schema_version").fetchone()
        version = 0 if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{db.path} has schema version {version}, newer than this retest "
                f"supports ({SCHEMA_VERSION}). Upgrade retest."
            )
        for script in MIGRATIONS[version:]:
            for stmt in filter(str.strip, script.split(";")):
                c.execute(stmt)
        if row is None:
            c.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
        else:
            c.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
    return SCHEMA_VERSION


class SQLiteStore(Store):
    """The project store in one SQLite file.

    Parameters
    ----------
    path : path-like
        The database file (created if missing; parent directory must exist).
    timeout : float
        Seconds a writer waits for another process's transaction (``busy_timeout``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from retest.store.base import ClassRow
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with SQLiteStore(pathlib.Path(d) / "retest.db") as s:
    ...         s.classes.put([ClassRow(0, "cat")])
    ...         s.classes.list()[0].name
    'cat'
    """

    kind: Literal["sqlite", "memory"] = "sqlite"

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise StoreError(
                f"cannot open store {self.path}: directory {self.path.parent} does not exist."
            )
        try:
            self._db = _DB(self.path, timeout)
            _migrate(self._db)
        except sqlite3.DatabaseError as err:
            raise StoreError(
                f"cannot open store {self.path}: {err}. Is it a retest.db file?"
            ) from err
        repos: dict[str, Callable[[_DB], Any]] = {
            "classes": _Classes,
            "references": _References,
            "candidates": _Candidates,
            "tasks": _Tasks,
            "annotations": _Annotations,
            "blacklist": _Blacklist,
            "neardup": _NearDup,
            "revisions": _Revisions,
            "artifacts": _Artifacts,
            "stages": _Stages,
            "predictions": _Predictions,
        }
        for name, cls in repos.items():
            setattr(self, name, cls(self._db))

    def schema_version(self) -> int:
        return int(self._db.one("SELECT version FROM schema_version")[0])

    def close(self) -> None:
        with self._db.lock:
            self._db.conn.close()
