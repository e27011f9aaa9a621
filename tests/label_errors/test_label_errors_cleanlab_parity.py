"""retest's label-error finders against cleanlab 2.9, case by case and at random.

The first tests restate the cases of cleanlab's own ``tests/test_filter_count.py``
and ``tests/test_rank.py`` that apply to single-label classification (their
expected values where they state them, cleanlab itself as the oracle where they
compare two cleanlab calls). Cases about multi-label data, cleanlab internals
(``_keep_at_least_n_per_class``, ``_reduce_prune_counts``), custom thresholds,
ensembles and ``find_label_issues_batched`` have no retest counterpart.

The last test draws 120 random problems (empty classes, float16, rows that do
not sum to 1, precomputed confident joints, ``num_to_remove_per_class``) and
requires every filter of both engines to equal ``cleanlab.filter.find_label_issues``
on the same float32 values (retest computes in float32, as its docs state).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from cleanlab import count, filter, rank

from retest.errors import ConfigError
from retest.label_errors.finders import (
    CLEANLAB_FILTERS,
    ProbabilitySumWarning,
    as_float32,
    compute_confident_joint,
    find_label_errors,
)
from retest.label_errors.ranking import estimate_noise, label_quality_scores

FILTERS = list(CLEANLAB_FILTERS)

# cleanlab's small example (test_filter_count.py: pred_probs_, labels_)
P_ = np.array(
    [
        [0.9, 0.1, 0],
        [0.6, 0.2, 0.2],
        [0.1, 0, 0.9],
        [0.1, 0.8, 0.1],
        [0.1, 0.8, 0.1],
        [0.1, 0.8, 0.1],
        [0.1, 0.8, 0.1],
        [0.1, 0.8, 0.1],
        [0.1, 0.8, 0.1],
        [0.1, 0.1, 0.8],
    ]
)
Y_ = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 2])


def _noisy_problem(
    seed: int, sizes=(80, 40, 40), noise: float = 0.2, sharp: float = 2.5
):
    """Labels with planted errors and out-of-sample-like probabilities."""
    rng = np.random.default_rng(seed)
    k = len(sizes)
    true = np.repeat(np.arange(k), sizes)
    logits = rng.normal(size=(true.size, k)) + sharp * np.eye(k)[true]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    flip = rng.random(true.size) < noise
    given = np.where(flip, (true + rng.integers(1, k, true.size)) % k, true)
    return given.astype(np.int64), p.astype(np.float32)


def _cleanlab(labels, probs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return filter.find_label_issues(labels, as_float32(probs), n_jobs=1, **kw)


# ------------------------------------------------ cases of test_filter_count.py


def test_predicted_neq_given_filter() -> None:
    p = np.array(
        [
            [0.9, 0.1, 0],
            [0.6, 0.2, 0.2],
            [0.3, 0.3, 0.4],
            [0.1, 0.1, 0.8],
            [0.4, 0.5, 0.1],
        ]
    )
    got = find_label_errors([0, 0, 1, 1, 2], p, filter_by="predicted_neq_given")
    assert got.tolist() == [False, False, True, True, True]
    got = find_label_errors(Y_, P_, filter_by="predicted_neq_given")
    assert got.tolist() == [False, False, True] + [False] * 7


def test_filters_match_origin_functions() -> None:
    neq = find_label_errors(Y_, P_, filter_by="predicted_neq_given")
    assert (find_label_errors(Y_, P_, filter_by="confident_learning") == neq).all()
    with pytest.raises(ConfigError, match="apply to prune-by-class"):
        find_label_errors(
            Y_, P_, filter_by="predicted_neq_given", num_to_remove_per_class=[1] * 3
        )


def test_predicted_neq_given_breaks_ties_toward_the_given_label() -> None:
    # argmax of [0.4, 0.4, 0.2] is class 0; cleanlab does not flag label 1 there
    p = np.array([[0.4, 0.4, 0.2], [0.4, 0.4, 0.2], [0.2, 0.2, 0.6]])
    y = np.array([1, 0, 2])
    assert (
        find_label_errors(y, p, filter_by="predicted_neq_given").tolist() == [False] * 3
    )
    assert find_label_errors(y, p, method="argmax").tolist() == [True, False, False]
    assert (_cleanlab(y, p, filter_by="predicted_neq_given") == [False] * 3).all()


@pytest.mark.parametrize("engine", ["cleanlab", "chunked"])
def test_exact_prune_count_and_both(engine: str) -> None:
    y, p = _noisy_problem(1)
    kw = {"num_to_remove_per_class": 5, "engine": engine}
    by_class = find_label_errors(y, p, filter_by="prune_by_class", **kw)
    assert np.bincount(y[by_class], minlength=3).tolist() == [5, 5, 5]
    by_rate = find_label_errors(y, p, filter_by="prune_by_noise_rate", **kw)
    both = find_label_errors(y, p, filter_by="both", **kw)
    assert (both == (by_class & by_rate)).all()
    for fb, got in [("prune_by_class", by_class), ("prune_by_noise_rate", by_rate)]:
        assert (got == _cleanlab(y, p, filter_by=fb, num_to_remove_per_class=5)).all()


@pytest.mark.parametrize("fb", FILTERS)
def test_prune_on_small_data(fb: str) -> None:
    y, p = _noisy_problem(2, sizes=(3, 3, 3), noise=0.3, sharp=0.5)
    for engine in ("cleanlab", "chunked"):
        got = find_label_errors(y, p, filter_by=fb, engine=engine)
        assert (got == _cleanlab(y, p, filter_by=fb)).all()


def test_missing_classes() -> None:
    labels = np.array([0, 0, 2, 2])
    p = np.array(
        [
            [0.9, 0.0, 0.1, 0.0],
            [0.8, 0.0, 0.2, 0.0],
            [0.1, 0.0, 0.9, 0.0],
            [0.95, 0.0, 0.05, 0.0],
        ]
    )
    p3 = np.array(
        [
            [0.9, 0.1, 0.0, 0.0],
            [0.8, 0.1, 0.1, 0.0],
            [0.1, 0.0, 0.9, 0.0],
            [0.9, 0.025, 0.025, 0.05],
        ]
    )
    want = [False, False, False, True]
    assert (
        find_label_errors(labels, p, filter_by="prune_by_noise_rate").tolist() == want
    )
    # with zero probability on the missing classes, dropping them changes nothing
    dropped = find_label_errors(
        [0, 0, 1, 1], p[:, [0, 2]], filter_by="prune_by_noise_rate"
    )
    assert dropped.tolist() == want
    for fb in ["prune_by_class", "prune_by_noise_rate", "both", "confident_learning",
               "predicted_neq_given"]:  # fmt: skip
        for engine in ("cleanlab", "chunked"):
            assert (
                find_label_errors(labels, p, filter_by=fb, engine=engine).tolist()
                == want
            )
            assert (
                find_label_errors(labels, p3, filter_by=fb, engine=engine).tolist()
                == want
            )


def test_removing_class_consistent_results() -> None:
    labels = np.array([0, 0, 0, 0, 1, 2, 2, 2])
    p = np.array(
        [[0.9, 0.1, 0.0], [0.8, 0.1, 0.1], [0.1, 0.0, 0.9], [0.9, 0.0, 0.1],
         [0.1, 0.3, 0.6], [0.1, 0.0, 0.9], [0.1, 0.0, 0.9], [0.1, 0.0, 0.9]]
    )  # fmt: skip
    no1 = np.array([0, 0, 0, 0, 2, 2, 2, 2])  # class 1 has no example
    assert estimate_noise(labels, p).confident_joint.tolist() == [
        [3, 0, 1],
        [0, 1, 0],
        [0, 0, 3],
    ]
    assert estimate_noise(no1, p).confident_joint.tolist() == [
        [3, 0, 1],
        [0, 0, 0],
        [0, 0, 4],
    ]
    for engine in ("cleanlab", "chunked"):
        a = find_label_errors(labels, p, filter_by="prune_by_noise_rate", engine=engine)
        b = find_label_errors(no1, p, filter_by="prune_by_noise_rate", engine=engine)
        assert (a == b).all() and a.tolist() == _cleanlab(labels, p).tolist()


def test_issue_158_diagonal_raised() -> None:
    rng = np.random.default_rng(158)
    p = rng.dirichlet([2, 1, 2, 2], size=20)
    labels = np.array([3, 3, 1, 3, 0, 2, 2, 2, 0, 2, 2, 1, 0, 0, 0, 0, 2, 1, 3, 3])
    raw = compute_confident_joint(
        labels, p.astype(np.float32), clip_thresholds=True
    ).counts
    want = count.compute_confident_joint(labels, p.astype(np.float32), calibrate=False)
    assert (raw == want).all() and (raw.diagonal() >= 1).all()
    est = estimate_noise(labels, p)
    assert np.isfinite(est.noise_matrix).all() and np.isfinite(est.py).all()
    assert np.isfinite(est.inverse_noise_matrix).all()


def test_low_filter_by_methods() -> None:
    y, p = _noisy_problem(3)
    n_issues = count.num_label_issues(y, p)
    for fb in ("low_normalized_margin", "low_self_confidence"):
        got = find_label_errors(y, p, filter_by=fb)
        assert got.sum() == n_issues
        assert (got == _cleanlab(y, p, filter_by=fb)).all()
    assert find_label_errors(y, p, filter_by="confident_learning").sum() == n_issues


@pytest.mark.parametrize("fb", ["prune_by_noise_rate", "prune_by_class", "both",
                                "confident_learning", "predicted_neq_given"])  # fmt: skip
def test_does_not_flag_correct_examples(fb: str) -> None:
    y, p = _noisy_problem(4)
    for engine in ("cleanlab", "chunked"):
        mask = find_label_errors(y, p, filter_by=fb, engine=engine)
        assert not mask[y == p.argmax(axis=1)].any()


def test_one_class_is_refused_like_cleanlab() -> None:
    from retest.errors import InputValidationError

    with pytest.raises(InputValidationError, match="at least 2 different classes"):
        find_label_errors([1, 1, 1], [[0.2, 0.8], [0.3, 0.7], [0.9, 0.1]])
    with pytest.raises(ValueError, match="at least 2 classes"):
        _cleanlab(np.array([1, 1, 1]), np.array([[0.2, 0.8], [0.3, 0.7], [0.9, 0.1]]))


def test_precomputed_confident_joint_is_used() -> None:
    y, p = _noisy_problem(5)
    cj = count.compute_confident_joint(y, p)
    cj[0, 1] += 10  # a different joint must change the answer, as in cleanlab
    for engine in ("cleanlab", "chunked"):
        got = find_label_errors(
            y, p, filter_by="prune_by_noise_rate", confident_joint=cj, engine=engine
        )
        assert (got == _cleanlab(y, p, confident_joint=cj)).all()
        assert (got != find_label_errors(y, p, filter_by="prune_by_noise_rate")).any()


def test_spellings_and_defaults() -> None:
    y, p = _noisy_problem(6, sizes=(40, 4, 40), noise=0.3)
    y[y == 1] = 0
    y[40:44] = 1  # four examples given class 1, which the model doubts
    p[40:44] = [[0.6, 0.3, 0.1]] * 4
    # cleanlab's spelling: cleanlab's minimum class size 1 (class 1 is pruned)
    a = find_label_errors(y, p, filter_by="prune_by_noise_rate")
    assert (a == _cleanlab(y, p)).all()
    assert a[y == 1].any()
    assert (find_label_errors(y, p, method="prune_by_noise_rate") == a).all()
    # the paper's spelling keeps v0.1.0's 5: class 1 (4 examples) is left alone
    b = find_label_errors(y, p, method="prune-by-noise-rate")
    assert (b == _cleanlab(y, p, min_examples_per_class=5)).all()
    assert not b[y == 1].any()
    with pytest.raises(ConfigError, match="filter_by must be one of"):
        find_label_errors(y, p, filter_by="prune-by-noise-rate")
    with pytest.raises(ConfigError, match="not both"):
        find_label_errors(y, p, method="both", filter_by="both")


# ------------------------------------------------------ cases of test_rank.py


def test_self_confidence_and_normalized_margin_scores() -> None:
    y, p = _noisy_problem(7)
    for method in ("self_confidence", "normalized_margin"):
        want = rank.get_label_quality_scores(y, p, method=method)
        np.testing.assert_allclose(
            label_quality_scores(y, p, method=method), want, atol=1e-6
        )
    # the worked values: P[k] and (P[k] - max_other + 1) / 2
    p2 = np.array([[0.8, 0.1, 0.1], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]])
    y2 = np.array([0, 2, 1])
    sc = label_quality_scores(y2, p2, method="self_confidence")
    nm = label_quality_scores(y2, p2, method="normalized_margin")
    np.testing.assert_allclose(sc, [0.8, 0.3, 0.3], atol=1e-6)
    np.testing.assert_allclose(nm, [0.85, 0.4, 0.45], atol=1e-6)


# ----------------------------------------------------------- random problems


def _random_problem(rng: np.random.Generator):
    k = int(rng.integers(2, 8))
    n = int(rng.integers(8, 160))
    present = rng.permutation(k)[: max(2, int(rng.integers(k // 2, k + 1)))]
    labels = rng.choice(present, size=n)
    labels[:2] = present[:2]  # cleanlab (and retest) need two different labels
    p = rng.dirichlet(np.full(k, rng.uniform(0.3, 2.0)), size=n)
    p[np.arange(n), labels] += rng.uniform(0, 1.5, size=n)
    p /= p.sum(axis=1, keepdims=True)
    kind = rng.integers(0, 3)
    if kind == 1:
        p = p.astype(np.float16)  # sums 0.99–1.01, as published float16 files
    elif kind == 2:
        p = (p * rng.uniform(0.9, 1.0, size=(n, 1))).astype(np.float32)  # off-sum rows
    else:
        p = p.astype(np.float32)
    if rng.random() < 0.15:  # ties between classes
        p[: n // 4] = np.round(p[: n // 4] * 4) / 4
    return labels.astype(np.int64), p


def test_random_problems_equal_cleanlab() -> None:
    rng = np.random.default_rng(2026)
    compared = empty = f16 = 0
    for _ in range(120):
        labels, p = _random_problem(rng)
        k = p.shape[1]
        counts = np.bincount(labels, minlength=k)
        empty += bool((counts == 0).any())
        f16 += p.dtype == np.float16
        extra: dict = {}
        r = rng.random()
        if r < 0.2:
            extra["num_to_remove_per_class"] = [
                int(rng.integers(0, c + 1)) for c in counts
            ]
        elif r < 0.35:
            extra["confident_joint"] = count.compute_confident_joint(
                labels, as_float32(p)
            )
        for fb in FILTERS:
            opts = (
                extra if fb in ("prune_by_class", "prune_by_noise_rate", "both") else {}
            )
            if opts.get("num_to_remove_per_class") is not None and (counts == 0).any():
                continue  # cleanlab divides by a zero noise rate there
            want = _cleanlab(labels, p, filter_by=fb, **opts)
            for engine in ("cleanlab", "chunked"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ProbabilitySumWarning)
                    got = find_label_errors(
                        labels, p, filter_by=fb, engine=engine, chunk_rows=17, **opts
                    )
                assert (got == want).all(), (fb, engine, np.flatnonzero(got != want))
                compared += 1
    assert compared > 1500 and empty > 20 and f16 > 20
