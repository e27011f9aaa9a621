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


_CHUNK = 1 << 20  # rows per statement: one string of ~50 MB at most


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

    ``read(fn)`` runs ``fn(connection)`` in one read transaction. Three cheap
    passes: each class's rows from the class index (covering, no table read),
    then ``kp`` of every classed row in row order (NULL for other ids, so a
    shorter list means some class holds them and is sorted by its id strings).
    """

    def run(c: Any) -> tuple[dict[int, NDArray[np.int64]], NDArray[np.int64]]:
        top = int(
            c.execute("SELECT COALESCE(MAX(seq), 0) FROM candidates").fetchone()[0]
        )
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
        parts = [
            _ints(
                c.execute(
                    "SELECT group_concat(CASE WHEN length(key) = 32 THEN kp END, ' ') "
                    "FROM candidates WHERE seq > ? AND seq <= ? "
                    "AND +class_id IS NOT NULL",
                    (lo, lo + _CHUNK),
                ).fetchone()[0],
                1,
            )[:, 0]
            for lo in range(0, top, _CHUNK)
        ]
        kp = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return seqs, kp

    seqs, kp = read(run)
    every = np.sort(np.concatenate(list(seqs.values()))) if seqs else kp
    out: dict[int, NDArray[np.int64]] = {}
    for k, s in seqs.items():
        if len(kp) != len(every):  # not all content ids
            out[k] = _text_order(read, s)
            continue
        p = kp[np.searchsorted(every, s)].astype(np.uint64)
        order = np.argsort(p, kind="stable")
        out[k] = _break_ties(read, s[order], p[order])
    return out


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
