"""The paper's model for the linear fit (paper §5.3) as a simulator.

See docs/algorithms.md#probit-model.

Each example has a difficulty ``θ ~ N(μ, σ²)``; a model with skill ``s`` gets an
example right with probability ``Φ(s − θ)``. The accuracy on a test set
``(μ, σ)`` is then ``Φ((s − μ) / sqrt(σ² + 1))``, so probit accuracies on two
test sets are exactly linear in each other: ``α̃₂ = u·α̃₁ + v`` with
``u = sqrt(σ₁² + 1) / sqrt(σ₂² + 1)`` and ``v = (μ₁ − μ₂) / sqrt(σ₂² + 1)``.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from retest._validation import RandomStateLike, check_labels, check_random_state
from retest.errors import ConfigError

__all__ = [
    "probit_line",
    "simulate_accuracies",
    "simulate_correctness",
    "simulate_predicted_labels",
]

FloatArray: TypeAlias = NDArray[np.float64]


def _check_sigma(sigma: float) -> float:
    s = float(sigma)
    if not np.isfinite(s) or s < 0:
        raise ConfigError(f"sigma must be a finite number >= 0. Got {sigma!r}.")
    return s


def simulate_accuracies(skills: ArrayLike, mu: float, sigma: float) -> FloatArray:
    """Expected accuracies ``Φ((s − μ) / sqrt(σ² + 1))`` of models with ``skills``.

    Examples
    --------
    >>> simulate_accuracies([0.0], 0.0, 1.0).tolist()
    [0.5]
    """
    s = np.asarray(skills, dtype=np.float64)
    scale = np.sqrt(_check_sigma(sigma) ** 2 + 1.0)
    return np.asarray(special.ndtr((s - float(mu)) / scale), dtype=np.float64)


def probit_line(
    mu1: float, sigma1: float, mu2: float, sigma2: float
) -> tuple[float, float]:
    """Slope ``u`` and intercept ``v`` of the probit-linear relation from set 1 to set 2.

    Examples
    --------
    >>> probit_line(0.0, 0.0, 0.0, 0.0)
    (1.0, 0.0)
    """
    d1 = np.sqrt(_check_sigma(sigma1) ** 2 + 1.0)
    d2 = np.sqrt(_check_sigma(sigma2) ** 2 + 1.0)
    return float(d1 / d2), float((float(mu1) - float(mu2)) / d2)


def simulate_correctness(
    skills: ArrayLike,
    mu: float,
    sigma: float,
    n_examples: int,
    *,
    random_state: RandomStateLike,
) -> NDArray[np.bool_]:
    """Per-example correctness of each model on a simulated test set.

    Difficulties ``θ_i ~ N(μ, σ²)`` are shared by all models (so errors are
    correlated across models, as in real testbeds); model ``j`` is right on
    example ``i`` with probability ``Φ(s_j − θ_i)``.

    Returns
    -------
    ndarray of bool of shape (n_models, n_examples)
    """
    if int(n_examples) < 1:
        raise ConfigError(f"n_examples must be >= 1. Got {n_examples!r}.")
    rng = check_random_state(random_state)
    s = np.atleast_1d(np.asarray(skills, dtype=np.float64))
    theta = rng.normal(float(mu), _check_sigma(sigma), size=int(n_examples))
    p = special.ndtr(s[:, None] - theta[None, :])
    return np.asarray(rng.random(p.shape) < p)


def simulate_predicted_labels(
    labels: ArrayLike,
    correct: ArrayLike,
    n_classes: int,
    *,
    random_state: RandomStateLike,
) -> NDArray[np.int64]:
    """Predicted classes that are right exactly where ``correct`` is True.

    A wrong prediction is a class drawn uniformly from the ``n_classes − 1``
    classes other than the label.

    Returns
    -------
    ndarray of int64 with the shape of ``correct`` (n_models, n_examples) or (n_examples,)
    """
    if int(n_classes) < 2:
        raise ConfigError(f"n_classes must be >= 2. Got {n_classes!r}.")
    y = check_labels(labels, n_classes=int(n_classes))
    ok = np.asarray(correct, dtype=bool)
    rng = check_random_state(random_state)
    shift = rng.integers(1, int(n_classes), size=ok.shape)
    wrong = (y + shift) % int(n_classes)
    return np.where(ok, y, wrong).astype(np.int64)
