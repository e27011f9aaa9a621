"""Exactness of the blocked kNN engine against a float64 brute force."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.dedup import _knn_chunks
from retest.dedup.knn import KnnResult, knn, knn_range, merge_knn
from retest.errors import ConfigError, InputValidationError

BACKENDS = ["numpy", "torch", "faiss"]
NATIVE = _knn_chunks.native_kernel() is not None


@contextmanager
def numpy_selection() -> Iterator[None]:
    """Run the engine with the numpy selection and merge instead of the C loop."""
    saved = list(_knn_chunks._NATIVE_FNS)
    _knn_chunks._NATIVE_FNS[:] = [None]
    try:
        yield
    finally:
        _knn_chunks._NATIVE_FNS[:] = saved


def brute(q: np.ndarray, r: np.ndarray, k: int, exclude=None) -> KnnResult:
    q64 = q.reshape(len(q), -1).astype(np.float64)
    r64 = r.reshape(len(r), -1).astype(np.float64)
    d = ((q64[:, None, :] - r64[None, :, :]) ** 2).sum(-1)
    if exclude is not None:
        for i, e in enumerate(exclude):
            if e >= 0:
                d[i, e] = np.inf
    cols = np.broadcast_to(np.arange(d.shape[1]), d.shape)
    order = np.lexsort((cols, d), axis=1)[:, :k]
    return KnnResult(order.astype(np.int64), np.take_along_axis(d, order, 1))


def assert_same(a: KnnResult, b: KnnResult) -> None:
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.distances, b.distances)


def near_tie_images(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Bright images differing by ±1 in a few pixels: distances 0, 1, 2, ... with
    norms ~2e8 where a float32 ‖x‖²+‖y‖²−2x·y cannot tell them apart."""
    base = rng.integers(240, 255, size=d).astype(np.int16)
    out = np.repeat(base[None], n, axis=0)
    for i in range(n):
        m = int(rng.integers(0, 4))
        pos = rng.choice(d, size=m, replace=False)
        out[i, pos] += rng.choice([-1, 1], size=m)
    return out.astype(np.uint8)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_near_ties_break_naive_float32_but_not_knn(backend: str, native: bool) -> None:
    rng = np.random.default_rng(3)
    x = near_tie_images(rng, 80, 1024)
    # the naive float32 formula gets this data wrong (so the test has teeth)
    x32 = x.astype(np.float32)
    n32 = (x32 * x32).sum(1)
    naive = n32[:, None] + n32[None, :] - 2 * x32 @ x32.T
    np.fill_diagonal(naive, np.inf)
    ref = brute(x, x, 5, exclude=np.arange(len(x)))
    naive_idx = np.lexsort(
        (np.broadcast_to(np.arange(80), naive.shape), naive), axis=1
    )[:, :5]
    assert (naive_idx != ref.indices).any()
    with nullcontext() if native else numpy_selection():
        got = knn(x, x, 5, exclude_self=True, backend=backend, chunk_rows=17)
    assert_same(got, ref)


