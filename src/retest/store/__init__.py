"""The project store: repository interfaces (:mod:`retest.store.base`), their SQLite
implementation (:mod:`retest.store.sqlite`), and on-disk artifacts
(:mod:`retest.store.artifacts`)."""

from __future__ import annotations

from pathlib import Path

from retest.store.base import Store

__all__ = ["Store", "open_store"]


def open_store(path: str | Path) -> Store:
    """Open the SQLite store at ``path`` (created if missing; its folder must exist).

    Tests and notebooks that want a throwaway store open one in a temporary folder.
    """
    # imported here so that retest.store.SQLiteStore is not a second import path
    from retest.store.sqlite import SQLiteStore

    return SQLiteStore(path)
