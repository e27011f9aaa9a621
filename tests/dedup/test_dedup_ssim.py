"""Vectorised SSIM agrees with skimage.metrics.structural_similarity."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import structural_similarity as sk_ssim

from retest.build.ssim import (
    SSIMParams,
    compute_ssim_stats,
    dssim_pairs,
    ssim_one_to_many,
    ssim_pairs,
    structural_similarity,
)
from retest.errors import ConfigError, InputValidationError


def _images(rng: np.random.Generator, n: int, h: int, w: int, c: int) -> np.ndarray:
    base = rng.integers(0, 256, size=(n, h, w, c)).astype(np.float64)
    smooth = (base + np.roll(base, 1, 1) + np.roll(base, 1, 2)) / 3  # some structure
    out = np.where(rng.random((n, 1, 1, 1)) < 0.5, base, smooth)
    out[0] = 255  # flat bright image
    out[1] = 0
    return out.astype(np.uint8)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"win_size": 3},
        {"win_size": 11},
        {"win_size": 21},
        {"gaussian_weights": True},
        {"gaussian_weights": True, "win_size": 7},
        {"gaussian_weights": True, "sigma": 1.0, "use_sample_covariance": False},
        {"use_sample_covariance": False, "win_size": 5},
    ],
)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_matches_skimage_rgb(kw: dict, backend: str) -> None:
    rng = np.random.default_rng(0)
    imgs = _images(rng, 12, 24, 26, 3)
    q = imgs[5]
    ours = ssim_one_to_many(q, imgs, SSIMParams(**kw), backend=backend, batch=5)
    ref = [sk_ssim(q, im, channel_axis=-1, data_range=255, **kw) for im in imgs]
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=0)
    assert abs(ours[5] - 1.0) < 1e-6


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_matches_skimage_large_window_and_pairs(backend: str) -> None:
    rng = np.random.default_rng(1)
    a = _images(rng, 5, 40, 40, 3)
    b = _images(np.random.default_rng(2), 4, 40, 40, 3)
    p = SSIMParams(win_size=35)
    qi, ri = np.array([0, 1, 4, 2, 3]), np.array([3, 0, 1, 1, 2])
    qs, rs = compute_ssim_stats(a, p), compute_ssim_stats(b, p)
    ours = ssim_pairs(qs, rs, qi, ri, n_threads=2, batch=2, backend=backend)
    ref = [
        sk_ssim(a[i], b[j], channel_axis=-1, data_range=255, win_size=35)
        for i, j in zip(qi, ri, strict=True)
    ]
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=0)
    d = dssim_pairs(qs, rs, qi, ri, backend=backend)
    np.testing.assert_allclose(d, (1 - np.asarray(ref)) / 2, atol=1e-4)
    # batches of 4: query 2 (tiled), query 0 (re-tiled), mixed (gathered), query 2
    qi2 = np.array([2, 2, 2, 2, 0, 0, 0, 0, 4, 1, 2, 2, 2, 2, 2])
    ri2 = np.array([0, 1, 3, 2, 2, 3, 3, 0, 1, 1, 0, 0, 1, 2, 3])
    mixed = ssim_pairs(qs, rs, qi2, ri2, batch=4, n_threads=1, backend=backend)
    ref2 = [
        sk_ssim(a[i], b[j], channel_axis=-1, data_range=255, win_size=35)
        for i, j in zip(qi2, ri2, strict=True)
    ]
    np.testing.assert_allclose(mixed, ref2, atol=1e-4, rtol=0)


def test_single_pair_grayscale_and_float() -> None:
    rng = np.random.default_rng(3)
    x = rng.random((30, 30))
    y = np.clip(x + 0.1 * rng.standard_normal((30, 30)), 0, 1)
    ref = sk_ssim(x, y, data_range=1.0)
    assert abs(structural_similarity(x, y, data_range=1.0) - ref) < 1e-4
    with pytest.raises(ConfigError, match="data_range"):
        structural_similarity(x, y)


def test_bad_inputs() -> None:
    with pytest.raises(InputValidationError, match="win_size 9 exceeds"):
        compute_ssim_stats(np.zeros((2, 8, 8), np.uint8), SSIMParams(win_size=9))
    with pytest.raises(ConfigError, match="odd"):
        compute_ssim_stats(np.zeros((2, 8, 8), np.uint8), SSIMParams(win_size=4))
    with pytest.raises(InputValidationError, match="same shape"):
        structural_similarity(np.zeros((8, 8)), np.zeros((9, 8)), data_range=1)
    a = compute_ssim_stats(np.zeros((2, 8, 8), np.uint8))
    b = compute_ssim_stats(np.zeros((2, 9, 9), np.uint8))
    with pytest.raises(InputValidationError, match="one size"):
        ssim_pairs(a, b, [0], [0])
    with pytest.raises(ConfigError, match="backend"):
        ssim_pairs(a, a, [0], [0], backend="cuda")
