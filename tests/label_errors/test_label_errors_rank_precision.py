"""Ranking keeps the probabilities' own precision (issue #26)."""

from __future__ import annotations

import numpy as np

from retest import rank_label_errors


def test_float64_scores_that_tie_in_float32_keep_their_order() -> None:
    # 0.30000001 and 0.3 round to the same float32; aad0cc2 then fell back to
    # the index and ranked [0, 1]
    labels = [0, 0, 1]
    probs = np.array([[0.30000001, 0.69999999], [0.3, 0.7], [0.2, 0.8]])
    ranked = rank_label_errors(labels, probs, [True, True, False])
    assert [e.index for e in ranked] == [1, 0]
    assert ranked[0].score == 0.3
    assert ranked[1].self_confidence == 0.30000001


def test_float32_and_float16_inputs_rank_as_before() -> None:
    labels = [0, 0, 1, 1]
    probs = np.array([[0.4, 0.6], [0.25, 0.75], [0.9, 0.1], [0.5, 0.5]])
    mask = [True, True, True, True]
    for dtype in (np.float16, np.float32):
        ranked = rank_label_errors(labels, probs.astype(dtype), mask)
        assert [e.index for e in ranked] == [2, 1, 0, 3]
        assert isinstance(ranked[0].score, float)