@settings(max_examples=50, deadline=None)
@given(
    nq=st.integers(1, 30),
    nr=st.integers(1, 80),
    d=st.integers(1, 40),
    k=st.integers(1, 12),
    chunk=st.integers(1, 50),
    self_ex=st.booleans(),
    kind=st.sampled_from(["uint8", "lowrange", "float"]),
    backend=st.sampled_from(BACKENDS),
    seed=st.integers(0, 2**31 - 1),
    threads=st.sampled_from([1, 2, 3]),
    native=st.booleans(),
)
def test_knn_equals_brute_force(
    nq, nr, d, k, chunk, self_ex, kind, backend, seed, threads, native
) -> None:
    rng = np.random.default_rng(seed)
    if kind == "uint8":
        r = rng.integers(0, 256, size=(nr, d)).astype(np.uint8)
    elif kind == "lowrange":  # many exact ties
        r = rng.integers(0, 2, size=(nr, d)).astype(np.uint8)
    else:
        r = rng.normal(size=(nr, d)).astype(np.float32).astype(np.float64)
    if self_ex:
        q, ex = r, np.arange(nr)
        nq = nr
    else:
        q = (
            rng.integers(0, 256, size=(nq, d)).astype(r.dtype)
            if kind != "float"
            else rng.normal(size=(nq, d))
        )
        q = q if kind != "lowrange" else (q % 2).astype(np.uint8)
        ex = None
    k = min(k, nr - (1 if self_ex else 0))
    if k < 1:
        return
    with nullcontext() if native else numpy_selection():
        got = knn(
            q, r, k, exclude=ex, backend=backend, chunk_rows=chunk, n_threads=threads
        )
    ref = brute(q, r, k, exclude=ex)
    if kind == "float":  # float64 sums in another order may differ in the last bit
        np.testing.assert_allclose(got.distances, ref.distances, rtol=1e-12)
        gaps = np.diff(np.sort(ref.distances, axis=1), axis=1)
        if gaps.size == 0 or gaps.min() > 1e-9:
            np.testing.assert_array_equal(got.indices, ref.indices)
    else:
        assert_same(got, ref)


def test_memmapped_references_and_queries(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(700, 8, 8, 3)).astype(np.uint8)
    data[100:110] = data[5]  # exact duplicates → ties broken by index
    np.save(tmp_path / "refs.npy", data)
    refs = np.load(tmp_path / "refs.npy", mmap_mode="r")
    mm = np.memmap(tmp_path / "q.bin", dtype=np.uint8, mode="w+", shape=(40, 192))
    mm[:] = data[:40].reshape(40, -1)
    mm.flush()
    q = np.memmap(tmp_path / "q.bin", dtype=np.uint8, mode="r", shape=(40, 192))
    got = knn(q, refs, 12, chunk_rows=64, memory_budget=2**20)
    assert_same(got, brute(np.asarray(q), data, 12))
    assert got.indices[5, :11].tolist() == [5, *range(100, 110)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_merge_of_shards_equals_whole(backend: str) -> None:
    rng = np.random.default_rng(1)
    r = rng.integers(0, 4, size=(300, 16)).astype(np.uint8)
    q = r[:50]
    whole = knn(q, r, 9, exclude=np.arange(50), backend=backend)
    parts = []
    for lo, hi in [(0, 7), (7, 150), (150, 300)]:
        ex = np.where(
            (np.arange(50) >= lo) & (np.arange(50) < hi), np.arange(50) - lo, -1
        )
        p = knn(q, r[lo:hi], 9, exclude=ex, pad=True, backend=backend)
        parts.append(
            KnnResult(np.where(p.indices >= 0, p.indices + lo, -1), p.distances)
        )
    assert_same(merge_knn(parts, 9), whole)


def test_range_query_matches_brute_force() -> None:
    rng = np.random.default_rng(2)
    r = rng.integers(0, 3, size=(200, 12)).astype(np.uint8)
    got = knn_range(r, r, low=2.0, high=6.0, exclude_self=True, chunk_rows=33)
    d = ((r[:, None].astype(float) - r[None].astype(float)) ** 2).sum(-1)
    np.fill_diagonal(d, -1)
    qi, ri = np.nonzero((d >= 2) & (d <= 6))
    want = sorted(zip(qi.tolist(), d[qi, ri].tolist(), ri.tolist(), strict=True))
    have = list(
        zip(
            got.query.tolist(),
            got.distances.tolist(),
            got.reference.tolist(),
            strict=True,
        )
    )
    assert have == want


def test_progress_is_reported_per_chunk() -> None:
    calls = []
    r = np.zeros((100, 4), dtype=np.uint8)
    knn(r[:3], r, 2, chunk_rows=25, progress=lambda t, d, n: calls.append((t, d, n)))
    assert calls[-1] == ("knn", 4, 4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"queries": np.zeros((2, 3)), "references": np.zeros((4, 5)), "k": 1},
            "features",
        ),
        (
            {"queries": np.zeros((2, 3)), "references": np.zeros((0, 3)), "k": 1},
            "references are empty",
        ),
        (
            {"queries": np.zeros((2, 3)), "references": np.zeros((4, 3)), "k": 5},
            "k=5 exceeds the 4",
        ),
        (
            {
                "queries": np.zeros((4, 3)),
                "references": np.zeros((4, 3)),
                "k": 4,
                "exclude_self": True,
            },
            "self-matches",
        ),
        (
            {
                "queries": np.array([[np.nan, 0.0]]),
                "references": np.zeros((4, 2)),
                "k": 1,
            },
            "queries contains NaN",
        ),
        (
            {
                "queries": np.zeros((1, 2)),
                "references": np.array([[0.0, 1.0], [np.nan, 1.0]]),
                "k": 1,
            },
            r"references contains NaN.*rows \[1\]",
        ),
    ],
)
def test_bad_input_names_the_input(kwargs: dict, match: str) -> None:
    with pytest.raises(InputValidationError, match=match):
        knn(**kwargs)


