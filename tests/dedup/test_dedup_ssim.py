"""Vectorised SSIM agrees with skimage.metrics.structural_similarity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from retest.dedup.ssim import (
    SSIMParams,
    compute_ssim_stats,
    dssim_pairs,
    native_available,
    ssim_one_to_many,
    ssim_pairs,
    structural_similarity,
)
from retest.errors import ConfigError, InputValidationError


@pytest.fixture
def sk_ssim() -> Callable[..., float]:
    """skimage's SSIM: the reference the vectorised SSIM must reproduce."""
    metrics = pytest.importorskip(
        "skimage.metrics", reason="the reference SSIM is scikit-image's (dev extra)"
    )
    return metrics.structural_similarity


def _need_native() -> None:
    why = native_available()
    if why:
        pytest.skip(f"compiled SSIM loop unavailable here: {why}")


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
@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_matches_skimage_rgb(
    kw: dict, backend: str, sk_ssim: Callable[..., float]
) -> None:
    rng = np.random.default_rng(0)
    imgs = _images(rng, 12, 24, 26, 3)
    q = imgs[5]
    if backend == "native":
        _need_native()
        if kw.get("gaussian_weights") and kw.get("win_size") == 7:
            # the 7-wide crop of an 11-tap gaussian reflects at the border
            with pytest.raises(ConfigError, match="reflected border taps"):
                ssim_one_to_many(q, imgs, SSIMParams(**kw), backend=backend)
            return
    ours = ssim_one_to_many(q, imgs, SSIMParams(**kw), backend=backend, batch=5)
    ref = [sk_ssim(q, im, channel_axis=-1, data_range=255, **kw) for im in imgs]
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=0)
    assert abs(ours[5] - 1.0) < 1e-6


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_matches_skimage_large_window_and_pairs(
    backend: str, sk_ssim: Callable[..., float]
) -> None:
    if backend == "native":
        _need_native()
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


def test_single_pair_grayscale_and_float(sk_ssim: Callable[..., float]) -> None:
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


def test_native_and_numpy_agree_whatever_the_batching() -> None:
    _need_native()
    rng = np.random.default_rng(5)
    a, b = _images(rng, 30, 32, 32, 3), _images(rng, 200, 32, 32, 3)
    qs, rs = compute_ssim_stats(a), compute_ssim_stats(b)
    qi, ri = rng.integers(0, 30, 1000), rng.integers(0, 200, 1000)
    ref = ssim_pairs(qs, rs, qi, ri, backend="numpy", batch=64, n_threads=1)
    one = ssim_pairs(qs, rs, qi, ri, backend="native", batch=1000, n_threads=1)
    np.testing.assert_allclose(one, ref, atol=2e-6, rtol=0)
    many = ssim_pairs(qs, rs, qi, ri, backend="native", batch=7, n_threads=3)
    np.testing.assert_array_equal(many, one)  # per-pair sums: batching-invariant
    assert ssim_pairs(qs, rs, qi, ri).tolist() == one.tolist()  # auto = native


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"RETEST_NATIVE": "0"}, "RETEST_NATIVE=0"),
        ({"CC": "no-such-cc"}, "no C compiler"),
    ],
)
def test_without_native_kernel_auto_falls_back_to_numpy(
    tmp_path: Path, env: dict[str, str], reason: str
) -> None:
    code = (
        "import json\nimport numpy as np\n"
        "from retest.dedup.ssim import native_available, ssim_one_to_many\n"
        "from retest.errors import ConfigError\n"
        "x = np.arange(3 * 16 * 16 * 3, dtype=np.uint8).reshape(3, 16, 16, 3)\n"
        "print(native_available())\n"
        "print(json.dumps(ssim_one_to_many(x[0], x).tolist()))\n"
        "try:\n"
        "    ssim_one_to_many(x[0], x, backend='native')\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
    )
    full = {**os.environ, "RETEST_CACHE_DIR": str(tmp_path), **env}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=full,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert reason in out[0]
    # auto ran the numpy kernel (checked against skimage above): the same values.
    x = np.arange(3 * 16 * 16 * 3, dtype=np.uint8).reshape(3, 16, 16, 3)
    expect = ssim_one_to_many(x[0], x, backend="numpy")
    np.testing.assert_array_equal(json.loads(out[1]), expect)
    assert "backend 'native' is unavailable" in out[2] and reason in out[2]
    assert not list(tmp_path.rglob("*.so"))  # nothing compiled


def test_native_kernel_is_built_once_into_the_cache(tmp_path: Path) -> None:
    _need_native()
    code = (
        "from retest.dedup.ssim import native_available\n"
        "assert native_available() == '', native_available()\n"
    )
    env = {**os.environ, "RETEST_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    built = list(tmp_path.rglob("*.so"))
    assert len(built) == 1 and built[0].parent.name == "native"
    stamp = built[0].stat().st_mtime_ns
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert [p.stat().st_mtime_ns for p in tmp_path.rglob("*.so")] == [stamp]
