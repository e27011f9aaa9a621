"""gaussian-nb on a tiny training set: predict_proba rows are probabilities.

30 training images give 30 PCA components of very different scales; GaussianNB
normalised its log-likelihoods in float32 and its rows summed to 0.6–3.
"""

from __future__ import annotations

import numpy as np

from retest.models.base import get_model


def test_gaussian_nb_tiny_training_set_rows_sum_to_one() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (30, 28, 28), dtype=np.uint8)
    y = np.arange(30) % 10
    r = get_model("gaussian-nb", n_classes=10, preset="quick", random_state=0)
    r.fit(x, y)  # type: ignore[attr-defined]
    pred = r.predict(rng.integers(0, 256, (200, 28, 28), dtype=np.uint8))
    assert pred.probs is not None
    sums = pred.probs.astype(np.float64).sum(axis=1)
    assert np.abs(sums - 1).max() < 1e-5, (sums.min(), sums.max())
    assert (pred.probs >= 0).all()
