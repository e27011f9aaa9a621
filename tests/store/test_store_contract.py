"""The Store contract: every repository method, on a SQLite store in a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import NotFoundError, StoreError
from retest.store._sqlite_schema import SCHEMA_VERSION
from retest.store.base import Store
from retest.store.rows import (
    AnnotationEvent,
    ArtifactRecord,
    BlacklistEvent,
    CandidateRow,
    ClassRow,
    DuplicateVerdict,
    KeywordRow,
    NeighbourList,
    NeighbourReview,
    PredictionRecord,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    StageCheckpoint,
    TaskRow,
    content_id,
    reference_id,
    split_reference_id,
)
from retest.store.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s: Store = SQLiteStore(tmp_path / "retest.db")
    yield s
    s.close()


def _cand(i: int, **kw: object) -> CandidateRow:
    px = np.full((2, 2, 3), i % 256, np.uint8)
    px[0, 0, 0] = i // 256
    base: dict[str, object] = {
        "id": content_id(px),
        "source": "arrays",
        "source_ref": str(i),
        "class_id": i % 3,
    }
    base.update(kw)
    return CandidateRow(**base)  # type: ignore[arg-type]


def test_ids_helpers() -> None:
    a = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    assert content_id(a) == content_id(a.copy())
    assert content_id(a) != content_id(a.reshape(4, 3))
    assert content_id(a) != content_id(a[::-1])
    assert reference_id("test", 17) == "test:17"
    assert split_reference_id("test:17") == ("test", 17)
    assert split_reference_id(content_id(a)) is None


def test_schema_version(store: Store) -> None:
    assert store.schema_version() == SCHEMA_VERSION >= 1


def test_classes_and_keywords(store: Store) -> None:
    store.classes.put([ClassRow(1, "dog", links=("http://x",)), ClassRow(0, "cat")])
    assert [c.name for c in store.classes.list()] == ["cat", "dog"]
    assert store.classes.get(1).links == ("http://x",)
    assert store.classes.by_name("dog").id == 1
    store.classes.put([ClassRow(1, "dog", description="barks")])
    assert store.classes.get(1).description == "barks"
    with pytest.raises(NotFoundError, match="classes: cat, dog"):
        store.classes.by_name("bird")
    with pytest.raises(NotFoundError):
        store.classes.get(5)
    store.classes.put_keywords(
        [KeywordRow(0, "kitty", 3), KeywordRow(0, "tabby", 9), KeywordRow(1, "pup", 1)]
    )
    store.classes.put_keywords([KeywordRow(0, "kitty", 4)])
    kws = store.classes.keywords(class_id=0)
    assert [(k.keyword, k.original_count) for k in kws] == [("tabby", 9), ("kitty", 4)]
    assert len(store.classes.keywords()) == 3


def test_references(store: Store) -> None:
    rows = [
        ReferenceRow("test", i, i % 2, f"c{i}", array_name="ref", array_row=i)
        for i in range(5)
    ]
    assert store.references.add(rows) == 5
    assert store.references.add(rows[:2]) == 0
    assert store.references.count() == 5 and store.references.count(split="train") == 0
    r = store.references.get("test:3")
    assert r == rows[3] and r.id == "test:3"
    store.references.set_keywords({3: "tabby"}, split="test")
    assert store.references.get("test:3").keyword == "tabby"
    assert [r.index for r in store.references.list(class_id=1)] == [1, 3]
    for bad in ("test:9", "nonsense", "test:x"):
        with pytest.raises(NotFoundError):
            store.references.get(bad)


def test_candidates_insert_or_ignore(store: Store) -> None:
    rows = [_cand(i, extra={"b": 1, "a": [1, 2]} if i == 0 else {}) for i in range(10)]
    assert store.candidates.add(rows) == 10
    assert store.candidates.add([*rows[5:], _cand(10)]) == 1
    assert store.candidates.count() == 11
    assert store.candidates.get(rows[0].id) == rows[0]
    assert store.candidates.get(rows[0].id).extra == {"a": [1, 2], "b": 1}
    ids = [rows[7].id, rows[2].id]
    assert [r.source_ref for r in store.candidates.get_many(ids)] == ["7", "2"]
    assert store.candidates.existing([rows[1].id, "nope"]) == {rows[1].id}
    assert [r.source_ref for r in store.candidates.iter(class_id=1, batch_size=2)] == [
        "1",
        "4",
        "7",
        "10",
    ]
    assert store.candidates.count(class_id=0) == 4
    assert store.candidates.count_by_class() == {0: 4, 1: 4, 2: 3}
    assert store.candidates.class_map()[rows[5].id] == 2
    with pytest.raises(NotFoundError):
        store.candidates.get("nope")
    with pytest.raises(NotFoundError):
        store.candidates.get_many([rows[0].id, "nope"])


def test_candidates_bulk_more_than_one_batch(store: Store) -> None:
    rows = [_cand(i, keyword="k" if i % 2 else None) for i in range(12_001)]
    assert store.candidates.add(iter(rows)) == 12_001
    assert store.candidates.count(keyword="k") == 6000
    got = [r.id for r in store.candidates.iter(batch_size=5000)]
    assert got == [r.id for r in rows]  # insertion order, no gaps or repeats
    assert len(store.candidates.existing(r.id for r in rows)) == 12_001


def test_tasks(store: Store) -> None:
    t = TaskRow("t1", 2, ("a", "b", "c"), {"pos": ("b",)}, seed=3, created="2020")
    assert store.tasks.add([t, TaskRow("t2", 1, ("x",))]) == 2
    assert store.tasks.add([t]) == 0
    assert store.tasks.get("t1") == t
    assert store.tasks.get("t2").created  # stamped
    assert [x.id for x in store.tasks.list(class_id=1)] == ["t2"]
    with pytest.raises(NotFoundError):
        store.tasks.get("t3")


def test_annotations_append_and_counts(store: Store) -> None:
    evs = [
        AnnotationEvent("w", "task", 0, "a", 1, task_id="t", assignment_id="as1"),
        AnnotationEvent("w", "task", 0, "b", 0, task_id="t", assignment_id="as1"),
        AnnotationEvent("v", "task", 0, "a", 0, task_id="t", assignment_id="as2"),
        AnnotationEvent("v", "task", 0, "b", 1, task_id="t", assignment_id="as2"),
        AnnotationEvent("me", "select", 1, "c", 1, when="2020-01-01T00:00:00Z"),
    ]
    ids = store.annotations.add(evs)
    assert ids == sorted(ids) and len(set(ids)) == 5
    more = store.annotations.add([AnnotationEvent("me", "verify", 1, "c", 1)])
    assert more[0] > ids[-1]
    assert store.annotations.count() == 6 and store.annotations.count(kind="task") == 4
    got = store.annotations.list(item_id="c")
    assert [e.kind for e in got] == ["select", "verify"]
    assert got[0].when == "2020-01-01T00:00:00Z" and got[1].when
    assert got[0].id == ids[4]
    assert [e.id for e in store.annotations.list(after_id=ids[3])] == [ids[4], more[0]]
    assert store.annotations.item_counts(kinds=["task"]) == {"a": (2, 1), "b": (2, 1)}
    assert store.annotations.set_assignment_status("as2", status="Rejected") == 2
    assert store.annotations.list(assignment_id="as2")[0].assignment_status == (
        "Rejected"
    )
    assert store.annotations.item_counts(kinds=["task"]) == {"a": (1, 1), "b": (1, 0)}
    assert store.annotations.item_counts(kinds=["task"], valid_only=False)["b"] == (
        2,
        1,
    )
    assert store.annotations.item_counts()["c"] == (2, 2)


def test_blacklist_current_is_derived(store: Store) -> None:
    store.blacklist.add(
        [
            BlacklistEvent("a", "drawing", "me"),
            BlacklistEvent("b", "blurry", "me"),
            BlacklistEvent("a", "", "you", undo=True),
            BlacklistEvent("c", "wrong class", "me"),
            BlacklistEvent("c", "wrong class (again)", "you"),
        ]
    )
    assert store.blacklist.current() == {"b": "blurry", "c": "wrong class (again)"}
    store.blacklist.add([BlacklistEvent("a", "cartoon", "me")])
    assert store.blacklist.current()["a"] == "cartoon"
    assert [e.undo for e in store.blacklist.events(item_id="a")] == [False, True, False]


def test_neardup(store: Store) -> None:
    nl = NeighbourList("c1", "l2", ("test:1", "train:5"), (0.5, 1.25))
    assert store.neardup.put_neighbours([nl, NeighbourList("c1", "ssim", (), ())]) == 2
    assert store.neardup.neighbours("c1", metric="l2") == [nl]
    assert [x.metric for x in store.neardup.neighbours("c1")] == ["l2", "ssim"]
    nl2 = NeighbourList("c1", "l2", ("test:2",), (0.1,))
    store.neardup.put_neighbours([nl2, NeighbourList("c0", "l2", ("x",), (2.0,))])
    assert [x.candidate_id for x in store.neardup.iter_neighbours(metric="l2")] == [
        "c0",
        "c1",
    ]
    assert store.neardup.neighbours("c1", metric="l2") == [nl2]
    with pytest.raises(StoreError, match="2 ids but 1 distances"):
        store.neardup.put_neighbours([NeighbourList("c", "l2", ("a", "b"), (1.0,))])
    store.neardup.add_verdicts(
        [
            DuplicateVerdict("c1", "test:1", "l2", True, "me"),
            DuplicateVerdict("c2", "test:9", "l2", True, "me"),
            DuplicateVerdict("c2", "test:9", "ssim", False, "you"),
        ]
    )
    assert store.neardup.duplicate_pairs() == {("c1", "test:1")}
    assert len(store.neardup.verdicts(candidate_id="c2")) == 2
    store.neardup.add_reviews(
        [NeighbourReview("c1", "l2", "me", ("test:1", "train:5"), when="t0")]
    )
    rv = store.neardup.reviews(candidate_id="c1", metric="l2")
    assert rv[0].references == ("test:1", "train:5") and rv[0].when == "t0"
    assert store.neardup.reviews(metric="ssim") == []


def test_revisions_are_immutable(store: Store) -> None:
    members = [
        RevisionMember("x", 0, bin=0, origin="sampled"),
        RevisionMember("a", 1, bin=2, origin="upward", from_bin=1),
    ]
    r0 = store.revisions.create(
        Revision("r-0", "threshold", {"t": 0.7}, seed=1, shortfall={"1": 2}), members
    )
    assert r0.created and r0.params == {"t": 0.7} and r0.shortfall == {"1": 2}
    assert store.revisions.get("r-0") == r0
    assert store.revisions.members("r-0") == members  # written order kept
    with pytest.raises(StoreError, match="already exists"):
        store.revisions.create(Revision("r-0", "x"), [])
    with pytest.raises(NotFoundError, match="parent revision 'zz'"):
        store.revisions.create(Revision("r-1", "x", parent="zz"), [])
    store.revisions.create(Revision("r-1", "x", parent="r-0", valid=False), [])
    assert [r.name for r in store.revisions.list()] == ["r-0", "r-1"]
    assert not store.revisions.get("r-1").valid
    with pytest.raises(NotFoundError, match=r"revisions: r-0, r-1"):
        store.revisions.get("r-2")
    store.revisions.set_review(ReviewState("r-0", 0, reviewed=True, who="me"))
    store.revisions.set_review(ReviewState("r-0", 0, reviewed=False, problematic=True))
    store.revisions.set_review(ReviewState("r-0", 1, reviewed=True))
    rev = store.revisions.reviews("r-0")
    assert not rev[0].reviewed and rev[0].problematic and rev[1].reviewed
    assert len(store.revisions.review_events("r-0")) == 3
    with pytest.raises(NotFoundError):
        store.revisions.set_review(ReviewState("nope", 0, reviewed=True))


def test_artifacts_stages_predictions(store: Store) -> None:
    a = ArtifactRecord("px", "arrays/px.u8", "ab", stage="ingest", params={"k": 1})
    store.artifacts.put(a)
    assert store.artifacts.get("px").params == {"k": 1}
    assert store.artifacts.get("px").created
    store.artifacts.put(ArtifactRecord("px", "arrays/px.u8", "cd", created="t"))
    assert store.artifacts.get("px").sha256 == "cd"
    assert store.artifacts.list(stage="ingest") == []
    with pytest.raises(NotFoundError):
        store.artifacts.get("nope")

    store.stages.mark(StageCheckpoint("ingest", "chunk-1"))
    store.stages.mark(StageCheckpoint("ingest", "chunk-0", artifact="a"))
    store.stages.mark(StageCheckpoint("ingest", "chunk-2", done=False))
    assert store.stages.done_keys("ingest") == {"chunk-0", "chunk-1"}
    got = store.stages.get("ingest", key="chunk-0")
    assert got is not None and got.artifact == "a"
    assert store.stages.get("ingest", key="chunk-9") is None
    assert [c.key for c in store.stages.list("ingest")] == [
        "chunk-0",
        "chunk-1",
        "chunk-2",
    ]
    assert store.stages.reset("ingest") == 3 and store.stages.list("ingest") == []

    p = PredictionRecord("resnet", "r-0", "arrays/p.npy", "ef", created="t")
    store.predictions.put(p)
    store.predictions.put(PredictionRecord("alex", "r-0", "arrays/q.npy", "01"))
    assert store.predictions.get("resnet", dataset="r-0") == p
    assert [x.model for x in store.predictions.list(dataset="r-0")] == [
        "alex",
        "resnet",
    ]
    with pytest.raises(NotFoundError, match="model 'vgg'"):
        store.predictions.get("vgg", dataset="r-0")


def test_array_and_file_refs(store: Store) -> None:
    """What ``check`` and ingest's resume read: rows per pixel array, file paths."""
    assert store.references.max_array_row("ref") == -1
    store.references.add(
        [ReferenceRow("train", i, 0, f"c{i}", array_name=a, array_row=r)
         for i, (a, r) in enumerate([("ref", 4), ("ref", 9), ("other", 30)])]
        + [ReferenceRow("test", 0, 0, "c", array_name="ref")]
    )  # fmt: skip
    assert store.references.max_array_row("ref") == 9
    assert store.references.max_array_row("other") == 30
    derived = {"thumb": "images/x.t", "big": "images/x.b"}
    rows = [
        _cand(0, array_name="a", array_row=5),
        _cand(1, array_name="b", array_row=50),
        _cand(2, array_name="a", array_row=2),
        _cand(3, file_path="images/x", extra={"derived": derived}),
        _cand(4, file_path="images/y"),
        _cand(5, array_name="a"),  # no row: not a pixel reference
    ]
    store.candidates.add(rows)
    assert list(store.candidates.array_refs("a")) == [(rows[0].id, 5), (rows[2].id, 2)]
    assert store.candidates.max_array_row("a") == 5
    assert store.candidates.max_array_row("b") == 50
    assert store.candidates.max_array_row("ref") == -1
    assert sorted(store.candidates.file_refs()) == sorted(
        [(rows[3].id, "images/x", ["images/x.b", "images/x.t"]),
         (rows[4].id, "images/y", [])]
    )  # fmt: skip


