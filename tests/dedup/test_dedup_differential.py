"""Randomized differential tests of the exact kernels against their peers (issue #26).

kNN against a float64 numpy brute force (the definition) and faiss (a peer that
must never beat it), SSIM against ``skimage.metrics.structural_similarity``. Seeded
and small, so they run in CI in seconds; the inputs are the ones that break
float32 shortcuts: ties, duplicate rows, float16, uint8, huge and tiny values,
constant and saturated images. A kernel change that loses exactness fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from retest import knn
from retest.dedup.ssim import (
    AGREEMENT,
    SSIMParams,
    compute_ssim_stats,
    ssim_pairs,
)

SEEDS = range(6)


def _brute(q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Float64 squared distances, every pair (the definition kNN must equal)."""
    q64, r64 = q.astype(np.float64), r.astype(np.float64)
    return ((q64[:, None, :] - r64[None, :, :]) ** 2).sum(-1)


def _knn_case(seed: int, kind: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """(queries, references, exact) — ``exact``: every distance is an integer or a
    dyadic value summed without rounding, so ties must resolve by index exactly."""
    rng = np.random.default_rng(seed)
    d = int(rng.choice([1, 3, 17, 48]))
    nr, nq = int(rng.integers(60, 240)), int(rng.integers(5, 40))
    if kind == "uint8":
        r = rng.integers(0, 256, (nr, d)).astype(np.uint8)
        exact = True
    elif kind == "ties":  # 4 levels: most distances tie
        r = rng.integers(0, 4, (nr, d)).astype(np.uint8)
        exact = True
    elif kind == "float16":  # multiples of 1/64 below 4: exact float64 sums
        r = (rng.integers(0, 256, (nr, d)) / 64).astype(np.float16)
        exact = True
    elif kind == "huge":
        r = rng.normal(size=(nr, d)) * 10.0 ** rng.uniform(18, 60)
        exact = False
    elif kind == "offset":  # far from the origin: float32 scores are noise
        r = 1000.0 + rng.normal(size=(nr, d)) * 1e-3
        exact = False
    elif kind == "tiny":
        r = rng.normal(size=(nr, d)) * 10.0 ** rng.uniform(-30, -18)
        exact = False
    else:
        r = rng.normal(size=(nr, d)).astype(np.float32)
        exact = False
    r[rng.integers(0, nr, nr // 10)] = r[rng.integers(0, nr, nr // 10)]  # duplicates
    q = r[rng.integers(0, nr, nq)].copy()  # queries that are references...
    half = nq // 2  # ...and queries that are not
    q[:half] = (
        r[rng.integers(0, nr, half)] + (r[rng.integers(0, nr, half)] - r[:half]) / 2
    )
    return q.astype(r.dtype), r, exact


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "kind", ["uint8", "ties", "float16", "float32", "offset", "huge", "tiny"]
)
def test_knn_equals_float64_brute_force_and_never_loses_to_faiss(
    seed: int, kind: str
) -> None:
    import faiss

    q, r, exact = _knn_case(seed, kind)
    k = min(8, r.shape[0])
    d = _brute(q, r)
    order = np.lexsort((np.broadcast_to(np.arange(r.shape[0]), d.shape), d), axis=1)
    want_idx = order[:, :k]
    want = np.take_along_axis(d, want_idx, 1)
    for backend in ("numpy", "torch", "faiss"):
        got = knn(q, r, k, backend=backend)  # type: ignore[arg-type]
        if exact:
            np.testing.assert_array_equal(got.indices, want_idx, err_msg=backend)
            np.testing.assert_array_equal(got.distances, want, err_msg=backend)
        else:  # float data: the same k-th distances, each at its true value
            np.testing.assert_allclose(got.distances, want, rtol=1e-12, err_msg=backend)
            true_of_got = np.take_along_axis(d, got.indices, 1)
            np.testing.assert_allclose(got.distances, true_of_got, rtol=1e-12)
    if kind in ("uint8", "ties", "float16", "float32"):  # faiss's own range
        index = faiss.IndexFlatL2(r.shape[1])
        index.add(np.ascontiguousarray(r, np.float32))
        _, fi = index.search(np.ascontiguousarray(q, np.float32), k)
        faiss_true = np.sort(np.take_along_axis(d, fi, 1), axis=1)
        assert (want <= faiss_true * (1 + 1e-12)).all()


def _ssim_images(seed: int, n: int, shape: tuple[int, ...]) -> np.ndarray:
    """Noise, constant, saturated binary, half black / half white, smooth blocks."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, *shape), np.uint8)
    for t in range(n):
        kind = t % 5
        if kind == 0:
            x = rng.integers(0, 256, shape)
        elif kind == 1:
            x = np.full(shape, rng.choice([0, 255, int(rng.integers(0, 256))]))
        elif kind == 2:
            x = rng.choice([0, 255], shape)
        elif kind == 3:
            x = np.zeros(shape, np.int64)
            x[:, shape[1] // 2 :] = 255
            x = np.clip(x + rng.integers(-1, 2, shape), 0, 255)
        else:
            x = np.clip(rng.integers(0, 256) + rng.normal(0, 2, shape), 0, 255)
        out[t] = x.astype(np.uint8)
    return out


SSIM_SETTINGS: list[tuple[str, dict[str, Any], tuple[int, ...]]] = [
    ("uniform 7 rgb", {}, (20, 24, 3)),
    ("uniform 3 gray", {"win_size": 3}, (12, 12)),
    (
        "uniform 11 population cov",
        {"win_size": 11, "use_sample_covariance": False},
        (16, 16, 3),
    ),
    ("gaussian rgb", {"gaussian_weights": True}, (20, 20, 3)),
    ("gaussian reflected taps", {"gaussian_weights": True, "win_size": 7}, (16, 16, 2)),
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    ("label", "kw", "shape"), SSIM_SETTINGS, ids=[s[0] for s in SSIM_SETTINGS]
)
@pytest.mark.parametrize("as_float", [False, True])
def test_ssim_equals_skimage_within_the_documented_bound(
    sk_ssim: Callable[..., float],
    seed: int,
    label: str,
    kw: dict[str, Any],
    shape: tuple[int, ...],
    as_float: bool,
) -> None:
    n = 20
    a, b = _ssim_images(seed, n, shape), _ssim_images(seed + 100, n, shape)
    b[::4] = a[::4]  # identical pairs: SSIM exactly 1 up to rounding
    b[1::4] = np.clip(a[1::4].astype(int) + 1, 0, 255)  # off by one grey level
    data_range = 255.0
    if as_float:  # float images in [0, 1]
        a, b = a / 255.0, b / 255.0
        data_range = 1.0
    channel = {"channel_axis": -1} if len(shape) == 3 else {}
    ref = np.array(
        [sk_ssim(a[t], b[t], data_range=data_range, **channel, **kw) for t in range(n)]
    )
    params = SSIMParams(data_range=data_range, **kw)
    qi = np.arange(n)
    results = []
    for backend in ("auto", "numpy"):
        qs = compute_ssim_stats(a, params)
        rs = compute_ssim_stats(b, params)
        results.append(ssim_pairs(qs, rs, qi, qi, backend=backend))
    assert np.abs(results[0] - ref).max() <= AGREEMENT
    np.testing.assert_array_equal(results[0], results[1])  # backends: same values


@pytest.fixture
def sk_ssim() -> Callable[..., float]:
    from skimage.metrics import structural_similarity

    return structural_similarity  # type: ignore[no-any-return]
