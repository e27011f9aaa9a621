"""Accuracy metrics with exact counts, per-class accuracy, ranks and error ratios.

A metric maps ``(labels, topk)`` to a boolean "correct" vector; accuracies are
always carried as exact counts ``(k, n)`` so intervals and gaps are computed from
unrounded values (docs/algorithms.md#accuracy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._validation import check_labels
from retest.errors import InputValidationError
from retest.evaluate.intervals import INTERVALS
from retest.records import Predictions
from retest.registry import Registry

__all__ = [
    "METRICS",
    "Accuracy",
    "MetricFn",
    "accuracy",
    "correct",
    "error_ratio",
    "per_class_accuracy",
    "rank",
]

BoolArray: TypeAlias = NDArray[np.bool_]
MetricFn: TypeAlias = Callable[[NDArray[np.int64], NDArray[np.int64]], BoolArray]

METRICS: Registry[MetricFn] = Registry("metric")


@dataclass(frozen=True, slots=True)
class _TopK:
    """Correct iff the label is among the first ``required_k`` predicted classes.

    A metric's optional ``required_k`` is how many ranked classes per example it
    reads, checked before it runs (1 when absent, as for a plain function).
    """

    required_k: int

    def __call__(self, labels: NDArray[np.int64], topk: NDArray[np.int64]) -> BoolArray:
        # A row with fewer than k ranked classes only happens when K < k (then all
        # classes are listed), so "label among the listed classes" is still exact.
        hit = topk[:, : self.required_k] == labels[:, None]
        return np.asarray(hit.any(axis=1))


METRICS.add("top1", _TopK(1))
METRICS.add("top5", _TopK(5))


@dataclass(frozen=True, slots=True)
class Accuracy:
    """An accuracy with its exact counts and confidence interval (fractions)."""

    k: int
    n: int
    lo: float
    hi: float
    confidence: float

    @property
    def value(self) -> float:
        """``k / n`` as a fraction (unrounded)."""
        return self.k / self.n

    def __str__(self) -> str:
        return f"{100 * self.value:.1f} [{100 * self.lo:.1f}, {100 * self.hi:.1f}]"


def _as_topk(predictions: Predictions | ArrayLike) -> tuple[NDArray[np.int64], str]:
    if isinstance(predictions, Predictions):
        return predictions.topk, f"model {predictions.model!r}"
    arr = np.asarray(predictions)
    return (arr[:, None] if arr.ndim == 1 else arr).astype(np.int64), "predictions"


def correct(
    labels: ArrayLike,
    predictions: Predictions | ArrayLike,
    *,
    metric: str = "top1",
) -> BoolArray:
    """Per-example correctness under ``metric`` (``"top1"``, ``"top5"``, ...).

    Raises
    ------
    InputValidationError
        If lengths differ, or the predictions rank too few classes for ``metric``.
    """
    fn = METRICS.get(metric)
    n_classes = predictions.n_classes if isinstance(predictions, Predictions) else None
    y = check_labels(labels, n_classes=n_classes)
    topk, what = _as_topk(predictions)
    if topk.shape[0] != y.shape[0]:
        raise InputValidationError(
            f"{what}: {topk.shape[0]} predictions but {y.shape[0]} labels; "
            "predictions and labels must describe the same examples in the same order."
        )
    need = int(getattr(fn, "required_k", 1))
    if topk.shape[1] < need and (n_classes is None or topk.shape[1] < n_classes):
        raise InputValidationError(
            f"{what}: metric {metric!r} needs {need} ranked classes per example but "
            f"the predictions have {topk.shape[1]}. Use top1 or provide top-{need} "
            "predictions or a score matrix."
        )
    return fn(y, topk)


def accuracy(
    labels: ArrayLike,
    predictions: Predictions | ArrayLike,
    *,
    metric: str = "top1",
    confidence: float = 0.95,
    interval: str = "clopper-pearson",
) -> Accuracy:
    """Accuracy with exact counts and a confidence interval.

    Parameters
    ----------
    labels : array-like of int, shape (n,)
        True classes.
    predictions : Predictions or array-like of int, shape (n,) or (n, k)
        Predicted classes, best first.
    metric : {"top1", "top5"}
        Correctness criterion (a name in :data:`METRICS`).
    confidence : float
        Level of the interval.
    interval : {"clopper-pearson", "wilson"}
        Interval method (a name in ``INTERVALS``).

    Returns
    -------
    Accuracy
        ``k`` correct of ``n``, ``value`` = k / n, bounds ``lo`` and ``hi``
        (fractions).

    Raises
    ------
    InputValidationError
        Lengths differ, class ids are invalid, or the predictions rank too few
        classes for ``metric``.

    Examples
    --------
    >>> from retest import accuracy
    >>> a = accuracy([0, 1, 1, 2], [0, 1, 2, 2])
    >>> (a.k, a.n, a.value)
    (3, 4, 0.75)
    >>> str(accuracy([0] * 425 + [1] * 75, [0] * 500))  # percent [95% interval]
    '85.0 [81.6, 88.0]'
    """
    c = correct(labels, predictions, metric=metric)
    k, n = int(c.sum()), int(c.size)
    lo, hi = INTERVALS.get(interval)(k, n, confidence=confidence)
    return Accuracy(k, n, float(lo), float(hi), confidence)


def per_class_accuracy(
    labels: ArrayLike,
    predictions: Predictions | ArrayLike,
    *,
    n_classes: int | None = None,
    metric: str = "top1",
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Correct counts and example counts per true class.

    Returns
    -------
    k, n : ndarray of int64 of shape (n_classes,)
        ``k[c] / n[c]`` is the accuracy on class ``c`` (undefined where ``n[c] = 0``).
    """
    y = check_labels(labels, n_classes=n_classes)
    c = correct(y, predictions, metric=metric)
    m = n_classes if n_classes is not None else int(y.max()) + 1
    k = np.bincount(y, weights=c, minlength=m).astype(np.int64)
    n = np.bincount(y, minlength=m).astype(np.int64)
    return k, n


def rank(values: ArrayLike, names: Sequence[str]) -> NDArray[np.int64]:
    """Ranks (1 = best) by ``values`` descending; ties broken by name ascending.

    Pass unrounded accuracies: the tie-break (docs/algorithms.md#accuracy) only decides
    exact ties.

    Examples
    --------
    >>> rank([0.9, 0.95, 0.9], ["b", "a", "a2"]).tolist()
    [3, 1, 2]
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.shape[0] != len(names):
        raise InputValidationError(
            f"rank needs one value per name. Got {v.shape} values for {len(names)} names."
        )
    order = sorted(range(len(names)), key=lambda i: (-v[i], names[i]))
    out = np.empty(len(names), dtype=np.int64)
    out[order] = np.arange(1, len(names) + 1)
    return out


def error_ratio(orig_acc: ArrayLike, new_acc: ArrayLike) -> NDArray[np.float64]:
    """``(1 − new) / (1 − orig)``: how many times more errors on the new set.

    ``inf`` where the original error is 0 and the new one is not; ``nan`` when both are 0.
    """
    o = 1.0 - np.asarray(orig_acc, dtype=np.float64)
    n = 1.0 - np.asarray(new_acc, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(n / o, dtype=np.float64)
