"""SQLite repository of candidates (schema version 4: ids stored as a compact
``key``, looked up through a tiered index on its 64-bit prefix ``kp``).

Candidate ids are usually sha256 content ids, 64 lower-case hex characters. Since
schema version 2 uniqueness and look-ups go through ``key``, a BLOB derived
injectively from the id (:func:`candidate_key`): the 32 raw digest bytes for a
content id, so the unique index holds 32-byte instead of 64-character keys.
Ingest inserts random keys into that index, so its size is what bulk ingest pays
for (every batch rewrites most of its leaf pages). Since version 3 the id text is
not stored at all: queries decode it from ``key`` (``_ID``), which shrinks each
row by 64 bytes and the JSON that bulk inserts carry by half.

Since version 4 nothing indexes ``key`` itself: a unique index on random 32-byte
keys costs bulk ingest more with every million rows (each commit rewrites leaf
pages all over it). Rows carry ``kp`` (:func:`candidate_kp`), indexed by two
partial indexes: the old tier (``seq <= boundary``, built in one sorted pass)
and the new tier (later rows, small enough to stay in the page cache, so inserts
are cheap). Every look-up probes both tiers by ``kp`` and compares the full key,
so equal prefixes of different keys are harmless; inserts skip a row whose key
either tier holds (the uniqueness check, done inside the write transaction).
When the new tier outgrows half the old one (and :data:`TIER_MIN_ROWS`) the
tiers are rebuilt at the current end. Statements name the boundary as a literal
(a partial index is used only when the query repeats its condition), read in the
same transaction as the statement.

Since version 7 the source ids (``source || ':' || source_ref``) held by two or
more candidates are kept in ``candidate_shared_sources``, filled at every insert
through a source-id index tiered like ``kp``: linking candidates that share one
reads those few rows instead of sorting every candidate's source id. An insert
given the mark of the caller's existence check (``checked``) probes only the new
tier of ``kp`` when the old tier holds nothing newer than the mark.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from retest._gc import no_cyclic_gc
from retest.errors import NotFoundError
from retest.store._sqlite_columns import (
    _ID,
    cached_class_counts,
    cached_keyword_class_counts,
    class_id_orders,
    ids_at,
    locate,
    update_cache,
)
from retest.store._sqlite_common import Repo as _Repo
from retest.store._sqlite_common import _batches, _extra, _loads_extra, _where
from retest.store.base import CandidateRepo, _check_columns
from retest.store.rows import CandidateRow

__all__ = [
    "TIER_MIN_ROWS",
    "_Candidates",
    "candidate_key",
    "candidate_kp",
    "ensure_tiers",
]

TIER_MIN_ROWS = 1 << 21
"""The new tier is never merged into the old one before it holds this many rows."""

_FIELDS = (
    "source, source_ref, class_id, keyword, date_taken, date_uploaded, url, "
    "license, width, height, array_name, array_row, file_path, extra"
)
_CAND_COLS = f"{_ID}, {_FIELDS}"
_SRC = "source || ':' || source_ref"  # the source id that links candidates
_SRC_N = "n.source || ':' || n.source_ref"
_SRC_O = "o.source || ':' || o.source_ref"
_SHARED = "candidate_shared_sources"
"""Source ids held by two or more candidates (schema 7), kept at every insert."""
_SCAN_BATCH = 100_000
_FEW_VALUES = frozenset({"source", "keyword", "license", "array_name"})
"""Columns with few distinct values: a scan keeps one string object per value."""
_PARAMS = ",".join(f"?{i}" for i in range(3, 17))
_DEFERRABLE = {"candidates_keyword": "candidates(keyword)"}
"""Secondary indexes a bulk job may build once at its end instead of per row:
the keyword index's thousand insertion points cost ≈ 6 µs per inserted row
(the class index, ≈ 1 µs, stays: the id order and class counts read it)."""
_DEFER_SHARE = 0.25
"""Defer when the job adds at least this share of the rows the table will hold:
one sorted build costs ≈ 1.6 µs per row of the table (measured at 1 M)."""


def _absent(b: int, kp: str, key: str, *, old: bool = True) -> str:
    """SQL: no row of the new tier (and, if ``old``, of the old tier) has this key."""
    new = (
        f"NOT EXISTS (SELECT 1 FROM candidates c WHERE c.kp = {kp} AND "
        f"c.seq > {b} AND c.key = {key})"
    )
    if not old:
        return new
    return (
        f"NOT EXISTS (SELECT 1 FROM candidates c WHERE c.kp = {kp} AND "
        f"c.seq <= {b} AND c.key = {key}) AND {new}"
    )


def _insert_sql(b: int, old: bool) -> str:
    # one row per execution: a row repeated within the input is skipped too
    return (
        f"INSERT INTO candidates(key, kp, {_FIELDS}) SELECT ?1, ?2, {_PARAMS} "
        f"WHERE {_absent(b, '?2', '?1', old=old)}"
    )


def _column_insert_sql(b: int, old: bool, listed: bool = True, new: bool = True) -> str:
    # Rows as one JSON array walked in order by json_each (so seq follows the
    # input), keys as one blob of 32-byte digests cut by position: no per-row
    # binding. The input holds no repeated key (checked before). Array rows are
    # the JSON's 5th value when ``listed``, else ?7 + the position (a range).
    # Without ``new`` (nor ``old``) no tier is probed: the caller knows no key is
    # stored (:func:`_none_since`).
    row = "value->>4" if listed else "?7 + key"
    cond = _absent(b, "p", "k", old=old) if new else "1"
    return (
        f"INSERT INTO candidates(key, kp, {_FIELDS}) SELECT "
        "substr(?5, 32 * key + 1, 32) AS k, value->>3 AS p, ?1, value->>0, "
        "value->>1, value->>2, NULL, NULL, NULL, NULL, ?2, ?3, ?4, "
        f"{row}, NULL, NULL FROM json_each(?6) WHERE {cond}"
    )


def _consecutive(rows: Sequence[int]) -> TypeGuard[range]:
    return isinstance(rows, range) and rows.step == 1


def _probe_old(b: int, checked: int | None) -> bool:
    """Whether an insert must probe the old tier for its keys: not when the
    caller checked them (:meth:`~retest.store.base.CandidateRepo.existing_mark`)
    against a state holding every old-tier row (``seq <= b``), since rows are
    never deleted and ``seq`` only grows. The new tier is always probed: it holds
    what was stored since (it is small and cached, the old tier is neither)."""
    return checked is None or checked < b


_RECHECK_MAX = 1 << 18
"""Rows stored after the caller's check that an insert reads instead of probing."""