def test_record_import_adds_events_and_sets_statuses(store: Store) -> None:
    store.annotations.add([AnnotationEvent("w", "task", 0, "a", 1, assignment_id="s1")])
    store.annotations.record_import(
        [AnnotationEvent("v", "task", 0, "a", 0, assignment_id="s2"),
         AnnotationEvent("v", "task", 0, "b", 1, assignment_id="s2")],
        {"s1": "Approved", "s2": "Rejected"},
    )  # fmt: skip
    got = [(e.item_id, e.assignment_status) for e in store.annotations.list()]
    assert got == [("a", "Approved"), ("a", "Rejected"), ("b", "Rejected")]
    assert store.annotations.item_counts(kinds=["task"]) == {"a": (1, 1)}


def test_stages_forget_one_checkpoint(store: Store) -> None:
    store.stages.mark(StageCheckpoint("dedup", "k1"))
    store.stages.mark(StageCheckpoint("dedup", "k2"))
    store.stages.mark(StageCheckpoint("ingest", "k1"))
    assert store.stages.forget("dedup", "k1") is True
    assert store.stages.forget("dedup", "k1") is False
    assert store.stages.done_keys("dedup") == {"k2"}
    assert store.stages.done_keys("ingest") == {"k1"}


_events = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]), st.booleans(), st.sampled_from(["x", "y"])
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(events=_events)
def test_blacklist_current_matches_replay(events: list[tuple[str, bool, str]]) -> None:
    """Property: the derived blacklist equals a replay of the events."""
    expected: dict[str, str] = {}
    for item, undo, reason in events:
        if undo:
            expected.pop(item, None)
        else:
            expected[item] = reason
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        with SQLiteStore(Path(d) / "retest.db") as s:
            s.blacklist.add(BlacklistEvent(i, r, "me", undo=u) for i, u, r in events)
            assert s.blacklist.current() == dict(sorted(expected.items()))


def test_sqlite_persists_and_refuses_newer_schema(tmp_path: Path) -> None:
    db = tmp_path / "retest.db"
    with SQLiteStore(db) as s:
        s.candidates.add([_cand(1)])
    with SQLiteStore(db) as s:
        assert s.candidates.count() == 1
        s._db.conn.execute("UPDATE schema_version SET version = 999")
    with pytest.raises(StoreError, match="newer than this retest supports"):
        SQLiteStore(db)
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(tmp_path / "missing" / "retest.db")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match=r"Is it a retest\.db file"):
        SQLiteStore(bad)


def test_sqlite_transaction_rolls_back(tmp_path: Path) -> None:
    """A failing batch leaves nothing behind (one transaction per write)."""
    with SQLiteStore(tmp_path / "retest.db") as s:

        def rows() -> Iterator[NeighbourList]:
            yield NeighbourList("ok", "l2", ("a",), (1.0,))
            yield NeighbourList("bad", "l2", ("a", "b"), (1.0,))

        with pytest.raises(StoreError):
            s.neardup.put_neighbours(rows())
        assert s.neardup.neighbours("ok") == []
