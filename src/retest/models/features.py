"""Feature maps used by the testbed: pixel flattening and random ReLU features.

Everything here is a scikit-learn transformer (``fit``/``transform``), so it
composes into pipelines, pickles for Dask workers and takes a fixed seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, TransformerMixin

from retest._validation import check_random_state
from retest.errors import ConfigError, InputValidationError

__all__ = ["RandomReluFeatures", "to_features"]


def to_features(x: NDArray[Any]) -> NDArray[np.float32]:
    """Images → flat float32 rows; uint8 pixels are scaled to [0, 1].

    Float inputs are taken as features already (only flattened), so runners
    accept either images or precomputed features.
    """
    arr = np.asarray(x)
    if arr.ndim < 2:
        raise InputValidationError(
            f"expected images (N, H, W[, C]) or features (N, D). Got shape {arr.shape}."
        )
    flat = arr.reshape(arr.shape[0], -1)
    if arr.dtype == np.uint8:
        return flat.astype(np.float32) * np.float32(1.0 / 255.0)
    if arr.dtype.kind not in "fiub":
        raise InputValidationError(f"inputs must be numeric. Got dtype {arr.dtype}.")
    return flat.astype(np.float32, copy=False)


class RandomReluFeatures(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """``max(0, X W + b)`` with Gaussian ``W`` (random-features baselines).

    The inputs are centred on the training mean first and ``W`` is scaled by
    ``1/sqrt(d)`` so the pre-activations have unit scale whatever ``d``.

    Parameters
    ----------
    n_features : int
        Output width.
    random_state : int
        Seed of ``W`` and ``b``.
    """

    def __init__(self, n_features: int = 1024, *, random_state: int = 0) -> None:
        self.n_features = n_features
        self.random_state = random_state

    def fit(self, X: NDArray[Any], y: Any = None) -> RandomReluFeatures:
        if int(self.n_features) < 1:
            raise ConfigError(f"n_features must be >= 1. Got {self.n_features!r}.")
        x = to_features(X)
        rng = check_random_state(int(self.random_state))
        d = x.shape[1]
        self.mean_ = x.mean(axis=0, dtype=np.float64).astype(np.float32)
        scale = np.float32(
            1.0 / np.sqrt(max(float(((x - self.mean_) ** 2).sum(1).mean()), 1e-12))
        )
        self.weights_ = (rng.standard_normal((d, int(self.n_features))) * scale).astype(
            np.float32
        )
        self.bias_ = rng.uniform(-1.0, 1.0, int(self.n_features)).astype(np.float32)
        return self

    def transform(self, X: NDArray[Any]) -> NDArray[np.float32]:
        x = to_features(X) - self.mean_
        out = x @ self.weights_
        out += self.bias_
        np.maximum(out, 0.0, out=out)
        return out
