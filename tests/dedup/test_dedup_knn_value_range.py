"""kNN stays exact over the whole float range, or refuses the input (issue #26).

Float32 squares overflow from about 1.8e19 and underflow below about 1e-19; the
fast pass must neither lose the true neighbours nor return NaN-ordered lists.
"""

from __future__ import annotations

import numpy as np
import pytest

from retest import knn
from retest.dedup.knn import knn_range
from retest.errors import InputValidationError

BACKENDS = ["numpy", "torch", "faiss"]


def _brute(q: np.ndarray, r: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = ((q[:, None, :] - r[None, :, :]) ** 2).sum(-1)
    idx = np.argsort(d, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(d, idx, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_issue_case_squares_beyond_float32(backend: str) -> None:
    # aad0cc2 returned [[0, -1]] with distances [[1e40, inf]]
    r = knn(np.array([[1e20]]), np.array([[0.0], [1e20], [3e20]]), 2, backend=backend)
    assert r.indices.tolist() == [[1, 0]]
    assert r.distances.tolist() == [[0.0, 1e40]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("magnitude", [1e-22, 1e-30, 1e20, 1e30, 1e100])
def test_random_sets_at_extreme_magnitudes_match_brute_force(
    backend: str, magnitude: float
) -> None:
    # 1e-22 / 1e-30: float32 products underflow (torch and faiss lost neighbours on
    # aad0cc2); 1e20 / 1e30: squares overflow; 1e100: beyond float32 altogether
    rng = np.random.default_rng(7)
    q = rng.normal(size=(20, 8)) * magnitude
    r = np.concatenate([rng.normal(size=(300, 8)) * magnitude, q[:5]])
    res = knn(q, r, 3, backend=backend)
    idx, dist = _brute(q, r, 3)
    np.testing.assert_array_equal(res.indices, idx)
    np.testing.assert_allclose(res.distances, dist, rtol=1e-12, atol=0)


def test_range_search_with_huge_values_finds_every_pair() -> None:
    rng = np.random.default_rng(3)
    q = rng.normal(size=(6, 4)) * 1e20
    r = np.concatenate([rng.normal(size=(60, 4)) * 1e20, q[:2]])
    high = 4e40
    res = knn_range(q, r, low=0.0, high=high)
    d = ((q[:, None] - r[None]) ** 2).sum(-1)
    want = sorted(zip(*np.nonzero(d <= high), strict=True))
    got = sorted(zip(res.query.tolist(), res.reference.tolist(), strict=True))
    assert got == [(int(a), int(b)) for a, b in want]
    assert len(got) > 2


def test_int64_rows_whose_norms_overflow_float32_are_ranked_exactly() -> None:
    # 16 · (2**62)² = 2**128: beyond float32, so aad0cc2's norms became inf
    step = 2**10  # the float64 spacing at 2**62: every value below is exact
    q = np.full((1, 16), 2**62, dtype=np.int64)
    offsets = np.array([5, 0, 3, 9, 1], dtype=np.int64)
    r = q + (offsets * step)[:, None]
    res = knn(q, r, 3, backend="numpy")
    assert res.indices.tolist() == [[1, 4, 2]]
    assert res.distances.tolist() == [[0.0, 16.0 * step**2, 16.0 * (3 * step) ** 2]]


def test_values_whose_float64_distances_overflow_are_refused() -> None:
    with pytest.raises(InputValidationError, match=r"values up to 1e\+200.*float64"):
        knn(np.array([[1e200]]), np.array([[0.0], [1.0]]), 1)


def test_nan_is_still_refused_with_its_row() -> None:
    refs = np.zeros((5, 3))
    refs[3, 1] = np.nan
    with pytest.raises(InputValidationError, match=r"references.*NaN.*rows \[3\]"):
        knn(np.zeros((2, 3)), refs, 1)


def test_float16_chunks_convert_exactly_every_bit_pattern() -> None:
    # the compiled f16 → f32 loop (or numpy's cast without a compiler) must be exact
    # for all 65,536 values: normals, subnormals, ±0, ±inf and NaN
    from retest.dedup._knn_chunks import _load_scaled

    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = h.reshape(256, 256)
    out = np.empty(h.shape, np.float32)
    _load_scaled(out, h, 1.0)
    want = h.astype(np.float32)
    np.testing.assert_array_equal(out, want)  # NaN matches NaN (payloads may differ)
    assert (np.signbit(out) == np.signbit(want)).all()
