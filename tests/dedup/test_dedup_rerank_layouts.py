"""The exact re-ranking reads rows of any layout a caller or Dask hands it:
unaligned (a deserialised query block), strided, memory-mapped, mixed dtypes;
each gives the float64 brute-force distance of every pair, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from retest.cluster._dask import MemmapRef, _shard_task
from retest.dedup import _knn_chunks as kc
from retest.dedup.knn import exact_sqdist, knn


def _unaligned(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` at an odd address, as Dask's deserialisation may leave it."""
    raw = np.empty(a.nbytes + 1, np.uint8)
    out = np.frombuffer(raw[1:].data, dtype=a.dtype).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned
    return out


def _pairs_brute(q: np.ndarray, r: np.ndarray, qi: np.ndarray, ri: np.ndarray):
    diff = q[qi].astype(np.float64) - r[ri].astype(np.float64)
    return np.einsum("ij,ij->i", diff, diff)


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(5)
    # float16 values with every exponent the data can have, plus exact ties
    refs = rng.standard_normal((700, 40)) * 2.0 ** rng.integers(-12, 8, (700, 1))
    refs = refs.astype(np.float16)
    refs[::9] = refs[1::9][: len(refs[::9])]
    np.save(tmp_path / "r.npy", refs)
    q = refs[rng.integers(0, 700, 30)] + np.float16(0.5)
    qi = rng.integers(0, 30, 5000)
    ri = rng.integers(0, 700, 5000)  # more pairs than one gather block, unsorted
    return q, np.load(tmp_path / "r.npy", mmap_mode="r"), qi, ri


@pytest.mark.parametrize("layout", ["plain", "unaligned", "strided", "float32_queries"])
def test_exact_sqdist_of_every_layout_is_the_brute_force(data, layout) -> None:
    q, refs, qi, ri = data
    want = _pairs_brute(q, np.asarray(refs), qi, ri)
    r = refs
    if layout == "unaligned":
        q, r = _unaligned(q), _unaligned(np.asarray(refs))
    elif layout == "strided":  # every other feature of a wider array: a view
        wide = np.repeat(np.asarray(refs), 2, axis=1)
        r = wide[:, ::2]
        assert not r.flags.c_contiguous
    elif layout == "float32_queries":
        q = q.astype(np.float32)
    np.testing.assert_array_equal(exact_sqdist(q, r, qi, ri), want)


def test_row_gather_reuses_its_buffers_without_mixing_blocks(data) -> None:
    _, refs, _, ri = data
    gather = kc.RowGather(64, refs.shape[1])
    first = gather(refs, ri[:64]).copy()
    gather(refs, ri[64:100])  # a shorter block into the same buffers
    again = gather(refs, ri[:64])
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, np.asarray(refs)[ri[:64]].astype(np.float64))


def test_shard_task_with_unaligned_queries_equals_the_local_knn(data) -> None:
    q, refs, _, _ = data
    loc = MemmapRef.of(refs)
    assert loc is not None
    got = _shard_task(_unaligned(q), loc, 100, 600, 7, None, 2**26, "numpy", 1)
    want = knn(q, np.asarray(refs)[100:600], 7, backend="numpy")
    np.testing.assert_array_equal(got.indices, want.indices + 100)
    np.testing.assert_array_equal(got.distances, want.distances)
