"""The stale-candidate check answered in SQL equals the definition it replaced.

``stale_candidates`` used to load every neighbour list of every metric and walk
every candidate; now the store finds the classed candidates without a list of
some metric (``without_lists``). The old definition is kept here as the oracle
and both run on a real project whose ids take every key encoding (content
digests, other ids, 31-byte ids), with blacklisted candidates without lists (one
taken off the blacklist again), an unclassed candidate without lists, two
metrics where only one list is missing, unclassed candidates with and without
lists. Lists are only ever written for candidates (the count fast path of that
time relied on it; the marks of schema 8 do not: ``test_store_stale_marks.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from retest.errors import StageError
from retest.project import (
    Project,
    check_fresh,
    init_project,
    load_neighbours,
    stale_candidates,
)
from retest.project._neardup import metrics_run
from retest.store import _sqlite_decisions
from retest.store.rows import BlacklistEvent, CandidateRow, NeighbourList


def _old_stale(project: Project) -> list[str]:
    """The definition before the store answered it: every list and every id."""
    metrics = metrics_run(project)
    if not metrics:
        return []
    nbrs = load_neighbours(project, list(metrics))
    black = set(project.store.blacklist.current())
    out = []
    for cid in project.store.candidates.columns(("id",), has_class=True)["id"]:
        if cid in black:
            continue
        have = nbrs.get(cid, {})
        if any(m not in have for m in metrics):
            out.append(cid)
    return out


def _digest(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


# insertion order differs from id order; every key encoding occurs
_IDS = [
    *(_digest(i) for i in range(12)),
    "flickr:42",
    "x" * 31,  # 31 UTF-8 bytes: the two-byte 0xffff key prefix
    "fichier-é",
    "A" * 64,  # 64 characters but not lower-case hex
]


def _lists(ids: list[str], metric: str) -> list[NeighbourList]:
    return [NeighbourList(c, metric, ("train:0", "train:1"), (1.0, 2.0)) for c in ids]


@pytest.fixture
def project(tmp_path: Path):
    proj = init_project(tmp_path / "p", classes=["a", "b"])
    rows = [CandidateRow(c, "src", str(i), class_id=i % 2) for i, c in enumerate(_IDS)]
    proj.store.candidates.add(rows)
    yield proj
    proj.close()


def _check(proj: Project, expected: list[str]) -> None:
    old = _old_stale(proj)
    assert old == expected  # the oracle agrees with the case as built
    assert stale_candidates(proj) == old


@pytest.mark.parametrize("scan", [None, 3])
def test_same_stale_candidates_as_the_full_pass(project, monkeypatch, scan) -> None:
    if scan is not None:  # queries split into rowid ranges of 3
        monkeypatch.setattr(_sqlite_decisions, "_SCAN", scan)
    proj = project
    nd = proj.store.neardup
    assert stale_candidates(proj) == []  # no metric ever ran
    # two unclassed candidates: the dedup stage gives them lists too
    unclassed = ["u:1", _digest(50)]
    proj.store.candidates.add([CandidateRow(c, "src", c) for c in unclassed])
    every = [*_IDS, *unclassed]
    nd.put_neighbours(_lists(every, "l2") + _lists(every, "warp"))
    _check(proj, [])

    # a classed newcomer with an l2 list only: as many warp lists as classed
    # candidates, yet one of them has none
    nd.put_neighbours(_lists(["late:1"], "l2"))
    proj.store.candidates.add([CandidateRow("late:1", "src", "l1", class_id=1)])
    _check(proj, ["late:1"])

    # blacklisted: an old candidate with lists, a new one with none (it is no
    # excuse for a missing list of a candidate that is not blacklisted)
    late_black = _digest(200)
    proj.store.candidates.add([CandidateRow(late_black, "src", "lb", class_id=0)])
    proj.store.blacklist.add(
        [
            BlacklistEvent(_IDS[5], "blurry", "me"),
            BlacklistEvent(late_black, "blurry", "me"),
        ]
    )
    _check(proj, ["late:1"])

    # new candidates: one with a class and both lists missing, one with only the
    # warp list missing, one without a class (never stale), one blacklisted, one
    # blacklisted and taken off again
    new = ["late:2", _digest(100), "late:unclassed", _digest(101), "late:undone"]
    proj.store.candidates.add(
        [
            CandidateRow(new[0], "src", "n0", class_id=1),
            CandidateRow(new[1], "src", "n1", class_id=0),
            CandidateRow(new[2], "src", "n2", class_id=None),
            CandidateRow(new[3], "src", "n3", class_id=0),
            CandidateRow(new[4], "src", "n4", class_id=1),
        ]
    )
    nd.put_neighbours(_lists([new[1]], "l2"))
    proj.store.blacklist.add(
        [
            BlacklistEvent(new[3], "blurry", "me"),
            BlacklistEvent(new[4], "blurry", "me"),
            BlacklistEvent(new[4], "blurry", "me", undo=True),
            BlacklistEvent(late_black, "ok", "me", undo=True),  # stale again
        ]
    )
    expected = ["late:1", late_black, new[0], new[1], new[4]]
    _check(proj, expected)
    with pytest.raises(StageError, match=r"^5 candidates were added") as e:
        check_fresh(proj)
    assert "late:1" in str(e.value)

    # dedup again (it skips the blacklisted): fresh
    black = set(proj.store.blacklist.current())
    every = [c for c in [*every, "late:1", late_black, *new] if c not in black]
    nd.put_neighbours(_lists(every, "l2") + _lists(every, "warp"))
    _check(proj, [])
    check_fresh(proj)


def test_sqlite_plans_use_the_primary_key(project) -> None:
    """Each candidate probes the (candidate_id, metric) key, and the counts scan
    that index: no list is read."""
    proj = project
    proj.store.neardup.put_neighbours(_lists(_IDS, "l2"))
    seen: dict[str, list[str]] = {"probe": [], "count": []}
    conn_rows = proj.store.neardup._db.rows

    def spy(sql, params=()):
        if "NOT EXISTS" in sql or "TOTAL(" in sql:
            plan = conn_rows(f"EXPLAIN QUERY PLAN {sql}", params)
            seen["probe" if "NOT EXISTS" in sql else "count"].extend(
                str(r[-1]) for r in plan
            )
        return conn_rows(sql, params)

    def spy_one(sql, params=()):
        spy(sql, params)
        return conn_one(sql, params)

    conn_one = proj.store.neardup._db.one
    proj.store.neardup._db.rows = spy  # type: ignore[method-assign]
    proj.store.neardup._db.one = spy_one  # type: ignore[method-assign]
    try:
        assert proj.store.neardup.without_lists(["l2"]) == []
        assert proj.store.neardup.list_counts(["l2", "warp"]) == {
            "l2": len(_IDS),
            "warp": 0,
        }
    finally:
        del proj.store.neardup._db.rows
        del proj.store.neardup._db.one
    # the counts read the key index alone (no list), without a sort
    plan = " | ".join(seen["count"])
    assert "SCAN neighbours USING COVERING INDEX" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    plan = " | ".join(seen["probe"])
    assert "sqlite_autoindex_neighbours_1 (candidate_id=? AND metric=?)" in plan, plan
    assert "SCAN neighbours" not in plan, plan
