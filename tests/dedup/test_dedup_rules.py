"""Review queue, review thresholds and graph resolution.

See docs/algorithms.md#review-queue.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from retest.dedup.rules import (
    NO_PENDING,
    DedupCandidate,
    cifar_auto_excluded,
    default_thresholds,
    is_sufficiently_reviewed,
    resolve_near_duplicates,
    review_queue,
    review_thresholds,
)

INFO = {
    "a": DedupCandidate(0, 0.9, source_id="f1"),
    "b": DedupCandidate(0, 0.8, source_id="f1"),  # same Flickr id as a
    "c": DedupCandidate(1, 0.5, source_id="f3"),
    "d": DedupCandidate(1, None, blacklisted=True, source_id="f4"),
}
NBRS = {
    "a": {"l2": [("a", 0.0), ("b", 1.0), ("train:1", 5.0), ("d", 6.0), ("c", 9.0)]},
    "c": {"l2": [("train:2", 50.0)]},
    "d": {"l2": [("a", 1.0)]},
}


def test_review_queue_rules() -> None:
    q = review_queue(NBRS, thresholds={"l2": 8.0}, candidates=INFO)
    # a: itself, same-source b, blacklisted d and c above threshold are skipped;
    # d is blacklisted; c's neighbour is above threshold
    assert [(i.candidate_id, i.references) for i in q] == [("a", ("train:1",))]
    q2 = review_queue(
        NBRS,
        thresholds={"l2": 8.0},
        candidates=INFO,
        reviewed={"a": {"l2": {"train:1"}}},
    )
    assert q2 == []


def test_review_thresholds_and_sufficiency() -> None:
    th = review_thresholds(
        NBRS,
        candidate_ids=["a", "b", "c"],
        metrics=["l2"],
        candidates=INFO,
        reviewed={"a": {"l2": {"train:1"}}},
    )
    assert th["a"]["l2"] == 6.0  # d is not reviewed (blacklist does not matter here)
    assert th["b"]["l2"] == 0.0  # no results
    assert th["c"]["l2"] == 50.0
    th2 = review_thresholds(
        {"a": {"l2": [("a", 0.0), ("b", 1.0)]}},
        candidate_ids=["a"],
        metrics=["l2"],
        candidates=INFO,
    )
    assert th2["a"]["l2"] == NO_PENDING
    assert is_sufficiently_reviewed({"l2": 50.0}, {"l2": 8.0})
    assert not is_sufficiently_reviewed({"l2": 6.0}, {"l2": 8.0})
    assert not is_sufficiently_reviewed({"l2": 8.0}, {"l2": 8.0})


def test_defaults_and_cifar_rule() -> None:
    assert default_thresholds()["l2"] == 1.2e8
    assert default_thresholds()["dssim"] == 0.2205
    assert default_thresholds()["features"] == 1.32e4
    assert cifar_auto_excluded([1000.0**2, 1000.0**2 + 1, 0.0]).tolist() == [
        True,
        False,
        True,
    ]


def test_resolution_rules() -> None:
    cands = {
        "x1": DedupCandidate(0, 0.9),
        "x2": DedupCandidate(0, 0.95),
        "y1": DedupCandidate(1, 0.75),
        "y2": DedupCandidate(2, 0.72),
        "z1": DedupCandidate(3, 0.9),
        "z2": DedupCandidate(3, 0.1),
        "w1": DedupCandidate(4, 0.65),
        "w2": DedupCandidate(5, 0.5),
        "s1": DedupCandidate(6, 0.9, source_id="same"),
        "s2": DedupCandidate(6, 0.3, source_id="same"),
    }
    pairs = [("x1", "x2"), ("y1", "y2"), ("z1", "test:3"), ("z2", "z1"), ("w2", "w1")]
    good = {0: 10, 1: 50, 2: 5, 3: 1, 4: 1, 5: 0, 6: 1}
    res = resolve_near_duplicates(pairs, candidates=cands, good_counts=good)
    assert "x2" in res.kept and "x1" in res.near_duplicates  # max (score, id)
    assert "y2" in res.kept  # both ≥0.7: class with fewer good candidates
    assert {"z1", "z2"} <= res.near_duplicates  # touches an original
    assert "w1" in res.kept  # only class with score ≥ 0.6
    assert "s1" in res.kept and "s2" in res.near_duplicates  # same source id
    ov = resolve_near_duplicates(
        pairs, candidates=cands, good_counts=good, overrides=["x1"]
    )
    assert "x1" in ov.kept and "x2" in ov.near_duplicates


ids = st.sampled_from([f"c{i}" for i in range(8)] + ["train:1", "test:2"])


@settings(max_examples=50, deadline=None)
@given(pairs=st.lists(st.tuples(ids, ids), max_size=15), seed=st.integers(0, 1000))
def test_resolution_properties(pairs, seed) -> None:
    cands = {f"c{i}": DedupCandidate(i % 3, (i * 37 % 10) / 10) for i in range(8)}
    base = resolve_near_duplicates(pairs, candidates=cands)
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    flipped = [(b, a) for a, b in shuffled]
    assert resolve_near_duplicates(flipped, candidates=cands) == base  # order/symmetry
    assert (
        resolve_near_duplicates(pairs + pairs, candidates=cands) == base
    )  # idempotent
    # exactly one survivor per candidate-only component, none where an original is
    for comp in base.components:
        members = [m for m in comp if m in cands]
        kept = [m for m in members if m in base.kept]
        if len(members) < len(comp):
            assert kept == [] and set(members) <= base.near_duplicates
        elif members:
            assert len(kept) == 1
    assert not (base.kept & base.near_duplicates)
