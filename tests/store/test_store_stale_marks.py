"""The marks of the neighbour lists (schema 8) never change an answer.

``without_lists`` now probes only the candidates after each metric's mark and
the gaps the mark left; ``metrics_run`` reads which metrics have lists from the
marks' table. Both are compared with the full definitions (every list and every
candidate read) after every step of random histories on a real SQLite file:
candidates added with and without a class, lists written for some metrics and
some candidates (before and after the candidate exists), marks set at random
times (some with too many gaps to move), blacklist changes, a list deleted and
one moved by hand (SQL), every key encoding of ids.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from retest.project import Project, init_project, stale_candidates
from retest.project._neardup import metrics_run
from retest.store import _sqlite_cover, _sqlite_decisions
from retest.store.rows import BlacklistEvent, CandidateRow, NeighbourList

METRICS = ("l2", "features", "dssim", "warp", "plug")


def _full_stale(p: Project, metrics: tuple[str, ...]) -> list[str]:
    """The definition: classed, not blacklisted, lacking a list of some metric."""
    have: dict[str, set[str]] = {}
    for m in metrics:
        have[m] = {n.candidate_id for n in p.store.neardup.iter_neighbours(metric=m)}
    black = set(p.store.blacklist.current())
    ids = p.store.candidates.columns(("id",), has_class=True)["id"]
    return [c for c in ids if c not in black and any(c not in have[m] for m in metrics)]


def _full_metrics(p: Project) -> set[str]:
    db = sqlite3.connect(p.store.path)
    try:
        return {r[0] for r in db.execute("SELECT DISTINCT metric FROM neighbours")}
    finally:
        db.close()


def _id(rng: np.random.Generator, i: int) -> str:
    kind = int(rng.integers(4))
    if kind == 0:
        return hashlib.sha256(f"c{i}".encode()).hexdigest()
    if kind == 1:
        return f"flickr:{i}"
    if kind == 2:
        return f"{i:031d}"  # 31 bytes: the two-byte key prefix
    return f"fichier-é-{i}"


def _lists(ids: list[str], metric: str) -> list[NeighbourList]:
    return [NeighbourList(c, metric, ("train:0",), (1.0,)) for c in ids]


def _check(p: Project) -> None:
    assert p.store.neardup.list_metrics() == _full_metrics(p)
    ms = metrics_run(p)
    assert set(ms) == _full_metrics(p) & {"l2", "features", "dssim", "warp"}
    every = tuple(sorted(_full_metrics(p)))
    black = set(p.store.blacklist.current())
    for some in [every, *((m,) for m in every)]:
        got = p.store.neardup.without_lists(some)
        assert [c for c in got if c not in black] == _full_stale(p, some), some
    assert stale_candidates(p) == _full_stale(p, ms)


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_answer_as_the_full_probe(
    tmp_path: Path, monkeypatch, seed: int
) -> None:
    monkeypatch.setattr(_sqlite_cover, "GAPS_MIN", 2)  # marks refuse to move too
    monkeypatch.setattr(_sqlite_decisions, "_SCAN", 7)  # several rowid ranges
    rng = np.random.default_rng(seed)
    p = init_project(tmp_path / "p", classes=["a", "b", "c"])
    nd = p.store.neardup
    cands: list[str] = []
    moved = 0
    try:
        for _ in range(60):
            op = int(rng.integers(7))
            if op == 0 or len(cands) < 5:  # an ingest
                new = [_id(rng, len(cands) + j) for j in range(int(rng.integers(1, 9)))]
                p.store.candidates.add(
                    CandidateRow(
                        c,
                        "s",
                        c,
                        class_id=None if rng.random() < 0.2 else int(rng.integers(3)),
                    )
                    for c in new
                )
                cands += new
            elif op == 1:  # lists for some candidates (a dedup chunk, an old run)
                m = METRICS[int(rng.integers(len(METRICS)))]
                pick = rng.random(len(cands)) < 0.7
                nd.put_neighbours(
                    _lists([c for c, k in zip(cands, pick, strict=True) if k], m)
                )
            elif op == 2:  # a list for an id that is not a candidate yet
                nd.put_neighbours(_lists([_id(rng, len(cands))], "l2"))
            elif op == 3:
                ms = [m for m in METRICS if rng.random() < 0.5]
                nd.mark_covered(ms)
            elif op == 4:
                c = cands[int(rng.integers(len(cands)))]
                undo = c in p.store.blacklist.current()
                p.store.blacklist.add([BlacklistEvent(c, "x", "t", undo=undo)])
            else:  # a hand edit deletes one list or moves it to another id
                with p.store._db.tx() as c:
                    rowids = [r[0] for r in c.execute("SELECT rowid FROM neighbours")]
                    if rowids:
                        r = rowids[int(rng.integers(len(rowids)))]
                        moved += 1
                        c.execute(
                            "DELETE FROM neighbours WHERE rowid = ?"
                            if op == 5
                            else "UPDATE OR IGNORE neighbours SET candidate_id = "
                            f"'moved:{moved}' WHERE rowid = ?",
                            (r,),
                        )
            _check(p)
    finally:
        p.close()


def test_a_dedup_pass_then_an_ingest_probes_only_the_new(
    tmp_path: Path, monkeypatch
) -> None:
    """After a mark, the stale check reads the new candidates and the gaps only:
    counted by the SQL the probe runs (candidates it visits)."""
    p = init_project(tmp_path / "p", classes=["a"])
    try:
        ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(300)]
        p.store.candidates.add(CandidateRow(c, "s", c, class_id=0) for c in ids)
        black = ids[10]
        p.store.blacklist.add([BlacklistEvent(black, "x", "t")])
        p.store.neardup.put_neighbours(_lists([c for c in ids if c != black], "l2"))
        assert p.store.neardup.mark_covered(["l2"]) == {"l2": True}
        late = ["late:1", "late:2"]
        p.store.candidates.add(CandidateRow(c, "s", c, class_id=0) for c in late)
        visited: list[str] = []
        p.store._db.conn.create_function(
            "seen", 1, lambda x: visited.append(x) or x, deterministic=False
        )
        # every candidate a probe visits decodes its id: count them
        monkeypatch.setattr(_sqlite_decisions, "_ID", f"seen({_sqlite_decisions._ID})")
        assert p.store.neardup.without_lists(["l2"]) == [black, *late]
        monkeypatch.undo()
        assert set(visited) == {black, *late}  # none of the 299 others
        assert stale_candidates(p) == late
        p.store.blacklist.add([BlacklistEvent(black, "x", "t", undo=True)])
        assert stale_candidates(p) == [black, *late]
    finally:
        p.close()
