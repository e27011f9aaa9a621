"""Selection-frequency bins and largest-remainder rounding of histograms.

See docs/algorithms.md#bins-and-rounding.

The MatchedFrequency sampler reproduces, per class, the distribution of the
original images over five selection-frequency bins
``[0, 0.2), [0.2, 0.4), [0.4, 0.6), [0.6, 0.8), [0.8, 1.0]``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest.errors import ConfigError, InputValidationError
from retest.sampling.compat import AUTHORS, check_compat

__all__ = [
    "DEFAULT_BINS",
    "bin_index",
    "bin_indices",
    "check_bins",
    "histogram_counts",
    "round_histogram",
]

DEFAULT_BINS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)


def check_bins(bins: Sequence[float]) -> tuple[float, ...]:
    """Return ``bins`` as a tuple of strictly increasing edges in (0, 1]."""
    edges = tuple(float(b) for b in bins)
    if not edges or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ConfigError(
            f"histogram bins must be a non-empty, strictly increasing list of edges. "
            f"Got {list(bins)!r} instead."
        )
    if edges[0] <= 0.0 or edges[-1] > 1.0:
        raise ConfigError(
            f"histogram bin edges must lie in (0, 1]. Got {list(bins)!r} instead."
        )
    return edges


def bin_index(frequency: float, bins: Sequence[float] = DEFAULT_BINS) -> int:
    """Bin of one selection frequency: the first ``i`` with ``f < bins[i]``, else ``len(bins)``.

    Examples
    --------
    >>> bin_index(0.0), bin_index(0.2), bin_index(0.79), bin_index(0.8), bin_index(1.0)
    (0, 1, 3, 4, 4)
    """
    for i, edge in enumerate(bins):
        if frequency < edge:
            return i
    return len(bins)


def bin_indices(
    frequencies: ArrayLike, bins: Sequence[float] = DEFAULT_BINS
) -> NDArray[np.int64]:
    """Vectorised :func:`bin_index`."""
    f = np.asarray(frequencies, dtype=np.float64)
    # side="right" counts the edges <= f, i.e. the first edge with f < edge.
    return np.searchsorted(np.asarray(bins, np.float64), f, side="right").astype(
        np.int64
    )


def histogram_counts(
    frequencies: ArrayLike, bins: Sequence[float] = DEFAULT_BINS
) -> NDArray[np.int64]:
    """Number of frequencies per bin, length ``len(bins) + 1``."""
    idx = bin_indices(frequencies, bins)
    return np.bincount(idx, minlength=len(bins) + 1).astype(np.int64)


def round_histogram(
    hist: ArrayLike, target: int, *, compat: str | None = None
) -> list[int]:
    """Scale a histogram to sum to ``target`` by largest-remainder rounding.

    ``frac = target * hist / sum(hist)``; every bin gets ``floor(frac)`` and the
    remaining ``target - sum(floor)`` units go to the bins in descending order of
    ``(frac - floor, bin_index)``, so ties go to the higher bin
    (docs/algorithms.md#bins-and-rounding).

    The remainders are compared as exact integers (``target * hist mod sum``), not
    floats, so rationally equal remainders always tie. ``compat="authors"``
    computes them in float64 as ImageNetV2's ``round_histogram`` did, where an
    exact tie can come out unequal (docs/algorithms.md#two-modes).

    Parameters
    ----------
    hist : array-like of int, shape (n_bins,)
        Non-negative counts with a positive sum.
    target : int
        The total the result must sum to.
    compat : {"exact", "authors"}, optional
        Exact integer remainders (default) or the published float arithmetic.

    Returns
    -------
    list of int
        Non-negative counts summing to ``target``; each within 1 of the exact share.

    Examples
    --------
    >>> round_histogram([3, 1, 0, 4, 12], 10)
    [1, 1, 0, 2, 6]
    >>> round_histogram([1, 1, 1, 0, 0], 10)
    [3, 3, 4, 0, 0]
    >>> round_histogram([8, 5, 5, 1, 6], 10), round_histogram([8, 5, 5, 1, 6], 10, compat="authors")
    ([3, 2, 2, 0, 3], [3, 2, 2, 1, 2])
    """
    h = np.asarray(hist)
    if h.ndim != 1 or h.size == 0 or h.dtype.kind not in "iu":
        if not (h.ndim == 1 and h.size and h.dtype.kind == "f" and _integral(h)):
            raise InputValidationError(
                f"histogram must be a 1-d array of integer counts. Got {hist!r}."
            )
    counts = [int(x) for x in h]
    if any(c < 0 for c in counts) or sum(counts) == 0:
        raise InputValidationError(
            f"histogram counts must be non-negative with a positive sum. Got {counts}."
        )
    if int(target) != target or target < 0:
        raise ConfigError(f"target must be a non-negative integer. Got {target!r}.")
    if check_compat(compat) == AUTHORS:
        return _round_float(counts, int(target))
    total = sum(counts)
    scaled = [int(target) * c for c in counts]
    floors = [s // total for s in scaled]
    rems = [s % total for s in scaled]
    order = sorted(range(len(counts)), key=lambda i: (rems[i], i), reverse=True)
    for i in order[: int(target) - sum(floors)]:
        floors[i] += 1
    return floors


def _round_float(counts: list[int], target: int) -> list[int]:
    """The published float arithmetic: ``frac = target * h / sum(h)`` in float64,
    remainders ``frac - floor(frac)``, ties of equal floats to the higher bin."""
    h = np.asarray(counts, dtype=np.float64)
    frac = target * h / np.sum(h)
    floors = np.floor(frac)
    gaps = (frac - floors).tolist()
    out = [int(f) for f in floors]
    order = sorted(range(len(out)), key=lambda i: (gaps[i], i), reverse=True)
    for i in order[: target - int(np.round(np.sum(floors)))]:
        out[i] += 1
    return out


def _integral(a: NDArray[np.float64]) -> bool:
    return bool(np.all(np.isfinite(a)) and np.all(a == np.round(a)))
