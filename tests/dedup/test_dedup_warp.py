"""Warp-tolerant L2 (retest.build.warp) against scipy and brute-force oracles."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import affine_transform

from retest.build.warp import _axis_matrix, _warps, warp_grid, warped_sqdist_pairs
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


def test_separable_warps_equal_scipy_affine_transform() -> None:
    img = np.random.default_rng(0).random((9, 11, 2)) * 255
    gy, gx = warp_grid((9, 11))
    assert len(gy) == len(gx) == 15  # 3 scales × 5 shifts per axis
    ay = np.stack([_axis_matrix(9, s, t) for s, t in gy])
    ax = np.stack([_axis_matrix(11, s, t) for s, t in gx])
    got = _warps(img, ay, ax).reshape(len(gy), len(gx), 9, 11, 2)
    for a in (0, 3, 7, 14):
        for b in (1, 7, 12):
            (sy, ty), (sx, tx) = gy[a], gx[b]
            ref = _scipy_warp(img, sy, sx, ty, tx)
            np.testing.assert_allclose(got[a, b], ref, atol=1e-9)


def test_min_over_warps_brute_force_and_pose() -> None:
    rng = np.random.default_rng(1)
    refs = rng.integers(0, 256, (6, 12, 12)).astype(np.uint8)
    q = np.stack([refs[2], np.rot90(refs[3]).copy(), refs[5]])
    q[2] = np.roll(q[2], 1, axis=1)  # a 1-px shift is inside the grid
    qi = np.array([0, 0, 1, 1, 2, 2, 2])
    ri = np.array([2, 4, 3, 0, 5, 1, 2])
    perm = rng.permutation(qi.size)
    got = warped_sqdist_pairs(q, refs, qi[perm], ri[perm])
    gy, gx = warp_grid((12, 12))
    for t, (i, j) in enumerate(zip(qi[perm], ri[perm], strict=True)):
        best = min(
            float(
                (
                    (
                        _scipy_warp(q[i][..., None].astype(float), sy, sx, ty, tx)[
                            ..., 0
                        ]
                        - refs[j]
                    )
                    ** 2
                ).sum()
            )
            for sy, ty in gy
            for sx, tx in gx
        )
        assert got[t] == pytest.approx(best, rel=1e-9, abs=1e-6)
    keys = list(zip(qi[perm].tolist(), ri[perm].tolist(), strict=True))
    d = dict(zip(keys, got, strict=True))
    assert d[(0, 2)] == pytest.approx(0.0, abs=1e-6)
    assert d[(1, 3)] > 1e5  # a 90° turn is not a small warp
    # np.roll wraps one column around; the warp only reaches the edge-clamped shift
    assert d[(2, 5)] < 0.5 * min(d[(2, 1)], d[(2, 2)])


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