def test_bad_config() -> None:
    with pytest.raises(ConfigError, match="n_threads"):
        knn(np.zeros((1, 2)), np.zeros((2, 2)), 1, n_threads=0)
    with pytest.raises(ConfigError, match="backend"):
        knn(np.zeros((1, 2)), np.zeros((2, 2)), 1, backend="gpu")  # type: ignore[arg-type]


def test_torch_thread_setting_is_restored() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    r = np.random.default_rng(0).integers(0, 256, (300, 16)).astype(np.uint8)
    got = knn(r[:20], r, 3, backend="torch", chunk_rows=50, n_threads=2)
    assert torch.get_num_threads() == before
    assert_same(got, brute(r[:20], r, 3))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_large_first_chunks_scanned_in_warm_up_pieces_stay_exact(
    backend: str, exclude_self: bool
) -> None:
    # 9,000 references over 2 threads: first chunks of 4,500 are scanned as pieces
    # of 1,024 + 2,048 + 1,428 (see knn._pieces); near ties make the order matter
    rng = np.random.default_rng(11)
    r = near_tie_images(rng, 9000, 48)
    q = r[:300] if exclude_self else near_tie_images(rng, 300, 48)
    ex = np.arange(300) if exclude_self else None
    with numpy_selection():  # the C loop needs no warm-up pieces
        got = knn(q, r, 7, exclude=ex, backend=backend, n_threads=2)  # type: ignore[arg-type]
    assert_same(got, brute(q, r, 7, exclude=ex))


def test_packed_sort_key_orders_like_lexsort() -> None:
    from retest.dedup._knn_chunks import _row_val_idx_order

    rng = np.random.default_rng(0)
    values = np.array([-3.5, -1.0, -0.0, 0.0, 2.25, 7.0, 1e30, np.inf], np.float32)
    for _ in range(300):
        n = int(rng.integers(1, 300))
        rows, idx = rng.integers(0, 5, n), rng.integers(-1, 20, n)
        pad = np.where(idx < 0, np.iinfo(np.int64).max, idx)
        v = rng.choice(values, n).astype(np.float64)  # packed path
        np.testing.assert_array_equal(
            _row_val_idx_order(rows, v, idx), np.lexsort((pad, v, rows))
        )
        v2 = v + 1e-9  # not float32 values (faiss backend): plain lexsort
        np.testing.assert_array_equal(
            _row_val_idx_order(rows, v2, idx), np.lexsort((pad, v2, rows))
        )


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_exact_distances_of_many_pairs_split_over_threads(dtype: type) -> None:
    from retest.dedup.knn import exact_sqdist

    rng = np.random.default_rng(4)
    q = rng.integers(0, 256, (300, 40)).astype(dtype)
    r = rng.integers(0, 256, (700, 40)).astype(dtype)
    qi, ri = rng.integers(0, 300, 90_000), rng.integers(0, 700, 90_000)
    want = ((q[qi].astype(np.float64) - r[ri].astype(np.float64)) ** 2).sum(1)
    np.testing.assert_array_equal(exact_sqdist(q, r, qi, ri), want)
    with numpy_selection():  # the numpy path gives the same values
        np.testing.assert_array_equal(exact_sqdist(q, r, qi, ri), want)


