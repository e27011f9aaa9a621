"""Helpers shared by the SQLite repositories (no sqlite3 import: the connection
is reached through :class:`Database`)."""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, TypeVar

__all__ = ["Database", "Repo"]

_BATCH = 5000
T = TypeVar("T")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _extra(obj: Mapping[str, Any]) -> str | None:
    return _dumps(dict(obj)) if obj else None


def _loads_extra(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def _batches(it: Iterable[T], n: int = _BATCH) -> Iterator[list[T]]:
    it = iter(it)
    while chunk := builtins.list(islice(it, n)):
        yield chunk


def _where(**conds: Any) -> tuple[str, list[Any]]:
    """``WHERE a = ? AND …`` over the non-None conditions."""
    keys = [k for k, v in conds.items() if v is not None]
    if not keys:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k in keys), [conds[k] for k in keys]


class Database(Protocol):
    """What the repositories need from :class:`retest.store.sqlite._DB`."""

    @property
    def path(self) -> Path | None: ...

    def tx(self) -> AbstractContextManager[Any]: ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def snapshot_rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def read(self, fn: Callable[[Any], T]) -> T: ...

    def snapshot_read(self, fn: Callable[[Any], T]) -> T: ...

    def append(
        self, table: str, sql: str, rows: Iterable[Sequence[Any]]
    ) -> list[int]: ...

    def insert_count(self, sql: str, rows: Iterable[Sequence[Any]]) -> int: ...


class Repo:
    def __init__(self, db: Database) -> None:
        self._db = db
