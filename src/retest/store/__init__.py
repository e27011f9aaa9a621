"""The project store: repository interfaces (:mod:`retest.store.base`), a SQLite and an
in-memory implementation, and on-disk artifacts (:mod:`retest.store.artifacts`)."""

from __future__ import annotations

from pathlib import Path

from retest.store.base import Store

__all__ = ["Store", "open_store"]


def open_store(path: str | Path | None = None) -> Store:
    """Open the SQLite store at ``path`` (created if missing), or a fresh in-memory
    store when ``path`` is None."""
    if path is None:
        from retest.store.memory import MemoryStore

        return MemoryStore()
    from retest.store.sqlite import SQLiteStore

    return SQLiteStore(path)
