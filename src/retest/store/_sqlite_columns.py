"""Candidates as arrays, read in bulk: what a columnar sampling pool needs.

A candidate's *handle* is its ``seq`` (row number). Reading ten million rows
through the ``sqlite3`` module costs a tuple and several objects per row; here
SQLite formats a whole range of rows into one string with ``group_concat`` and
numpy parses it, so no Python object is made per row.

Content ids (64 hex digits, stored as their 32 digest bytes) sort as their
keys do, and a key's first 8 bytes are ``kp`` (signed): sorting ``kp`` as
unsigned gives the id order, and rows with equal ``kp`` are ordered by their
full ids. A class holding any other id is ordered by its id strings instead.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.store import _idorder_cache as _cache

__all__ = [
    "cache_is_current",
    "cached_class_counts",
    "cached_keyword_class_counts",
    "class_id_orders",
    "ids_at",
    "locate",
    "update_cache",
]


# The id, decoded from the key (inverse of candidate_key): the SQL every candidate query selects.
_ID = (
    "CASE WHEN length(key) = 32 THEN lower(hex(key)) "
    "WHEN substr(key, 1, 2) = X'FFFF' THEN CAST(substr(key, 3) AS TEXT) "
    "ELSE CAST(substr(key, 2) AS TEXT) END"
)


def _ints(text: str | None, width: int) -> NDArray[np.int64]:
    if not text:
        return np.zeros((0, width), np.int64)
    return np.fromstring(text, dtype=np.int64, sep=" ").reshape(-1, width)


def class_id_orders(
    read: Any, cache: Path | None = None
) -> dict[int, NDArray[np.int64]]:
    """``class_id → handles of its candidates in id order`` (classless left out).

    ``read(fn)`` runs ``fn(connection)`` in one read transaction. ``cache``: a
    file for :mod:`retest.store._idorder_cache` (used while the table is
    unchanged, extended by the rows appended since, else rebuilt).

    Without a usable cache, indexes only and the table once for one column:
    each class's rows from the class index; whether any classed row has a
    non-content id (then every class is sorted by its id strings and nothing is
    cached); else every row's ``kp`` and handle in ``kp`` order from the two
    tier indexes, range by range (unsigned order), so the id order comes
    sorted out of SQLite.
    """
    got, new = _current(read, cache, want=True)
    if new is not None:
        _cache.save(cache, new)
    return got


def update_cache(read: Any, cache: Path) -> None:
    """Bring the id-order cache ``cache`` up to date with the table (extended
    by the appended rows, or rebuilt), as :func:`class_id_orders` would, so its
    next reader finds it ready. Nothing is cached when some classed id is not
    a content id. ``OSError`` when the file cannot be written."""
    _, new = _current(read, cache, want=False)
    if new is not None:
        _cache.write(cache, new)


def cache_is_current(read: Any, cache: Path | None) -> bool:
    """Whether ``cache`` is a valid id-order cache of the table as it is now."""
    return _matching(read, cache) is not None


def _current(
    read: Any, cache: Path | None, *, want: bool
) -> tuple[dict[int, NDArray[np.int64]], _cache.IdOrders | None]:
    """The id orders and the cache content to write (None: the cache is
    current, or nothing can be cached). Without ``want`` the orders of classes
    holding non-content ids are not computed (an empty dict instead)."""
    old = _cache.load(cache)

    def run(c: Any) -> tuple[tuple[int, int], Any, Any]:
        st = _state(c)
        if old is not None and (old.top, old.top_kp) == st:
            return st, "same", None
        if old is not None and _appended(c, old, st):
            tail = c.execute(
                "SELECT seq, class_id, kp, length(key) = 32 FROM candidates "
                "WHERE seq > ? AND class_id IS NOT NULL",
                (old.top,),
            ).fetchall()
            if all(r[3] for r in tail):
                return st, "tail", tail
        return st, "full", _full(c)

    st, how, got = read(run)
    if how == "same":
        assert old is not None
        return old.as_dict(), None
    if how == "tail":
        assert old is not None
        new = _merge(read, old, got, st)
    else:
        seqs, ordered = got
        if ordered is None:  # some ids are not content ids
            if not want:
                return {}, None
            return {k: _text_order(read, s) for k, s in seqs.items()}, None
        order, kp = ordered
        new = _split(read, seqs, order, kp, st)
    return new.as_dict(), new


def _state(c: Any) -> tuple[int, int]:
    """(last seq, kp of the last row): what a cache was read from."""
    row = c.execute(
        "SELECT seq, kp FROM candidates WHERE seq = (SELECT MAX(seq) FROM candidates)"
    ).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def _appended(c: Any, old: _cache.IdOrders, st: tuple[int, int]) -> bool:
    """Rows were only appended since ``old`` was read (its last row is there)."""
    if old.top > st[0]:
        return False
    row = c.execute("SELECT kp FROM candidates WHERE seq = ?", (old.top,)).fetchone()
    return not old.top or (row is not None and int(row[0]) == old.top_kp)


def _matching(read: Any, cache: Path | None) -> tuple[_cache.IdOrders, int] | None:
    """The cache at ``cache`` and the number of classless rows, when the cache
    was read from the table as it is now; else None."""
    old = _cache.load(cache)
    if old is None:
        return None

    def run(c: Any) -> int | None:
        if (old.top, old.top_kp) != _state(c):
            return None
        q = "SELECT COUNT(*) FROM candidates WHERE class_id IS NULL"
        return int(c.execute(q).fetchone()[0])

    n = read(run)
    return None if n is None else (old, n)


def cached_class_counts(read: Any, cache: Path | None) -> dict[int | None, int] | None:
    """``class_id → candidates`` from a cache that matches the table (the
    classless counted through the class index), else None."""
    got = _matching(read, cache)
    if got is None:
        return None
    old, n = got
    out: dict[int | None, int] = {None: n} if n else {}
    out.update((k, len(h)) for k, h in zip(old.classes, old.handles, strict=True))
    return {k: v for k, v in out.items() if v}


def cached_keyword_class_counts(
    read: Any, cache: Path | None, keywords: Collection[str]
) -> dict[tuple[str, int | None], int] | None:
    """``(keyword, class_id) → candidates`` of ``keywords`` (classless: None),
    from one grouped read of the keyword index and the cache's classes; None
    when the cache does not match the table.

    The index holds each row's seq (the rowid) but not its class: grouping by
    class in SQL looks every row up in the table, random reads that took 16 s
    for 1 M candidates of 100 keywords on a cold cache. The id-order cache
    already holds every classed row's seq per class."""
    old = _cache.load(cache)
    if old is None:
        return None

    def run(c: Any) -> list[Any] | None:
        if (old.top, old.top_kp) != _state(c):
            return None
        return list(  # covered by candidates_keyword: no table read
            c.execute(
                "SELECT keyword, group_concat(seq, ' ') FROM candidates WHERE keyword "
                "IN (SELECT value FROM json_each(?)) GROUP BY keyword",
                (json.dumps(sorted(set(keywords))),),
            )
        )

    rows = read(run)
    if rows is None:
        return None
    code = np.full(old.top + 1, -1, np.int64)  # seq → class id, -1: classless
    for k, h in zip(old.classes, old.handles, strict=True):
        code[h] = k
    out: dict[tuple[str, int | None], int] = {}
    for kw, text in rows:
        got, n = np.unique(code[_ints(text, 1)[:, 0]], return_counts=True)
        for k, m in zip(got.tolist(), n.tolist(), strict=True):
            out[(kw, None if k < 0 else k)] = m
    return out


