"""Shared fixtures: seeds, the real-data folder, temporary projects."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(
    os.environ.get("RETEST_SHARED_DATA", REPO.parent / "shared" / "data")
)
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(params=[0, 7, 42])
def global_seed(request: pytest.FixtureRequest) -> int:
    """Tests using this must pass for any seed."""
    return int(request.param)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only real data folder; skips (with the reason printed) when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent; set RETEST_SHARED_DATA")
    return SHARED_DATA


@pytest.fixture(scope="session")
def fashion_mnist_dir() -> Path:
    if not (FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz").exists():
        pytest.skip("Fashion-MNIST is absent: apt-get install dataset-fashion-mnist")
    return FASHION_MNIST_DIR
