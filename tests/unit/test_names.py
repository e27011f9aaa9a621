"""One spelling per idea: retest's spellings, cleanlab's aliases, renamed keywords,
and errors of the documented class."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from retest import compare, find_label_errors, knn, rank_label_errors
from retest.errors import ConfigError, UnknownNameError

P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8], [0.6, 0.4], [0.55, 0.45]])
Y = [0, 1, 1, 1, 1, 1]


def test_an_unknown_metric_is_the_documented_config_error() -> None:
    y = np.arange(60) % 2
    testbed = dict.fromkeys("abc", y)
    with pytest.raises(ValueError, match="Unknown metric 'top3'") as caught:
        compare(y, y, testbed, testbed, metric="top3", n_boot=10)
    # a ConfigError as documented, still a KeyError for registry-style callers
    assert isinstance(caught.value, ConfigError)
    assert isinstance(caught.value, UnknownNameError)
    assert isinstance(caught.value, KeyError)
    with pytest.raises(ConfigError, match="logit"):
        compare(y, y, testbed, testbed, axes="log", n_boot=10)


@pytest.mark.parametrize(
    ("retest_name", "cleanlab_name"),
    [
        ("self-confidence", "self_confidence"),
        ("normalized-margin", "normalized_margin"),
    ],
)
def test_rank_by_takes_both_spellings(retest_name: str, cleanlab_name: str) -> None:
    mask = find_label_errors(Y, P, method="argmax")
    mine = rank_label_errors(Y, P, mask, rank_by=retest_name)  # type: ignore[arg-type]
    theirs = rank_label_errors(Y, P, mask, rank_by=cleanlab_name)  # type: ignore[arg-type]
    assert mine == theirs and len(mine) == 3
    # the two scores order these rows differently: the spelling picked the score
    other = (
        "normalized-margin" if retest_name == "self-confidence" else "self-confidence"
    )
    assert [e.score for e in mine] != [
        e.score
        for e in rank_label_errors(Y, P, mask, rank_by=other)  # type: ignore[arg-type]
    ]
    with pytest.raises(ConfigError, match="self-confidence, normalized-margin"):
        rank_label_errors(Y, P, mask, rank_by="self confidence")  # type: ignore[arg-type]


def test_method_and_filter_by_spellings_agree() -> None:
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(3), size=200)
    y = rng.integers(0, 3, 200)
    by_filter = find_label_errors(y, p, filter_by="prune_by_noise_rate")
    assert by_filter.any()
    assert (find_label_errors(y, p, method="prune_by_noise_rate") == by_filter).all()
    # retest's spelling with cleanlab's class-size floor is cleanlab's answer too
    mine = find_label_errors(
        y, p, method="prune-by-noise-rate", min_examples_per_class=1
    )
    assert (mine == by_filter).all()


def test_knn_chunk_rows_and_its_deprecated_name() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 12), dtype=np.uint8)
    want = knn(x, x, 3, exclude_self=True, backend="numpy", chunk_rows=7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = knn(x, x, 3, exclude_self=True, backend="numpy", chunk_size=7)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "chunk_rows" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller's line
    np.testing.assert_array_equal(old.indices, want.indices)
    with pytest.raises(ConfigError, match="chunk_rows only"):
        knn(x, x, 3, backend="numpy", chunk_rows=7, chunk_size=7)
