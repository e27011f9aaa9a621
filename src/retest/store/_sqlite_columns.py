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
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["class_id_orders", "ids_at", "locate"]


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


def class_id_orders(read: Any) -> dict[int, NDArray[np.int64]]:
    """``class_id → handles of its candidates in id order`` (classless left out).

    ``read(fn)`` runs ``fn(connection)`` in one read transaction. Indexes only,
    the table is read once for one column: each class's rows from the class
    index; whether any classed row has a non-content id (then every class is
    sorted by its id strings); else every row's ``kp`` and handle in ``kp``
    order from the two tier indexes, range by range (unsigned order), so the
    id order comes sorted out of SQLite.
    """

    def run(c: Any) -> tuple[dict[int, NDArray[np.int64]], Any]:
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

    seqs, ordered = read(run)
    if ordered is None:  # some ids are not content ids
        return {k: _text_order(read, s) for k, s in seqs.items()}
    order, kp = ordered
    top = max(
        int(order.max()) if len(order) else 0, *(int(s.max()) for s in seqs.values())
    )
    code = np.full(top + 1, -1, np.int32)
    for i, s in enumerate(seqs.values()):
        code[s] = i
    of = code[order]
    out: dict[int, NDArray[np.int64]] = {}
    for i, k in enumerate(seqs):
        mine = of == i
        out[k] = _break_ties(read, order[mine], kp[mine])
    return out


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
