"""Noisy-label simulation for benchmarking label-error finders.

A noise matrix ``N[s, y] = P(given = s | true = y)`` (columns sum to 1) is drawn
from a trace (``K·(1 − noise)``) and a sparsity (the fraction of off-diagonal
noise rates that are exactly zero); noisy labels are then drawn from it.

Two behaviours:

* default (``legacy=False``): a seeded ``numpy.random.Generator``. The diagonal
  is Dirichlet-distributed with the requested sum (rejection keeps every entry
  in ``[min_trace_prob, 1)``); zero off-diagonals are spread over columns (at
  most ``K − 2`` per column, so every column keeps a noise rate); each column's
  remaining rates are Dirichlet-distributed over random rows. The number of
  zeros is ``round(K·(K−1)·sparsity)`` (v0.1.0 truncates, which turns 0.7 into
  62 of 90 instead of 63). Noisy labels flip exactly
  ``round(n_y·(1 − N[y, y]))`` examples of each true class ``y``, split over the
  rows of the column by largest remainder, so the realised noise matrix is the
  requested one up to rounding.
* ``legacy=True``: docs/algorithms.md#noise-generation, the original experiments' code
  (``cleanlab.benchmarking.noise_generation``, identical to cleanlab v0.1.0),
  which seeds NumPy's global generator. We save and restore the global state
  around the call, so callers' ``np.random`` streams are unaffected (not
  thread-safe: do not run it concurrently with other users of ``np.random``).
  This regenerates the released CIFAR-10 label files bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._validation import (
    RandomStateLike,
    check_fraction,
    check_labels,
    check_random_state,
)
from retest.errors import ConfigError, InputValidationError

__all__ = [
    "PAPER_NOISE_AMOUNTS",
    "PAPER_SPARSITIES",
    "generate_noise_matrix",
    "generate_noisy_labels",
    "noise_matrix_of",
    "paper_trace",
]

#: The benchmark grids (docs/algorithms.md#noise-generation), kept as the float values
#: the original loops produced.
PAPER_SPARSITIES: tuple[float, ...] = tuple(float(x) for x in np.arange(0, 0.8, 0.2))
PAPER_NOISE_AMOUNTS: tuple[float, ...] = tuple(float(x) for x in np.arange(0, 1, 0.2))

T = TypeVar("T")


def paper_trace(noise_amount: float, n_classes: int = 10) -> int:
    """The original trace ``int(K·(1 − noise))`` (truncation: "0.6" gives trace 3)."""
    return int(n_classes * (1 - noise_amount))


@contextmanager
def _isolated_global_rng() -> Iterator[None]:
    state = np.random.get_state()  # noqa: NPY002 - the legacy stream
    try:
        yield
    finally:
        np.random.set_state(state)  # noqa: NPY002


def _legacy_seed(random_state: RandomStateLike) -> int:
    if isinstance(random_state, (int, np.integer)) and not isinstance(
        random_state, bool
    ):
        check_random_state(random_state)  # rejects negatives with the usual message
        return int(random_state)
    raise ConfigError(
        f"legacy=True needs an int seed (the original code seeds np.random). Got {random_state!r}."
    )


def generate_noise_matrix(
    n_classes: int,
    trace: float,
    *,
    frac_zero_noise_rates: float = 0.0,
    random_state: RandomStateLike = 0,
    legacy: bool = False,
    min_trace_prob: float = 1e-5,
    max_iter: int = 10000,
) -> NDArray[np.float64]:
    """Noise matrix ``P(given | true)`` with a given trace and sparsity.

    Parameters
    ----------
    n_classes : int
        K ≥ 2.
    trace : float
        Sum of the diagonal, in ``(0, K]``; the average noise rate with a uniform
        prior is ``1 − trace / K``.
    frac_zero_noise_rates : float
        Fraction of the ``K·(K−1)`` off-diagonal entries that are zero.
    random_state : int or Generator
        Seed (``legacy=True`` needs an int: it is the original ``seed``).
    legacy : bool
        Use the original code (docs/algorithms.md#noise-generation,
        ``valid_noise_matrix=False``).

    Examples
    --------
    >>> nm = generate_noise_matrix(4, 3.0, frac_zero_noise_rates=0.5, random_state=0)
    >>> bool(np.allclose(nm.sum(axis=0), 1)), round(float(np.trace(nm)), 6)
    (True, 3.0)
    >>> int((nm[~np.eye(4, dtype=bool)] == 0).sum())
    6
    """
    k = int(n_classes)
    if k < 2:
        raise ConfigError(f"n_classes must be >= 2. Got {n_classes}.")
    check_fraction(trace, "trace", low=0.0, high=float(k), closed="right")
    frac = check_fraction(frac_zero_noise_rates, "frac_zero_noise_rates")
    if legacy:
        return _legacy_noise_matrix(k, trace, frac, _legacy_seed(random_state))
    rng = check_random_state(random_state)
    if trace == k:
        return np.eye(k)
    n_zero = round(k * (k - 1) * frac)
    if n_zero > k * (k - 2):
        raise ConfigError(
            f"frac_zero_noise_rates={frac} asks for {n_zero} zero noise rates but at most "
            f"{k * (k - 2)} fit (each column keeps one non-zero rate); use a smaller value."
        )
    diag = _diagonal(rng, k, float(trace), min_trace_prob, max_iter)
    slots = (
        rng.choice(k * (k - 2), size=n_zero, replace=False) if k > 2 else np.array([])
    )
    zeros_per_col = np.bincount((slots // max(k - 2, 1)).astype(int), minlength=k)
    nm = np.zeros((k, k))
    for col in range(k):
        nnz = k - 1 - int(zeros_per_col[col])
        rates = rng.dirichlet(np.ones(nnz)) * (1.0 - diag[col])
        rows = rng.choice([r for r in range(k) if r != col], size=nnz, replace=False)
        nm[rows, col] = rates
        nm[col, col] = diag[col]
    return nm


def _diagonal(
    rng: np.random.Generator, k: int, trace: float, low: float, max_iter: int
) -> NDArray[np.float64]:
    # Sample the smaller side (diagonal or its complement) so rejection is rare.
    for _ in range(max_iter):
        if trace <= k / 2:
            d = rng.dirichlet(np.ones(k)) * trace
        else:
            d = 1.0 - rng.dirichlet(np.ones(k)) * (k - trace)
        if (d >= low).all() and (d < 1.0).all():
            return np.asarray(d, dtype=np.float64)
    raise ConfigError(
        f"could not draw a diagonal with trace {trace} in [{low}, 1) for K={k} "
        f"in {max_iter} tries; use a trace further from 0 and K."
    )


def _legacy_noise_matrix(
    k: int, trace: float, frac: float, seed: int
) -> NDArray[np.float64]:
    from cleanlab.benchmarking.noise_generation import generate_noise_matrix_from_trace

    def draw() -> Any:
        return generate_noise_matrix_from_trace(
            k,
            trace,
            valid_noise_matrix=False,
            frac_zero_noise_rates=frac,
            seed=seed,
        )

    nm = _call_isolated(draw)
    if nm is None:  # pragma: no cover - only with valid_noise_matrix=True
        raise ConfigError(f"no noise matrix found for K={k}, trace={trace}.")
    return np.asarray(nm, dtype=np.float64)


def _call_isolated(fn: Callable[[], T]) -> T:
    with _isolated_global_rng():
        return fn()


def _check_noise_matrix(
    noise_matrix: ArrayLike, k: int | None = None
) -> NDArray[np.float64]:
    nm = np.asarray(noise_matrix, dtype=np.float64)
    if nm.ndim != 2 or nm.shape[0] != nm.shape[1] or nm.shape[0] < 2:
        raise InputValidationError(
            f"noise_matrix must be square (K, K), K >= 2. Got {nm.shape}."
        )
    if k is not None and nm.shape[0] < k:
        raise InputValidationError(
            f"labels use {k} classes but noise_matrix is {nm.shape[0]}x{nm.shape[0]}."
        )
    if (nm < 0).any() or not np.allclose(nm.sum(axis=0), 1.0, atol=1e-6):
        raise InputValidationError(
            "noise_matrix must be non-negative with columns summing to 1 "
            f"(P(given | true)); column sums are {np.round(nm.sum(axis=0), 4).tolist()}."
        )
    return nm


def generate_noisy_labels(
    true_labels: ArrayLike,
    noise_matrix: ArrayLike,
    *,
    random_state: RandomStateLike = 0,
    legacy: bool = False,
) -> NDArray[np.int64]:
    """Noisy labels drawn from ``noise_matrix`` (column y = distribution of the given label).

    ``legacy=True`` (docs/algorithms.md#noise-generation): ``np.random.seed(seed)`` then
    cleanlab's ``generate_noisy_labels`` (floors the counts), global state restored
    after.
    """
    y = check_labels(true_labels, name="true_labels")
    k = int(y.max()) + 1
    nm = _check_noise_matrix(noise_matrix, k)
    if legacy:
        from cleanlab.benchmarking.noise_generation import generate_noisy_labels as gen

        seed = _legacy_seed(random_state)

        def draw() -> Any:
            np.random.seed(seed)  # noqa: NPY002 - the original code's seeding
            return gen(y, nm)

        return np.asarray(_call_isolated(draw), dtype=np.int64)
    rng = check_random_state(random_state)
    s = y.copy()
    for c in range(nm.shape[0]):
        idx = np.flatnonzero(y == c)
        if idx.size == 0:
            continue
        counts = _flip_counts(nm[:, c], c, idx.size)
        new = np.repeat(np.arange(nm.shape[0]), counts)
        s[rng.permutation(idx)[: new.size]] = new
    return s


def _flip_counts(col: NDArray[np.float64], c: int, n: int) -> NDArray[np.int64]:
    """Largest-remainder split of ``round(n·(1 − col[c]))`` flips over the other rows."""
    target = col * n
    target[c] = 0.0
    total = min(round(n * (1.0 - col[c])), n)
    counts = np.floor(target).astype(np.int64)
    rest = total - int(counts.sum())
    if rest > 0:
        rem = target - counts
        order = np.lexsort((np.arange(col.size), -rem))  # ties → lower class id
        counts[order[:rest]] += 1
    return counts


def noise_matrix_of(
    true_labels: ArrayLike, noisy_labels: ArrayLike, n_classes: int | None = None
) -> NDArray[np.float64]:
    """Realised ``P(given | true)`` of a pair of label arrays."""
    y = check_labels(true_labels, name="true_labels")
    s = check_labels(noisy_labels, name="noisy_labels")
    if y.shape != s.shape:
        raise InputValidationError(
            f"true_labels and noisy_labels differ in length: {y.size} vs {s.size}."
        )
    k = n_classes or int(max(y.max(), s.max())) + 1
    counts = np.bincount(s * k + y, minlength=k * k).reshape(k, k).astype(np.float64)
    counts /= np.maximum(counts.sum(axis=0), 1.0)  # a class never true keeps zeros
    return counts
