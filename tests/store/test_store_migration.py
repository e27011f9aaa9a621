"""Schema migrations: a database written by an older retest opens and upgrades."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.store._sqlite_candidates import candidate_key
from retest.store._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from retest.store.rows import AnnotationEvent, CandidateRow
from retest.store.sqlite import SQLiteStore

# The candidates table of schema version 1, verbatim: the frozen MIGRATIONS[0]
# must still hold it (migrations are never edited once released).
_V1_CANDIDATES = """
CREATE TABLE candidates(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, source TEXT NOT NULL,
  source_ref TEXT NOT NULL, class_id INTEGER, keyword TEXT, date_taken TEXT,
  date_uploaded TEXT, url TEXT, license TEXT, width INTEGER, height INTEGER,
  array_name TEXT, array_row INTEGER, file_path TEXT, extra TEXT);
CREATE INDEX candidates_class ON candidates(class_id);
CREATE INDEX candidates_keyword ON candidates(keyword);"""


def _hex(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


# hex content ids, other ids (one of 31 UTF-8 bytes), ids that only look like hex
_IDS = [_hex(i) for i in range(40)] + [
    "odd", "x" * 31, "é" * 16, _hex(99).upper(), _hex(98)[:63], "",
]  # fmt: skip


def _old_rows() -> list[tuple[object, ...]]:
    # seq values with gaps, inserted out of id order: order must survive
    return [
        (10 + 3 * k, cid, "arrays", str(k), k % 3, f"kw{k % 4}", None, "2020",
         None, "cc", 32, 32, "cand", k, None, '{"a":1}' if k % 5 == 0 else None)
        for k, cid in enumerate(_IDS)
    ]  # fmt: skip


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    """A version-1 ``retest.db`` with candidates and annotations in it."""
    path = tmp_path / "retest.db"
    with sqlite3.connect(path) as c:
        c.executescript(MIGRATIONS[0])
        c.executescript("CREATE TABLE schema_version(version INTEGER NOT NULL);"
                        "INSERT INTO schema_version VALUES (1);")  # fmt: skip
        c.executemany(
            f"INSERT INTO candidates VALUES ({','.join('?' * 16)})", _old_rows()
        )
        c.execute(
            "INSERT INTO annotations(who, kind, class_id, item_id, value, at, ui_version) "
            "VALUES ('ann', 'label', 1, ?, 1, '2021', 'v1')",
            (_IDS[3],),
        )
    c.close()
    return path


def test_version_1_script_is_frozen() -> None:
    assert _V1_CANDIDATES.strip() in MIGRATIONS[0]


def test_candidate_key_is_injective_and_compact() -> None:
    keys = [candidate_key(i) for i in _IDS]
    assert len(set(keys)) == len(_IDS)
    assert [len(k) == 32 for k in keys] == [True] * 40 + [False] * 6
    assert candidate_key(_IDS[0]) == hashlib.sha256(b"0").digest()


def test_version_1_database_upgrades_with_data_intact(old_db: Path) -> None:
    with SQLiteStore(old_db) as store:
        assert store.schema_version() == SCHEMA_VERSION == 8
        got = list(store.candidates.iter())
        want = [
            CandidateRow(*r[1:15], extra={"a": 1} if r[15] else {})  # type: ignore[arg-type]
            for r in _old_rows()
        ]
        assert got == want  # same rows, same (seq) order
        for cid in _IDS:
            assert store.candidates.get(cid).id == cid
        assert store.candidates.get_many(_IDS[::-1]) == want[::-1]
        assert store.candidates.existing([*_IDS, "nope", _hex(1000)]) == set(_IDS)
        assert store.candidates.class_map() == {r[1]: r[4] for r in _old_rows()}
        assert store.candidates.count(class_id=1) == sum(r[4] == 1 for r in _old_rows())
        assert store.candidates.count(keyword="kw2") == sum(
            r[5] == "kw2" for r in _old_rows()
        )
        # uniqueness holds through the new key: old ids are ignored, new ones land last
        new = CandidateRow(_hex(500), "arrays", "new", 0)
        assert store.candidates.add([CandidateRow(_IDS[0], "x", "y"), new]) == 1
        assert list(store.candidates.iter())[-1] == new
        assert (
            store.candidates.add_tuples([(_IDS[-2], *("x",) * 2, *(None,) * 12)]) == 0
        )
        ann = store.annotations.list()
        assert [(a.who, a.item_id) for a in ann] == [("ann", _IDS[3])]
        store.annotations.add([AnnotationEvent("b", "label", 0, _IDS[4], 0)])
    with SQLiteStore(old_db) as store:  # reopening does not migrate again
        assert (
            store.schema_version() == SCHEMA_VERSION
            and store.candidates.count() == len(_IDS) + 1
        )
    with sqlite3.connect(old_db) as c:
        ddl = c.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'candidates'"
        ).fetchone()[0]
        idx = {
            r[0]
            for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
    c.close()
    # ids live only in the compact key, found through its tiered prefix index
    assert "key BLOB NOT NULL" in ddl and "kp INTEGER" in ddl and "id TEXT" not in ddl
    assert "UNIQUE" not in ddl
    assert {"candidates_class", "candidates_keyword", "candidates_kp_old",
            "candidates_kp_new"} <= idx  # fmt: skip


def test_fresh_database_has_the_latest_schema(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "retest.db") as store:
        assert store.schema_version() == SCHEMA_VERSION
        cid = _hex(1)
        assert store.candidates.add([CandidateRow(cid, "s", "0")]) == 1
        assert store.candidates.add_columns(
            [cid, _hex(2)], ["0", "1"], [None, 1], ["k", None], [0, 1],
            source="s", width=1, height=1, array_name="a",
        ) == 1  # fmt: skip
        assert store.candidates.existing([cid, _hex(2), _hex(3)]) == {cid, _hex(2)}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=40) | st.sampled_from(_IDS), min_size=1, max_size=8))
def test_any_id_round_trips_through_the_key(tmp_path_factory, ids: list[str]) -> None:
    ids = list(dict.fromkeys(ids))
    folder = tmp_path_factory.mktemp("k")
    with SQLiteStore(folder / "retest.db") as store:
        assert store.candidates.add(
            CandidateRow(i, "s", str(k)) for k, i in enumerate(ids)
        ) == len(ids)
        assert [r.id for r in store.candidates.iter()] == ids
        assert list(store.candidates.class_map()) == ids
        assert store.candidates.existing([*ids, "zz-not-there"]) == set(ids)
        assert [r.id for r in store.candidates.get_many(ids)] == ids


def test_v5_grid_answers_leave_the_item_index_and_per_item_lookups_still_use_one(
    tmp_path: Path,
) -> None:
    """Version 5: grid answers are not in the item index (their random keys were
    most of each commit's pages); label events still are, and the per-item
    queries of the label-error queue reach that partial index."""
    path = tmp_path / "retest.db"
    with SQLiteStore(path) as store:
        store.annotations.add(
            [AnnotationEvent("w", "task", 0, f"c{i}", i % 2, task_id="t",
                             assignment_id="a1") for i in range(6)]
            + [AnnotationEvent("w", "select", 0, "c1", 1),
               AnnotationEvent("w", "label-error-suspect", 0, "c1", 0)]
        )  # fmt: skip
        # every kind is still found by item, grid answers included (by a scan)
        assert [e.kind for e in store.annotations.list(item_id="c1")] == [
            "task",
            "select",
            "label-error-suspect",
        ]
        assert len(store.annotations.list(kind="task", item_id="c1")) == 1
        sql: list[str] = []
        store._db.conn.set_trace_callback(sql.append)
        got = store.annotations.list(kind="label-error-suspect", item_id="c1")
        store._db.conn.set_trace_callback(None)
        assert [(e.kind, e.item_id) for e in got] == [("label-error-suspect", "c1")]
        # the statement the store ran (bound values expanded) uses the index
        plan = store._db.conn.execute("EXPLAIN QUERY PLAN " + sql[-1]).fetchall()
    with sqlite3.connect(path) as c:
        idx = {r[0]: r[1] for r in c.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index'")}  # fmt: skip
        entries = c.execute(
            "SELECT COUNT(*) FROM annotations INDEXED BY annotations_item_labels "
            "WHERE kind <> 'task' AND item_id >= ''"
        ).fetchone()[0]
    c.close()
    assert (
        "annotations_item" not in idx
        and "kind <> 'task'" in idx["annotations_item_labels"]
    )
    assert entries == 2  # the two label events, none of the six grid answers
    assert "annotations_item_labels" in str(plan)


def test_upgrading_a_large_store_says_so_before_it_starts(
    old_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retest.store.sqlite as sqlite_mod
    from retest.errors import SchemaUpgradeWarning

    monkeypatch.setattr(sqlite_mod, "UPGRADE_NOTICE_ROWS", len(_IDS))
    with pytest.warns(
        SchemaUpgradeWarning, match=rf"from schema 1 to {SCHEMA_VERSION}"
    ):
        SQLiteStore(old_db).close()
    with SQLiteStore(
        old_db
    ) as store:  # upgraded: no second notice (warnings are errors)
        assert store.schema_version() == SCHEMA_VERSION


def test_upgrading_a_small_store_is_silent(old_db: Path) -> None:
    with SQLiteStore(old_db) as store:  # a warning would fail: they are errors here
        assert store.schema_version() == SCHEMA_VERSION
