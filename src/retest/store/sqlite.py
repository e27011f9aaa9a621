"""SQLite implementation of the project store (``retest.db``).

One file, WAL journal, ``busy_timeout`` so several processes (an ingest, the web
app, a crowd poller) can write at once: every write is one ``BEGIN IMMEDIATE``
transaction, bulk inserts go through ``executemany``. The schema is versioned: the
``schema_version`` table holds the version and :data:`MIGRATIONS` are applied in
order when a store is opened (a database from a newer retest is refused).

Damage is refused, not papered over: before SQLite touches an existing file its
header is checked (:func:`check_db_header`: magic string, page size, a size that
is a whole number of pages), so an emptied or truncated ``retest.db`` is never
reopened as a new empty database. A file up to :data:`QUICK_CHECK_MAX_BYTES` is
also verified page by page with ``PRAGMA quick_check`` on open (about 0.26 s
for 1M candidates / 154 MB on the 2-core VM, so the limit keeps opening under
about half a second); larger files are checked by ``retest check``. Whenever
SQLite reports a damaged page later (``SQLITE_CORRUPT`` / ``SQLITE_NOTADB``) the
error becomes a :class:`~retest.errors.DataIntegrityError` naming the file.
"""

from __future__ import annotations

import builtins
import errno
import os
import shutil
import sqlite3
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from retest.errors import DataIntegrityError, SchemaUpgradeWarning, StoreError
from retest.store._sqlite_candidates import (
    _Candidates,
    candidate_key,
    candidate_kp,
    ensure_tiers,
)
from retest.store._sqlite_common import _batches
from retest.store._sqlite_cover import fill as fill_cover
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
from retest.store._sqlite_people import _People
from retest.store._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from retest.store.base import Store

T = TypeVar("T")

__all__ = [
    "MIGRATIONS",
    "QUICK_CHECK_MAX_BYTES",
    "SCHEMA_VERSION",
    "DamagedDatabaseError",
    "SQLiteStore",
    "check_db_header",
    "damage_message",
    "inspect_database",
]


class DamagedDatabaseError(DataIntegrityError, StoreError):
    """The database file is empty, truncated or has damaged pages (both a data
    integrity and a store error, so either ``except`` catches it)."""


QUICK_CHECK_MAX_BYTES = 256 << 20
"""Databases up to this size get ``PRAGMA quick_check`` when opened."""

_MAGIC = b"SQLite format 3\0"
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL = 8, 10, 11, 13
_SQLITE_NOTADB = 26
#: Free bytes below which an I/O error of SQLite is taken for a full disk (it
#: reports one when the -wal / -shm files cannot grow).
_NEARLY_FULL = 1 << 20


def damage_message(path: Path, what: str) -> str:
    """The one-line message for a damaged database: culprit, problem, what to do."""
    return (
        f"{path} is damaged: {what}. Nothing was changed. Run `retest check` for a "
        "full report, then restore retest.db from a backup (or re-create the project)."
    )


def check_db_header(path: Path) -> None:
    """Refuse an existing file that cannot be a healthy SQLite database.

    An empty file would be silently turned into a new empty database by SQLite;
    a wrong magic string, an impossible page size or a size that is not a whole
    number of pages means the file was overwritten or truncated.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        raise DamagedDatabaseError(damage_message(path, "the file is empty (0 bytes)"))
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or head[:16] != _MAGIC:
        raise DamagedDatabaseError(
            damage_message(
                path,
                "no SQLite header. Is it a retest.db file?",
            )
        )
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise DamagedDatabaseError(
            damage_message(path, f"its header gives an impossible page size {page}")
        )
    if size % page:
        what = f"{size} bytes is not a whole number of {page}-byte pages (truncated?)"
        raise DamagedDatabaseError(damage_message(path, what))


def inspect_database(path: Path, *, limit: int = 20) -> tuple[list[str], int | None]:
    """SQLite's full ``integrity_check`` of ``path`` (empty list when sound) and
    the schema version, read over a read-only connection: nothing is migrated."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute(f"PRAGMA integrity_check({int(limit)})").fetchall()
            found = [" ".join(str(r[0]).split()) for r in rows]
            if found != ["ok"]:
                return found, None
            v = con.execute("SELECT version FROM schema_version").fetchone()
            return [], None if v is None else int(v[0])
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        if _cannot_write(path):  # not damage: SQLite needs to write even to read
            raise StoreError(_read_only_message(path)) from None
        return [" ".join(str(err).split())], None


