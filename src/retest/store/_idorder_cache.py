"""A derived cache of every class's id order, beside the database file.

Reading the id order of ten million candidates from SQLite takes seconds (the
class index, the ``kp`` tier indexes and one table pass); the order only changes
when candidates are added, and candidates are only ever appended (never updated
or deleted). The cache holds each class's handles in id order with their
``kp``, and the state it was read from: the last ``seq`` and the last row's
``kp`` (rows are never deleted, so no count is needed). It is used when the database still has that state, extended
when rows were only appended since (only the new rows are read and merged in),
and rebuilt otherwise. It is a plain file of int64 values, memory-mapped when
read, written atomically; a damaged or foreign file is ignored and replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from retest._atomic import atomic_write_bytes

__all__ = ["IdOrders", "load", "save", "write"]

_MAGIC = 0x52455445535449444F  # "RETESTIDO" (truncated to 64 bits below)
_HEAD = 6  # magic, version, top, kp of the top row, classes, rows
_VERSION = 2


@dataclass(frozen=True)
class IdOrders:
    """Per class (in ``classes`` order) its handles in id order and their ``kp``
    (as unsigned); ``top``/``top_kp``: the state they were read from."""

    top: int
    top_kp: int
    classes: list[int]
    handles: list[NDArray[np.int64]]
    kps: list[NDArray[np.uint64]]

    def as_dict(self) -> dict[int, NDArray[np.int64]]:
        return dict(zip(self.classes, self.handles, strict=True))


def _magic() -> int:
    return _MAGIC & ((1 << 63) - 1)


def load(path: Path | None) -> IdOrders | None:
    """The cache at ``path``, or None when absent or not a valid cache file."""
    if path is None or not path.is_file():
        return None
    try:
        a = np.memmap(path, dtype="<i8", mode="r")
    except (OSError, ValueError):
        return None
    if len(a) < _HEAD or int(a[0]) != _magic() or int(a[1]) != _VERSION:
        return None
    top, top_kp, k, n = (int(x) for x in a[2:_HEAD])
    if k < 0 or n < 0 or len(a) != _HEAD + k + (k + 1) + 2 * n:
        return None
    classes = a[_HEAD : _HEAD + k].tolist()
    off = np.asarray(a[_HEAD + k : _HEAD + 2 * k + 1])
    if off[0] != 0 or off[-1] != n or (np.diff(off) < 0).any():
        return None
    h0 = _HEAD + 2 * k + 1
    hs = a[h0 : h0 + n]
    ps = a[h0 + n : h0 + 2 * n].view(np.uint64)
    return IdOrders(
        top,
        top_kp,
        classes,
        [hs[off[i] : off[i + 1]] for i in range(k)],
        [ps[off[i] : off[i + 1]] for i in range(k)],
    )


def save(path: Path | None, orders: IdOrders) -> None:
    """:func:`write`, but a place that cannot be written is left alone (a
    cache: the next reader rebuilds it)."""
    if path is None:
        return
    try:
        write(path, orders)
    except OSError:
        pass


def write(path: Path, orders: IdOrders) -> None:
    """Write ``orders`` to ``path`` atomically: a temporary file in the same
    folder renamed over it, so a reader in another process maps either the old
    file or the new one, never a part; ``OSError`` when it cannot be written."""
    sizes = [len(h) for h in orders.handles]
    head = [_magic(), _VERSION, orders.top, orders.top_kp]
    parts = [
        np.array([*head, len(sizes), sum(sizes), *orders.classes], np.int64),
        np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64),
        *(np.asarray(h, np.int64) for h in orders.handles),
        *(np.asarray(p, np.uint64).view(np.int64) for p in orders.kps),
    ]
    data = np.concatenate(parts).astype("<i8")
    atomic_write_bytes(path, data.data.cast("B"), fsync=False)
