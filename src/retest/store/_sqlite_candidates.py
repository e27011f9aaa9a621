"""SQLite repository of candidates (schema version 3: ids stored as a compact ``key``).

Candidate ids are usually sha256 content ids, 64 lower-case hex characters. Since
schema version 2 uniqueness and look-ups go through ``key``, a BLOB derived
injectively from the id (:func:`candidate_key`): the 32 raw digest bytes for a
content id, so the unique index holds 32-byte instead of 64-character keys.
Ingest inserts random keys into that index, so its size is what bulk ingest pays
for (every batch rewrites most of its leaf pages). Since version 3 the id text is
not stored at all: queries decode it from ``key`` (``_ID``), which shrinks each
row by 64 bytes and the JSON that bulk inserts carry by half.
"""

from __future__ import annotations

import builtins
import functools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from retest.errors import NotFoundError
from retest.store._sqlite_common import Repo as _Repo
from retest.store._sqlite_common import _batches, _extra, _loads_extra, _where
from retest.store.base import CandidateRepo, CandidateRow

__all__ = ["_Candidates", "candidate_key"]

# The id, decoded from the key (inverse of candidate_key).
_ID = (
    "CASE WHEN length(key) = 32 THEN lower(hex(key)) "
    "WHEN substr(key, 1, 2) = X'FFFF' THEN CAST(substr(key, 3) AS TEXT) "
    "ELSE CAST(substr(key, 2) AS TEXT) END"
)
_FIELDS = (
    "source, source_ref, class_id, keyword, date_taken, date_uploaded, url, "
    "license, width, height, array_name, array_row, file_path, extra"
)
_CAND_COLS = f"{_ID}, {_FIELDS}"
_INSERT = (
    f"INSERT OR IGNORE INTO candidates(key, {_FIELDS}) VALUES ({','.join('?' * 15)})"
)
# Rows as one JSON array walked in order by json_each (so seq follows the input),
# keys as one blob of 32-byte digests cut by position: no per-row binding.
_COLUMN_INSERT = (
    f"INSERT OR IGNORE INTO candidates(key, {_FIELDS}) SELECT "
    "substr(?5, 32 * key + 1, 32), ?1, value->>0, value->>1, value->>2, "
    "NULL, NULL, NULL, NULL, ?2, ?3, ?4, value->>3, NULL, NULL FROM json_each(?6)"
)
# Positions come back, not ids: a JSON array of small integers parses much
# faster than one of 64-character strings.
_EXISTING = (
    "SELECT j.value FROM json_each(?1) j "
    "JOIN candidates c ON c.key = substr(?2, 32 * j.value + 1, 32)"
)
_NOT_HEX = re.compile("[^0-9a-f]")


def candidate_key(item_id: str) -> bytes:
    """The ``key`` column of a candidate id (injective).

    A 64-character lower-case hex id (a sha256 content id) → its 32 digest bytes.
    Any other id → ``0xff`` + its UTF-8 bytes (one more ``0xff`` when that would
    be 32 bytes long); ``0xff`` never occurs in UTF-8, so these keys neither
    collide with each other nor with digests (which are exactly 32 bytes).
    """
    if len(item_id) == 64 and _NOT_HEX.search(item_id) is None:
        return bytes.fromhex(item_id)
    raw = item_id.encode("utf-8", "surrogatepass")
    return (b"\xff\xff" if len(raw) == 31 else b"\xff") + raw


def _digest_keys(ids: Sequence[str]) -> bytes | None:
    """The keys of ``ids`` as one blob, or None unless all are content ids."""
    text = "".join(ids)
    if len(text) != 64 * len(ids) or _NOT_HEX.search(text) is not None:
        return None
    if set(map(len, ids)) != {64}:
        return None
    return bytes.fromhex(text)


@functools.lru_cache(maxsize=4)
def _positions(n: int) -> str:
    """``"[0,1,…,n-1]"`` (batches mostly have the same size: cached)."""
    return json.dumps(builtins.list(range(n)), separators=(",", ":"))


def _cand_row(a: Sequence[Any]) -> CandidateRow:
    return CandidateRow(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
        a[12], a[13], _loads_extra(a[14]),
    )  # fmt: skip


