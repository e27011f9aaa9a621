"""The native float16 re-ranking pass (gather, convert, subtract in one loop)
gives numpy's float64 difference rows bit for bit on every kind of float16
value, so exact distances stay the brute force's; layouts it does not take
fall back to numpy with the same result."""

from __future__ import annotations

import numpy as np
import pytest

from retest.dedup import _knn_chunks as kc
from retest.dedup.knn import exact_sqdist


def _every_kind(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Normals, subnormals, ±0, the largest finite values and exact repeats."""
    bits = rng.integers(0, 1 << 16, size=(n, d), dtype=np.uint16) & 0xFBFF  # finite
    a = bits.view(np.float16).copy()
    a[:, ::7] = np.float16(-0.0)
    a[::5, 1::9] = np.float16(6.1e-5) * rng.integers(-1, 2, (len(a[::5]), 1))
    a[1::6, 2::11] = np.float16(2.0**-24)  # smallest subnormal
    top = a[2::7, :3]
    top[...] = np.float16(65504.0) * np.sign(rng.standard_normal(top.shape))
    a[3:-1:8] = a[4::8][: len(a[3:-1:8])]
    return a


@pytest.fixture(scope="module")
def fns():
    fns = kc.native_kernel()
    if fns is None:
        pytest.skip("no C compiler: the native pass is not built here")
    return fns


@pytest.mark.parametrize("d", [1, 7, 8, 40, 129])
def test_native_difference_rows_are_numpys(fns, d: int) -> None:
    rng = np.random.default_rng(d)
    q, r = _every_kind(rng, 50, d), _every_kind(rng, 300, d)
    qi, ri = rng.integers(0, 50, 2000), rng.integers(0, 300, 2000)
    out = np.empty((2000, d))
    assert fns.pair_diff_f16(q, r, qi, ri, out)
    want = r[ri].astype(np.float64) - q[qi].astype(np.float64)
    np.testing.assert_array_equal(out.view(np.uint64), want.view(np.uint64))
    dist = exact_sqdist(q, r, qi, ri)
    np.testing.assert_array_equal(dist, np.einsum("ij,ij->i", want, want))


def test_layouts_the_pass_does_not_take_fall_back(fns) -> None:
    rng = np.random.default_rng(3)
    q, r = _every_kind(rng, 20, 16), _every_kind(rng, 90, 16)
    qi, ri = rng.integers(0, 20, 300), rng.integers(0, 90, 300)
    out = np.empty((300, 16))
    raw = np.empty(r.nbytes + 1, np.uint8)
    odd = np.frombuffer(raw[1:].data, dtype=np.float16).reshape(r.shape)
    odd[...] = r
    wide = np.repeat(r, 2, axis=1)[:, ::2]
    for refs in (odd, wide, r.astype(np.float32)):
        assert not fns.pair_diff_f16(q, refs, qi, ri, out)
        diff = r[ri].astype(np.float64) - q[qi].astype(np.float64)
        got = exact_sqdist(q, refs, qi, ri)
        np.testing.assert_array_equal(got, np.einsum("ij,ij->i", diff, diff))
