"""The packed GEMM that scores reference rows in their stored type (float16,
float32, uint8) without a float32 copy: values within the float32 bound, norms
bit-equal to the float32 path's, and kNN answers unchanged by it."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from retest.dedup import _knn_chunks as kc
from retest.dedup import _knn_gemm as kg
from retest.dedup.knn import knn, knn_range

SRC = Path(kg.__file__).with_name("_knn_gemm.c")
U = 2.0**-24


@pytest.fixture(scope="module", autouse=True)
def available() -> None:
    if kg._lib() is None:
        pytest.skip("no C compiler or no AVX2/FMA/F16C: the packed GEMM is unavailable")


@pytest.fixture
def blas_only(monkeypatch):
    """The kNN without the packed GEMM (every chunk converted, then the BLAS)."""
    monkeypatch.setattr(kg, "_LIB", [None])


def _rows(rng, n: int, d: int, dtype) -> np.ndarray:
    """n rows of d values inside a wider, offset array (row stride != d)."""
    wide = np.zeros((n + 2, d + 5), dtype=dtype)
    if dtype == np.uint8:
        wide[:] = rng.integers(0, 256, wide.shape)
    else:
        wide[:] = rng.standard_normal(wide.shape) * 8
    return wide[1 : n + 1, 3 : d + 3]


# micro-kernel edges: queries not a multiple of 6, references not a multiple of 16,
# terms not a multiple of 8 or 4, several 256-term blocks, one row / one query
SHAPES = [(1, 1, 1), (5, 17, 13), (6, 16, 8), (7, 33, 257), (13, 50, 515),
          (256, 40, 1000), (2, 3, 4096), (12, 31, 300), (256, 20, 1013),
          (300, 9, 2050),
          (600, 40, 300), (1000, 17, 515)]  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8])
@pytest.mark.parametrize(("nq", "n", "d"), SHAPES)
def test_scores_are_within_the_float32_bound_and_norms_bit_equal(nq, n, d, dtype):
    rng = np.random.default_rng([nq, n, d])
    rows = _rows(rng, n, d, dtype)
    assert kg.rows_gemm_applies(rows)
    xq = rng.standard_normal((nq, d)).astype(np.float32)
    out = np.full((nq, n + kg.LD_PAD), np.nan, np.float32)[:, :n]
    norms = np.empty(n)
    kg.PackedQueries(xq).scores(rows, out, norms)
    y = rows.astype(np.float32).astype(np.float64)
    x = xq.astype(np.float64)
    # any summation order of d float32 products: |error| <= γ_d Σ|x_i y_i|
    gamma = d * U / (1 - d * U)
    err = np.abs(out - x @ y.T)
    assert (err <= gamma * (np.abs(x) @ np.abs(y).T) + 1e-37).all()
    want = kc._chunk_norms(
        np.ascontiguousarray(rows.astype(np.float32)), dtype == np.uint8
    )
    np.testing.assert_array_equal(norms, want)
    again = np.empty((nq, n), np.float32)  # without norms: the same scores
    kg.PackedQueries(xq).scores(rows, again, None)
    np.testing.assert_array_equal(again, out)


def test_every_float16_value_is_converted_exactly():
    # each finite float16 bit pattern, one per row position, against unit queries:
    # the score of query t is then exactly the value in column t
    vals = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    vals = vals[np.isfinite(vals)]
    d = 24
    rows = np.zeros((-(-vals.size // d), d), np.float16)
    rows.reshape(-1)[: vals.size] = vals
    out = np.empty((d, rows.shape[0]), np.float32)
    norms = np.empty(rows.shape[0])
    kg.PackedQueries(np.eye(d, dtype=np.float32)).scores(rows, out, norms)
    # (−0 comes out +0: it is added to +0 products)
    np.testing.assert_array_equal(out.T, rows.astype(np.float32))
    np.testing.assert_array_equal(
        norms, kc._chunk_norms(rows.astype(np.float32), False)
    )


def test_inf_and_nan_rows_reach_the_norm_check():
    rows = np.ones((3, 20), np.float16)
    rows[1, 17] = np.inf
    rows[2, 4] = np.nan
    norms = np.empty(3)
    kg.PackedQueries(np.ones((2, 20), np.float32)).scores(
        rows, np.empty((2, 3), np.float32), norms
    )
    assert norms[0] == 20.0 and norms[1] == np.inf and np.isnan(norms[2])
    with pytest.raises(kc.NeedsScale):
        kc.check_norms(norms)


def test_rows_it_cannot_read_are_left_to_the_blas_path():
    a = np.zeros((4, 8), np.float16)
    assert kg.rows_gemm_applies(a)
    assert not kg.rows_gemm_applies(a[:, ::2])  # values not contiguous
    assert not kg.rows_gemm_applies(a.astype(np.float64))  # no such kind
    assert not kg.rows_gemm_applies(a.astype(np.int16))
    assert not kg.rows_gemm_applies(a[0])  # 1-d
    assert not kg.rows_gemm_applies([[0.0] * 8] * 4)  # not an array
    odd = np.frombuffer(bytearray(2 * 32 + 1), np.uint8)[1:].view(np.float16)
    assert not kg.rows_gemm_applies(odd.reshape(4, 8))  # misaligned


def _data(rng, dtype, n: int = 2500, d: int = 72):
    base = rng.integers(0, 6, size=(30, d))
    refs = base[rng.integers(0, 30, size=n)]  # rows repeated: ties everywhere
    q = np.concatenate([base[:6], refs[7:13] + 1])
    if dtype == np.uint8:
        return q.astype(np.uint8), refs.astype(np.uint8)
    return (q / 4).astype(dtype), (refs / 4).astype(dtype)


def _brute(q, refs, k):
    d = ((q.astype(np.float64)[:, None] - refs.astype(np.float64)[None]) ** 2).sum(-1)
    idx = np.broadcast_to(np.arange(refs.shape[0]), d.shape)
    order = np.lexsort((idx, d))[:, :k]
    return order, np.take_along_axis(d, order, 1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8])
def test_knn_answers_equal_the_brute_force_and_the_blas_path(
    dtype, monkeypatch, tmp_path
):
    rng = np.random.default_rng(5)
    q, refs = _data(rng, dtype)
    np.save(tmp_path / "r.npy", refs)
    mm = np.load(tmp_path / "r.npy", mmap_mode="r")
    calls = []
    real = kg.PackedQueries.scores
    monkeypatch.setattr(
        kg.PackedQueries, "scores", lambda self, *a: calls.append(1) or real(self, *a)
    )
    got = knn(q, mm, 8, backend="numpy", chunk_rows=700, n_threads=2)
    assert calls, "the packed GEMM did not run"
    order, dist = _brute(q, refs, 8)
    np.testing.assert_array_equal(got.indices, order)
    np.testing.assert_array_equal(got.distances, dist)
    monkeypatch.setattr(kg, "_LIB", [None])
    blas = knn(q, mm, 8, backend="numpy", chunk_rows=700, n_threads=2)
    np.testing.assert_array_equal(blas.indices, got.indices)
    np.testing.assert_array_equal(blas.distances, got.distances)


@pytest.mark.parametrize("dtype", [np.float16, np.uint8])
def test_range_search_is_unchanged(dtype, monkeypatch):
    rng = np.random.default_rng(8)
    q, refs = _data(rng, dtype, n=900)
    got = knn_range(q, refs, low=0.0, high=3.0, chunk_rows=256)
    monkeypatch.setattr(kg, "_LIB", [None])
    want = knn_range(q, refs, low=0.0, high=3.0, chunk_rows=256)
    for f in ("query", "reference", "distances"):
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f))
    assert got.query.size > 0


def test_no_float32_copy_of_a_chunk_is_made(monkeypatch):
    # the point of the kernel: a float16 chunk is never converted into a buffer
    def refuse(*a, **k):
        raise AssertionError("a float16 chunk was converted to float32")

    monkeypatch.setattr(kc.Scorer, "load", refuse)
    rng = np.random.default_rng(2)
    q, refs = _data(rng, np.float16, n=1200)
    got = knn(q, refs, 5, backend="numpy", chunk_rows=512)
    order, dist = _brute(q, refs, 5)
    np.testing.assert_array_equal(got.indices, order)
    np.testing.assert_array_equal(got.distances, dist)


def test_scaled_input_still_takes_the_converting_path():
    # float32 values whose squares overflow float32 scores: the input is scaled
    # by a power of two, which the packed GEMM does not do
    rng = np.random.default_rng(4)
    refs = rng.standard_normal((300, 16)).astype(np.float32) * np.float32(3e18)
    q = refs[:4] * np.float32(1.0001)
    got = knn(q, refs, 3, backend="numpy")
    order, dist = _brute(q, refs, 3)
    np.testing.assert_array_equal(got.indices, order)
    np.testing.assert_allclose(got.distances, dist, rtol=1e-12)


def test_a_build_without_avx2_says_so(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    lib_path = tmp_path / "gemm_portable.so"
    subprocess.run(
        [cc, "-O2", "-std=c99", "-shared", "-fPIC", "-o", str(lib_path), str(SRC)],
        check=True,
    )
    lib = ctypes.CDLL(str(lib_path))
    assert lib.rows_gemm_available() == 0  # the caller then keeps the BLAS path


@pytest.mark.slow
def test_fashion_mnist_neighbours_equal_the_blas_paths(fashion_mnist_dir, monkeypatch):
    # real images: 1,000 test images against the 60,000 training images, as raw
    # uint8 pixels and as float16 values scaled to [0, 1], with the packed GEMM
    # and without (the BLAS path of earlier versions): identical answers
    from retest.datasets.idx import read_idx

    train = read_idx(fashion_mnist_dir / "train-images-idx3-ubyte.gz").reshape(
        60000, -1
    )
    test = read_idx(fashion_mnist_dir / "t10k-images-idx3-ubyte.gz").reshape(10000, -1)
    q = test[np.random.default_rng(0).choice(10000, 1000, replace=False)]
    for qq, rr in (
        (q, train),
        ((q / 255).astype(np.float16), (train / 255).astype(np.float16)),
    ):
        got = knn(qq, rr, 10, backend="numpy", n_threads=1)
        with monkeypatch.context() as m:
            m.setattr(kg, "_LIB", [None])
            want = knn(qq, rr, 10, backend="numpy", n_threads=1)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.distances, want.distances)
