"""Vectorised SSIM / DSSIM that matches ``skimage.metrics.structural_similarity``.

skimage filters each image, its square and the pair's product with a uniform
(``win_size``) or gaussian (``sigma``, truncate 3.5, reflect borders) window, forms
the SSIM map and averages it over the interior (a border of ``(win_size − 1) // 2``
pixels is cropped), channel by channel. Here, too: an image's filtered mean
``μ = F(x)`` and variance term ``varh = cov_norm·(F(x²) − μ²) + C2/2``, and the
pair's filtered product ``F(x·y)``, all float64 with skimage's (uncentred)
algebra: products of uint8 pixels are exact and the cancellations ``F(x²) − μ²``
and ``F(x·y) − μ_x μ_y`` lose about 1e-16 of 255², far below ``C2``. The result
agrees with skimage to 1e-9 (``AGREEMENT``, checked by the tests on noise,
constant, binary and half-black/half-white images; the earlier float32 statistics
were off by up to 7e-5 on such images).

Each pair runs in one fused C pass (``_ssim_kernel.c``, compiled on first use by
:mod:`retest._native`) that computes both images' statistics from their pixels
(keeping a query's while consecutive pairs share it, as along a shortlist) and
the map's mean; nothing per image is stored, since reading a 3 KB uint8 image
beats reading 32 KB of float64 maps. uint8 images under a uniform window use exact
int32 window sums. When the window has reflected border taps (a gaussian cropped
below its extent), or without a C compiler, numpy does the same operations in the
same order (with a dense matrix per axis, ``F_h`` (H' × H) and ``F_w`` (W' × W),
for reflected taps), so both give identical values. Images are stored (N, H, W,
C), one image contiguous (uint8 as given, anything else as float64).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest import _native
from retest._parallel import available_cpus
from retest._progress import ProgressCallback, report
from retest._validation import check_image_batch
from retest.dedup._ssim_kernels import (
    BoxKernel,
    Native,
    NativeKernel,
    NumpyKernel,
    box_window,
    image_maps,
)
from retest.errors import ConfigError, InputValidationError

__all__ = [
    "AGREEMENT",
    "PairOptions",
    "SSIMParams",
    "SSIMStats",
    "compute_ssim_stats",
    "dssim_pairs",
    "native_available",
    "ssim_one_to_many",
    "ssim_pairs",
    "structural_similarity",
]

_TRUNCATE = 3.5
AGREEMENT = 1e-9  # max |SSIM − skimage's| the tests check (float64 throughout)


@dataclass(frozen=True, slots=True)
class SSIMParams:
    """SSIM settings with skimage's names and defaults.

    ``win_size=None`` means 7 for the uniform window and ``2·int(3.5σ + 0.5) + 1``
    (11 for σ = 1.5) for the gaussian one; ``data_range=None`` means 255 for uint8
    input (float input needs it explicitly, as in skimage). ImageNetV2 used
    ``win_size=35`` with the uniform window on 256×256×3 images
    (docs/algorithms.md#dssim).
    """

    win_size: int | None = None
    gaussian_weights: bool = False
    sigma: float = 1.5
    use_sample_covariance: bool = True
    data_range: float | None = None
    K1: float = 0.01
    K2: float = 0.03

    def resolved_win_size(self) -> int:
        if self.win_size is not None:
            return int(self.win_size)
        if self.gaussian_weights:
            return 2 * int(_TRUNCATE * self.sigma + 0.5) + 1
        return 7


def _kernel(p: SSIMParams) -> NDArray[np.float64]:
    if p.gaussian_weights:
        r = int(_TRUNCATE * p.sigma + 0.5)
        x = np.arange(-r, r + 1, dtype=np.float64)
        w = np.exp(-0.5 / p.sigma**2 * x**2)
        w /= w.sum()
        return w
    ws = p.resolved_win_size()
    return np.full(ws, 1.0 / ws)


def _reflect(i: int, n: int) -> int:
    """scipy.ndimage 'reflect' (d c b a | a b c d | d c b a)."""
    period = 2 * n
    i %= period
    return i if i < n else period - 1 - i


def filter_matrix(n: int, p: SSIMParams) -> NDArray[np.float64]:
    """Rows = cropped output positions, columns = input positions of one axis."""
    w = _kernel(p)
    r = w.size // 2
    pad = (p.resolved_win_size() - 1) // 2
    out = np.zeros((n - 2 * pad, n))
    for row, i in enumerate(range(pad, n - pad)):
        for t, wt in enumerate(w):
            out[row, _reflect(i + t - r, n)] += wt
    return out


@dataclass(frozen=True, slots=True)
class SSIMStats:
    """An image batch ready for SSIM: ``image`` (N, H, W, C), one image contiguous,
    uint8 as given and anything else as float64, with its parameters and constants.

    Nothing else is stored per image: each pair's filtered means ``μ = F(x)``,
    variances ``varh = cov_norm·(F(x²) − μ²) + C2/2`` and product ``F(xy)`` are
    computed from the pixels (a 32×32×3 uint8 image is 3 KB, its float64 maps
    32 KB: recomputing is faster than reading them back). With
    ``k = 2·cov_norm``: ``SSIM map = (2μμ' + C1)(k·(F(xy) − μμ') + C2) /
    ((μ² + μ'² + C1)(varh + varh'))``.
    """

    image: NDArray[Any]
    params: SSIMParams
    c1: float
    c2: float

    @property
    def n(self) -> int:
        return int(self.image.shape[0])


def _data_range(p: SSIMParams, dtype: np.dtype[np.generic]) -> float:
    if p.data_range is not None:
        return float(p.data_range)
    if dtype == np.uint8:
        return 255.0
    raise ConfigError(
        f"data_range must be given for {dtype} images (skimage guesses it only for "
        "uint8). Pass data_range=255 for 0–255 pixels or 1.0 for [0, 1] floats."
    )


def _cov_norm(p: SSIMParams) -> float:
    ws = p.resolved_win_size()
    return ws * ws / (ws * ws - 1.0) if p.use_sample_covariance else 1.0


def compute_ssim_stats(
    images: ArrayLike, params: SSIMParams | None = None, *, name: str = "images"
) -> SSIMStats:
    """Check a batch of images and store it for SSIM (see :class:`SSIMStats`).

    Parameters
    ----------
    images : ndarray of shape (n, H, W) or (n, H, W, C)
        Channel-last images (channels are averaged like skimage's ``channel_axis=-1``).
    params : SSIMParams, optional
    name : str
        Used in error messages.
    """
    p = params or SSIMParams()
    a = check_image_batch(images, name)
    h, w = a.shape[1:3]
    ws = p.resolved_win_size()
    if ws % 2 != 1 or ws < 3:
        raise ConfigError(f"win_size must be an odd integer ≥ 3. Got {ws}.")
    if ws > min(h, w):
        raise InputValidationError(
            f"win_size {ws} exceeds the {h}×{w} {name}; use an odd win_size ≤ {min(h, w)}."
        )
    rng = _data_range(p, a.dtype)
    image = np.ascontiguousarray(a if a.dtype == np.uint8 else a.astype(np.float64))
    return SSIMStats(image, p, (p.K1 * rng) ** 2, (p.K2 * rng) ** 2)


def _check_compatible(q: SSIMStats, r: SSIMStats) -> None:
    if q.params != r.params or q.image.shape[1:] != r.image.shape[1:]:
        h, w, c = q.image.shape[1:]
        h2, w2, c2 = r.image.shape[1:]
        raise InputValidationError(
            "SSIM needs both image sets at one size and one parameter set: "
            f"{h}×{w}×{c} vs {h2}×{w2}×{c2}. Resize both sides first."
        )


def _taps(p: SSIMParams) -> tuple[NDArray[np.float64] | None, int]:
    """The window taps and their offset when every cropped output sees all of them.

    Output row ``i`` (input centre ``i + pad``) reads rows ``i + off …`` with
    ``off = pad − radius``; only when ``pad ≥ radius`` does no tap reach past the
    border (skimage's defaults: uniform ``win_size``, gaussian ``2·⌈3.5σ⌋ + 1``).
    """
    w = _kernel(p)
    off = (p.resolved_win_size() - 1) // 2 - w.size // 2
    return (w, off) if off >= 0 else (None, 0)


_NATIVE = "dedup/_ssim_kernel"


def _backend(backend: str, exact_taps: bool) -> str:
    """'native' or 'numpy'; 'auto' prefers the compiled loop when it applies."""
    if backend not in ("auto", "native", "numpy"):
        raise ConfigError(
            f"backend must be 'auto', 'native' or 'numpy'. Got {backend!r}."
        )
    if backend == "numpy":
        return "numpy"
    ok = exact_taps and _native.load(_NATIVE) is not None
    if backend == "native" and not ok:
        why = _native.unavailable_reason(_NATIVE) or (
            "the window has reflected border taps (win_size smaller than the "
            "gaussian's extent)"
        )
        raise ConfigError(f"backend 'native' is unavailable: {why}. Use 'auto'.")
    return "native" if ok else "numpy"


def native_available() -> str:
    """'' when the compiled SSIM loop is usable here, else the reason it is not."""
    return (
        "" if _native.load(_NATIVE) is not None else _native.unavailable_reason(_NATIVE)
    )


def _native_fns() -> Native:
    if not _FNS:
        lib = _native.load(_NATIVE)
        assert lib is not None
        _FNS.append(Native(lib))
    return _FNS[0]


_FNS: list[Native] = []


def _make_kernels(
    q: SSIMStats, r: SSIMStats, backend: str
) -> tuple[Callable[[], BoxKernel | NativeKernel | NumpyKernel], int]:
    """A per-thread kernel factory and its default batch size."""
    p = r.params
    taps, off = _taps(p)
    native = _backend(backend, taps is not None) == "native"
    cov = _cov_norm(p)
    size = box_window(q.image.dtype, taps) and box_window(r.image.dtype, taps)
    if size:
        box_fn = _native_fns() if native else None
        return (lambda: BoxKernel(box_fn, q, r, size, cov)), 256 if native else 64
    if q.image.dtype != r.image.dtype:  # one storage for both sides
        q = replace(q, image=q.image.astype(np.float64))
        r = replace(r, image=r.image.astype(np.float64))
    if native:
        assert taps is not None
        fn = _native_fns()
        return (lambda: NativeKernel(fn, q, r, taps, off, cov)), 256
    h, w = r.image.shape[1:3]
    fh, fw = filter_matrix(h, p), filter_matrix(w, p)
    qm = image_maps(q.image, taps, off, fh, fw, cov, q.c2)
    rm = qm if r is q else image_maps(r.image, taps, off, fh, fw, cov, r.c2)
    consts = (2.0 * cov, r.c1, r.c2)
    return (lambda: NumpyKernel(qm, rm, consts, taps, off, fh, fw)), 64


def ssim_pairs(
    q: SSIMStats,
    r: SSIMStats,
    qi: ArrayLike,
    ri: ArrayLike,
    *,
    batch: int | None = None,
    n_threads: int | None = None,
    backend: str = "auto",
    progress: ProgressCallback | None = None,
) -> NDArray[np.float64]:
    """Mean SSIM of the pairs ``(q[qi[t]], r[ri[t]])``, one value per pair.

    Pairs are processed in batches (default 256 with the compiled loop, 64 with
    numpy) by ``n_threads`` threads (default: CPU count, at most 4); ctypes calls
    and numpy release the GIL. ``backend`` 'auto' takes the compiled loop when a C
    compiler is available and the window allows it (see :func:`native_available`),
    else numpy; 'native' insists on the loop and 'numpy' avoids it. Each pair's
    value is independent of batching and threads; the two backends give the same
    values and agree with skimage to ``AGREEMENT`` (1e-9).
    """
    _check_compatible(q, r)
    qa = np.asarray(qi, dtype=np.int64).ravel()
    ra = np.asarray(ri, dtype=np.int64).ravel()
    if qa.shape != ra.shape:
        raise InputValidationError(
            f"qi and ri must pair up: {qa.size} query indices, {ra.size} reference indices."
        )
    for arr, st, nm in ((qa, q, "qi"), (ra, r, "ri")):
        if arr.size and (arr.min() < 0 or arr.max() >= st.n):
            raise InputValidationError(
                f"{nm} must index rows in [0, {st.n}). Got {int(arr.min())}..{int(arr.max())}."
            )
    make, default_batch = _make_kernels(q, r, backend)
    out = np.empty(qa.size, dtype=np.float64)
    if qa.size == 0:
        return out
    batch = batch or default_batch
    starts = list(range(0, qa.size, batch))
    threads = max(1, min(n_threads or min(4, available_cpus()), len(starts)))
    done = [0]

    def work(worker: int) -> None:
        kern = make()
        for s0 in starts[worker::threads]:
            sl = slice(s0, s0 + batch)
            out[sl] = kern.run(qa[sl], ra[sl])
            done[0] += 1
            if worker == 0:
                report(progress, "ssim", min(qa.size, done[0] * batch), qa.size)

    if threads == 1:
        work(0)
    else:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1), ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, range(threads)))
    report(progress, "ssim", qa.size, qa.size)
    return out


class PairOptions(TypedDict, total=False):
    """The keyword options of :func:`ssim_pairs`, passed on by its wrappers."""

    batch: int | None
    n_threads: int | None
    backend: str
    progress: ProgressCallback | None


def dssim_pairs(
    q: SSIMStats,
    r: SSIMStats,
    qi: ArrayLike,
    ri: ArrayLike,
    **kwargs: Unpack[PairOptions],
) -> NDArray[np.float64]:
    """DSSIM = (1 − SSIM) / 2 for pairs (0 = identical); see :func:`ssim_pairs`."""
    return (1.0 - ssim_pairs(q, r, qi, ri, **kwargs)) / 2.0


def ssim_one_to_many(
    query: ArrayLike,
    images: ArrayLike,
    params: SSIMParams | None = None,
    **kwargs: Unpack[PairOptions],
) -> NDArray[np.float64]:
    """SSIM of one image (H, W[, C]) against each of ``images`` (n, H, W[, C])."""
    qarr = np.asarray(query)[None]
    qs = compute_ssim_stats(qarr, params, name="query")
    rs = compute_ssim_stats(images, params, name="images")
    n = rs.n
    return ssim_pairs(qs, rs, np.zeros(n, np.intp), np.arange(n), **kwargs)


def structural_similarity(
    im1: ArrayLike,
    im2: ArrayLike,
    *,
    win_size: int | None = None,
    gaussian_weights: bool = False,
    sigma: float = 1.5,
    use_sample_covariance: bool = True,
    data_range: float | None = None,
    channel_axis: int | None = None,
) -> float:
    """Mean SSIM of two images with skimage's signature and result (to 1e-9).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(64, dtype=np.uint8).reshape(8, 8)
    >>> round(structural_similarity(a, a), 6)
    1.0
    """
    a, b = np.asarray(im1), np.asarray(im2)
    if a.shape != b.shape:
        raise InputValidationError(
            f"images must have the same shape. Got {a.shape} and {b.shape}; "
            "resize one of them first."
        )
    if channel_axis is not None:
        a, b = np.moveaxis(a, channel_axis, -1), np.moveaxis(b, channel_axis, -1)
    elif a.ndim != 2:
        raise InputValidationError(
            f"2-D images expected without channel_axis. Got shape {a.shape}."
        )
    p = SSIMParams(
        win_size=win_size,
        gaussian_weights=gaussian_weights,
        sigma=sigma,
        use_sample_covariance=use_sample_covariance,
        data_range=data_range,
    )
    qs = compute_ssim_stats(a[None], p, name="im1")
    rs = compute_ssim_stats(b[None], p, name="im2")
    return float(ssim_pairs(qs, rs, [0], [0], n_threads=1)[0])