def _full(c: Any) -> tuple[dict[int, NDArray[np.int64]], Any]:
    classes = [
        int(r[0])
        for r in c.execute(
            "SELECT class_id FROM candidates WHERE class_id IS NOT NULL "
            "GROUP BY class_id"
        )
    ]
    seqs = {
        k: _ints(
            c.execute(
                "SELECT group_concat(seq, ' ') FROM candidates WHERE class_id = ?",
                (k,),
            ).fetchone()[0],
            1,
        )[:, 0]
        for k in classes
    }
    other = c.execute(
        "SELECT 1 FROM candidates WHERE length(key) <> 32 "
        "AND +class_id IS NOT NULL LIMIT 1"
    ).fetchone()
    if other is not None or not seqs:
        return seqs, None
    return seqs, _kp_order(c)


def _split(
    read: Any,
    seqs: dict[int, NDArray[np.int64]],
    order: NDArray[np.int64],
    kp: NDArray[np.uint64],
    st: tuple[int, int],
) -> _cache.IdOrders:
    """The global id order cut into each class's."""
    top = max(
        int(order.max()) if len(order) else 0, *(int(s.max()) for s in seqs.values())
    )
    code = np.full(top + 1, -1, np.int32)
    for i, s in enumerate(seqs.values()):
        code[s] = i
    of = code[order]
    hs, ps = [], []
    for i in range(len(seqs)):
        mine = of == i
        hs.append(_break_ties(read, order[mine], kp[mine]))
        ps.append(kp[mine])
    return _cache.IdOrders(*st, list(seqs), hs, ps)