def _cannot_write(path: Path) -> bool:
    """Whether the database or its folder refuses writes (tried, not guessed from
    mode bits: root and capabilities make those unreliable)."""
    try:
        os.close(os.open(path, os.O_RDWR))
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except PermissionError:
        return True
    except OSError as err:
        return err.errno == errno.EROFS
    return False


def _errcode(err: sqlite3.Error) -> int:
    return int(getattr(err, "sqlite_errorcode", 0)) & 0xFF


def _translate(path: Path, err: sqlite3.Error) -> Exception:
    """A retest error for a damaged / read-only database, else ``err`` itself."""
    code = _errcode(err)
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return DamagedDatabaseError(damage_message(path, f"SQLite reports {err}"))
    if code == _SQLITE_READONLY:
        return StoreError(_read_only_message(path))
    if code == _SQLITE_FULL or (code == _SQLITE_IOERR and _nearly_full(path.parent)):
        return StoreError(
            f"{path}: the disk is full (SQLite: {err}); the unfinished write was "
            f"rolled back, nothing of it was kept. Free space on the disk holding "
            f"{path.parent} and rerun the command: finished steps are kept."
        )
    return err


def _nearly_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < _NEARLY_FULL
    except OSError:
        return False


def _read_only_message(path: Path) -> str:
    return (
        f"{path} is read-only: retest writes to retest.db and its journal files "
        f"(-wal, -shm) in {path.parent} even to read. Make the folder and the file "
        "writable (chmod u+w), or copy the project to a writable place."
    )


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
            str(self.path),
            timeout=self.timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        c.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        c.execute("PRAGMA synchronous = NORMAL")
        c.execute("PRAGMA foreign_keys = ON")
        # the new tier of the candidate index takes random inserts: it must stay
        # in the page cache (old-tier probes read through the memory map)
        c.execute("PRAGMA cache_size = -131072")
        c.execute("PRAGMA mmap_size = 4294967296")
        c.execute("PRAGMA temp_store = MEMORY")
        return c

    @contextmanager
    def _damage(self) -> Iterator[None]:
        """Turn SQLite's damaged-file / read-only errors into retest errors."""
        try:
            yield
        except sqlite3.Error as err:
            new = _translate(self.path, err)
            if new is err:
                raise
            raise new from err

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self.lock, self._damage():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error:  # e.g. a full disk: leave no open transaction
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.lock, self._damage():
            return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self.lock, self._damage():
            return self.conn.execute(sql, params).fetchone()

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` inside one read transaction: its statements see one
        consistent state (e.g. the candidate tier boundary and the indexes)."""
        with self.lock, self._damage():
            if self.conn.in_transaction:  # within tx(): already one snapshot
                return fn(self.conn)
            self.conn.execute("BEGIN")
            try:
                return fn(self.conn)
            finally:
                if self.conn.in_transaction:  # a failed statement may have ended it
                    self.conn.execute("COMMIT")

    def _snapshot_conn(self) -> sqlite3.Connection:
        if self._reader is None:
            self._reader = self._connect()
            self._reader.execute("PRAGMA query_only = ON")
            # the writer's commits invalidate this connection's page cache;
            # reading the file through a memory map makes the re-reads cheap
            self._reader.execute("PRAGMA mmap_size = 1073741824")
        return self._reader

    def snapshot_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`read` on the snapshot connection (see :meth:`snapshot_rows`)."""
        with self._read_lock, self._damage():
            conn = self._snapshot_conn()
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def snapshot_rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """:meth:`rows` on a second, read-only connection (last committed state).

        Does not wait for a transaction running on the main connection (WAL
        readers never block), e.g. the ingest's commit thread inserting the
        previous batch while the next batch is de-duplicated.
        """
        with self._read_lock, self._damage():
            return self._snapshot_conn().execute(sql, params).fetchall()

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
        """Run an insert-or-ignore for batches of rows; returns rows inserted
        (by the statement: rows its triggers write are not counted)."""
        with self.tx() as c:
            n = 0
            for batch in _batches(rows):
                n += c.executemany(sql, batch).rowcount
            return n


_COVER_VERSION = 8
"""The schema that added the neighbour-list marks (filled by code on migration)."""

UPGRADE_NOTICE_ROWS = 500_000
"""An upgrade of a store with at least this many candidates says so before it
starts: at 10 M candidates it takes a minute or more, in one transaction."""


def _migrate(db: _DB) -> int:
    db.conn.create_function(
        "retest_candidate_key", 1, candidate_key, deterministic=True
    )
    db.conn.create_function("retest_candidate_kp", 1, candidate_kp, deterministic=True)
    with db.tx() as c:
        c.execute("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)")
        row = c.execute("SELECT version FROM schema_version").fetchone()
        version = 0 if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{db.path} has schema version {version}, newer than this retest "
                f"supports ({SCHEMA_VERSION}). Upgrade retest."
            )
        if row is not None and version < SCHEMA_VERSION:
            n = c.execute("SELECT MAX(rowid) FROM candidates").fetchone()[0] or 0
            if n >= UPGRADE_NOTICE_ROWS:
                warnings.warn(
                    SchemaUpgradeWarning(
                        f"{db.path}: upgrading its {n:,} candidates from schema "
                        f"{version} to {SCHEMA_VERSION} (once; this can take minutes; "
                        "an interrupted upgrade is rolled back and starts again)."
                    ),
                    stacklevel=2,
                )
        for script in MIGRATIONS[version:]:
            for stmt in filter(str.strip, script.split(";")):
                c.execute(stmt)
        ensure_tiers(c)
        if version < _COVER_VERSION:
            fill_cover(c)
        if row is None:
            c.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
        else:
            c.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
    return SCHEMA_VERSION


REPOS: dict[str, Callable[[_DB], Any]] = {
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
    "people": _People,
}
"""The repositories of a store, by attribute name (the writer and the reader
stores both build theirs from this table)."""


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
    >>> from retest.store.rows import ClassRow
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with SQLiteStore(pathlib.Path(d) / "retest.db") as s:
    ...         s.classes.put([ClassRow(0, "cat")])
    ...         s.classes.list()[0].name
    'cat'
    """

    def __init__(
        self, path: str | Path, *, timeout: float = 60.0, verify: bool = True
    ) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise StoreError(
                f"cannot open store {self.path}: directory {self.path.parent} does not exist."
            )
        check_db_header(self.path)
        existed = self.path.exists()
        try:
            self._db = _DB(self.path, timeout)
        except sqlite3.Error as err:
            raise self._open_error(err) from err
        try:
            if verify and existed:
                self._quick_check()
            _migrate(self._db)
        except BaseException as err:
            self._db.close()
            if isinstance(err, sqlite3.Error):
                raise self._open_error(err) from err
            raise
        for name, cls in REPOS.items():
            setattr(self, name, cls(self._db))

    def _open_error(self, err: sqlite3.Error) -> Exception:
        new = _translate(self.path, err)
        if new is not err:
            return new
        writable = os.access(self.path.parent, os.W_OK) and (
            not self.path.exists() or os.access(self.path, os.W_OK)
        )
        if not writable:
            return StoreError(_read_only_message(self.path))
        return StoreError(
            f"cannot open store {self.path}: {err}. Is it a retest.db file? "
            "`retest check` reports what is wrong with it."
        )

    def _quick_check(self) -> None:
        """``PRAGMA quick_check`` for files up to :data:`QUICK_CHECK_MAX_BYTES`."""
        if self.path.stat().st_size > QUICK_CHECK_MAX_BYTES:
            return
        problems = self.integrity_problems(quick=True, limit=1)
        if problems:
            raise DamagedDatabaseError(damage_message(self.path, problems[0]))

    def integrity_problems(self, *, quick: bool = False, limit: int = 20) -> list[str]:
        """What SQLite's ``integrity_check`` (or the faster ``quick_check``, which
        skips index-versus-table comparisons) finds; empty when the file is sound."""
        pragma = "quick_check" if quick else "integrity_check"
        try:
            with self._db.lock:
                rows = self._db.conn.execute(
                    f"PRAGMA {pragma}({int(limit)})"
                ).fetchall()
        except sqlite3.DatabaseError as err:
            if _errcode(err) in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
                return [" ".join(str(err).split())]
            raise
        found = [" ".join(str(r[0]).split()) for r in rows]
        return [] if found == ["ok"] else found

    def schema_version(self) -> int:
        return int(self._db.one("SELECT version FROM schema_version")[0])

    def close(self) -> None:
        self._db.close()
