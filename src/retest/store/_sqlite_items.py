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
    _dumps,
    _extra,
    _loads_extra,
    _where,
)
from retest.store.base import AnnotationRepo, ClassRepo, ReferenceRepo, TaskRepo
from retest.store.rows import (
    AnnotationEvent,
    ClassRow,
    KeywordRow,
    ReferenceRow,
    TaskRow,
    utc_now,
)

__all__ = ["_Annotations", "_Classes", "_References", "_Tasks"]


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

    def max_array_row(self, array_name: str) -> int:
        row = self._db.one(
            "SELECT MAX(array_row) FROM refs WHERE array_name = ?", (array_name,)
        )
        return -1 if row[0] is None else int(row[0])

    def set_keywords(self, keywords: Mapping[int, str | None], *, split: str) -> None:
        data = [(kw, split, int(i)) for i, kw in keywords.items()]
        with self._db.tx() as c:
            c.executemany(
                "UPDATE refs SET keyword = ? WHERE split = ? AND idx = ?", data
            )


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
    _INSERT = f"INSERT INTO annotations({_ANN_COLS}) VALUES ({','.join('?' * 13)})"

    @staticmethod
    def _data(events: Iterable[AnnotationEvent]) -> Iterator[tuple[Any, ...]]:
        now = utc_now()
        return (
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

    def add(self, events: Iterable[AnnotationEvent]) -> list[int]:
        return self._db.append("annotations", self._INSERT, self._data(events))

    def record_import(
        self, events: Iterable[AnnotationEvent], statuses: Mapping[str, str]
    ) -> set[str]:
        events = list(events)
        ids = sorted({e.assignment_id for e in events if e.assignment_id})
        # BEGIN IMMEDIATE: the check and the insert see no other import between them
        with self._db.tx() as c:
            stored: set[str] = set()
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                stored.update(
                    r[0]
                    for r in c.execute(
                        "SELECT DISTINCT assignment_id FROM annotations WHERE kind = "
                        f"'task' AND assignment_id IN ({','.join('?' * len(part))})",
                        part,
                    )
                )
            fresh = [e for e in events if e.assignment_id not in stored]
            c.executemany(self._INSERT, self._data(fresh))
            c.executemany(
                "UPDATE annotations SET assignment_status = ? WHERE assignment_id = ?",
                [(st, aid) for aid, st in statuses.items()],
            )
        return stored

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
        if item_id is not None and kind is not None and kind != "task":
            # implied by kind = ?, but SQLite needs it spelt out to use the
            # partial item index (grid answers are not in it: schema version 5)
            cond += " AND kind <> 'task'"
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

    def workers(self) -> set[str]:
        rows = self._db.rows(
            "SELECT DISTINCT worker FROM annotations "
            "WHERE kind = 'task' AND worker IS NOT NULL AND worker <> ''"
        )
        return {str(r[0]) for r in rows}

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
            # VALID_STATUSES of retest.sampling.selection_frequency: a withdrawn
            # (undone) web answer is no more valid than a rejected one
            conds.append(
                "(assignment_status IS NULL OR "
                "lower(assignment_status) IN ('submitted', 'approved'))"
            )
        where = " WHERE " + " AND ".join(conds) if conds else ""
        rows = self._db.rows(
            "SELECT item_id, COUNT(*), SUM(value > 0) FROM annotations"
            f"{where} GROUP BY item_id",
            params,
        )
        return {i: (int(n), int(p)) for i, n, p in rows}
