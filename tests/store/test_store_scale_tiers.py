"""Schema 4: candidates found through a two-tier index on a 64-bit key prefix.

The tiers are rebuilt as the table grows (forced here with a small threshold);
uniqueness, look-ups and shared prefixes must hold across every rebuild, and a
version-3 database (the previous release's layout) migrates with its data.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

import retest.store._sqlite_candidates as sc
from retest.store._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from retest.store.rows import CandidateRow
from retest.store.sqlite import SQLiteStore


def _hex(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def _twin(cid: str) -> str:
    """A different content id with the same first 8 bytes (the same ``kp``)."""
    last = "0" if cid[-1] != "0" else "1"
    return cid[:-1] + last


def _boundary(path: Path) -> int:
    with sqlite3.connect(path) as c:
        b = c.execute("SELECT boundary FROM candidate_tiers").fetchone()[0]
    c.close()
    return int(b)


def _plan(store: SQLiteStore, sql: str, params: tuple[object, ...]) -> str:
    rows = store._db.conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
    return " | ".join(str(r[-1]) for r in rows)


def test_tiers_rebuild_and_keep_uniqueness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sc, "TIER_MIN_ROWS", 40)
    path = tmp_path / "retest.db"
    ids = [_hex(i) for i in range(400)]
    with SQLiteStore(path) as s:
        boundaries = []
        for k in range(0, 400, 25):  # column path (the ingest's), 25 rows a batch
            part = ids[k : k + 25]
            added = s.candidates.add_columns(
                part, [str(i) for i in range(k, k + 25)], [0] * 25, ["kw"] * 25,
                list(range(k, k + 25)), source="s", width=1, height=1, array_name="a",
            )  # fmt: skip
            assert added == 25
            boundaries.append(_boundary(path))
        assert len(set(boundaries)) >= 3  # the tiers were rebuilt several times
        b = boundaries[-1]
        assert 0 < b < 400
        # every row is found whichever tier holds it, in insertion order
        assert [r.id for r in s.candidates.iter()] == ids
        assert s.candidates.existing([*ids, _hex(999)]) == set(ids)
        assert [r.id for r in s.candidates.get_many(ids[::-7])] == ids[::-7]
        assert s.candidates.get(ids[0]).source_ref == "0"
        assert s.candidates.get(ids[-1]).source_ref == "399"
        # nothing is stored twice: old tier, new tier, general and column paths
        assert s.candidates.add([CandidateRow(ids[3], "x", "y")]) == 0
        assert s.candidates.add([CandidateRow(ids[-2], "x", "y")]) == 0
        assert s.candidates.add_tuples([(ids[5], "x", "y", *(None,) * 12)]) == 0
        assert s.candidates.add_columns(
            [ids[1], ids[-1], _hex(1000)], ["a", "b", "c"], [0, 0, 0],
            [None] * 3, [0, 1, 2], source="x", width=1, height=1, array_name="a",
        ) == 1  # fmt: skip
        assert s.candidates.count() == 401


def test_shared_prefix_keys_are_distinct_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sc, "TIER_MIN_ROWS", 4)
    a = _hex(1)
    b = _twin(a)
    assert a != b and sc.candidate_kp(sc.candidate_key(a)) == sc.candidate_kp(
        sc.candidate_key(b)
    )
    with SQLiteStore(tmp_path / "retest.db") as s:
        assert s.candidates.add([CandidateRow(a, "s", "a")]) == 1
        for i in range(10):  # push ``a`` into the old tier
            s.candidates.add([CandidateRow(_hex(100 + i), "s", str(i))])
        assert _boundary(tmp_path / "retest.db") >= 1
        assert s.candidates.existing([b]) == set()
        assert s.candidates.add([CandidateRow(b, "s", "b")]) == 1  # not a duplicate
        assert s.candidates.add([CandidateRow(b, "s", "again")]) == 0
        assert s.candidates.get(a).source_ref == "a"
        assert s.candidates.get(b).source_ref == "b"
        assert s.candidates.existing([a, b]) == {a, b}
        # a repeated id within one input is stored once (first row wins)
        c = _hex(7)
        assert s.candidates.add_columns(
            [c, c], ["x", "y"], [0, 0], [None, None], [0, 1],
            source="s", width=1, height=1, array_name="a",
        ) == 1  # fmt: skip
        assert s.candidates.get(c).source_ref == "x"
        # non-content ids share long prefixes: their kp comes from a hash
        odd = [f"file:img_{i:05d}" for i in range(50)]
        assert s.candidates.add(CandidateRow(i, "s", i) for i in odd) == 50
        assert len({sc.candidate_kp(sc.candidate_key(i)) for i in odd}) == 50
        assert s.candidates.existing([*odd, "file:none"]) == set(odd)


def test_lookups_use_the_tier_indexes(tmp_path: Path) -> None:
    """A look-up probes the partial indexes; a table scan would be O(rows)."""
    with SQLiteStore(tmp_path / "retest.db") as s:
        s.candidates.add(CandidateRow(_hex(i), "s", str(i)) for i in range(50))
        b = sc._boundary(s._db.conn)
        key = sc.candidate_key(_hex(3))
        get = _plan(s, sc._tiers("seq", b, "kp = ?1 AND key = ?2"),
                    (sc.candidate_kp(key), key))  # fmt: skip
        assert get.count("candidates_kp_") == 2 and "SCAN candidates" not in get
        ins = _plan(s, sc._existing_sql(b), ("[1,2]", key + key))
        assert ins.count("candidates_kp_") == 2 and "SCAN candidates" not in ins
        probe = _plan(s, f"SELECT 1 WHERE {sc._absent(b, '?1', '?2')}", (1, key))
        assert probe.count("candidates_kp_") == 2


def _v3_database(path: Path, ids: list[str]) -> None:
    """A version-3 ``retest.db`` as the previous release wrote it: the frozen
    scripts, then rows through its insert (``INSERT OR IGNORE`` on the unique key)."""
    c = sqlite3.connect(path, isolation_level=None)
    c.create_function("retest_candidate_key", 1, sc.candidate_key)
    for script in MIGRATIONS[:3]:
        for stmt in filter(str.strip, script.split(";")):
            c.execute(stmt)
    c.execute("CREATE TABLE schema_version(version INTEGER NOT NULL)")
    c.execute("INSERT INTO schema_version VALUES (3)")
    c.executemany(
        "INSERT OR IGNORE INTO candidates(key, source, source_ref, class_id, keyword,"
        " array_name, array_row, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (sc.candidate_key(cid), "tiny", str(i), i % 3, f"kw{i % 5}", "a", i,
             '{"n": 1}' if i % 4 == 0 else None)
            for i, cid in enumerate(ids)
        ],
    )  # fmt: skip
    c.close()


def test_version_3_database_migrates_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "retest.db"
    ids = [_hex(i) for i in range(300)] + ["file:a.png", "x" * 31]
    _v3_database(path, ids)
    with SQLiteStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        rows = list(s.candidates.iter())
        assert [r.id for r in rows] == ids  # same rows, same order
        assert [r.array_row for r in rows] == list(range(len(ids)))
        assert rows[4].extra == {"n": 1} and rows[5].extra == {}
        assert s.candidates.count(class_id=1) == sum(i % 3 == 1 for i in range(302))
        assert s.candidates.existing(ids) == set(ids)
        assert s.candidates.get("file:a.png").source_ref == "300"
        assert s.candidates.add([CandidateRow(ids[10], "x", "y")]) == 0
        assert s.candidates.add([CandidateRow(_hex(5000), "x", "y")]) == 1
    assert _boundary(path) == len(ids)  # everything migrated is the old tier
    with SQLiteStore(path) as s:  # reopening keeps the tiers
        assert s.candidates.count() == len(ids) + 1
        assert s.integrity_problems() == []
