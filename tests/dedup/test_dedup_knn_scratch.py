"""A thread reuses its kNN chunk buffers across calls (a Dask worker runs shard
task after shard task): no fresh chunk buffer after the first call, and reused
(dirty) buffers never change a result, whatever shapes the calls take."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest

from retest.dedup import _knn_chunks
from retest.dedup.knn import knn


def _brute(q: np.ndarray, r: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = ((q.astype(np.float64)[:, None] - r.astype(np.float64)[None]) ** 2).sum(-1)
    ties = np.broadcast_to(np.arange(r.shape[0]), d.shape)
    order = np.lexsort((ties, d))[:, :k]
    return order, np.take_along_axis(d, order, 1)


def _data(seed: int, nq: int, nr: int, d: int, dtype: type) -> tuple:
    rng = np.random.default_rng(seed)
    base = rng.integers(-8, 9, size=(nr // 4, d)) / 4
    refs = base[rng.integers(0, base.shape[0], size=nr)].astype(dtype)  # ties
    q = np.concatenate([refs[:3], rng.integers(-8, 9, size=(nq - 3, d)) / 4])
    return q.astype(dtype), refs


def test_second_call_allocates_no_chunk_buffer() -> None:
    q, refs = _data(0, 16, 4096, 512, np.float32)
    kw = {"backend": "numpy", "n_threads": 1, "chunk_rows": 2048}
    knn(q, refs, 5, **kw)  # the first call allocates the 4 MiB chunk buffer
    tracemalloc.start()
    try:
        got = knn(q, refs, 5, **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2048 * 512 * 4  # a fresh buffer alone would be 4 MiB
    idx, dist = _brute(q, refs, 5)
    np.testing.assert_array_equal(got.indices, idx)
    np.testing.assert_array_equal(got.distances, dist)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8])
def test_reused_buffers_never_change_results(dtype: type) -> None:
    # shapes that shrink and grow between calls, so a reused buffer holds the
    # previous call's values past the new chunk's end
    for seed, (nq, nr, d, chunk) in enumerate(
        [
            (20, 3000, 96, 1024),
            (7, 500, 40, 128),
            (33, 2600, 96, 999),
            (5, 900, 200, 64),
        ]
    ):
        q, refs = _data(seed, nq, nr, d, np.float32)
        if dtype == np.uint8:
            q, refs = (q * 4 + 40).astype(np.uint8), (refs * 4 + 40).astype(np.uint8)
        else:
            q, refs = q.astype(dtype), refs.astype(dtype)
        idx, dist = _brute(q, refs, 7)
        for threads in (1, 3):
            got = knn(q, refs, 7, backend="numpy", n_threads=threads, chunk_rows=chunk)
            np.testing.assert_array_equal(got.indices, idx)
            np.testing.assert_array_equal(got.distances, dist)


def test_threads_keep_their_own_buffers() -> None:
    q, refs = _data(5, 12, 2000, 64, np.float32)
    idx, dist = _brute(q, refs, 4)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(5):
                got = knn(q, refs, 4, backend="numpy", n_threads=1, chunk_rows=300)
                np.testing.assert_array_equal(got.indices, idx)
                np.testing.assert_array_equal(got.distances, dist)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_pool_keeps_the_largest_within_its_limit() -> None:
    _knn_chunks._POOL.free = []
    big = np.empty(_knn_chunks._KEEP_BYTES // 4 - 8, dtype=np.float32)
    small = np.empty(100, dtype=np.float32)
    _knn_chunks.give_back(small, big)
    assert _knn_chunks.borrow(50, np.float32) is big  # `small` did not fit beside it
    too_big = np.empty(_knn_chunks._KEEP_BYTES // 8 + 1, dtype=np.float64)
    _knn_chunks.give_back(too_big)
    assert _knn_chunks.borrow(10, np.float64) is not too_big
    assert _knn_chunks.borrow(10, np.float32) is not big  # borrowed, not kept twice