def test_exact_distances_of_long_uint8_rows_do_not_overflow(tmp_path: Path) -> None:
    from retest.dedup.knn import exact_sqdist

    # 40,000 × 255² = 2.6e9 exceeds int32: the C loop must sum in blocks
    q = np.zeros((2, 40_000), np.uint8)
    q[1, ::2] = 7
    r = np.lib.format.open_memmap(tmp_path / "r.npy", "w+", np.uint8, (3, 40_000))
    r[:] = 255
    r[2, :100] = 0
    got = exact_sqdist(q, r, np.array([0, 1, 0, 1]), np.array([0, 0, 2, 2]))
    want = [40_000 * 255**2, 20_000 * 248**2 + 20_000 * 255**2]
    want += [39_900 * 255**2, 19_950 * (248**2 + 255**2) + 50 * 7**2]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float64))


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_rows_longer_than_one_float32_block_stay_exact(
    backend: str, native: bool
) -> None:
    # d > 4096: scores are float64 sums of float32 blocks (ImageNet-like 256² pixels)
    rng = np.random.default_rng(9)
    r = near_tie_images(rng, 60, 4100)
    q = near_tie_images(rng, 7, 4100)
    with nullcontext() if native else numpy_selection():
        got = knn(q, r, 4, backend=backend, chunk_rows=25, n_threads=2)  # type: ignore[arg-type]
    assert_same(got, brute(q, r, 4))


@pytest.mark.skipif(not NATIVE, reason="no C compiler: the native selection is off")
@pytest.mark.parametrize("with_norms", [True, False])
def test_native_selection_keeps_the_same_shortlists_as_numpy(with_norms: bool) -> None:
    # integer-valued scores make many exact ties, so the (value, index) order and
    # the strict "below the k'-th value" rule are both exercised
    rng = np.random.default_rng(5)
    nq, kp, c = 40, 6, 1e-3
    qn = rng.random(nq) * 100
    ex = rng.integers(-1, 300, nq)
    native, ref = (_knn_chunks.Shortlist.empty(nq, kp) for _ in range(2))
    for r0 in (0, 100, 130, 250):
        n = int(rng.integers(1, 50)) if r0 != 130 else 120
        g = rng.integers(-20, 20, (nq, n)).astype(np.float32)
        rn = rng.integers(0, 5, n).astype(np.float64)
        rn32 = rn.astype(np.float32) if with_norms else None
        native.absorb(g, rn32, rn, r0, ex, qn, c)
        s = g + rn32 if rn32 is not None else g.copy()
        _knn_chunks.mask_excluded(s, ex, r0, r0 + n)
        rows, cols = _knn_chunks.select_topk(s, ref.tau(), kp, "numpy")
        vals = s[rows, cols].astype(np.float64)
        ref.merge(rows, cols + r0, vals, c * (qn[rows] + 2.0 * rn[cols]))
    np.testing.assert_array_equal(native.idx, ref.idx)
    np.testing.assert_array_equal(native.vals, ref.vals)
    np.testing.assert_allclose(native.bnd, ref.bnd, rtol=1e-15)
    # merging two threads' lists: C merge equals the numpy merge
    other = _knn_chunks.Shortlist.empty(nq, kp)
    other.absorb(rng.integers(-20, 20, (nq, 30)).astype(np.float32), None,
                 np.zeros(30), 400, None, qn, c)  # fmt: skip
    a = _knn_chunks.Shortlist(native.vals.copy(), native.idx.copy(), native.bnd.copy())
    a.merge_list(other)
    with numpy_selection():
        native.merge_list(other)
    np.testing.assert_array_equal(a.idx, native.idx)
    np.testing.assert_array_equal(a.vals, native.vals)
