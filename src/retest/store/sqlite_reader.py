"""Read-only views of a project store on their own SQLite connections.

A :class:`~retest.store.sqlite.SQLiteStore` serialises everything through one
connection and its lock, so a long read waits behind every write and the other
way round. In WAL mode SQLite lets any number of readers run next to one
writer, each on its own snapshot, but only when each reader has its own
connection. The web app gives each worker thread one :class:`SQLiteReadStore`
and keeps writes on the project's store.

:func:`table_fingerprint` and :func:`external_data_version` let a cache notice
changes without reading the changed rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retest.store.sqlite import _DB, REPOS, SQLiteStore

__all__ = [
    "SQLiteReadStore",
    "checkpoint",
    "external_data_version",
    "external_data_version_if_idle",
    "set_autocheckpoint",
    "table_fingerprint",
]


class SQLiteReadStore(SQLiteStore):
    """The store's read methods on a private ``query_only`` connection.

    Opens an existing, already migrated database (the project's store migrated
    it); never writes, so opening it neither waits for nor disturbs a writer.
    Write methods raise ``sqlite3.OperationalError`` (attempt to write a
    readonly database).
    """

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self._db = _DB(self.path, timeout)
        self._db.conn.execute("PRAGMA query_only = ON")
        # commits of the writer invalidate this connection's page cache; a memory
        # map makes re-reading the changed pages cheap
        self._db.conn.execute("PRAGMA mmap_size = 1073741824")
        for name, cls in REPOS.items():
            setattr(self, name, cls(self._db))


_COUNTED = frozenset(
    {
        "classes",
        "keywords",
        "stages",
        "artifacts",
        "predictions",
        "revisions",
        "review_states",
    }
)
"""Small tables rows are replaced in or deleted from: their row count is read too."""


def table_fingerprint(
    store: SQLiteStore, *, skip: tuple[str, ...] = ()
) -> tuple[Any, ...]:
    r"""``(table, max rowid[, row count])`` of every table not in ``skip``.

    Appends raise the max rowid and ``INSERT OR REPLACE`` gives the row a new
    rowid; the small tables rows are deleted from also report their count. Each
    part is one index lookup, so this is cheap at any size; all parts are read by
    one statement (one snapshot, one trip into SQLite). Not seen: in-place
    ``UPDATE``\ s and deletes in the big tables, which only other processes (CLI
    commands) make: see :func:`external_data_version`.
    """
    db = store._db
    with db.lock:
        names = [
            r[0]
            for r in db.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
            if r[0] not in skip and not r[0].startswith("sqlite_")
        ]
        parts = [
            f'(SELECT MAX(rowid) FROM "{n}")'
            + (f', (SELECT COUNT(*) FROM "{n}")' if n in _COUNTED else "")
            for n in names
        ]
        row = db.conn.execute(f"SELECT {', '.join(parts)}").fetchone() if parts else ()
    out: list[tuple[Any, ...]] = []
    values = iter(row)
    for n in names:
        out.append(
            (n, next(values), next(values)) if n in _COUNTED else (n, next(values))
        )
    return tuple(out)


def external_data_version(store: SQLiteStore) -> int:
    """SQLite's ``data_version`` of the store's own connection.

    It changes whenever *another* connection (another process: a CLI command)
    commits, and never for the store's own writes; a cache kept current from the
    writes it sees can use it to notice everything else, in-place updates
    included.
    """
    with store._db.lock:
        return int(store._db.conn.execute("PRAGMA data_version").fetchone()[0])


def external_data_version_if_idle(store: SQLiteStore) -> int | None:
    """:func:`external_data_version`, or None while the store's connection is
    busy (its own write is running) instead of waiting for it."""
    if not store._db.lock.acquire(blocking=False):
        return None
    try:
        return int(store._db.conn.execute("PRAGMA data_version").fetchone()[0])
    finally:
        store._db.lock.release()


def checkpoint(store: SQLiteStore) -> None:
    """Copy the write-ahead log into the database file (``PASSIVE``: waits for
    no reader or writer; a read-only store may run it)."""
    store._db.rows("PRAGMA wal_checkpoint(PASSIVE)")


def set_autocheckpoint(store: SQLiteStore, pages: int) -> None:
    """Let the store's own commits checkpoint only once the log exceeds ``pages``
    pages (SQLite's default, 1,000, makes about every tenth small write wait
    for one); for a process that checkpoints with :func:`checkpoint` itself."""
    with store._db.lock:
        store._db.conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")
