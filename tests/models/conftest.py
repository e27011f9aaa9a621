"""Fixtures of the model tests: small real images (scikit-learn's bundled digits)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from retest.records import LabeledSet


@pytest.fixture(scope="session")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """1,797 real 8×8 handwritten digits as uint8 (N, 8, 8) and int64 labels."""
    d = load_digits()
    images = np.round(d.images * (255 / 16)).astype(np.uint8)
    return images, d.target.astype(np.int64)


@pytest.fixture(scope="session")
def digit_sets(
    digits: tuple[np.ndarray, np.ndarray],
) -> tuple[LabeledSet, LabeledSet, LabeledSet]:
    """(train 1,197, original test 400, new test 200) disjoint splits."""
    x, y = digits
    names = tuple(str(i) for i in range(10))
    train = LabeledSet("train", y[:1197], class_names=names, images=x[:1197])
    orig = LabeledSet("orig", y[1197:1597], class_names=names, images=x[1197:1597])
    new = LabeledSet("new", y[1597:], class_names=names, images=x[1597:])
    return train, orig, new