def _none_since(c: Any, checked: int, top: int, keys: bytes) -> bool:
    """Whether no row stored after the caller's check (``seq > checked``, up to
    ``top``) holds one of ``keys`` (32-byte digests): their keys read in one
    rowid range (in an ingest, its batches in flight), instead of a new-tier
    probe per inserted row. Rows up to ``checked`` were checked by the caller
    and rows are never deleted, so then no stored row holds any of ``keys``.
    False when too many rows came since (then the insert probes)."""
    if top - checked > _RECHECK_MAX:
        return False
    if top <= checked:
        return True
    since = c.execute("SELECT key FROM candidates WHERE seq > ?", (checked,))
    stored = {r[0] for r in since}
    return stored.isdisjoint(keys[i : i + 32] for i in range(0, len(keys), 32))


def _mark_shared(c: Any, b: int, since: int) -> None:
    """Record the source ids of rows after ``since`` that another row holds too:
    one probe per row into each source tier (ids of one job are near each other
    in the index, so the old tier's pages are read once per batch, not per row)."""
    c.execute(
        f"INSERT OR IGNORE INTO {_SHARED}(src) SELECT {_SRC_N} FROM candidates n "
        f"WHERE n.seq > ?1 AND (EXISTS (SELECT 1 FROM candidates o WHERE {_SRC_O} = "
        f"{_SRC_N} AND o.seq <= {b}) OR EXISTS (SELECT 1 FROM candidates o WHERE "
        f"{_SRC_O} = {_SRC_N} AND o.seq > {b} AND o.seq <> n.seq))",
        (since,),
    )


def _tiers(cols: str, b: int, cond: str) -> str:
    """``cols`` of the rows matching ``cond`` (which names ``kp``), both tiers."""
    return (
        f"SELECT {cols} FROM candidates WHERE seq <= {b} AND {cond} UNION ALL "
        f"SELECT {cols} FROM candidates WHERE seq > {b} AND {cond}"
    )


