"""The id-order cache beside the database: used while the candidates are
unchanged, extended (only the appended rows read) when rows were added, rebuilt
when it does not match the database, and never a reason for a wrong order."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import retest.store._sqlite_columns as cols
from retest.store.rows import CandidateRow, ClassRow
from retest.store.sqlite import SQLiteStore


def _ids(rng: np.random.Generator, n: int) -> list[str]:
    raw = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    raw[1::9, :8] = raw[0:-1:9, :8]  # equal kp, different keys
    return [bytes(r).hex() for r in raw]


def _add(s: SQLiteStore, ids: list[str], classes: list[int]) -> None:
    s.candidates.add(
        [CandidateRow(i, "s", i[:8], k) for i, k in zip(ids, classes, strict=True)]
    )
    n = s.candidates.count()
    s.candidates.add([CandidateRow(f"x{n}", "s", "x"), CandidateRow(f"y{n}", "s", "y")])


def _check(s: SQLiteStore, ids: list[str], classes: list[int], classless: int) -> None:
    orders = s.candidates.id_orders()
    assert sorted(orders) == sorted(set(classes))
    for k, h in orders.items():
        want = sorted(i for i, c in zip(ids, classes, strict=True) if c == k)
        assert s.candidates.ids_at(h) == want
    # counts per class come from a matching cache (classless ones counted)
    counts = {k: classes.count(k) for k in sorted(set(classes))}
    assert s.candidates.count_by_class() == {None: classless, **counts}


def test_cache_is_used_then_extended_by_appended_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(4)
    ids = _ids(rng, 700)
    classes = rng.integers(0, 4, size=700).tolist()
    path = tmp_path / "retest.db"
    cache = tmp_path / "retest.db-idorder"
    with SQLiteStore(path) as s:
        s.classes.put([ClassRow(k, f"c{k}") for k in range(5)])
        _add(s, ids[:500], classes[:500])
        _check(s, ids[:500], classes[:500], 2)
        assert cache.is_file()
        calls: list[int] = []
        full = cols._full
        monkeypatch.setattr(cols, "_full", lambda c: calls.append(1) or full(c))
        _check(s, ids[:500], classes[:500], 2)  # from the cache
        _add(s, ids[500:], [4, *classes[501:]])  # a new class among them
        _check(s, ids, [*classes[:500], 4, *classes[501:]], 4)  # extended
        assert calls == []
    # another database of the same size: its own order, not the cache's
    other = tmp_path / "other"
    other.mkdir()
    with SQLiteStore(other / "retest.db") as s2:
        s2.classes.put([ClassRow(k, f"c{k}") for k in range(5)])
        ids2 = _ids(np.random.default_rng(5), 700)
        _add(s2, ids2, classes)
        shutil.copy(cache, other / "retest.db-idorder")
        _check(s2, ids2, classes, 2)
        assert calls == [1]


def test_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    ids = _ids(rng, 300)
    classes = rng.integers(0, 3, size=300).tolist()
    with SQLiteStore(tmp_path / "retest.db") as s:
        s.classes.put([ClassRow(k, f"c{k}") for k in range(3)])
        _add(s, ids, classes)
        cache = tmp_path / "retest.db-idorder"
        _check(s, ids, classes, 2)
        assert cache.is_file()
        for junk in (b"", b"x" * 13, cache.read_bytes()[:-8]):
            cache.write_bytes(junk)
            _check(s, ids, classes, 2)
