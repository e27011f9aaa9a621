"""Pool a testbed's predictions into one probability matrix for confident learning.

A replication already has many models' predictions on the original and the new
test set; together they are a good stand-in for out-of-sample probabilities.

* Every model gives probabilities → their mean (score rows that are not
  probabilities, e.g. logits, are softmaxed first).
* Otherwise (e.g. the 30 CIFAR-10 models' predicted classes) → vote shares over
  the models' top-1 predictions, additively smoothed:
  ``p[i, c] = (votes[i, c] + α) / (M + K·α)`` with ``α = smoothing`` (default
  0.1). Smoothing keeps every row summing to 1 with no zero entries (so no
  class's confident threshold is 0 and no row has an all-zero given-label
  probability tie) without changing any row's ordering of classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from retest._validation import check_fraction
from retest.errors import ConfigError, InputValidationError
from retest.records import Predictions

__all__ = ["Ensemble", "ensemble_pred_probs"]

Mode = Literal["auto", "mean-probs", "votes"]


@dataclass(frozen=True, slots=True)
class Ensemble:
    """Pooled probabilities and how they were made.

    Attributes
    ----------
    pred_probs : ndarray of shape (n_samples, n_classes), float32
    mode : {"mean-probs", "votes"}
    models : tuple of str
        The models pooled, in input order.
    votes : ndarray of shape (n_samples, n_classes), optional
        Top-1 vote counts (``mode == "votes"``).
    """

    pred_probs: NDArray[np.float32]
    mode: str
    models: tuple[str, ...]
    votes: NDArray[np.int64] | None = None


def _n_classes(preds: Sequence[Predictions], n_classes: int | None) -> int:
    if n_classes is not None:
        k = int(n_classes)
    else:
        known = {p.n_classes for p in preds if p.n_classes is not None}
        known |= {p.probs.shape[1] for p in preds if p.probs is not None}
        if len(known) > 1:
            raise InputValidationError(
                f"predictions disagree on the number of classes: {sorted(known)}."
            )
        k = known.pop() if known else int(max(int(p.topk.max()) for p in preds)) + 1
    if k < 2:
        raise InputValidationError(f"an ensemble needs at least 2 classes. Got {k}.")
    return k


def _as_probabilities(scores: NDArray[np.float32]) -> NDArray[np.float64]:
    s = scores.astype(np.float64)
    if not ((s >= 0).all() and np.allclose(s.sum(axis=1), 1.0, atol=1e-3)):
        s = np.exp(s - s.max(axis=1, keepdims=True))  # softmax of scores
    s /= s.sum(axis=1, keepdims=True)
    return s


def ensemble_pred_probs(
    predictions: Sequence[Predictions],
    *,
    n_classes: int | None = None,
    mode: Mode = "auto",
    smoothing: float = 0.1,
) -> Ensemble:
    """Average probabilities, or smoothed top-1 vote shares, of many models.

    Parameters
    ----------
    predictions : sequence of Predictions
        One per model, all on the same examples (same ``n``).
    n_classes : int, optional
        K; inferred from the predictions otherwise.
    mode : {"auto", "mean-probs", "votes"}
        ``auto`` averages probabilities when every model has them, else votes.
    smoothing : float
        Additive smoothing α for vote shares (≥ 0; 0 allows zero entries).

    Returns
    -------
    Ensemble
        ``pred_probs`` (n_samples, n_classes) float32, rows summing to 1, ready
        for :func:`~retest.label_errors.finders.find_label_errors`; ``mode``,
        ``models`` and, for votes, the vote counts.

    Raises
    ------
    InputValidationError
        No predictions, models of different lengths or class counts, a class id
        out of range, or ``mean-probs`` with a model that has no scores.
    ConfigError
        An unknown ``mode`` or a negative ``smoothing``.

    Examples
    --------
    >>> from retest import Predictions, ensemble_pred_probs
    >>> ps = [Predictions.from_labels(m, "t", l) for m, l in
    ...       [("a", [0, 1]), ("b", [0, 0]), ("c", [0, 1])]]
    >>> e = ensemble_pred_probs(ps, n_classes=2, smoothing=0.0)
    >>> e.mode, e.votes.tolist()
    ('votes', [[3, 0], [1, 2]])
    >>> [round(float(x), 3) for x in e.pred_probs[1]]
    [0.333, 0.667]
    """
    if isinstance(predictions, (Predictions, str)) or not isinstance(
        predictions, Sequence
    ):
        raise InputValidationError(
            "predictions must be a list of Predictions, one per model. "
            f"Got {type(predictions).__name__}."
        )
    preds = list(predictions)
    for i, p in enumerate(preds):
        if not isinstance(p, Predictions):
            raise InputValidationError(
                f"predictions[{i}] is a {type(p).__name__}, not a Predictions; wrap "
                "each model's output with Predictions.from_labels / from_scores."
            )
    if not preds:
        raise InputValidationError(
            "an ensemble needs at least one model's predictions."
        )
    sizes = {p.n for p in preds}
    if len(sizes) != 1:
        detail = ", ".join(f"{p.model}: {p.n}" for p in preds[:6])
        raise InputValidationError(
            f"all models must predict the same examples; got different lengths ({detail})."
        )
    alpha = check_fraction(smoothing, "smoothing", low=0.0, high=float("inf"))
    k = _n_classes(preds, n_classes)
    all_probs = all(p.probs is not None for p in preds)
    if mode == "auto":
        mode = "mean-probs" if all_probs else "votes"
    names = tuple(p.model for p in preds)
    if mode == "mean-probs":
        if not all_probs:
            missing = [p.model for p in preds if p.probs is None][:5]
            raise InputValidationError(
                f"mode='mean-probs' needs probabilities from every model; {missing} have none."
            )
        acc = np.zeros((sizes.pop(), k))
        for p in preds:
            assert p.probs is not None
            if p.probs.shape[1] != k:
                raise InputValidationError(
                    f"model {p.model!r} has {p.probs.shape[1]} classes, expected {k}."
                )
            acc += _as_probabilities(p.probs)
        return Ensemble((acc / len(preds)).astype(np.float32), "mean-probs", names)
    if mode != "votes":
        raise ConfigError(
            f"mode must be 'auto', 'mean-probs' or 'votes'. Got {mode!r}."
        )
    votes = np.zeros((sizes.pop(), k), dtype=np.int64)
    rows = np.arange(votes.shape[0])
    for p in preds:
        if int(p.top1.max()) >= k:
            raise InputValidationError(
                f"model {p.model!r} predicts class {int(p.top1.max())}, outside [0, {k})."
            )
        votes[rows, p.top1] += 1  # one vote per row and model
    probs = (votes + alpha) / (len(preds) + k * alpha)
    return Ensemble(probs.astype(np.float32), "votes", names, votes)
