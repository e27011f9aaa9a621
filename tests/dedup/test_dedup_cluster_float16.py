"""Float16 references on a real 2-worker LocalCluster: shards read by path and
sent, several query blocks against the same shards, ties across shard
boundaries; every result equals the local kNN and a float64 brute force."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.cluster._dask import ClusterReferences, cluster_client
from retest.dedup.knn import knn


@pytest.fixture(scope="module")
def client():
    with cluster_client(workers=2, processes=True) as c:
        yield c


def _brute(q: np.ndarray, refs: np.ndarray, k: int, ex: np.ndarray | None):
    d = ((q.astype(np.float64)[:, None] - refs.astype(np.float64)[None]) ** 2).sum(-1)
    if ex is not None:
        ok = ex >= 0
        d[np.flatnonzero(ok), ex[ok]] = np.inf
    ties = np.broadcast_to(np.arange(refs.shape[0]), d.shape)
    order = np.lexsort((ties, d))[:, :k]
    return order, np.take_along_axis(d, order, 1)


@pytest.mark.parametrize("transfer", ["path", "send"])
def test_float16_shards_with_ties_equal_local_and_brute_force(
    client, tmp_path: Path, transfer: str
) -> None:
    rng = np.random.default_rng(21)
    base = (rng.integers(-6, 7, size=(30, 72)) / 8).astype(np.float16)
    refs = base[rng.integers(0, 30, size=2500)]  # each row ~80 times: exact ties
    refs[::11] += np.float16(2.0**-9)  # and near-ties one float16 step away
    np.save(tmp_path / "r.npy", refs)
    mm = np.load(tmp_path / "r.npy", mmap_mode="r")
    shards = ClusterReferences(client, mm, n_shards=7, transfer=transfer)
    try:
        assert shards.n_shards == 7
        for block in range(3):  # the same shards serve later query blocks
            q = np.concatenate([base[block::3], refs[block * 40 : block * 40 + 12]])
            ex = np.full(q.shape[0], -1, dtype=np.int64)
            ex[-12:] = np.arange(block * 40, block * 40 + 12)  # skip own row
            got = shards.knn(q, 15, exclude=ex)
            local = knn(q, mm, 15, exclude=ex)
            idx, dist = _brute(q, refs, 15, ex)
            np.testing.assert_array_equal(got.indices, local.indices)
            np.testing.assert_array_equal(got.distances, local.distances)
            np.testing.assert_array_equal(got.indices, idx)
            np.testing.assert_array_equal(got.distances, dist)
        assert shards.shards_sent == (7 if transfer == "send" else 0)
    finally:
        shards.release()