def _existing_sql(b: int) -> str:
    # Positions come back, not ids: small integers parse faster than 64-character
    # strings. ?1 is the JSON array of prefixes, ?2 the blob of 32-byte keys.
    part = (
        "SELECT j.key FROM json_each(?1) j JOIN candidates c ON c.kp = j.value "
        "AND c.seq {op} " + str(b) + " AND c.key = substr(?2, 32 * j.key + 1, 32)"
    )
    return part.format(op="<=") + " UNION ALL " + part.format(op=">")


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


def candidate_kp(key: bytes) -> int:
    """The signed 64-bit prefix ``kp`` of a candidate ``key``.

    A 32-byte key is a sha256 digest: its first 8 bytes (big-endian). Other keys
    (non-content ids, often sharing long prefixes) → the first 8 bytes of their
    sha256, so prefixes stay spread out. Different keys may share a ``kp``.
    """
    raw = key if len(key) == 32 else hashlib.sha256(key).digest()
    return int.from_bytes(raw[:8], "big", signed=True)


def _kps(keys: bytes) -> builtins.list[int]:
    """:func:`candidate_kp` of each 32-byte key in a blob of digests."""
    kps: builtins.list[int] = np.frombuffer(keys, ">i8").reshape(-1, 4)[:, 0].tolist()
    return kps


def _boundary(c: Any) -> int:
    return int(c.execute("SELECT boundary FROM candidate_tiers").fetchone()[0])


def _source_tiers(c: Any, b: int) -> None:
    c.execute("DROP INDEX IF EXISTS candidates_src_old")
    c.execute("DROP INDEX IF EXISTS candidates_src_new")
    c.execute(f"CREATE INDEX candidates_src_old ON candidates({_SRC}) WHERE seq <= {b}")
    c.execute(f"CREATE INDEX candidates_src_new ON candidates({_SRC}) WHERE seq > {b}")


def _rebuild_tiers(c: Any, b: int) -> None:
    """Old tier = rows up to ``b`` (one sorted index build), new tier empty."""
    c.execute("DROP INDEX IF EXISTS candidates_kp_old")
    c.execute("DROP INDEX IF EXISTS candidates_kp_new")
    c.execute(f"CREATE INDEX candidates_kp_old ON candidates(kp) WHERE seq <= {b}")
    c.execute(f"CREATE INDEX candidates_kp_new ON candidates(kp) WHERE seq > {b}")
    _source_tiers(c, b)
    c.execute("UPDATE candidate_tiers SET boundary = ?", (b,))


def _top(c: Any) -> int:
    return int(c.execute("SELECT COALESCE(MAX(seq), 0) FROM candidates").fetchone()[0])


def ensure_tiers(c: Any) -> None:
    """Build the tier indexes if a migration left them out (boundary −1, or the
    source tiers missing after the migration to schema 7), and then record the
    shared source ids: the old tier's from one ordered scan of its index, the
    new tier's by probing."""
    b = _boundary(c)
    if (
        b >= 0
        and c.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'candidates_src_old'"
        ).fetchone()
    ):
        return
    if b < 0:
        b = _top(c)
        _rebuild_tiers(c, b)
    else:
        _source_tiers(c, b)
    c.execute(
        f"INSERT OR IGNORE INTO {_SHARED}(src) SELECT {_SRC} AS s FROM candidates "
        f"WHERE seq <= {b} GROUP BY s HAVING COUNT(*) > 1"
    )
    _mark_shared(c, b, b)


