"""Testbed ensembles: mean probabilities or smoothed vote shares; CIFAR-10 test audit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.errors import InputValidationError
from retest.label_errors.ensemble import ensemble_pred_probs
from retest.label_errors.finders import find_label_errors
from retest.label_errors.ranking import rank_label_errors
from retest.records import Predictions

CIFAR10 = (
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


def test_votes_are_smoothed_shares() -> None:
    preds = [
        Predictions.from_labels("a", "t", [0, 1, 2]),
        Predictions.from_labels("b", "t", [0, 1, 1]),
    ]
    e = ensemble_pred_probs(preds, n_classes=3, smoothing=0.5)
    assert e.mode == "votes" and e.models == ("a", "b")
    expected = (np.array([[2, 0, 0], [0, 2, 0], [0, 1, 1]]) + 0.5) / (2 + 1.5)
    np.testing.assert_allclose(e.pred_probs, expected, rtol=1e-6)
    np.testing.assert_allclose(e.pred_probs.sum(axis=1), 1, rtol=1e-6)
    assert (e.pred_probs > 0).all()
    assert e.votes is not None and e.votes.sum() == 6


def test_probabilities_are_averaged_and_logits_softmaxed() -> None:
    p1 = np.array([[0.8, 0.2], [0.4, 0.6]])
    logits = np.array([[0.0, 0.0], [np.log(3.0), 0.0]])
    preds = [
        Predictions.from_scores("a", "t", p1),
        Predictions.from_scores("b", "t", logits, probabilities=False),
    ]
    e = ensemble_pred_probs(preds)
    assert e.mode == "mean-probs"
    np.testing.assert_allclose(e.pred_probs, [[0.65, 0.35], [0.575, 0.425]], rtol=1e-6)
    # A model without probabilities switches to votes.
    mixed = [*preds, Predictions.from_labels("c", "t", [1, 1], n_classes=2)]
    assert ensemble_pred_probs(mixed).mode == "votes"
    with pytest.raises(
        InputValidationError, match="needs probabilities from every model"
    ):
        ensemble_pred_probs(mixed, mode="mean-probs")


def test_bad_ensembles() -> None:
    with pytest.raises(InputValidationError, match="at least one"):
        ensemble_pred_probs([])
    with pytest.raises(InputValidationError, match="same examples"):
        ensemble_pred_probs(
            [
                Predictions.from_labels("a", "t", [0, 1]),
                Predictions.from_labels("b", "t", [0]),
            ]
        )
    with pytest.raises(InputValidationError, match="outside"):
        ensemble_pred_probs([Predictions.from_labels("a", "t", [0, 3])], n_classes=2)


def _audit(shared_data: Path) -> tuple[np.ndarray, list]:
    from retest.datasets.predictions import read_testbed

    y = np.load(shared_data / "cifar10" / "test_labels.npy").astype(np.int64)
    tb = read_testbed(
        shared_data / "cifar10_1" / "model_predictions" / "original_predictions",
        n_classes=10,
    )
    assert len(tb) == 30
    e = ensemble_pred_probs(list(tb.values()), n_classes=10)
    mask = find_label_errors(y, e.pred_probs, method="prune-by-noise-rate")
    return mask, list(rank_label_errors(y, e.pred_probs, mask))


@pytest.mark.slow
def test_cifar10_test_set_audit_with_30_models(shared_data: Path) -> None:
    mask, ranked = _audit(shared_data)
    print(
        f"\n{mask.sum()} suspected CIFAR-10 test label errors (30-model vote ensemble)"
    )
    print(f"{'rank':>4} {'index':>6} {'given':>11} {'suggested':>11} {'score':>7}")
    for e in ranked[:20]:
        print(
            f"{e.rank:4d} {e.index:6d} {CIFAR10[e.given]:>11} "
            f"{CIFAR10[e.suggested]:>11} {e.score:7.4f}"
        )
    assert 10 <= mask.sum() <= 300
    # Deterministic: a second run gives the same ranking.
    _, ranked2 = _audit(shared_data)
    assert [e.index for e in ranked2] == [e.index for e in ranked]
    # Known top suspects (the frog labeled "cat" of the CL paper's figure, etc.).
    top = [e.index for e in ranked[:20]]
    assert 2405 in top[:3]
    assert {3560, 4404, 9227, 1969} <= set(top)
    # External check: CIFAR-10H humans disagree with the given label far more
    # often among the flagged images than overall.
    y = np.load(shared_data / "cifar10" / "test_labels.npy").astype(np.int64)
    human = np.load(shared_data / "cifar10h" / "cifar10h-counts.npy").argmax(axis=1)
    flagged = np.flatnonzero(mask)
    assert (human[flagged] != y[flagged]).mean() > 10 * (human != y).mean()
