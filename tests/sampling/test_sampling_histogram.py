"""round_histogram oracles and properties, bins, selection frequency and eligibility."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import InputValidationError
from retest.sampling.eligibility import (
    CandidateInfo,
    EligibilityRules,
    check_candidate,
    split_eligible,
)
from retest.sampling.histogram import bin_index, bin_indices, round_histogram
from retest.sampling.selection_frequency import (
    AssignmentRecord,
    FrequencyStat,
    TaskRecord,
    class_target_histograms,
    compute_selection_frequencies,
    selection_frequency_from_counts,
)


@pytest.mark.parametrize(
    ("hist", "target", "expected"),
    [
        ([3, 1, 0, 4, 12], 10, [1, 1, 0, 2, 6]),
        ([1, 1, 1, 0, 0], 10, [3, 3, 4, 0, 0]),
        ([1, 1, 1, 1, 1], 10, [2, 2, 2, 2, 2]),
        ([0, 0, 0, 0, 7], 10, [0, 0, 0, 0, 10]),
        ([5, 5], 3, [1, 2]),  # tie → higher bin
        ([2, 1], 0, [0, 0]),
    ],
)
def test_round_histogram_oracles(
    hist: list[int], target: int, expected: list[int]
) -> None:
    assert round_histogram(hist, target) == expected


@settings(max_examples=60, deadline=None)
@given(
    hist=st.lists(st.integers(0, 500), min_size=1, max_size=8).filter(
        lambda h: sum(h) > 0
    ),
    target=st.integers(0, 300),
)
def test_round_histogram_properties(hist: list[int], target: int) -> None:
    out = round_histogram(hist, target)
    assert sum(out) == target and len(out) == len(hist)
    for h, o in zip(hist, out, strict=True):
        exact = Fraction(target * h, sum(hist))
        assert abs(o - exact) < 1
        assert o >= 0
    # Largest remainder: a bin that got +1 has a remainder >= every bin that did not
    # (ties: the higher index wins).
    rem = [Fraction(target * h, sum(hist)) % 1 for h in hist]
    up = [
        i
        for i, (h, o) in enumerate(zip(hist, out, strict=True))
        if o > target * h // sum(hist)
    ]
    down = [i for i in range(len(hist)) if i not in up]
    for i in up:
        for j in down:
            assert (rem[i], i) > (rem[j], j)


def test_round_histogram_rejects_bad_input() -> None:
    with pytest.raises(InputValidationError, match="positive sum"):
        round_histogram([0, 0], 10)
    with pytest.raises(InputValidationError, match="non-negative"):
        round_histogram([-1, 3], 10)
    with pytest.raises(InputValidationError, match="integer counts"):
        round_histogram([0.5, 1], 10)


def test_bins_follow_first_edge_rule() -> None:
    f = [0.0, 0.1999, 0.2, 0.4, 0.5999, 0.6, 0.7999, 0.8, 1.0]
    assert [bin_index(x) for x in f] == [0, 0, 1, 2, 2, 3, 3, 4, 4]
    assert bin_indices(f).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, 4]


def test_selection_frequency_counts_only_valid_assignments_of_the_class() -> None:
    tasks = [
        TaskRecord("h1", "cat", ("a", "b", "v1")),
        TaskRecord("h2", "cat", ("a", "c")),
        TaskRecord("h3", "dog", ("a",)),  # same image, other class
        TaskRecord("h4", "cat", ("d",)),  # no valid assignment
    ]
    asg = [
        AssignmentRecord("h1", "Approved", frozenset({"a", "v1"})),
        AssignmentRecord("h1", "Submitted", frozenset({"b"})),
        AssignmentRecord("h1", "Rejected", frozenset({"a", "b", "v1"})),
        AssignmentRecord("h2", "Approved", frozenset({"a"})),
        AssignmentRecord("h3", "Approved", frozenset()),
        AssignmentRecord("h4", "Rejected", frozenset({"d"})),
    ]
    s = compute_selection_frequencies(tasks, asg)
    assert s[("a", "cat")] == FrequencyStat(2 / 3, 3)
    assert s[("b", "cat")] == FrequencyStat(0.5, 2)
    assert s[("a", "dog")] == FrequencyStat(0.0, 1)
    assert s[("d", "cat")] == FrequencyStat(0.0, 0)
    with pytest.raises(InputValidationError, match="unknown task"):
        compute_selection_frequencies(
            tasks, [AssignmentRecord("zz", "Approved", frozenset())]
        )


def test_counts_matrix_helper_and_target_histograms() -> None:
    counts = np.array([[8, 2], [1, 9], [0, 0], [5, 5]])
    f, n = selection_frequency_from_counts(counts, [0, 0, 1, 1])
    assert f.tolist() == [0.8, 0.1, 0.0, 0.5] and n.tolist() == [10, 10, 0, 10]
    rng = np.random.default_rng(0)
    freq = rng.uniform(size=60)
    nn = np.r_[np.full(50, 10), np.full(10, 3)]
    classes = ["a"] * 25 + ["b"] * 35
    th = class_target_histograms(freq, nn, classes, all_classes=["z"])
    assert list(th) == ["a", "b", "z"]
    assert th["a"].n_images == 25 and th["a"].is_valid
    assert th["b"].n_images == 25  # 10 of b's images have only 3 annotations
    assert not th["z"].is_valid and th["z"].n_images == 0
    expect = np.bincount(
        np.searchsorted([0.2, 0.4, 0.6, 0.8], freq[:25], side="right"), minlength=5
    )
    assert list(th["a"].counts) == expect.tolist()
    assert sum(th["a"].target(10)) == 10


def test_eligibility_reasons_in_order() -> None:
    rules = EligibilityRules(
        min_annotations=10, threshold=0.7, class_thresholds={"b": 0.5}
    )
    mk = CandidateInfo
    assert (
        check_candidate(
            mk("x", "a", 0.9, 10, blacklisted=True, near_duplicate=True), rules
        )
        == "blacklisted"
    )
    assert (
        check_candidate(mk("x", "a", 0.1, 3, near_duplicate=True), rules)
        == "few_annotations"
    )
    assert (
        check_candidate(mk("x", "a", 0.6, 10, near_duplicate=True), rules)
        == "below_threshold"
    )
    assert check_candidate(mk("x", "b", 0.6, 10), rules) is None  # per-class override
    assert (
        check_candidate(
            mk("x", "a", 0.8, 10, near_duplicate=True, reviewed=False), rules
        )
        == "near_duplicate"
    )
    assert check_candidate(mk("x", "a", 0.8, 10, reviewed=False), rules) == "unreviewed"
    cifar = EligibilityRules(
        min_annotations=0, require_reviewed=False, max_nn_distance=1000
    )
    assert check_candidate(mk("x", "a", nn_distance=1000.0), cifar) == "near_duplicate"
    assert check_candidate(mk("x", "a", nn_distance=1000.5), cifar) is None

    pool = [
        mk("p", "a", 0.9, 10),
        mk("q", "a", 0.1, 10),
        mk("r", "a", 0.9, 1, blacklisted=True),
    ]
    eligible, report = split_eligible(pool, rules)
    assert [c.id for c in eligible["a"]] == ["p"]
    assert report.by_class["a"] == {
        "blacklisted": 1,
        "below_threshold": 1,
        "eligible": 1,
    }
    assert report.by_class_bin["a"][0] == {"below_threshold": 1}
    assert report.by_class_bin["a"][4] == {"blacklisted": 1, "eligible": 1}
    with pytest.raises(InputValidationError, match="twice"):
        split_eligible([*pool, pool[0]], rules)
