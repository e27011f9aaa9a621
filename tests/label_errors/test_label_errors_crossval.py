"""Cross-validated out-of-sample probabilities: stratified, seeded, resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from retest.errors import ConfigError, InputValidationError
from retest.label_errors.crossval import cross_val_pred_probs
from retest.stages.label_errors import NpyFoldCache


class CountingModel:
    """Not a scikit-learn estimator: nearest class mean with softmax scores."""

    fits = 0

    def fit(self, X: np.ndarray, y: np.ndarray) -> CountingModel:
        CountingModel.fits += 1
        self.classes_ = np.unique(y)
        self.means_ = np.stack([X[y == c].mean(axis=0) for c in self.classes_])
        self.train_rows_ = {tuple(r) for r in X}
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        # Out-of-sample guarantee: no test row was seen in fit.
        assert not any(tuple(r) in self.train_rows_ for r in X)
        d = -((X[:, None, :] - self.means_[None]) ** 2).sum(axis=2)
        z = np.exp(d - d.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)


def _data(n: int = 120, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(k), n // k)
    return y[:, None] * 2.0 + rng.normal(size=(y.size, 2)), y


def test_sklearn_model_and_factory_agree() -> None:
    X, y = _data()
    a = cross_val_pred_probs(X, y, LogisticRegression(), n_splits=4, random_state=1)
    b = cross_val_pred_probs(
        X, y, lambda: LogisticRegression(), n_splits=4, random_state=1
    )
    np.testing.assert_array_equal(a, b)
    assert a.shape == (120, 3) and a.dtype == np.float32
    np.testing.assert_allclose(a.sum(axis=1), 1, rtol=1e-5)
    assert (a.argmax(axis=1) == y).mean() > 0.8
    c = cross_val_pred_probs(X, y, LogisticRegression(), n_splits=4, random_state=2)
    assert not np.array_equal(a, c)  # the seed changes the folds


def test_resumable_with_fold_cache(tmp_path: Path) -> None:
    X, y = _data()
    calls: list[tuple[str, int, int | None]] = []
    cache = NpyFoldCache(tmp_path / "folds")
    CountingModel.fits = 0
    first = cross_val_pred_probs(
        X,
        y,
        CountingModel(),
        n_splits=4,
        cache=cache,
        progress=lambda t, d, n: calls.append((t, d, n)),
    )
    assert CountingModel.fits == 4
    assert calls[-1] == ("cross-validation", 4, 4) and len(calls) == 5
    files = sorted(p.name for p in (tmp_path / "folds").iterdir())
    assert len(files) == 4 and all(
        f.startswith("fold") and f.endswith(".npy") for f in files
    )
    # Simulate an interrupted run: one fold's file lost, one truncated.
    (tmp_path / "folds" / files[0]).unlink()
    (tmp_path / "folds" / files[1]).write_bytes(b"\x93NUMPY")
    again = cross_val_pred_probs(X, y, CountingModel(), n_splits=4, cache=cache)
    assert CountingModel.fits == 6  # only the two missing folds were refit
    np.testing.assert_array_equal(first, again)
    # Other labels → other keys: the cache is not reused wrongly.
    y2 = y.copy()
    y2[:2] = 1
    cross_val_pred_probs(X, y2, CountingModel(), n_splits=4, cache=cache)
    assert CountingModel.fits == 10


def test_missing_class_in_a_fold_maps_columns() -> None:
    class TwoClass(CountingModel):
        def predict_proba(self, X: np.ndarray) -> Any:
            return super().predict_proba(X)

    X, y = _data(n=60, k=3)
    p = cross_val_pred_probs(X, y, TwoClass(), n_splits=2, n_classes=4)
    assert p.shape == (60, 4) and (p[:, 3] == 0).all()


def test_bad_inputs() -> None:
    X, y = _data()
    with pytest.raises(InputValidationError, match="same length"):
        cross_val_pred_probs(X[:10], y, LogisticRegression())
    with pytest.raises(InputValidationError, match="fewer"):
        cross_val_pred_probs(
            X[:5], np.array([0, 0, 0, 1, 1]), LogisticRegression(), n_splits=3
        )
    with pytest.raises(ConfigError, match="fit"):
        cross_val_pred_probs(X, y, object())
    with pytest.raises(ConfigError, match="int seed"):
        cross_val_pred_probs(X, y, LogisticRegression(), random_state=None)  # type: ignore[arg-type]