class _Candidates(_Repo, CandidateRepo):
    def add(self, rows: Iterable[CandidateRow]) -> int:
        data = (
            (candidate_key(r.id), r.source, r.source_ref, r.class_id, r.keyword,
             r.date_taken, r.date_uploaded, r.url, r.license, r.width, r.height,
             r.array_name, r.array_row, r.file_path, _extra(r.extra))
            for r in rows
        )  # fmt: skip
        return self._db.insert_count(_INSERT, data)

    def add_tuples(self, rows: Iterable[tuple[Any, ...]]) -> int:
        # extra (the 15th field) is the only column needing conversion
        data = (
            (candidate_key(r[0]), *r[1:14], None if r[14] is None else _extra(r[14]))
            for r in rows
        )
        return self._db.insert_count(_INSERT, data)

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
        keys = _digest_keys(ids)
        if keys is None:  # not all content ids: the general path
            return super().add_columns(
                ids, refs, class_ids, keywords, array_rows, source=source,
                width=width, height=height, array_name=array_name,
            )  # fmt: skip
        if not ids:
            return 0
        if len(ids) != len(refs):
            raise ValueError(f"{len(ids)} ids but {len(refs)} refs.")
        cols = builtins.list(zip(refs, class_ids, keywords, array_rows, strict=True))
        data = json.dumps(cols, ensure_ascii=False, separators=(",", ":"))
        return self._db.insert_count(
            _COLUMN_INSERT, [(source, width, height, array_name, keys, data)]
        )

    def get(self, item_id: str) -> CandidateRow:
        row = self._db.one(
            f"SELECT {_CAND_COLS} FROM candidates WHERE key = ?",
            (candidate_key(item_id),),
        )
        if row is None:
            raise NotFoundError(f"candidate {item_id!r} is not in the project.")
        return _cand_row(row)

    def _fetch(
        self, cols: str, ids: Iterable[str], *, snapshot: bool = False
    ) -> Iterator[Any]:
        query = self._db.snapshot_rows if snapshot else self._db.rows
        for batch in _batches(ids, 900):
            marks = ",".join("?" * len(batch))
            yield from query(
                f"SELECT {cols} FROM candidates WHERE key IN ({marks})",
                [candidate_key(i) for i in batch],
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
        # Read on the snapshot connection: never waits for a writer (the ingest's
        # commit thread). Content ids: one query, keys cut from one blob.
        ids = builtins.list(item_ids)
        if not ids:
            return set()
        keys = _digest_keys(ids)
        if keys is None:
            return {r[0] for r in self._fetch(_ID, ids, snapshot=True)}
        rows = self._db.snapshot_rows(_EXISTING, (_positions(len(ids)), keys))
        return {ids[r[0]] for r in rows}

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

    def array_refs(self, array_name: str) -> Iterator[tuple[str, int]]:
        last = 0
        while True:
            rows = self._db.rows(
                f"SELECT seq, {_ID}, array_row FROM candidates WHERE seq > ? AND "
                "array_name = ? AND array_row IS NOT NULL ORDER BY seq LIMIT 50000",
                (last, array_name),
            )
            if not rows:
                return
            last = rows[-1][0]
            for _, i, r in rows:
                yield str(i), int(r)

    def max_array_row(self, array_name: str) -> int:
        row = self._db.one(
            "SELECT MAX(array_row) FROM candidates WHERE array_name = ?", (array_name,)
        )
        return -1 if row[0] is None else int(row[0])

    def file_refs(self) -> builtins.list[tuple[str, str, builtins.list[str]]]:
        out = []
        for cid, path, extra in self._db.rows(
            f"SELECT {_ID}, file_path, extra FROM candidates WHERE file_path IS NOT NULL"
        ):
            derived = _loads_extra(extra).get("derived") or {}
            out.append((str(cid), str(path), sorted(derived.values())))
        return out

    def class_map(self) -> dict[str, int | None]:
        return dict(
            self._db.rows(f"SELECT {_ID}, class_id FROM candidates ORDER BY seq")
        )
