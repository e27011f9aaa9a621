"""Confidence intervals for accuracies and for differences of accuracies.

Every accuracy in the paper carries a 95 % Clopper-Pearson (exact binomial)
interval (docs/algorithms.md#confidence-intervals). The gap between two accuracies gets
Newcombe's hybrid interval built from the two Clopper-Pearson intervals (not a paper
number; an added, documented choice).

All functions are vectorised over arrays of ``(k, n)`` and return float64
arrays with the broadcast shape (scalar inputs give Python floats).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from retest._validation import check_fraction
from retest.errors import InputValidationError
from retest.registry import Registry

__all__ = [
    "INTERVALS",
    "IntervalFn",
    "clopper_pearson",
    "difference_interval",
    "wilson",
]

FloatArray: TypeAlias = NDArray[np.float64]
IntervalFn: TypeAlias = Callable[..., tuple[FloatArray, FloatArray]]

INTERVALS: Registry[IntervalFn] = Registry("confidence interval")


def _check_counts(k: ArrayLike, n: ArrayLike) -> tuple[FloatArray, FloatArray]:
    kk = np.asarray(k, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    try:
        kk, nn = np.broadcast_arrays(kk, nn)
    except ValueError:
        raise InputValidationError(
            f"k and n must have compatible shapes. Got {kk.shape} and {nn.shape}."
        ) from None
    bad = ~np.isfinite(kk) | ~np.isfinite(nn) | (kk < 0) | (nn < 1) | (kk > nn)
    bad |= (kk != np.round(kk)) | (nn != np.round(nn))
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        raise InputValidationError(
            "counts must be integers with 0 <= k <= n and n >= 1. "
            f"Got k={kk.ravel()[i]:g}, n={nn.ravel()[i]:g}."
        )
    return kk, nn


def _out(a: FloatArray) -> Any:
    return float(a) if a.ndim == 0 else a


@INTERVALS.register("clopper-pearson")
def clopper_pearson(
    k: ArrayLike, n: ArrayLike, *, confidence: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Exact binomial (Clopper-Pearson) interval for ``k`` successes in ``n`` trials.

    ``lo = Beta.ppf(α/2, k, n − k + 1)`` and ``hi = Beta.ppf(1 − α/2, k + 1, n − k)``
    with ``α = 1 − confidence``; ``lo = 0`` when ``k = 0`` and ``hi = 1`` when
    ``k = n`` (the original code leaves these undefined).

    Parameters
    ----------
    k, n : array-like of int
        Successes and trials, broadcast together.
    confidence : float
        Coverage level in (0, 1).

    Returns
    -------
    lo, hi : ndarray of float64
        Bounds as fractions in [0, 1] (floats for scalar input).

    Raises
    ------
    InputValidationError
        Counts that are not integers with ``0 ≤ k ≤ n`` and ``n ≥ 1``.
    ConfigError
        ``confidence`` outside (0, 1).

    Examples
    --------
    >>> from retest import clopper_pearson
    >>> lo, hi = clopper_pearson(425, 500)
    >>> round(100 * lo, 1), round(100 * hi, 1)
    (81.6, 88.0)
    >>> lo, hi = clopper_pearson([0, 10], 10)  # vectorised; exact at the edges
    >>> lo.round(3).tolist(), hi.round(3).tolist()
    ([0.0, 0.692], [0.308, 1.0])
    """
    conf = check_fraction(confidence, "confidence", closed="neither")
    kk, nn = _check_counts(k, n)
    alpha = 1.0 - conf
    with np.errstate(invalid="ignore", divide="ignore"):
        # betaincinv(a, b, q) is Beta(a, b).ppf(q) without importing scipy.stats.
        lo = special.betaincinv(kk, nn - kk + 1, alpha / 2)
        hi = special.betaincinv(kk + 1, nn - kk, 1 - alpha / 2)
    lo = np.where(kk == 0, 0.0, lo).astype(np.float64)
    hi = np.where(kk == nn, 1.0, hi).astype(np.float64)
    return _out(lo), _out(hi)


@INTERVALS.register("wilson")
def wilson(
    k: ArrayLike, n: ArrayLike, *, confidence: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval (an approximate alternative; not used by the paper)."""
    conf = check_fraction(confidence, "confidence", closed="neither")
    kk, nn = _check_counts(k, n)
    z = float(special.ndtri(0.5 + conf / 2))
    p = kk / nn
    den = 1 + z * z / nn
    centre = (p + z * z / (2 * nn)) / den
    half = z * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / den
    lo = np.clip(centre - half, 0.0, 1.0)
    hi = np.clip(centre + half, 0.0, 1.0)
    return _out(np.asarray(lo)), _out(np.asarray(hi))


def difference_interval(
    k1: ArrayLike,
    n1: ArrayLike,
    k2: ArrayLike,
    n2: ArrayLike,
    *,
    confidence: float = 0.95,
    interval: str = "clopper-pearson",
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Interval for the difference ``d = k1/n1 − k2/n2`` of two independent proportions.

    Newcombe's hybrid ("square-and-add") method built from the two single-proportion
    intervals ``[l1, u1]`` and ``[l2, u2]`` (Clopper-Pearson by default)::

        lo = d − sqrt((p1 − l1)² + (u2 − p2)²)
        hi = d + sqrt((u1 − p1)² + (p2 − l2)²)

    It treats the two test sets as independent samples, which they are (different
    images), and inherits the exact intervals' behaviour at ``k = 0`` and ``k = n``.

    Returns
    -------
    d, lo, hi : ndarray of float64
        The difference and its bounds, as fractions.

    References
    ----------
    Newcombe, R. G. (1998). Interval estimation for the difference between
    independent proportions: comparison of eleven methods. Stat. Med. 17, 873-890.
    """
    fn = INTERVALS.get(interval)
    k1a, n1a = _check_counts(k1, n1)
    k2a, n2a = _check_counts(k2, n2)
    p1, p2 = k1a / n1a, k2a / n2a
    l1, u1 = fn(k1a, n1a, confidence=confidence)
    l2, u2 = fn(k2a, n2a, confidence=confidence)
    d = p1 - p2
    lo = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return _out(np.asarray(d)), _out(np.asarray(lo)), _out(np.asarray(hi))
