"""Out-of-sample predicted probabilities by stratified K-fold cross-validation.

Confident learning needs probabilities the model did not fit to
(docs/algorithms.md#cross-validation: 4-fold
``StratifiedKFold(shuffle=True, random_state=0)``). Any model with ``fit(X, y)`` and
``predict_proba(X)`` works (scikit-learn estimators, the testbed's model runners), or a
factory returning a fresh one per fold.

Resumability without files in the core: the caller passes a :class:`FoldCache`
(``retest.stages.label_errors._label_errors.NpyFoldCache`` stores atomic ``.npy`` files in a
directory). Fold keys hash the fold's test indices, the labels, K and the seed,
so a cache written for other data or another split is never reused.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest._validation import check_labels
from retest.errors import ConfigError, InputValidationError

__all__ = ["FoldCache", "ProbabilisticModel", "cross_val_pred_probs", "fold_key"]


class ProbabilisticModel(Protocol):
    def fit(self, X: Any, y: Any) -> Any: ...

    def predict_proba(self, X: Any) -> Any: ...


class FoldCache(Protocol):
    """Where finished folds are kept: ``load`` returns None for an unknown key."""

    def load(self, key: str) -> NDArray[np.float32] | None: ...

    def save(self, key: str, probs: NDArray[np.float32]) -> None: ...


ModelLike = ProbabilisticModel | Callable[[], ProbabilisticModel]


def fold_key(
    fold: int,
    n_splits: int,
    test_idx: NDArray[np.int64],
    labels: NDArray[np.int64],
    k: int,
    seed: int,
) -> str:
    """Stable name of one fold's result: ``fold{i}of{n}-<sha256 prefix>``."""
    h = hashlib.sha256()
    for part in (test_idx.astype(np.int64), labels.astype(np.int64)):
        h.update(part.tobytes())
    h.update(f"{k}:{seed}".encode())
    return f"fold{fold}of{n_splits}-{h.hexdigest()[:16]}"


def _fresh(model: ModelLike) -> ProbabilisticModel:
    if hasattr(model, "fit") and hasattr(model, "predict_proba"):
        if hasattr(model, "get_params"):
            from sklearn.base import clone

            fresh: ProbabilisticModel = clone(model)
            return fresh
        return copy.deepcopy(model)
    if callable(model):
        made = model()
        if hasattr(made, "fit") and hasattr(made, "predict_proba"):
            return made
    raise ConfigError(
        "model must have fit(X, y) and predict_proba(X), or be a factory returning "
        f"such a model. Got {type(model).__name__}."
    )


def _fold_probs(
    model: ProbabilisticModel, X_test: Any, k: int, train_classes: NDArray[np.int64]
) -> NDArray[np.float32]:
    raw = np.asarray(model.predict_proba(X_test), dtype=np.float64)
    classes = np.asarray(getattr(model, "classes_", train_classes))
    if raw.ndim != 2 or raw.shape[1] != classes.size:
        raise InputValidationError(
            f"predict_proba returned shape {raw.shape}; expected ({len(X_test)}, "
            f"{classes.size}) for the classes seen in training."
        )
    out = np.zeros((raw.shape[0], k))
    out[:, classes.astype(np.int64)] = raw
    return out.astype(np.float32)


def cross_val_pred_probs(
    X: Any,
    labels: ArrayLike,
    model: ModelLike,
    *,
    n_splits: int = 4,
    n_classes: int | None = None,
    random_state: int = 0,
    cache: FoldCache | None = None,
    progress: ProgressCallback | None = None,
) -> NDArray[np.float32]:
    """(N, K) out-of-sample probabilities, aligned with ``X``/``labels``.

    Parameters
    ----------
    X : array-like of shape (n_samples, ...)
        Features (indexed with integer arrays, as ``X[idx]``).
    labels : array-like of shape (n_samples,)
        Given labels; also used for stratification
        (docs/algorithms.md#cross-validation).
    model : model or callable
        Object with ``fit``/``predict_proba`` (cloned per fold; scikit-learn
        estimators via ``sklearn.base.clone``, others deep-copied) or a factory.
    n_splits : int
        Folds; every class needs at least ``n_splits`` examples.
    random_state : int
        Seed of the shuffled ``StratifiedKFold``.
    cache : FoldCache, optional
        Finished folds are loaded from / saved to it, so a rerun skips them.
    progress : callable, optional
        Called as ``progress("cross-validation", folds_done, n_splits)``.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20); X = y[:, None] + rng.normal(size=(40, 1))
    >>> p = cross_val_pred_probs(X, y, LogisticRegression(), n_splits=4)
    >>> p.shape, bool(np.allclose(p.sum(axis=1), 1))
    ((40, 2), True)
    """
    from sklearn.model_selection import StratifiedKFold

    y = check_labels(labels, name="labels")
    if len(X) != y.size:
        raise InputValidationError(
            f"X and labels must have the same length: {len(X)} rows, {y.size} labels."
        )
    if isinstance(random_state, bool) or not isinstance(
        random_state, (int, np.integer)
    ):
        raise ConfigError(f"random_state must be an int seed. Got {random_state!r}.")
    k = int(n_classes) if n_classes is not None else int(y.max()) + 1
    counts = np.bincount(y, minlength=k)
    if n_splits < 2 or counts[counts > 0].min() < n_splits:
        small = np.flatnonzero((counts > 0) & (counts < n_splits)).tolist()
        raise InputValidationError(
            f"n_splits={n_splits} needs >= 2 folds and every present class to have at "
            f"least n_splits examples; classes {small} have fewer. Use fewer folds."
        )
    skf = StratifiedKFold(
        n_splits=n_splits, shuffle=True, random_state=int(random_state)
    )
    out = np.zeros((y.size, k), dtype=np.float32)
    report(progress, "cross-validation", 0, n_splits)
    for i, (train, test) in enumerate(skf.split(np.zeros(y.size), y)):
        key = fold_key(i, n_splits, test, y, k, int(random_state))
        cached = cache.load(key) if cache is not None else None
        if cached is not None and cached.shape == (test.size, k):
            out[test] = cached
        else:
            m = _fresh(model)
            m.fit(X[train], y[train])
            out[test] = _fold_probs(m, X[test], k, np.unique(y[train]))
            if cache is not None:
                cache.save(key, out[test])
        report(progress, "cross-validation", i + 1, n_splits)
    return out