def _maybe_merge(c: Any, b: int) -> None:
    top = _top(c)
    if top - b >= max(TIER_MIN_ROWS, b // 2):
        _rebuild_tiers(c, top)


def _digest_keys(ids: Sequence[str]) -> bytes | None:
    """The keys of ``ids`` as one blob, or None unless all are content ids."""
    text = "".join(ids)
    if len(text) != 64 * len(ids) or _NOT_HEX.search(text) is not None:
        return None
    if set(map(len, ids)) != {64}:
        return None
    return bytes.fromhex(text)


def _cand_row(a: Sequence[Any]) -> CandidateRow:
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
    def _insert(self, rows: Iterable[Sequence[Any]], checked: int | None = None) -> int:
        """Insert ``(key, kp, 14 fields)`` rows whose key is new; returns rows added."""
        with self._db.tx() as c:
            b, top = _boundary(c), _top(c)
            sql = _insert_sql(b, _probe_old(b, checked))
            n0 = c.total_changes
            for batch in _batches(rows):
                c.executemany(sql, batch)
            added: int = c.total_changes - n0
            if added:
                _mark_shared(c, b, top)
            _maybe_merge(c, b)
        return added

    def defer_indexes(self, adding: int) -> bool:
        with self._db.tx() as c:
            if adding < _DEFER_SHARE * (_top(c) + adding):
                return False
            for name in _DEFERRABLE:
                c.execute(f"DROP INDEX IF EXISTS {name}")
        return True

    def restore_indexes(self) -> None:
        with self._db.tx() as c:
            for name, on in _DEFERRABLE.items():
                c.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {on}")

    def missing_indexes(self) -> builtins.list[str]:
        def run(c: Any) -> builtins.list[str]:
            there = {
                r[0]
                for r in c.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND "
                    "tbl_name = 'candidates'"
                )
            }
            return [n for n in _DEFERRABLE if n not in there]

        return self._db.read(run)

    def existing_mark(self, item_ids: Iterable[str]) -> tuple[set[str], int | None]:
        ids = builtins.list(item_ids)
        return self._existing(ids, mark=True)

    def add(self, rows: Iterable[CandidateRow], *, checked: int | None = None) -> int:
        def data() -> Iterator[tuple[Any, ...]]:
            for r in rows:
                key = candidate_key(r.id)
                yield (
                    key,
                    candidate_kp(key),
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

        return self._insert(data(), checked)

    def add_tuples(
        self, rows: Iterable[tuple[Any, ...]], *, checked: int | None = None
    ) -> int:
        # extra (the 15th field) is the only column needing conversion
        def data() -> Iterator[tuple[Any, ...]]:
            for r in rows:
                key = candidate_key(r[0])
                extra = None if r[14] is None else _extra(r[14])
                yield (key, candidate_kp(key), *r[1:14], extra)

        return self._insert(data(), checked)

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
        checked: int | None = None,
    ) -> int:
        where: dict[str, Any] = {"source": source, "width": width, "height": height}
        where["array_name"] = array_name
        keys = _digest_keys(ids)
        if keys is None or len(set(ids)) != len(ids):  # the general path
            return super().add_columns(
                ids, refs, class_ids, keywords, array_rows, **where, checked=checked
            )
        if len(ids) != len(refs) or len(ids) != len(array_rows):
            raise ValueError(
                f"{len(ids)} ids but {len(refs)} refs and {len(array_rows)} array rows."
            )
        if _consecutive(array_rows):
            insert = self._prepared(keys, refs, class_ids, keywords, where)
            return insert(array_rows, checked)
        cols = zip(refs, class_ids, keywords, _kps(keys), array_rows, strict=True)
        data = json.dumps(
            builtins.list(cols), ensure_ascii=False, separators=(",", ":")
        )
        return self._insert_json(keys, data, where, None, checked)

    def prepare_columns(
        self,
        ids: Sequence[str],
        refs: Sequence[str],
        class_ids: Sequence[int | None],
        keywords: Sequence[str | None],
        *,
        source: str,
        width: int,
        height: int,
        array_name: str,
    ) -> Callable[[Sequence[int], int | None], int]:
        where: dict[str, Any] = {"source": source, "width": width, "height": height}
        where["array_name"] = array_name
        keys = _digest_keys(ids)
        if keys is None or len(set(ids)) != len(ids):  # the general path
            return super().prepare_columns(ids, refs, class_ids, keywords, **where)
        if len(ids) != len(refs):
            raise ValueError(f"{len(ids)} ids but {len(refs)} refs.")
        prepared = self._prepared(keys, refs, class_ids, keywords, where)

        def insert(array_rows: Sequence[int], checked: int | None = None) -> int:
            if _consecutive(array_rows) and len(array_rows) == len(ids):
                return prepared(array_rows, checked)
            return self.add_columns(
                ids, refs, class_ids, keywords, array_rows, **where, checked=checked
            )

        return insert

    def _prepared(
        self,
        keys: bytes,
        refs: Sequence[str],
        class_ids: Sequence[int | None],
        keywords: Sequence[str | None],
        where: dict[str, Any],
    ) -> Callable[[range, int | None], int]:
        """Distinct content ids' rows encoded now; ``insert(rows, checked)``
        for consecutive array rows writes them."""
        cols = builtins.list(zip(refs, class_ids, keywords, _kps(keys), strict=True))
        data = json.dumps(cols, ensure_ascii=False, separators=(",", ":"))

        def insert(array_rows: range, checked: int | None) -> int:
            first = array_rows[0] if len(array_rows) else 0
            return self._insert_json(keys, data, where, first, checked)

        return insert

    def _insert_json(
        self,
        keys: bytes,
        data: str,
        where: dict[str, Any],
        first: int | None,
        checked: int | None,
    ) -> int:
        """One statement inserting the JSON rows whose key is new (array rows
        listed in the JSON when ``first`` is None, else ``first`` onwards)."""
        if not keys:
            return 0
        consts = (where["source"], where["width"], where["height"], where["array_name"])
        with self._db.tx() as c:
            b, top = _boundary(c), _top(c)
            n0 = c.total_changes
            old = _probe_old(b, checked)
            # not old: checked is not None
            new = old or not _none_since(c, checked or 0, top, keys)
            sql = _column_insert_sql(b, old, first is None, new)
            extra = () if first is None else (first,)
            c.execute(sql, (*consts, keys, data, *extra))
            added = c.total_changes - n0
            if added:
                _mark_shared(c, b, top)
            _maybe_merge(c, b)
        return int(added)

    def get(self, item_id: str) -> CandidateRow:
        key = candidate_key(item_id)

        def run(c: Any) -> Any:
            sql = _tiers(_CAND_COLS, _boundary(c), "kp = ?1 AND key = ?2")
            return c.execute(sql, (candidate_kp(key), key)).fetchone()

        row = self._db.read(run)
        if row is None:
            raise NotFoundError(f"candidate {item_id!r} is not in the project.")
        return _cand_row(row)

    def _fetch(self, cols: str, ids: Iterable[str]) -> Iterator[Any]:
        for batch in _batches(ids, 900):

            def run(c: Any, batch: Sequence[str] = batch) -> builtins.list[Any]:
                return builtins.list(self._fetch_in(c, cols, batch))

            yield from self._db.read(run)

    @staticmethod
    def _fetch_in(c: Any, cols: str, ids: Iterable[str]) -> Iterator[Any]:
        """``cols`` of the stored ones among ``ids``, read on connection ``c``."""
        b = _boundary(c)
        for batch in _batches(ids, 900):
            keys = [candidate_key(i) for i in batch]
            kps = [candidate_kp(k) for k in keys]
            n = len(batch)  # numbered: the condition appears once per tier
            kp_marks = ",".join(f"?{i}" for i in range(1, n + 1))
            key_marks = ",".join(f"?{i}" for i in range(n + 1, 2 * n + 1))
            cond = f"kp IN ({kp_marks}) AND key IN ({key_marks})"
            yield from c.execute(_tiers(cols, b, cond), (*kps, *keys)).fetchall()

    def get_many(self, item_ids: Sequence[str]) -> list[CandidateRow]:
        found = {r[0]: r for r in self._fetch(_CAND_COLS, item_ids)}
        missing = [i for i in item_ids if i not in found]
        if missing:
            raise NotFoundError(
                f"{len(missing)} candidate(s) are not in the project, e.g. {missing[0]!r}."
            )
        return [_cand_row(found[i]) for i in item_ids]

    def existing(self, item_ids: Iterable[str]) -> set[str]:
        return self._existing(builtins.list(item_ids), mark=False)[0]

    def _existing(self, ids: list[str], mark: bool) -> tuple[set[str], int | None]:
        # Read on the snapshot connection: never waits for a writer (the ingest's
        # commit thread). Content ids: one query, keys cut from one blob. The
        # mark is the highest seq of the state read, in the same transaction.
        keys = _digest_keys(ids) if ids else None
        kps = "[]" if keys is None else json.dumps(_kps(keys), separators=(",", ":"))

        def run(c: Any) -> tuple[set[str], int | None]:
            if not ids:
                found: set[str] = set()
            elif keys is None:
                found = {r[0] for r in self._fetch_in(c, _ID, ids)}
            else:
                sql = _existing_sql(_boundary(c))
                found = {ids[r[0]] for r in c.execute(sql, (kps, keys))}
            return found, _top(c) if mark else None

        if not ids and not mark:
            return set(), None
        return self._db.snapshot_read(run)

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
        got = cached_class_counts(self._db.read, self._order_cache())
        if got is not None:  # no pass over the class index
            return got
        rows = self._db.rows(
            "SELECT class_id, COUNT(*) FROM candidates GROUP BY class_id"
        )
        return {c: int(n) for c, n in rows}

    def count_by_keyword(
        self, keywords: Iterable[str]
    ) -> dict[tuple[str, int | None], int]:
        keywords = builtins.list(keywords)
        got = cached_keyword_class_counts(self._db.read, self._order_cache(), keywords)
        if got is not None:  # no table look-up per row
            return got
        rows = self._db.rows(
            "SELECT keyword, class_id, COUNT(*) FROM candidates WHERE keyword IN "
            "(SELECT value FROM json_each(?)) GROUP BY keyword, class_id",
            (json.dumps(sorted(set(keywords))),),
        )
        return {(kw, c): int(n) for kw, c, n in rows}

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

    def array_names(self) -> set[str]:
        rows = self._db.rows(
            "SELECT DISTINCT array_name FROM candidates WHERE array_name IS NOT NULL"
        )
        return {str(r[0]) for r in rows}

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

    def columns(
        self,
        names: Sequence[str],
        *,
        ids: Iterable[str] | None = None,
        has_class: bool = False,
    ) -> dict[str, builtins.list[Any]]:
        _check_columns(names)
        sel = ", ".join(_ID if n == "id" else n for n in names)
        out: builtins.list[builtins.list[Any]] = [[] for _ in names]
        if ids is not None:
            wanted = builtins.list(dict.fromkeys(ids))
            found = {r[0]: r for r in self._fetch(f"{_ID}, class_id, {sel}", wanted)}
            for i in wanted:
                r = found.get(i)
                if r is not None and not (has_class and r[1] is None):
                    for col, v in zip(out, r[2:], strict=True):
                        col.append(v)
            return dict(zip(names, out, strict=True))
        # "+class_id": filter while walking the rowid range, never through the
        # class index (which would read every row, then sort by seq)
        cond = " AND +class_id IS NOT NULL" if has_class else ""
        sql = f"SELECT seq, {sel} FROM candidates WHERE seq > ?{cond} ORDER BY seq LIMIT ?"
        shared: builtins.list[dict[Any, Any] | None] = [
            {} if n in _FEW_VALUES else None for n in names
        ]
        last = 0
        # The cyclic GC would walk the growing lists after every batch (a full
        # collection each time the batch's tuples survive): 68 s instead of 13 s
        # at ten million rows. Nothing here makes a cycle.
        with no_cyclic_gc():
            while rows := self._db.rows(sql, (last, _SCAN_BATCH)):
                last = rows[-1][0]
                cols = builtins.list(zip(*rows, strict=True))
                for col, vals, one in zip(out, cols[1:], shared, strict=True):
                    # one string object per distinct keyword or source, not per row
                    col.extend(
                        vals if one is None else [one.setdefault(v, v) for v in vals]
                    )
        return dict(zip(names, out, strict=True))

    def id_orders(self) -> dict[int, np.ndarray]:

        return class_id_orders(self._db.read, self._order_cache())

    def update_id_orders(self) -> None:

        path = self._order_cache()
        if path is not None:
            update_cache(self._db.read, path)

    def _order_cache(self) -> Path | None:
        path = self._db.path
        return None if path is None else path.with_name(path.name + "-idorder")

    def ids_at(self, handles: Sequence[int]) -> builtins.list[str]:

        return ids_at(self._db.read, handles)

    def locate(self, item_ids: Iterable[str]) -> dict[str, tuple[int, int | None]]:

        return locate(self._fetch, builtins.list(dict.fromkeys(item_ids)))

    def source_groups(self) -> builtins.list[builtins.list[str]]:
        # Sparse: the shared source ids are recorded at insert (almost always
        # none), their candidates found through the source tiers.
        def run(c: Any) -> Any:
            # the shared ids first (CROSS JOIN), then a probe into each source
            # tier; "+h.src" drops the column's TEXT affinity, which the index
            # expression lacks (with it SQLite would not use the index)
            b = _boundary(c)
            part = (
                f"SELECT h.src, {_ID} FROM {_SHARED} h CROSS "
                f"JOIN candidates o WHERE {_SRC_O} = +h.src AND o.seq {{op}} {b}"
            )
            sql = part.format(op="<=") + " UNION ALL " + part.format(op=">")
            return c.execute(sql).fetchall()

        groups: dict[str, builtins.list[str]] = {}
        for s, cid in self._db.read(run):
            groups.setdefault(s, []).append(cid)
        return sorted(sorted(v) for v in groups.values())
