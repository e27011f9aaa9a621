"""Warp-tolerant L2 (retest.dedup.warp) against scipy, PIL and brute-force oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from scipy.ndimage import affine_transform

from retest.dedup.warp import (
    _axis_matrix,
    _warped_norms,
    _warps,
    warp_grid,
    warp_threshold,
    warped_sqdist_pairs,
)
from retest.errors import ConfigError, InputValidationError


def _scipy_warp(img: np.ndarray, sy: float, sx: float, ty: float, tx: float):
    h, w = img.shape[:2]
    cy, cx = (h - 1) / 2, (w - 1) / 2
    return affine_transform(
        img,
        [1 / sy, 1 / sx, 1.0],
        offset=[cy - (cy + ty) / sy, cx - (cx + tx) / sx, 0.0],
        order=1,
        mode="nearest",
    )


def _loop_axis(n: int, scale: float, shift: float) -> np.ndarray:
    """Independent per-pixel oracle of PIL-style (antialiased) bilinear weights."""
    c, f = (n - 1) / 2, max(1.0, 1 / scale)
    m = np.zeros((n, n))
    for o in range(n):
        p = (o - c - shift) / scale + c
        w = [max(0.0, 1 - abs(i - p) / f) for i in range(n)]
        if sum(w) == 0:
            m[o, min(n - 1, max(0, round(p)))] = 1.0
        else:
            m[o] = np.array(w) / sum(w)
    return m


def _oracle_warp(img: np.ndarray, sy, ty, sx, tx) -> np.ndarray:
    ay, ax = _loop_axis(img.shape[0], sy, ty), _loop_axis(img.shape[1], sx, tx)
    return np.stack([ay @ img[..., c] @ ax.T for c in range(img.shape[2])], axis=-1)


def test_separable_warps_equal_scipy_upscales_and_loop_oracle() -> None:
    img = np.random.default_rng(0).random((9, 11, 2)) * 255
    gy, gx = warp_grid((9, 11))
    assert len(gy) == len(gx) == 15  # 3 scales × 5 shifts per axis
    ay = np.stack([_axis_matrix(9, s, t) for s, t in gy])
    ax = np.stack([_axis_matrix(11, s, t) for s, t in gx])
    # _warps lays each warp out in (W, H, C) order
    got = (
        _warps(img, ay, ax).reshape(len(gy), len(gx), 11, 9, 2).transpose(0, 1, 3, 2, 4)
    )
    for a in range(len(gy)):
        for b in range(len(gx)):
            (sy, ty), (sx, tx) = gy[a], gx[b]
            np.testing.assert_allclose(
                got[a, b], _oracle_warp(img, sy, ty, sx, tx), atol=1e-9
            )
            if sy >= 1 and sx >= 1:  # no antialiasing: plain bilinear, clamped
                ref = _scipy_warp(img, sy, sx, ty, tx)
                np.testing.assert_allclose(got[a, b], ref, atol=1e-9)


@pytest.mark.parametrize("size", [27, 29])
def test_top_left_rescale_is_on_the_grid_and_equals_pil(size: int) -> None:
    """n → n ± 1 anchored top-left = centre scale (n ± 1)/n with shift ±0.5."""
    rng = np.random.default_rng(size)
    y = np.zeros((28, 28), np.float32)
    y[2:26, 3:25] = rng.random((24, 22)) * 255  # black border, like Fashion-MNIST
    pil = np.asarray(
        Image.fromarray(y, mode="F").resize((size, size), Image.Resampling.BILINEAR)
    )
    copy = pil[:28, :28] if size > 28 else np.pad(pil, ((0, 1), (0, 1)))
    a = _axis_matrix(28, size / 28, 0.5 if size > 28 else -0.5)
    np.testing.assert_allclose(a @ y @ a.T, copy, atol=1e-3)
    assert (size / 28, 0.5 if size > 28 else -0.5) in warp_grid((28, 28))[0]
    d = warped_sqdist_pairs(copy[None], y[None], [0], [0])[0]
    one_way = warped_sqdist_pairs(copy[None], y[None], [0], [0], symmetric=False)[0]
    assert d < 1e-3 < 1e3 < one_way  # un-scaling the copy blurs it a second time


def test_min_over_warps_brute_force_both_ways_and_pose() -> None:
    rng = np.random.default_rng(1)
    refs = rng.integers(0, 256, (6, 12, 12)).astype(np.uint8)
    q = np.stack([refs[2], np.rot90(refs[3]).copy(), refs[5]])
    q[2] = np.roll(q[2], 1, axis=1)  # a 1-px shift is inside the grid
    qi = np.array([0, 0, 1, 1, 2, 2, 2])
    ri = np.array([2, 4, 3, 0, 5, 1, 2])
    perm = rng.permutation(qi.size)
    got = warped_sqdist_pairs(q, refs, qi[perm], ri[perm])
    one_way = warped_sqdist_pairs(q, refs, qi[perm], ri[perm], symmetric=False)
    gy, gx = warp_grid((12, 12))

    def sq(a: np.ndarray, b: np.ndarray) -> float:
        return float(((a - b) ** 2).sum())

    for t, (i, j) in enumerate(zip(qi[perm], ri[perm], strict=True)):
        x, y = q[i][..., None].astype(float), refs[j][..., None].astype(float)
        fwd = [_oracle_warp(x, sy, ty, sx, tx) for sy, ty in gy for sx, tx in gx]
        rev = [_oracle_warp(y, sy, ty, sx, tx) for sy, ty in gy for sx, tx in gx]
        best_fwd = min(sq(w, y) for w in fwd)
        assert one_way[t] == pytest.approx(best_fwd, rel=1e-9, abs=1e-6)
        best = min(best_fwd, min(sq(x, w) for w in rev))
        assert got[t] == pytest.approx(best, rel=1e-9, abs=1e-6)
    keys = list(zip(qi[perm].tolist(), ri[perm].tolist(), strict=True))
    d = dict(zip(keys, got, strict=True))
    assert d[(0, 2)] == pytest.approx(0.0, abs=1e-6)
    assert d[(1, 3)] > 1e5  # a 90° turn is not a small warp
    # np.roll wraps one column around; the warp only reaches the edge-clamped shift
    assert d[(2, 5)] < 0.5 * min(d[(2, 1)], d[(2, 2)])


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(3, 10),
    w=st.integers(3, 10),
    c=st.sampled_from([1, 3]),
    scale_px=st.integers(0, 2),
    step=st.sampled_from([0.25, 0.5, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_symmetric_is_min_of_both_one_way_distances(h, w, c, scale_px, step, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (3, h, w, c)).astype(np.uint8)
    b = rng.integers(0, 256, (4, h, w, c)).astype(np.uint8)
    qi, ri = rng.integers(0, 3, 9), rng.integers(0, 4, 9)
    kw = {"max_scale_px": scale_px, "max_shift_px": 1.0, "shift_step": step}
    both = warped_sqdist_pairs(a, b, qi, ri, **kw)
    ab = warped_sqdist_pairs(a, b, qi, ri, symmetric=False, **kw)
    ba = warped_sqdist_pairs(b, a, ri, qi, symmetric=False, **kw)
    np.testing.assert_allclose(both, np.minimum(ab, ba), rtol=1e-9, atol=1e-5)
    gy, gx = warp_grid((h, w), max_scale_px=scale_px, shift_step=step)
    ay = np.stack([_axis_matrix(h, s, t) for s, t in gy])
    ax = np.stack([_axis_matrix(w, s, t) for s, t in gx])
    norms = _warped_norms(b, ay, ax)
    direct = np.stack([(_warps(x.astype(float), ay, ax) ** 2).sum(1) for x in b], 1)
    np.testing.assert_allclose(norms, direct, rtol=1e-10, atol=1e-6)


def test_warp_threshold_is_the_cifar_rule_scaled() -> None:
    assert warp_threshold((32, 32, 3)) == pytest.approx(1000.0**2)
    assert warp_threshold([28, 28, 1]) == pytest.approx(1e6 * 784 / 3072)
    assert warp_threshold((256, 256, 3)) == pytest.approx(64e6)
    with pytest.raises(ConfigError, match="positive"):
        warp_threshold((0, 4))


def test_bad_inputs() -> None:
    a = np.zeros((2, 8, 8), np.uint8)
    with pytest.raises(InputValidationError, match="differ in size"):
        warped_sqdist_pairs(a, np.zeros((2, 9, 8), np.uint8), [0], [0])
    with pytest.raises(InputValidationError, match="pair up"):
        warped_sqdist_pairs(a, a, [0, 1], [0])
    with pytest.raises(InputValidationError, match="NaN"):
        warped_sqdist_pairs(np.full((1, 8, 8), np.nan), a, [0], [0])
    with pytest.raises(ConfigError, match="shift_step"):
        warped_sqdist_pairs(a, a, [0], [0], shift_step=0)
    assert warped_sqdist_pairs(a, a, [], []).shape == (0,)
