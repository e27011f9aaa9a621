"""Dask kNN on a real 2-worker LocalCluster equals the local run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.cluster import cluster_client, dask_knn
from retest.dedup.knn import knn
from retest.errors import ConfigError, InputValidationError


@pytest.fixture(scope="module")
def client():
    with cluster_client(workers=2, processes=True) as c:
        yield c


def test_dask_equals_local_in_memory(client) -> None:
    rng = np.random.default_rng(5)
    refs = rng.integers(0, 6, size=(400, 48)).astype(np.uint8)  # many ties
    local = knn(refs, refs, 7, exclude_self=True)
    remote = dask_knn(client, refs, refs, 7, exclude_self=True, n_shards=5)
    np.testing.assert_array_equal(remote.indices, local.indices)
    np.testing.assert_array_equal(remote.distances, local.distances)


def test_dask_equals_local_memmap(client, tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    data = rng.normal(size=(500, 20)).astype(np.float32)
    np.save(tmp_path / "r.npy", data)
    refs = np.load(tmp_path / "r.npy", mmap_mode="r")
    q = rng.normal(size=(30, 20)).astype(np.float32)
    local = knn(q, refs, 5)
    remote = dask_knn(client, q, refs, 5, n_shards=3)
    np.testing.assert_array_equal(remote.indices, local.indices)
    np.testing.assert_array_equal(remote.distances, local.distances)


def test_dask_bad_input(client) -> None:
    with pytest.raises(InputValidationError, match="k=9 exceeds"):
        dask_knn(client, np.zeros((2, 3)), np.zeros((8, 3)), 9)


def test_cluster_client_rejects_both() -> None:
    with (
        pytest.raises(ConfigError, match="not both"),
        cluster_client("tcp://127.0.0.1:1", 2),
    ):
        pass
