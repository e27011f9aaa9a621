"""The stale check after real dedup runs: the marks change no answer.

A Fashion-MNIST project goes through the dedup stage, new ingests, blacklist
changes (a candidate the run skipped is taken off the blacklist), an unclassed
newcomer, an interrupted run finished later, and a schema-7 project (written
without marks, as the previous release did) migrated to schema 8. After every
step ``stale_candidates`` and ``metrics_run`` are compared with the full
definitions (every list and every candidate read), and the marks are checked to
be where the stage leaves them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from dedup_helpers import fm_images, fm_project  # type: ignore[import-not-found]

import retest.stages.dedup._dedup as dd
import retest.store.sqlite as sq
from retest.errors import StageError
from retest.project import Project, check_fresh, stale_candidates
from retest.project._neardup import metric_state, metrics_run
from retest.stages.dedup import run_dedup
from retest.store._sqlite_decisions import _NearDup
from retest.store.rows import BlacklistEvent, CandidateRow, content_id

N_REF, N_NEW = 60, 40


def _full_stale(p: Project) -> list[str]:
    ms = metrics_run(p)
    have = {
        m: {n.candidate_id for n in p.store.neardup.iter_neighbours(metric=m)}
        for m in ms
    }
    black = set(p.store.blacklist.current())
    ids = p.store.candidates.columns(("id",), has_class=True)["id"]
    return [c for c in ids if c not in black and any(c not in have[m] for m in ms)]


def _full_metrics(p: Project) -> set[str]:
    with sqlite3.connect(p.store.path) as db:
        return {r[0] for r in db.execute("SELECT DISTINCT metric FROM neighbours")}


def _check(p: Project, expected: list[str]) -> None:
    assert p.store.neardup.list_metrics() == _full_metrics(p)
    assert _full_stale(p) == expected  # the case is what it is meant to be
    assert stale_candidates(p) == expected


def _marks(p: Project) -> dict[str, tuple[int, list[int]]]:
    with sqlite3.connect(p.store.path) as db:
        return {
            m: (u, [r[0] for r in db.execute(
                "SELECT seq FROM neighbour_gaps WHERE metric = ? ORDER BY seq", (m,)
            )])
            for m, u in db.execute("SELECT metric, upto FROM neighbour_cover")
        }  # fmt: skip


def _seq(p: Project, cid: str) -> int:
    return p.store.candidates.locate([cid])[cid][0]


def _top(p: Project) -> int:
    return int(p.store._db.one("SELECT MAX(seq) FROM candidates")[0])


def _ingest(p: Project, images: np.ndarray, classes: list[int | None]) -> list[str]:
    px = p.pixel_array("fm")
    rows = px.append(images)
    ids = [content_id(img) for img in images]
    p.store.candidates.add(
        CandidateRow(c, "late", c[:8], class_id=k, array_name="fm", array_row=r)
        for c, k, r in zip(ids, classes, rows, strict=True)
    )
    return ids


@pytest.fixture
def images(fashion_mnist_dir: Path) -> tuple[np.ndarray, ...]:
    return fm_images(fashion_mnist_dir, N_REF, N_NEW)


def _dedup(p: Project, **kw) -> None:
    run_dedup(p, metrics=["l2"], k=3, backend="numpy", chunk_size=4, **kw)


def test_dedup_ingest_blacklist_interrupt(tmp_path: Path, images, monkeypatch) -> None:
    train, labels, test = images
    p = fm_project(tmp_path / "p", train, labels, test[:10])
    try:
        first = p.store.candidates.columns(("id",))["id"]
        _check(p, [])  # no metric ran
        p.store.blacklist.add([BlacklistEvent(first[3], "blurry", "t")])
        _dedup(p)
        # the run skipped the blacklisted candidate: the one gap of the mark
        assert _marks(p) == {"l2": (_top(p), [_seq(p, first[3])])}
        _check(p, [])
        check_fresh(p)

        # an ingest: classed, unclassed and blacklisted newcomers
        new = _ingest(p, test[10:16], [1, None, 2, 0, 1, 3])
        p.store.blacklist.add([BlacklistEvent(new[4], "blurry", "t")])
        _check(p, [new[0], new[2], new[3], new[5]])
        # the candidate the run skipped is back: stale through its gap
        p.store.blacklist.add([BlacklistEvent(first[3], "ok", "t", undo=True)])
        _check(p, [first[3], new[0], new[2], new[3], new[5]])
        with pytest.raises(StageError, match="5 candidates were added"):
            check_fresh(p)

        # a run interrupted after two chunks: some lists written, no new mark
        calls = []
        store_lists = dd._store_lists

        def interrupt(*a, **kw):
            if len(calls) == 2:
                raise KeyboardInterrupt
            calls.append(1)
            store_lists(*a, **kw)

        monkeypatch.setattr(dd, "_store_lists", interrupt)
        with pytest.raises(KeyboardInterrupt):
            _dedup(p)
        monkeypatch.undo()
        assert metric_state(p, "l2")["complete"] is False
        assert _marks(p)["l2"][0] < _top(p)
        _check(p, _full_stale(p))  # whatever the two chunks covered
        with pytest.raises(StageError, match="interrupted"):
            check_fresh(p)
        _dedup(p)  # finished: fresh, the blacklisted newcomer the only gap
        assert _marks(p) == {"l2": (_top(p), [_seq(p, new[4])])}
        _check(p, [])
        check_fresh(p)
        p.store.blacklist.add([BlacklistEvent(new[4], "ok", "t", undo=True)])
        _check(p, [new[4]])

        # another ingest after the mark, then lists of a metric without a run
        more = _ingest(p, test[16:20], [0, 0, 1, 1])
        _check(p, [new[4], *more])
        _dedup(p)
        _check(p, [])
    finally:
        p.close()


def test_a_schema_7_project_migrates_with_its_marks(
    tmp_path: Path, images, monkeypatch
) -> None:
    train, labels, test = images
    # the previous release: schema 7, no marks (and so no mark call by the stage)
    monkeypatch.setattr(sq, "MIGRATIONS", sq.MIGRATIONS[:7])
    monkeypatch.setattr(sq, "SCHEMA_VERSION", 7)
    monkeypatch.setattr(sq, "_COVER_VERSION", 0)  # no fill
    monkeypatch.setattr(_NearDup, "mark_covered", lambda self, ms: {})
    monkeypatch.setattr(
        _NearDup,
        "list_metrics",
        lambda self: {
            r[0] for r in self._db.rows("SELECT DISTINCT metric FROM neighbours")
        },
    )
    p = fm_project(tmp_path / "p", train, labels, test[:12])
    first = p.store.candidates.columns(("id",))["id"]
    p.store.blacklist.add([BlacklistEvent(first[5], "blurry", "t")])
    _dedup(p)
    late = _ingest(p, test[12:15], [2, None, 1])
    p.close()
    monkeypatch.undo()
    with sqlite3.connect(tmp_path / "p" / "retest.db") as db:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (7,)
        assert not db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'neighbour_cover'"
        ).fetchone()

    p = Project.open(tmp_path / "p")  # migrates to schema 8, marks measured
    try:
        assert p.store.schema_version() == 8
        gaps = sorted(_seq(p, c) for c in (first[5], *late))
        assert _marks(p) == {"l2": (_top(p), gaps)}
        _check(p, [late[0], late[2]])
        p.store.blacklist.add([BlacklistEvent(first[5], "ok", "t", undo=True)])
        _check(p, [first[5], late[0], late[2]])
        _dedup(p)
        assert _marks(p) == {"l2": (_top(p), [])}
        _check(p, [])
        check_fresh(p)
    finally:
        p.close()
