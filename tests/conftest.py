"""Shared fixtures: seeds, the real-data folder, temporary projects.

The whole run has broken ``retest`` and ``dask`` executables first on PATH
(``checkout_cli.write_decoys``): a test that ran whichever command comes first
on PATH instead of this checkout's (``checkout_cli``) fails. Installed in
``pytest_configure`` so that lookups made while collecting meet them too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import write_decoys  # type: ignore[import-not-found]

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(
    os.environ.get("RETEST_SHARED_DATA", REPO.parent / "shared" / "data")
)
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
_decoy_dir: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _decoy_dir
    _decoy_dir = Path(tempfile.mkdtemp(prefix="retest-decoy-path-"))
    write_decoys(_decoy_dir)
    os.environ["PATH"] = os.pathsep.join([str(_decoy_dir), os.environ.get("PATH", "")])


def pytest_unconfigure(config: pytest.Config) -> None:
    if _decoy_dir is not None:
        shutil.rmtree(_decoy_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def decoy_path_dir() -> Path:
    """The folder of the broken ``retest``/``dask`` first on PATH."""
    assert _decoy_dir is not None
    return _decoy_dir


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(params=[0, 7, 42])
def global_seed(request: pytest.FixtureRequest) -> int:
    """Tests using this must pass for any seed."""
    return int(request.param)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only real data folder; skips (with the reason printed) when absent.

    In CI (``CI`` set and not empty) the folder is always there, so its absence is
    a failure instead: a green CI run must not have skipped the real-data tests.
    """
    if not SHARED_DATA.is_dir():
        reason = f"real data folder {SHARED_DATA} is absent; set RETEST_SHARED_DATA"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: CI must run the real-data tests)",
                        pytrace=False)  # fmt: skip
        pytest.skip(reason)
    return SHARED_DATA


@pytest.fixture(scope="session")
def fashion_mnist_dir() -> Path:
    if not (FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz").exists():
        pytest.skip("Fashion-MNIST is absent: apt-get install dataset-fashion-mnist")
    return FASHION_MNIST_DIR
