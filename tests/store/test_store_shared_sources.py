"""Schema 7: candidates sharing a source id are recorded at insert, and an insert
checked by ``existing_mark`` probes only what was stored since the check.

``source_groups`` must return what one pass over every candidate returns (the
reference implementation of :class:`CandidateRepo`), whatever tier the rows are
in and whichever insert path stored them; a v6 database (the previous release's
layout) migrates with its shared source ids; a check's mark never lets an id be
stored twice, also when a tier rebuild moved rows past it.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path

import pytest

import retest.store._sqlite_candidates as sc
from retest.store._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from retest.store.base import CandidateRepo
from retest.store.rows import CandidateRow
from retest.store.sqlite import SQLiteStore


def _hex(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def _boundary(store: SQLiteStore) -> int:
    return sc._boundary(store._db.conn)


def _reference(store: SQLiteStore) -> list[list[str]]:
    return CandidateRepo.source_groups(store.candidates)


def _add_columns(store: SQLiteStore, ids: list[str], refs: list[str], src: str) -> int:
    n = len(ids)
    return store.candidates.add_columns(
        ids, refs, [0] * n, ["kw"] * n, list(range(n)),
        source=src, width=1, height=1, array_name="a",
    )  # fmt: skip


def test_groups_match_a_full_pass_across_tiers_and_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sc, "TIER_MIN_ROWS", 30)
    rng = random.Random(7)
    with SQLiteStore(tmp_path / "retest.db") as s:
        n, bounds = 0, set()
        for batch in range(24):
            # refs mostly new, some repeating earlier ones (old tier, new tier,
            # this batch), some only a prefix of another ("1" vs "10")
            refs = [str(n + k) for k in range(12)]
            refs[rng.randrange(12)] = str(rng.randrange(max(n, 1)))
            refs[rng.randrange(12)] = refs[rng.randrange(12)]
            ids = [_hex(n + k) for k in range(12)]
            src = "job" if batch % 3 else "job2"
            if batch % 4 == 0:
                assert _add_columns(s, ids, refs, src) == 12
            elif batch % 4 == 1:
                rows = [CandidateRow(i, src, r) for i, r in zip(ids, refs, strict=True)]
                assert s.candidates.add(rows) == 12
            elif batch % 4 == 2:
                tup = [
                    (i, src, r, *(None,) * 12) for i, r in zip(ids, refs, strict=True)
                ]
                assert s.candidates.add_tuples(tup) == 12
            else:  # text ids take the general path of add_columns
                ids = [f"file:{n + k}" for k in range(12)]
                assert _add_columns(s, ids, refs, src) == 12
            n += 12
            bounds.add(_boundary(s))
            assert s.candidates.source_groups() == _reference(s)
        assert len(bounds) >= 4  # the tiers were rebuilt several times
        groups = s.candidates.source_groups()
        assert len(groups) >= 20 and any(len(g) > 2 for g in groups)
        # "a:b" + "c" and "a" + "b:c" are one source id ("a:b:c"), as the rule reads it
        assert s.candidates.add([CandidateRow(_hex(900), "a:b", "c")]) == 1
        assert s.candidates.source_groups() == groups
        assert s.candidates.add([CandidateRow(_hex(901), "a", "b:c")]) == 1
        assert [_hex(900), _hex(901)] in [sorted(g) for g in _reference(s)]
        assert s.candidates.source_groups() == _reference(s)


def test_a_rejected_copy_links_nothing(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "retest.db") as s:
        assert s.candidates.add([CandidateRow(_hex(1), "s", "1")]) == 1
        # the same image again under another source id is not stored: no link
        assert s.candidates.add([CandidateRow(_hex(1), "t", "1")]) == 0
        assert _add_columns(s, [_hex(1), _hex(2)], ["1", "2"], "s") == 1
        assert s.candidates.source_groups() == [] == _reference(s)
        # "s:1" and "s:1 " / "s:10" are different source ids
        assert s.candidates.add([CandidateRow(_hex(3), "s", "1 ")]) == 1
        assert s.candidates.add([CandidateRow(_hex(4), "s", "10")]) == 1
        assert s.candidates.source_groups() == []
        assert s.candidates.add([CandidateRow(_hex(5), "s", "10")]) == 1
        assert s.candidates.source_groups() == [sorted([_hex(4), _hex(5)])]


def test_groups_are_read_through_the_source_tiers(tmp_path: Path) -> None:
    """source_groups probes the source indexes; a table scan would be O(rows)."""
    with SQLiteStore(tmp_path / "retest.db") as s:
        s.candidates.add(CandidateRow(_hex(i), "s", str(i % 40)) for i in range(50))
        c = s._db.conn
        statements: list[str] = []
        c.set_trace_callback(statements.append)
        assert len(s.candidates.source_groups()) == 10
        c.set_trace_callback(None)
        sql = next(q for q in statements if sc._SHARED in q)
        plan = " | ".join(r[-1] for r in c.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert plan.count("USING INDEX candidates_src_") == 2, plan
        assert "INTEGER PRIMARY KEY" not in plan


def _v6_database(path: Path, rows: list[tuple[str, str, str]], b: int) -> None:
    """A version-6 ``retest.db`` as the previous release wrote it: the frozen
    scripts, its kp tiers at boundary ``b`` (rows after it in the new tier)."""
    c = sqlite3.connect(path, isolation_level=None)
    c.create_function("retest_candidate_key", 1, sc.candidate_key)
    c.create_function("retest_candidate_kp", 1, sc.candidate_kp)
    for script in MIGRATIONS[:6]:
        for stmt in filter(str.strip, script.split(";")):
            c.execute(stmt)
    c.execute("CREATE TABLE schema_version(version INTEGER NOT NULL)")
    c.execute("INSERT INTO schema_version VALUES (6)")
    c.execute(f"CREATE INDEX candidates_kp_old ON candidates(kp) WHERE seq <= {b}")
    c.execute(f"CREATE INDEX candidates_kp_new ON candidates(kp) WHERE seq > {b}")
    c.execute("UPDATE candidate_tiers SET boundary = ?", (b,))
    for cid, src, ref in rows:
        key = sc.candidate_key(cid)
        c.execute(
            "INSERT INTO candidates(key, kp, source, source_ref, class_id) "
            "VALUES (?, ?, ?, ?, 0)",
            (key, sc.candidate_kp(key), src, ref),
        )
    c.close()


def test_version_6_database_migrates_with_its_shared_sources(tmp_path: Path) -> None:
    path = tmp_path / "retest.db"
    # sharing within the old tier, within the new tier and across the two
    refs = [str(i) for i in range(60)]
    refs[5] = refs[2]  # old, old
    refs[45] = refs[50] = "new"  # new, new
    refs[55] = refs[7]  # new, old
    refs[56] = refs[7]  # three candidates
    rows = [(_hex(i), "job", r) for i, r in enumerate(refs)]
    rows.append(("file:x.png", "job", refs[10]))
    _v6_database(path, rows, 40)
    with SQLiteStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION == 8
        assert _boundary(s) == 40  # the kp tiers were kept, not rebuilt
        want = sorted(
            sorted(g)
            for g in (
                [_hex(2), _hex(5)],
                [_hex(45), _hex(50)],
                [_hex(7), _hex(55), _hex(56)],
                [_hex(10), "file:x.png"],
            )
        )
        assert s.candidates.source_groups() == want == _reference(s)
        assert [r.id for r in s.candidates.iter()] == [r[0] for r in rows]
        assert s.candidates.add([CandidateRow(_hex(99), "job", "3")]) == 1
        want = sorted([*want, sorted([_hex(3), _hex(99)])])
        assert s.candidates.source_groups() == want
        assert s.integrity_problems() == []
    with SQLiteStore(path) as s:  # reopening migrates nothing again
        assert s.candidates.source_groups() == want


def test_a_mark_never_lets_an_id_in_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer stores an id after the check; the insert with the check's
    mark must still refuse it, in the new tier and after a rebuild moved it into
    the old tier (past the mark)."""
    monkeypatch.setattr(sc, "TIER_MIN_ROWS", 8)
    path = tmp_path / "retest.db"
    with SQLiteStore(path) as s, SQLiteStore(path) as other:
        s.candidates.add(CandidateRow(_hex(i), "s", str(i)) for i in range(20))
        assert _boundary(s) == 20
        new, mark = s.candidates.existing_mark([_hex(100), _hex(3)])
        assert new == {_hex(3)} and mark == 20
        # in the new tier: only the new tier is probed, and it holds the id
        assert other.candidates.add([CandidateRow(_hex(100), "o", "x")]) == 1
        assert s.candidates.add([CandidateRow(_hex(100), "s", "y")], checked=mark) == 0
        assert _add_columns(s, [_hex(100)], ["y"], "s") == 0
        # a rebuild moves rows after the mark into the old tier
        _, mark = s.candidates.existing_mark([_hex(200)])
        other.candidates.add(
            CandidateRow(_hex(200 + i), "o", str(i)) for i in range(12)
        )
        assert _boundary(s) > mark
        assert s.candidates.add([CandidateRow(_hex(200), "s", "z")], checked=mark) == 0
        ids = [_hex(205), _hex(300)]
        assert s.candidates.add_columns(
            ids, ["a", "b"], [0, 0], [None, None], [0, 1], source="s", width=1,
            height=1, array_name="a", checked=mark,
        ) == 1  # fmt: skip
        assert s.candidates.count() == 20 + 1 + 12 + 1
        assert s.candidates.source_groups() == _reference(s) == []


def test_a_checked_insert_skips_the_old_tier(tmp_path: Path) -> None:
    """What the mark is for: the insert probes the new tier only."""
    b = 1000
    assert sc._probe_old(b, None) and sc._probe_old(b, b - 1)
    assert not sc._probe_old(b, b) and not sc._probe_old(b, b + 5)
    assert "seq <= 1000" in sc._column_insert_sql(b, True)
    assert "seq <= 1000" not in sc._column_insert_sql(b, False)
    assert "seq > 1000" in sc._column_insert_sql(b, False)
    assert "seq <= 1000" not in sc._insert_sql(b, False)
