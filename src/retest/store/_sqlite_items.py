"""SQLite repositories of classes, references, candidates, tasks and annotations."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from retest.errors import NotFoundError
from retest.store._sqlite_common import (
    Repo as _Repo,
)
from retest.store._sqlite_common import (
    _batches,
    _dumps,
    _extra,
    _loads_extra,
    _where,
)
from retest.store.base import (
    AnnotationEvent,
    AnnotationRepo,
    CandidateRepo,
    CandidateRow,
    ClassRepo,
    ClassRow,
    KeywordRow,
    ReferenceRepo,
    ReferenceRow,
    TaskRepo,
    TaskRow,
    utc_now,
)

__all__ = ["_Annotations", "_Candidates", "_Classes", "_References", "_Tasks"]


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


_COLUMN_INSERT = (
    f"INSERT OR IGNORE INTO candidates({_CAND_COLS}) SELECT value->>0, ?1, value->>1, "
    "value->>2, value->>3, NULL, NULL, NULL, NULL, ?2, ?3, ?4, value->>4, NULL, NULL "
    "FROM json_each(?5)"
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

    def add_tuples(self, rows: Iterable[tuple[Any, ...]]) -> int:
        # extra (the 15th field) is the only column needing conversion
        data = (r if r[14] is None else (*r[:14], _extra(r[14])) for r in rows)
        return self._db.insert_count(
            f"INSERT OR IGNORE INTO candidates({_CAND_COLS}) VALUES ({','.join('?' * 15)})",
            data,
        )

    def add_columns(
        self,
        ids: Sequence[str],
        refs: Sequence[str],
        class_ids: Sequence[int | None],
        keywords: Sequence[str | None],
        array_rows: Sequence[int],
        *,
        source: str,
        width: int,
        height: int,
        array_name: str,
    ) -> int:
        # The rows travel as one JSON array read by json_each (which walks it in
        # order, so seq follows the columns): no per-row parameter binding, which
        # was half the cost of executemany for 15-column rows.
        if not ids:
            return 0
        cols = builtins.list(
            zip(ids, refs, class_ids, keywords, array_rows, strict=True)
        )
        data = json.dumps(cols, ensure_ascii=False, separators=(",", ":"))
        return self._db.insert_count(
            _COLUMN_INSERT, [(source, width, height, array_name, data)]
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
        # one query per call: the ids travel as one JSON array, probed in the index
        ids = builtins.list(item_ids)
        if not ids:
            return set()
        rows = self._db.snapshot_rows(
            "SELECT c.id FROM json_each(?) j JOIN candidates c ON c.id = j.value",
            (_dumps(ids),),
        )
        return {r[0] for r in rows}

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
