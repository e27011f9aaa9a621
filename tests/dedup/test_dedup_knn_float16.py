"""Float16 references: the native conversion (with and without F16C), the fused
conversion + squared norms, and the float64 re-ranking rows are exact."""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from retest.dedup import _knn_chunks as kc
from retest.dedup.knn import exact_sqdist, knn

SRC = Path(kc.__file__).with_name("_knn_kernel.c")


def _every_float16() -> np.ndarray:
    return np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def _bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    # NaN payloads included: F16C and the portable path keep them, as numpy does
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.fixture(scope="module")
def native() -> kc._NativeFns:
    fns = kc.native_kernel()
    if fns is None:
        pytest.skip("no C compiler: the native kNN library is unavailable here")
    return fns


@pytest.mark.parametrize("d", [8, 13, 4096])
def test_fused_load_gives_exact_values_and_the_separate_norms(native, d) -> None:
    # every float16 bit pattern, in rows whose length exercises the 8-wide loop,
    # the 4-lane tail and the scalar tail; rows strided inside a wider array
    vals = _every_float16()
    # inf/NaN rows are checked below; shuffled, so each row mixes magnitudes and
    # its float64 sum depends on the order of the additions
    vals = np.random.default_rng(d).permutation(vals[np.isfinite(vals)])
    n = -(-vals.size // d)
    flat = np.zeros(n * d, dtype=np.float16)
    flat[: vals.size] = vals
    wide = np.zeros((n, d + 5), dtype=np.float16)
    wide[:, :d] = flat.reshape(n, d)
    src = wide[:, :d]
    assert np.count_nonzero(src) == vals.size - 2  # every value but ±0 is in
    out = np.empty((n, d), np.float32)
    norms = kc._f16_load_norms(out, src)
    assert norms is not None
    _bits_equal(out, src.astype(np.float32))
    # bit-equal to the norms of the two-pass path, so shortlists do not change
    np.testing.assert_array_equal(norms, kc._chunk_norms(out, False))
    np.testing.assert_allclose(norms, (src.astype(np.float64) ** 2).sum(1), rtol=1e-12)


def test_fused_load_passes_inf_and_nan_on_to_the_norm_check(native) -> None:
    src = np.ones((3, 16), np.float16)
    src[1, 5] = np.inf
    src[2, 9] = np.nan
    out = np.empty(src.shape, np.float32)
    norms = kc._f16_load_norms(out, src)
    assert norms is not None
    assert norms[0] == 16.0 and norms[1] == np.inf and np.isnan(norms[2])
    with pytest.raises(kc.NeedsScale):
        kc.check_norms(norms)


def test_portable_build_without_f16c_is_exact(tmp_path) -> None:
    # the library built without -march=native (no F16C): the bit-assembling path
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    lib_path = tmp_path / "knn_portable.so"
    no_f16c = ["-mno-f16c"] if platform.machine() in ("x86_64", "AMD64") else []
    subprocess.run(
        [cc, "-O2", "-std=c99", "-shared", "-fPIC", *no_f16c, "-o", str(lib_path),
         str(SRC)],
        check=True,
    )  # fmt: skip
    lib = ctypes.CDLL(str(lib_path))
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    i32 = ctypes.c_int
    lib.f16_to_f32.argtypes = [i64, p, p, i32]
    lib.f16_to_f32_norms.argtypes = [i64, i64, p, i64, p, i64, p, i32]
    lib.f16_to_f32.restype = lib.f16_to_f32_norms.restype = None
    vals = _every_float16()
    out = np.empty(vals.size, np.float32)
    lib.f16_to_f32(vals.size, vals.ctypes.data, out.ctypes.data, 1)
    _bits_equal(out, vals.astype(np.float32))
    fin = vals[np.isfinite(vals)][: 13 * 4883].reshape(-1, 13)
    out2 = np.empty(fin.shape, np.float32)
    norms = np.empty(fin.shape[0])
    lib.f16_to_f32_norms(
        fin.shape[0],
        13,
        fin.ctypes.data,
        13,
        out2.ctypes.data,
        13,
        norms.ctypes.data,
        1,
    )
    _bits_equal(out2, fin.astype(np.float32))
    np.testing.assert_array_equal(norms, kc._chunk_norms(out2, False))


def test_row_gather_of_float16_equals_numpys_cast(native) -> None:
    vals = _every_float16().reshape(256, 256)
    idx = np.random.default_rng(3).permutation(256)
    gather = kc.RowGather(100, 256)
    for s in range(0, 256, 100):  # buffers reused: the last block is shorter
        got = gather(vals, idx[s : s + 100])
        want = vals[idx[s : s + 100]].astype(np.float64)
        assert got.dtype == np.float64 and got.shape == want.shape
        ok = np.isfinite(got)
        np.testing.assert_array_equal(got.view(np.uint64)[ok], want.view(np.uint64)[ok])
        assert (np.isnan(got) == np.isnan(want)).all()


def test_float16_knn_with_ties_equals_float64_brute_force(tmp_path) -> None:
    rng = np.random.default_rng(11)
    base = rng.integers(-8, 9, size=(40, 96)).astype(np.float16) / np.float16(4)
    refs = base[rng.integers(0, 40, size=3000)]  # every row repeated: ties
    refs[::7] += np.float16(2.0**-10)  # near-ties one float16 step apart
    np.save(tmp_path / "r.npy", refs)
    mm = np.load(tmp_path / "r.npy", mmap_mode="r")
    q = np.concatenate([base[:10], refs[5:15] * np.float16(1.5)])
    d = ((q.astype(np.float64)[:, None] - refs.astype(np.float64)[None]) ** 2).sum(-1)
    order = np.lexsort((np.broadcast_to(np.arange(refs.shape[0]), d.shape), d))[:, :9]
    res = knn(q, mm, 9, backend="numpy", chunk_size=700, n_threads=2)
    np.testing.assert_array_equal(res.indices, order)
    np.testing.assert_array_equal(res.distances, np.take_along_axis(d, order, 1))
    pairs = exact_sqdist(
        q, mm, np.repeat(np.arange(20), 3000), np.tile(np.arange(3000), 20)
    )
    np.testing.assert_array_equal(pairs.reshape(20, 3000), d)


@pytest.mark.parametrize("d", [4096, 1000, 13])
def test_streamed_conversion_writes_the_same_bits_as_ordinary_stores(native, d) -> None:
    # a chunk above STREAM_BYTES, in a borrowed (aligned) buffer and one shifted
    # off alignment by a float (the stores must then fall back, not fault)
    rows = -(-kc.STREAM_BYTES // (4 * d)) + 3
    bits = np.random.default_rng(d).integers(0, 1 << 16, (rows, d), dtype=np.uint16)
    src = (bits & 0xBFFF).view(np.float16)  # finite values
    want = src.astype(np.float32)
    want_norms = kc._chunk_norms(want, False)
    flat = kc.borrow(rows * d + 1, np.float32)[: rows * d + 1]  # may be larger
    assert flat.ctypes.data % 64 == 0
    for out in (flat[: rows * d].reshape(rows, d), flat[1:].reshape(rows, d)):
        out[...] = np.nan
        norms = kc._f16_load_norms(out, src)
        _bits_equal(out, want)
        np.testing.assert_array_equal(norms, want_norms)
        out[...] = np.nan
        kc._load_scaled(out, src, 1.0)
        _bits_equal(out, want)
    kc.give_back(flat)
    aligned = flat[: rows * d].reshape(rows, d)
    assert kc.streams_into(aligned) == (1 if d % 8 == 0 else 0)
    assert kc.streams_into(flat[1:].reshape(rows, d)) == 0
    assert kc.streams_into(aligned[:10]) == 0  # small: ordinary stores


def test_borrowed_buffers_start_on_a_cache_line() -> None:
    def fresh() -> list[tuple[int, int, np.dtype]]:  # a new thread: an empty pool
        got = [kc.borrow(n, dt) for n, dt in ((1, np.float32), (1000, np.float64),
                                              (12345, np.float16), (77, np.float32))]  # fmt: skip
        return [(a.ctypes.data % 64, a.size, a.dtype) for a in got]

    with ThreadPoolExecutor(1) as pool:
        got = pool.submit(fresh).result()
    assert got == [(0, 1, np.float32), (0, 1000, np.float64), (0, 12345, np.float16),
                   (0, 77, np.float32)]  # fmt: skip
