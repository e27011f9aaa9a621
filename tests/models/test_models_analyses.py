"""Evaluation analyses (docs/algorithms.md#evaluation) against hand-computed answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import InputValidationError
from retest.evaluate.analyses import (
    accuracy_across_revisions,
    accuracy_by_selection_frequency,
    discriminate_datasets,
    revision_matrix,
)
from retest.records import Predictions


def P(model: str, ds: str, labels: list[int]) -> Predictions:
    return Predictions.from_labels(model, ds, labels, n_classes=3)


def test_selection_frequency_bins_hand_made() -> None:
    # new set: 8 images; frequencies hit every bin, including both edges 0.2 and 0.8
    # and the closed top edge 1.0 (docs/algorithms.md#bins-and-rounding: first i with f
    # < bins[i], else 4).
    y_new = [0, 1, 2, 0, 1, 2, 0, 1]
    f_new = [0.0, 0.19, 0.2, 0.5, 0.59, 0.6, 0.8, 1.0]
    a_new = [0, 0, 2, 0, 0, 2, 1, 1]  # correct: 1,0 | 1 | 1,0 | 1 | 0,1
    b_new = [0, 1, 2, 0, 1, 2, 0, 1]  # always correct
    # original: 4 images, one unannotated (NaN), frequencies in bins 1, 4, 4.
    y_orig = [0, 1, 2, 2]
    f_orig = [0.3, np.nan, 0.9, 0.85]
    a_orig = [0, 0, 2, 1]  # overall 2/4; annotated bin1 1/1, bin4 1/2
    b_orig = [0, 1, 2, 2]
    rows = accuracy_by_selection_frequency(
        {"a": P("a", "o", a_orig), "b": P("b", "o", b_orig)},
        {"a": P("a", "n", a_new), "b": P("b", "n", b_new)},
        y_orig,
        y_new,
        frequencies_original=f_orig,
        frequencies_new=f_new,
    )
    got = {(r.dataset, r.model, r.bin): (r.n, r.correct) for r in rows}
    assert got[("new", "a", 0)] == (2, 1)
    assert got[("new", "a", 1)] == (1, 1)
    assert got[("new", "a", 2)] == (2, 1)
    assert got[("new", "a", 3)] == (1, 1)
    assert got[("new", "a", 4)] == (2, 1)
    assert got[("original", "a", 0)] == (0, 0)
    assert got[("original", "a", 1)] == (1, 1)
    assert got[("original", "a", 4)] == (2, 1)
    assert (
        sum(n for (ds, m, _), (n, _) in got.items() if ds == "original" and m == "b")
        == 3
    )
    by = {(r.dataset, r.model, r.bin): r for r in rows}
    assert by[("new", "a", 0)].overall == 0.5 and by[("new", "b", 2)].overall == 1.0
    assert (by[("new", "a", 2)].low, by[("new", "a", 2)].high) == (0.4, 0.6)
    empty = by[("original", "a", 0)]
    assert np.isnan(empty.accuracy) and np.isnan(empty.ci_low)
    r = by[("new", "a", 4)]
    assert r.accuracy == 0.5 and r.ci_low < 0.5 < r.ci_high
    # Only the new side annotated → only new rows.
    only_new = accuracy_by_selection_frequency(
        {"a": P("a", "o", a_orig)},
        {"a": P("a", "n", a_new)},
        y_orig,
        y_new,
        frequencies_new=f_new,
    )
    assert {r.dataset for r in only_new} == {"new"} and len(only_new) == 5
    with pytest.raises(InputValidationError, match=r"must lie in \[0, 1\]"):
        accuracy_by_selection_frequency(
            {"a": P("a", "o", a_orig)},
            {"a": P("a", "n", a_new)},
            y_orig,
            y_new,
            frequencies_new=[1.2] * 8,
        )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.floats(0, 1)),
        min_size=1,
        max_size=40,
    )
)
def test_binned_counts_add_up(data: list[tuple[int, int, float]]) -> None:
    y = [d[0] for d in data]
    p = [d[1] for d in data]
    f = [d[2] for d in data]
    rows = accuracy_by_selection_frequency(
        {"m": P("m", "o", p)}, {"m": P("m", "n", p)}, y, y, frequencies_new=f
    )
    assert sum(r.n for r in rows) == len(y)
    assert sum(r.correct for r in rows) == sum(
        a == b for a, b in zip(y, p, strict=True)
    )


def test_accuracy_across_revisions() -> None:
    preds = {
        "b-1": {
            "m": P("m", "b-1", [0, 1, 1, 2]),
            "k": P("k", "b-1", [0, 0, 0, 0]),
            "x": P("x", "b-1", [0] * 4),
        },
        "b-2": {"m": P("m", "b-2", [0, 1, 2, 2]), "k": P("k", "b-2", [0, 0, 0, 0])},
    }
    labels = {"b-1": [0, 1, 2, 2], "b-2": [0, 1, 2, 2]}
    ids = {"b-1": ["a", "b", "c", "d"], "b-2": ["a", "b", "c", "e"]}
    rows = accuracy_across_revisions(preds, labels, ids=ids)
    assert [(r.revision, r.model, r.correct, r.n_changed) for r in rows] == [
        ("b-1", "k", 1, None),
        ("b-1", "m", 3, None),
        ("b-2", "k", 1, 2),
        ("b-2", "m", 4, 2),
    ]  # "x" is not on every revision: left out
    models, revs, mat = revision_matrix(rows)
    assert models == ["k", "m"] and revs == ["b-1", "b-2"]
    np.testing.assert_allclose(mat, [[0.25, 0.25], [0.75, 1.0]])
    with pytest.raises(
        InputValidationError, match="'x' has no predictions on revision 'b-2'"
    ):
        accuracy_across_revisions(preds, labels, models=["x"])


def _blobs(
    rng: np.random.Generator, n: int, shift: float
) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 4, n)
    centers = np.linspace(40, 200, 4)[labels]
    x = rng.normal(centers[:, None] + shift, 25.0, size=(n, 64))
    return np.clip(x, 0, 255).astype(np.uint8).reshape(n, 8, 8), labels


def test_discriminator_same_distribution_is_at_chance() -> None:
    rng = np.random.default_rng(0)
    xo, yo = _blobs(rng, 1200, 0.0)
    xn, yn = _blobs(rng, 600, 0.0)
    res = discriminate_datasets(xo, yo, xn, yn, random_state=1)
    assert res.ci_low <= 0.5 <= res.ci_high and res.indistinguishable
    # Class-balanced: per class, equally many original and new.
    assert sum(res.per_class_pairs.values()) * 2 == res.n_test + res.n_train
    assert res.n_test % 2 == 0
    again = discriminate_datasets(xo, yo, xn, yn, random_state=1)
    assert again == res  # seeded


def test_discriminator_different_distributions_far_above_chance() -> None:
    rng = np.random.default_rng(0)
    xo, yo = _blobs(rng, 800, 0.0)
    xn, yn = _blobs(rng, 800, 0.0)
    xn[:, 0, :] = 255  # e.g. a white border from a different image source
    res = discriminate_datasets(xo, yo, xn, yn, random_state=0)
    assert res.accuracy > 0.9 and res.ci_low > 0.8 and not res.indistinguishable


def test_discriminator_is_class_balanced_even_when_sets_are_not() -> None:
    rng = np.random.default_rng(3)
    # New set: all class 0, bright; original: class 0 dark but classes 1-3 bright.
    # Without per-class balancing a classifier could use the class mix.
    xo, yo = _blobs(rng, 800, 0.0)
    xn = np.full((100, 8, 8), 128, np.uint8)
    yn = np.zeros(100, np.int64)
    res = discriminate_datasets(xo, yo, xn, yn, random_state=0)
    assert set(res.per_class_pairs) == {0}
    assert res.per_class_pairs[0] == min(100, int((yo == 0).sum()))