def _merge(
    read: Any, old: _cache.IdOrders, tail: list[Any], st: tuple[int, int]
) -> _cache.IdOrders:
    """``old`` with the appended rows ``tail`` (seq, class, kp, …) merged in."""
    t = np.array([r[:3] for r in tail], np.int64).reshape(-1, 3)
    have = dict(zip(old.classes, zip(old.handles, old.kps, strict=True), strict=True))
    classes = sorted(set(old.classes) | set(t[:, 1].tolist()))
    hs, ps = [], []
    for k in classes:
        mine = t[t[:, 1] == k]
        h0, p0 = have.get(k, (np.zeros(0, np.int64), np.zeros(0, np.uint64)))
        h = np.concatenate([np.asarray(h0), mine[:, 0]])
        p = np.concatenate([np.asarray(p0), mine[:, 2].astype(np.uint64)])
        o = np.argsort(p, kind="stable")
        hs.append(_break_ties(read, h[o], p[o]))
        ps.append(p[o])
    return _cache.IdOrders(*st, classes, hs, ps)


_RANGES = 64  # kp ranges per pass: one string of ~30 bytes per row and range


def _kp_order(c: Any) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Every row's handle and ``kp`` (as unsigned), in unsigned ``kp`` order
    (rows of equal ``kp`` in any order), read from the two tier indexes."""
    b = int(c.execute("SELECT boundary FROM candidate_tiers").fetchone()[0])
    # a partial index is used only when the query repeats its condition
    tiers = (
        [f"INDEXED BY candidates_kp_old WHERE seq <= {b}",
         f"INDEXED BY candidates_kp_new WHERE seq > {b}"]
        if b >= 0
        else ["WHERE 1"]
    )  # fmt: skip
    step = (1 << 64) // _RANGES
    seq_parts: list[NDArray[np.int64]] = []
    kp_parts: list[NDArray[np.uint64]] = []
    for r in range(_RANGES):
        lo = r * step  # unsigned bounds, as the signed kp they are stored as
        hi = (1 << 64) if r == _RANGES - 1 else lo + step
        slo = lo - (1 << 64) if lo >= 1 << 63 else lo
        shi = hi - 1 - (1 << 64) if hi - 1 >= 1 << 63 else hi - 1
        runs = [
            _ints(
                c.execute(
                    "SELECT group_concat(kp || ' ' || seq, ' ') FROM (SELECT kp, "
                    f"seq FROM candidates {t} AND kp BETWEEN ? AND ? ORDER BY kp)",
                    (slo, shi),
                ).fetchone()[0],
                2,
            )
            for t in tiers
        ]
        both = np.concatenate(runs) if len(runs) > 1 else runs[0]
        k = both[:, 0].astype(np.uint64)
        if len(runs) > 1 and len(runs[1]) and len(runs[0]):  # merge the two tiers
            o = np.argsort(k, kind="stable")
            both, k = both[o], k[o]
        seq_parts.append(both[:, 1].copy())
        kp_parts.append(k)
    return np.concatenate(seq_parts), np.concatenate(kp_parts)


def _text_order(read: Any, seqs: NDArray[np.int64]) -> NDArray[np.int64]:
    """``seqs`` sorted by their id strings (classes holding non-content ids)."""
    got = ids_at(read, seqs)
    order = sorted(range(len(seqs)), key=got.__getitem__)
    return seqs[np.array(order, np.int64)] if order else seqs


def _break_ties(
    read: Any, seqs: NDArray[np.int64], kps: NDArray[np.uint64]
) -> NDArray[np.int64]:
    """Order runs of equal ``kp`` by the full id."""
    if len(kps) < 2:
        return seqs
    eq = kps[1:] == kps[:-1]
    if not eq.any():
        return seqs
    tied = np.flatnonzero(np.concatenate([[False], eq]) | np.concatenate([eq, [False]]))
    ids = ids_at(read, seqs[tied])
    out = seqs.copy()
    start = 0
    while start < len(tied):
        end = start + 1
        while end < len(tied) and kps[tied[end]] == kps[tied[start]]:
            end += 1
        group = sorted(range(start, end), key=ids.__getitem__)
        out[tied[start:end]] = seqs[tied[group]]
        start = end
    return out


def ids_at(read: Any, seqs: Sequence[int] | NDArray[np.int64]) -> list[str]:
    """The ids of the rows ``seqs``, in the same order (every seq must exist)."""
    want = [int(s) for s in np.asarray(seqs, np.int64).tolist()]
    sql = (
        f"SELECT seq, {_ID} FROM candidates WHERE seq IN "
        "(SELECT value FROM json_each(?))"
    )

    def run(c: Any) -> dict[int, str]:
        found: dict[int, str] = {}
        for i in range(0, len(want), 100_000):
            found.update(c.execute(sql, (json.dumps(want[i : i + 100_000]),)))
        return found

    found = read(run)
    return [found[s] for s in want]


def locate(fetch: Any, ids: Collection[str]) -> dict[str, tuple[int, int | None]]:
    """``id → (seq, class_id)`` of those ``ids`` that are candidates.

    ``fetch(cols, ids)`` yields rows of ``cols`` for the stored ones among ``ids``
    (the repository's look-up through the key index)."""
    return {r[0]: (int(r[1]), r[2]) for r in fetch(f"{_ID}, seq, class_id", list(ids))}
