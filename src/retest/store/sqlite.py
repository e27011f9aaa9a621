"""SQLite implementation of the project store (``retest.db``).

One file, WAL journal, ``busy_timeout`` so several processes (an ingest, the web
app, a crowd poller) can write at once: every write is one ``BEGIN IMMEDIATE``
transaction, bulk inserts go through ``executemany``. The schema is versioned: the
``schema_version`` table holds the version and :data:`MIGRATIONS` are applied in
order when a store is opened (a database from a newer retest is refused).
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from retest.errors import StoreError
from retest.store._sqlite_candidates import _Candidates, candidate_key
from retest.store._sqlite_common import _batches
from retest.store._sqlite_decisions import (
    _Artifacts,
    _Blacklist,
    _NearDup,
    _Predictions,
    _Revisions,
    _Stages,
)
from retest.store._sqlite_items import (
    _Annotations,
    _Classes,
    _References,
    _Tasks,
)
from retest.store._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from retest.store.base import Store

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]


class _DB:
    """A connection plus a lock; ``tx()`` is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.lock = threading.RLock()
        self.conn = self._connect()
        self.conn.execute("PRAGMA journal_mode = WAL")
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(
            str(self.path), timeout=self.timeout, isolation_level=None,
            check_same_thread=False,
        )  # fmt: skip
        c.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        c.execute("PRAGMA synchronous = NORMAL")
        c.execute("PRAGMA foreign_keys = ON")
        # random 64-hex ids make index inserts cache-bound: a bigger page cache
        # roughly doubles bulk-ingest speed
        c.execute("PRAGMA cache_size = -65536")
        c.execute("PRAGMA temp_store = MEMORY")
        return c

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self.lock:
            return self.conn.execute(sql, params).fetchone()

    def snapshot_rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """:meth:`rows` on a second, read-only connection (last committed state).

        Does not wait for a transaction running on the main connection (WAL
        readers never block), e.g. the ingest's commit thread inserting the
        previous batch while the next batch is de-duplicated.
        """
        with self._read_lock:
            if self._reader is None:
                self._reader = self._connect()
                self._reader.execute("PRAGMA query_only = ON")
                # the writer's commits invalidate this connection's page cache;
                # reading the file through a memory map makes the re-reads cheap
                self._reader.execute("PRAGMA mmap_size = 1073741824")
            return self._reader.execute(sql, params).fetchall()

    def close(self) -> None:
        with self.lock, self._read_lock:
            if self._reader is not None:
                self._reader.close()
            self.conn.close()

    def append(self, table: str, sql: str, rows: Iterable[Sequence[Any]]) -> list[int]:
        """Insert event rows (first column is the id) and return the ids given."""
        with self.tx() as c:
            start = c.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0]
            n0 = c.total_changes
            c.executemany(sql, rows)
            n = c.total_changes - n0
        # ids are max+1 … max+n: the table is append-only and we held the write lock
        return builtins.list(range(start + 1, start + n + 1))

    def insert_count(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run an insert-or-ignore for batches of rows; returns rows inserted."""
        with self.tx() as c:
            n0 = c.total_changes
            for batch in _batches(rows):
                c.executemany(sql, batch)
            return c.total_changes - n0


def _migrate(db: _DB) -> int:
    db.conn.create_function(
        "retest_candidate_key", 1, candidate_key, deterministic=True
    )
    with db.tx() as c:
        c.execute("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)")
        row = c.execute("SELECT version FROM schema_version").fetchone()
        version = 0 if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{db.path} has schema version {version}, newer than this retest "
                f"supports ({SCHEMA_VERSION}). Upgrade retest."
            )
        for script in MIGRATIONS[version:]:
            for stmt in filter(str.strip, script.split(";")):
                c.execute(stmt)
        if row is None:
            c.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
        else:
            c.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
    return SCHEMA_VERSION


class SQLiteStore(Store):
    """The project store in one SQLite file.

    Parameters
    ----------
    path : path-like
        The database file (created if missing; parent directory must exist).
    timeout : float
        Seconds a writer waits for another process's transaction (``busy_timeout``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from retest.store.base import ClassRow
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with SQLiteStore(pathlib.Path(d) / "retest.db") as s:
    ...         s.classes.put([ClassRow(0, "cat")])
    ...         s.classes.list()[0].name
    'cat'
    """

    kind: Literal["sqlite", "memory"] = "sqlite"

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise StoreError(
                f"cannot open store {self.path}: directory {self.path.parent} does not exist."
            )
        try:
            self._db = _DB(self.path, timeout)
            _migrate(self._db)
        except sqlite3.DatabaseError as err:
            raise StoreError(
                f"cannot open store {self.path}: {err}. Is it a retest.db file?"
            ) from err
        repos: dict[str, Callable[[_DB], Any]] = {
            "classes": _Classes,
            "references": _References,
            "candidates": _Candidates,
            "tasks": _Tasks,
            "annotations": _Annotations,
            "blacklist": _Blacklist,
            "neardup": _NearDup,
            "revisions": _Revisions,
            "artifacts": _Artifacts,
            "stages": _Stages,
            "predictions": _Predictions,
        }
        for name, cls in repos.items():
            setattr(self, name, cls(self._db))

    def schema_version(self) -> int:
        return int(self._db.one("SELECT version FROM schema_version")[0])

    def close(self) -> None:
        self._db.close()
