"""Sampler behaviour: exact counts, no duplicates, subset of the eligible pool,
carry-over, shortfall reports, determinism, MatchedFrequency steps."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import ConfigError, UnknownNameError
from retest.sampling.base import SAMPLERS
from retest.sampling.basic import (
    sample_class_balanced,
    sample_threshold,
    sample_top_images,
)
from retest.sampling.eligibility import CandidateInfo, EligibilityRules, check_candidate
from retest.sampling.histogram import bin_index, round_histogram
from retest.sampling.keyword_counts import sample_keyword_counts
from retest.sampling.matched_frequency import sample_matched_frequency
from retest.sampling.selection_frequency import TargetHistogram
from retest.sampling.split import build_train_test

FREQS = [0.0, 0.1, 0.3, 0.5, 0.7, 0.75, 0.9, 1.0]


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[CandidateInfo], list[str]]:
    n_classes = draw(st.integers(1, 3))
    pool = []
    for k in range(n_classes):
        for i in range(draw(st.integers(0, 25))):
            pool.append(
                CandidateInfo(
                    f"c{k}-{i:03d}",
                    f"class{k}",
                    draw(st.sampled_from(FREQS)),
                    draw(st.sampled_from([0, 5, 10, 12])),
                    blacklisted=draw(st.booleans()) and draw(st.booleans()),
                    near_duplicate=draw(st.integers(0, 9)) == 0,
                )
            )
    ids = [c.id for c in pool]
    previous = draw(st.lists(st.sampled_from(ids), unique=True)) if ids else []
    return pool, previous


def _rules_for(name: str) -> EligibilityRules:
    return {
        "threshold": EligibilityRules(10, 0.7),
        "class-balanced": EligibilityRules(0, None, {}, False),
        "top-images": EligibilityRules(10),
        "matched-frequency": EligibilityRules(10),
    }[name]


def _targets(pool: list[CandidateInfo]) -> dict[str, TargetHistogram]:
    classes = sorted({c.class_name for c in pool})
    return {c: TargetHistogram(c, (2, 3, 5, 6, 4), 20, True) for c in classes}


def _run(
    name: str, pool: list[CandidateInfo], per_class: int, previous: list[str], seed: int
):
    classes = sorted({c.class_name for c in pool})
    kw = {
        "per_class": per_class,
        "previous": previous,
        "random_state": seed,
        "classes": classes,
    }
    if name == "matched-frequency":
        return sample_matched_frequency(pool, _targets(pool), **kw)
    return SAMPLERS.get(name)(pool, **kw)


@settings(max_examples=50, deadline=None)
@given(
    data=pools(),
    per_class=st.integers(1, 8),
    name=st.sampled_from(
        ["threshold", "class-balanced", "top-images", "matched-frequency"]
    ),
    seed=st.integers(0, 2**32),
)
def test_sampler_properties(data, per_class: int, name: str, seed: int) -> None:
    pool, previous = data
    result = _run(name, pool, per_class, previous, seed)
    rules = _rules_for(name)
    by_id = {c.id: c for c in pool}
    ids = result.ids
    assert len(ids) == len(set(ids))  # no duplicates
    for m in result.members:  # members ⊆ eligible pool, right class
        assert check_candidate(by_id[m.id], rules) is None
        assert by_id[m.id].class_name == m.class_name
    eligible = Counter(c.class_name for c in pool if check_candidate(c, rules) is None)
    counts = result.class_counts()
    short = {s.class_name: s for s in result.shortfall}
    for cls in sorted({c.class_name for c in pool}):
        got = counts.get(cls, 0)
        assert got <= per_class
        if cls in short:
            assert short[cls].got == got < per_class == short[cls].needed
        else:
            assert got == per_class  # exact per-class counts when feasible
        if name != "matched-frequency":
            # feasible ⇔ enough eligible candidates; never silently short
            assert (cls in short) == (eligible[cls] < per_class)
    assert result.is_valid == (not short)
    prev = set(previous)
    for cls in sorted({c.class_name for c in pool}):
        still_ok = [
            i
            for i in previous
            if by_id[i].class_name == cls and check_candidate(by_id[i], rules) is None
        ]
        kept = {m.id for m in result.members if m.class_name == cls}
        if name == "matched-frequency":
            target = round_histogram((2, 3, 5, 6, 4), per_class)
            for b in range(5):
                in_bin = [i for i in still_ok if bin_index(by_id[i].frequency) == b]
                if len(in_bin) <= target[b]:
                    assert set(in_bin) <= kept
        elif name != "top-images" and len(still_ok) <= per_class:
            assert set(still_ok) <= kept
        assert all(
            (m.how == "carried") == (m.id in prev)
            for m in result.members
            if m.how != "upward"
        )
    again = _run(name, pool, per_class, previous, seed)
    assert again == result  # same inputs + seed → identical


def _mf_pool(per_bin: list[int], cls: str = "a", start: int = 0) -> list[CandidateInfo]:
    mid = [0.1, 0.3, 0.5, 0.7, 0.9]
    return [
        CandidateInfo(f"{cls}{b}-{i:03d}", cls, mid[b], 10)
        for b, k in enumerate(per_bin)
        for i in range(start, start + k)
    ]


def test_matched_frequency_matches_target_exactly_and_seeds_differ() -> None:
    targets = {"a": TargetHistogram("a", (3, 1, 0, 4, 12), 20, True)}
    pool = _mf_pool([10, 10, 10, 10, 10])
    r1 = sample_matched_frequency(pool, targets, per_class=10, random_state=1)
    r2 = sample_matched_frequency(pool, targets, per_class=10, random_state=2)
    for r in (r1, r2):
        assert r.is_valid
        assert Counter(m.bin for m in r.members) == Counter({0: 1, 1: 1, 3: 2, 4: 6})
        assert all(m.how == "sampled" and m.bin == m.target_bin for m in r.members)
        assert r.metadata["targets"]["a"]["target"] == [1, 1, 0, 2, 6]
    assert r1.ids != r2.ids
    assert r1 == sample_matched_frequency(pool, targets, per_class=10, random_state=1)


def test_matched_frequency_upward_sampling_and_previous_preference() -> None:
    targets = {"a": TargetHistogram("a", (0, 0, 5, 3, 2), 20, True)}  # target 0,0,5,3,2
    pool = _mf_pool([5, 5, 2, 6, 5])  # bin 2 has only 2 of the 5 it needs
    prev = ["a3-005"]  # a spare bin-3 image that was in the parent
    r = sample_matched_frequency(
        pool, targets, per_class=10, random_state=0, previous=prev
    )
    assert r.is_valid and len(r.members) == 10
    up = [m for m in r.members if m.how == "upward"]
    assert len(up) == 3 and all(m.target_bin == 2 for m in up)
    # bin 3 needs 3, has 6 → 3 spare: upward takes them first (the previous member
    # first), then bin 4 is untouched beyond its own 2
    assert all(m.bin == 3 for m in up)
    assert "a3-005" in r.ids
    assert r.metadata["upward_sampled"]["a"]
    no_up = sample_matched_frequency(
        pool, targets, per_class=10, random_state=0, allow_upward=False
    )
    assert not no_up.is_valid
    (s,) = no_up.shortfall
    assert (s.got, s.needed, s.detail) == (7, 10, (("bin 2", 3),))


def test_matched_frequency_short_class_and_invalid_histogram_are_reported() -> None:
    targets = {
        "a": TargetHistogram("a", (0, 0, 0, 0, 20), 20, True),
        "b": TargetHistogram("b", (5, 5, 0, 0, 0), 10, False),
    }
    pool = _mf_pool([0, 0, 0, 0, 4], "a") + _mf_pool([10, 10, 0, 0, 0], "b")
    r = sample_matched_frequency(pool, targets, per_class=10, random_state=0)
    assert not r.is_valid
    short = {s.class_name: s for s in r.shortfall}
    assert short["a"].got == 4 and short["a"].detail == (("bin 4", 6),)
    assert short["b"].reason == "invalid_target_histogram" and short["b"].got == 0
    assert r.class_counts() == {"a": 4}


def test_threshold_overrides_carry_over_and_shortfall() -> None:
    pool = [CandidateInfo(f"x{i:02d}", "x", i / 20, 10) for i in range(21)]
    pool += [CandidateInfo(f"y{i:02d}", "y", 0.55, 10) for i in range(3)]
    r = sample_threshold(
        pool,
        per_class=4,
        random_state=3,
        class_thresholds={"y": 0.5},
        previous=["x15", "x02"],
    )
    assert not r.is_valid
    assert r.class_counts() == {"x": 4, "y": 3}
    assert "x15" in r.ids and "x02" not in r.ids  # x02 is below τ: not carried
    assert all(m.id >= "x14" for m in r.members if m.class_name == "x")
    (s,) = r.shortfall
    assert (s.class_name, s.needed, s.got, s.reason) == ("y", 4, 3, "too_few_eligible")
    with pytest.raises(ConfigError, match="threshold"):
        sample_threshold(pool, random_state=0, threshold=1.5)


def test_missing_class_is_a_shortfall_not_silence() -> None:
    pool = [CandidateInfo(f"a{i}", "a") for i in range(5)]
    r = sample_class_balanced(pool, per_class=2, random_state=0, classes=["a", "b"])
    assert (
        not r.is_valid and r.shortfall[0].class_name == "b" and r.shortfall[0].got == 0
    )


def test_top_images_order() -> None:
    pool = [
        CandidateInfo("a", "k", 0.9, 10),
        CandidateInfo("b", "k", 0.9, 12),
        CandidateInfo("c", "k", 1.0, 10),
        CandidateInfo("d", "k", 0.9, 12),
        CandidateInfo("e", "k", 0.9, 12),
    ]
    r = sample_top_images(pool, per_class=3, previous=["b"])
    # c (1.0) first; then among 0.9/12: b (previous) beats e > d by id
    assert sorted(r.ids) == ["b", "c", "e"]
    assert {m.id: m.how for m in r.members}["b"] == "carried"


def test_keyword_sampler_v4_and_v6() -> None:
    pool = [
        CandidateInfo(f"t{i:02d}", "cat", keyword="tabby", nn_distance=2000.0)
        for i in range(10)
    ]
    pool += [CandidateInfo("close", "cat", keyword="tabby", nn_distance=900.0)]
    pool += [CandidateInfo(f"s{i}", "cat", keyword="siamese") for i in range(2)]
    pool += [CandidateInfo(f"c{i}", "car", keyword="coupe") for i in range(3)]
    plan = {"cat": {"tabby": 4, "siamese": 3}, "car": {"coupe": 2}}
    v4 = sample_keyword_counts(pool, plan, random_state=0)
    assert "close" not in v4.ids
    assert not v4.is_valid
    (s,) = v4.shortfall
    assert s.class_name == "cat" and s.detail == (("keyword siamese", 1),)
    assert Counter(m.keyword for m in v4.members) == Counter(
        {"tabby": 4, "siamese": 2, "coupe": 2}
    )
    plan6 = {"cat": {"tabby": 6, "siamese": 1}, "car": {"coupe": 2}}
    v6 = sample_keyword_counts(pool, plan6, random_state=1, previous=v4.ids)
    tabby4 = {m.id for m in v4.members if m.keyword == "tabby"}
    assert tabby4 <= set(v6.ids)  # grown: all old kept
    sia6 = [m for m in v6.members if m.keyword == "siamese"]
    assert len(sia6) == 1 and sia6[0].how == "carried"  # shrunk: random subset kept
    assert v6.is_valid and v6.class_counts() == {"car": 2, "cat": 7}


def test_train_test_builder_prefers_non_overlapping_and_splits() -> None:
    pool = [CandidateInfo(f"a{i:02d}", "a") for i in range(12)]
    pool += [CandidateInfo(f"b{i:02d}", "b", near_duplicate=i < 3) for i in range(12)]
    overlap = {"a00", "a01", "a02", "b05"}
    r = build_train_test(
        pool, per_class=10, in_original_train=overlap, random_state=200
    )
    a = sorted(m.id for m in r.members if m.class_name == "a")
    # 9 non-overlapping first, then the first overlapping one in index order
    assert a == ["a00"] + [f"a{i:02d}" for i in range(3, 12)]
    b = sorted(m.id for m in r.members if m.class_name == "b")
    assert not r.is_valid and len(b) == 9  # 3 near-duplicates out; b short by 1
    assert r.metadata["per_class"]["a"] == {"overlap": 1, "n_train": 8, "n_test": 2}
    assert Counter((m.class_name, m.split) for m in r.members)[("b", "train")] == 7
    assert r == build_train_test(
        pool, per_class=10, in_original_train=overlap, random_state=200
    )


def test_registry_names_and_suggestions() -> None:
    assert {
        "threshold",
        "matched-frequency",
        "top-images",
        "class-balanced",
        "keyword-count",
        "train-test",
    } <= set(SAMPLERS.names())
    with pytest.raises(UnknownNameError, match="matched-frequency"):
        SAMPLERS.get("matched-frequncy")


def test_class_draws_are_independent_of_other_classes() -> None:
    base = [CandidateInfo(f"{k}{i:02d}", k) for k in "ab" for i in range(30)]
    r1 = sample_class_balanced(base, per_class=5, random_state=9)
    fewer_b = [c for c in base if c.id != "b07"]
    r2 = sample_class_balanced(fewer_b, per_class=5, random_state=9)
    assert [m.id for m in r1.members if m.class_name == "a"] == [
        m.id for m in r2.members if m.class_name == "a"
    ]
    assert np.all(
        np.asarray(r1.ids)
        == np.asarray(sample_class_balanced(base, per_class=5, random_state=9).ids)
    )
