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

from retest.store._sqlite_candidates import _ID

__all__ = ["class_id_orders", "ids_at", "locate"]

_CHUNK = 1 << 20  # rows per statement: one string of ~50 MB at most


def _ints(text: str | None, width: int) -> NDArray[np.int64]:
    if not text:
        return np.zeros((0, width), np.int64)
    return np.fromstring(text, dtype=np.int64, sep=" ").reshape(-1, width)


def class_id_orders(rows: Any) -> dict[int, NDArray[np.int64]]:
    """``class_id → handles of its candidates in id order`` (classless left out).

    ``rows`` runs a statement: ``rows(sql, params) -> list of tuples``.
    """
    top = int(rows("SELECT COALESCE(MAX(seq), 0) FROM candidates")[0][0])
    parts = []
    # per row: seq, class, kp, is-a-content-id; "+class_id" walks the rowid range
    sql = (
        "SELECT group_concat(seq || ' ' || class_id || ' ' || kp || ' ' || "
        "(length(key) = 32), ' ') FROM candidates WHERE seq > ? AND seq <= ? "
        "AND +class_id IS NOT NULL"
    )
    for lo in range(0, top, _CHUNK):
        parts.append(_ints(rows(sql, (lo, lo + _CHUNK))[0][0], 4))
    a = np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)
    del parts
    seq, cls, kp, content = a[:, 0], a[:, 1], a[:, 2], a[:, 3].astype(bool)
    del a
    out: dict[int, NDArray[np.int64]] = {}
    for k in np.unique(cls).tolist():
        mine = cls == k
        if not content[mine].all():
            out[k] = _text_order(rows, seq[mine])
            continue
        s, p = seq[mine], kp[mine].astype(np.uint64)
        order = np.argsort(p, kind="stable")
        s, p = s[order], p[order]
        out[k] = _break_ties(rows, s, p)
    return out


def _text_order(rows: Any, seqs: NDArray[np.int64]) -> NDArray[np.int64]:
    """``seqs`` sorted by their id strings (classes holding non-content ids)."""
    got = ids_at(rows, seqs)
    order = sorted(range(len(seqs)), key=got.__getitem__)
    return seqs[np.array(order, np.int64)] if order else seqs


def _break_ties(
    rows: Any, seqs: NDArray[np.int64], kps: NDArray[np.uint64]
) -> NDArray[np.int64]:
    """Order runs of equal ``kp`` by the full id."""
    if len(kps) < 2:
        return seqs
    eq = kps[1:] == kps[:-1]
    if not eq.any():
        return seqs
    tied = np.flatnonzero(np.concatenate([[False], eq]) | np.concatenate([eq, [False]]))
    ids = ids_at(rows, seqs[tied])
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


def ids_at(rows: Any, seqs: Sequence[int] | NDArray[np.int64]) -> list[str]:
    """The ids of the rows ``seqs``, in the same order (every seq must exist)."""
    want = [int(s) for s in np.asarray(seqs, np.int64).tolist()]
    found: dict[int, str] = {}
    for i in range(0, len(want), 100_000):
        found.update(
            rows(
                f"SELECT seq, {_ID} FROM candidates WHERE seq IN "
                "(SELECT value FROM json_each(?))",
                (json.dumps(want[i : i + 100_000]),),
            )
        )
    return [found[s] for s in want]


def locate(fetch: Any, ids: Collection[str]) -> dict[str, tuple[int, int | None]]:
    """``id → (seq, class_id)`` of those ``ids`` that are candidates.

    ``fetch(cols, ids)`` yields rows of ``cols`` for the stored ones among ``ids``
    (the repository's look-up through the key index)."""
    return {r[0]: (int(r[1]), r[2]) for r in fetch(f"{_ID}, seq, class_id", list(ids))}
