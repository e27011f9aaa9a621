"""Keyword plan rules v4 and v6 and keyword recovery core.

See docs/algorithms.md#rule-v4, #rule-v6.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import ConfigError
from retest.labeling.keyword_plan import (
    CIFAR10_V4_SKIP,
    allocate_v4,
    allocate_v6,
    needed_vs_available,
    top_k_keywords,
)
from retest.labeling.keywords import (
    choose_unique_keywords,
    find_exact_matches,
    keyword_histogram,
)

CIFAR = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


def test_v6_hand_checked_example_with_ties() -> None:
    # denom 12: f = 4.1667, 2.5, 2.5, 0.8333 -> floors 4,2,2,0 (sum 8); two images left.
    # gaps .1667, .5, .5, .8333 -> z first, then the x/y tie goes to x (insertion order).
    plan = allocate_v6({"a": {"w": 5, "x": 3, "y": 3, "z": 1}}, size=10)
    assert plan.allocation == {"a": {"w": 4, "x": 3, "y": 2, "z": 1}}
    # all gaps equal: the first keyword in first-occurrence order wins
    plan = allocate_v6({"a": {"p": 1, "q": 1, "r": 1}}, size=10)
    assert plan.allocation == {"a": {"p": 4, "q": 3, "r": 3}}
    # order matters: the same counts in another first-occurrence order
    plan = allocate_v6({"a": {"r": 1, "q": 1, "p": 1}}, size=10)
    assert plan.allocation == {"a": {"r": 4, "q": 3, "p": 3}}


def test_v6_drops_zero_keywords_and_respects_top_k() -> None:
    counts = {"a": {"big": 1000, "tiny": 1, "mid": 100, "cut": 1}}
    plan = allocate_v6(counts, size=20, top_k=3)
    # top-3 = big, mid, tiny (tiny before cut: same count, earlier first occurrence)
    assert set(plan.allocation["a"]) <= {"big", "mid", "tiny"}
    assert "tiny" not in plan.allocation["a"]  # 20/1101 rounds to 0 and is dropped
    assert plan.totals() == {"a": 20}


def test_top_k_is_stable_with_respect_to_first_occurrence() -> None:
    assert top_k_keywords({"a": 2, "b": 3, "c": 2, "d": 3}, 3) == [
        ("b", 3),
        ("d", 3),
        ("a", 2),
    ]


@settings(max_examples=50, deadline=None)
@given(
    counts=st.lists(
        st.lists(st.integers(1, 600), min_size=1, max_size=60), min_size=1, max_size=10
    ),
    per_class=st.integers(1, 300),
    top_k=st.integers(1, 50),
)
def test_v6_gives_exactly_size_over_classes(counts, per_class, top_k) -> None:
    classes = {
        f"c{i}": {f"k{i}_{j}": n for j, n in enumerate(cs)}
        for i, cs in enumerate(counts)
    }
    size = per_class * len(classes)
    plan = allocate_v6(classes, size=size, top_k=top_k)
    assert plan.totals() == dict.fromkeys(classes, size // len(classes))
    for cls, kws in plan.allocation.items():
        top = dict(top_k_keywords(classes[cls], top_k))
        assert set(kws) <= set(top) and all(n > 0 for n in kws.values())
        denom = sum(top.values())
        for kw, n in kws.items():  # floor or floor+1 of the fraction
            assert n - per_class * top[kw] / denom < 1 + 1e-9
            assert n >= math.floor(per_class * top[kw] / denom)


def test_v6_reports_a_keyword_in_two_classes() -> None:
    plan = allocate_v6(
        {"automobile": {"coupe": 5, "cruiser": 5}, "ship": {"cruiser": 3}}, size=20
    )
    assert [(c.keyword, c.classes) for c in plan.conflicts] == [
        ("cruiser", ("automobile", "ship"))
    ]


def test_v6_needs_a_divisible_size() -> None:
    with pytest.raises(ConfigError, match="divisible"):
        allocate_v6({"a": {"x": 1}, "b": {"y": 1}}, size=7)


def test_v4_reproduces_ceil_and_the_half_cut() -> None:
    counts = {"airplane": {"k60": 60, "k31": 31, "k15": 15, "k14": 14, "k1": 1}}
    plan = allocate_v4(counts, original_size=60000, size=2000, skip={})
    # r = 30: 60/30=2 -> 2, 31/30 -> ceil 2, 15/30=0.5 -> 1 (not < 0.5), 14/30 -> 0
    assert plan.allocation == {"airplane": {"k60": 2, "k31": 2, "k15": 1}}
    assert plan.params["r"] == 30


def test_v4_skip_list_and_exclusions() -> None:
    counts = {c: {} for c in CIFAR}
    counts["automobile"] = {"cruiser": 40, "ford": 90, "coupe": 777}
    counts["ship"] = {"cruiser": 50, "liner": 70}
    counts["truck"] = {"ambulance": 30, "ford": 20}
    counts["automobile"]["ambulance"] = 10
    counts["ship"]["ambulance"] = 5
    plan = allocate_v4(
        counts, original_size=60000, size=2000, exclude=["ford"], class_order=CIFAR
    )
    # published skip list: cruiser ignores ship (8), ambulance ignores truck and ship
    assert plan.allocation["automobile"]["cruiser"] == math.ceil(90 / 30)
    assert "cruiser" not in plan.allocation["ship"]
    assert plan.allocation["automobile"]["ambulance"] == math.ceil(45 / 30)
    assert (
        "ford" not in plan.allocation["automobile"]
        and "ford" not in plan.allocation["truck"]
    )
    assert (
        plan.allocation["automobile"]["coupe"] == 26
        and plan.allocation["ship"]["liner"] == 3
    )
    assert not plan.conflicts
    assert CIFAR10_V4_SKIP["toy"] == (2, 8, 3)


def test_v4_reports_unresolved_shared_keywords() -> None:
    plan = allocate_v4(
        {"a": {"pet": 30, "x": 5}, "b": {"pet": 60}},
        original_size=600,
        size=20,
        skip={},
    )
    assert plan.allocation == {"a": {}, "b": {"pet": 3}}
    assert plan.conflicts[0].keyword == "pet" and plan.conflicts[0].classes == (
        "a",
        "b",
    )


def test_needed_vs_available() -> None:
    plan = allocate_v6({"a": {"x": 1, "y": 1}}, size=4)
    rows = needed_vs_available(plan, {("a", "x"): 5})
    assert rows == [
        {"class": "a", "keyword": "x", "needed": 2, "available": 5, "missing": 0},
        {"class": "a", "keyword": "y", "needed": 2, "available": 0, "missing": 2},
    ]


def test_unique_keyword_choice_follows_the_published_rule() -> None:
    # class 0 counts over all matches: cat 2 (img0, img2), kitty 3 (img0, img1 twice)
    matches = [["cat", "kitty"], ["kitty", "kitty"], ["cat"], ["zz", "aa"], []]
    assert choose_unique_keywords(matches, [0, 0, 0, 1, 1]) == [
        "kitty",
        "kitty",
        "cat",
        "zz",
        None,
    ]


def test_exact_matches_and_histogram() -> None:
    m = find_exact_matches(
        ["h1", "h2", "h1"], [("h1", 4, "a"), ("h3", 5, "b"), ("h1", 9, "c")]
    )
    assert m == [[(4, "a"), (9, "c")], [], [(4, "a"), (9, "c")]]
    h = keyword_histogram([1, 0, 1, 1], ["x", "y", None, "x"], ["c0", "c1"])
    assert h == {"c0": {"y": 1}, "c1": {"x": 2}}
