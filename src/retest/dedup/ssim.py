"""Vectorised SSIM / DSSIM that matches ``skimage.metrics.structural_similarity``.

skimage filters each image, its square and the pair's product with a uniform
(``win_size``) or gaussian (``sigma``, truncate 3.5, reflect borders) window, forms
the SSIM map and averages it over the interior (a border of ``(win_size − 1) // 2``
pixels is cropped), channel by channel. Here the cropped filter is a matrix per
axis, ``F_h`` (H' × H) and ``F_w`` (W' × W) with reflected border taps folded in, so
``filter(X)[crop] = F_h · X · F_wᵀ`` exactly. Each image's mean and variance maps
are computed once (float64, then stored as float32); a pair only needs the filtered
cross term ``F_h (X'⊙Y') F_wᵀ`` of its mean-centred images. Centring by each
image's channel mean leaves the covariance unchanged (the filter rows sum to one)
and keeps float32 rounding far below the 1e-4 agreement target.

When every cropped output sees the same taps (always for skimage's default
windows), pairs go through a fused C loop (``_ssim_kernel.c``, compiled on first
use by :mod:`retest._native`): one pass per pair through cache-resident buffers
instead of ~20 numpy passes over a batch. Otherwise, or without a C compiler, the
numpy kernel computes the same map. Images are stored (N, H, W, C), one image
contiguous, so a shortlist's random references are cheap to reach.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest import _native
from retest._parallel import available_cpus
from retest._progress import ProgressCallback, report
from retest._validation import check_image_batch
from retest.dedup._ssim_kernels import NativeKernel, NumpyKernel, bind, query_terms
from retest.errors import ConfigError, InputValidationError

__all__ = [
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
    """Per-image SSIM ingredients, float32, one image contiguous.

    ``centred`` is ``x' = x − c̄`` (N, H, W, C) with ``cbar = c̄`` (N, C) the
    channel means; ``mc = F(x')`` (N, H', W', C) is the filtered mean of the
    centred image (``μ = mc + c̄``); ``varh = v + C2/2`` with
    ``v = cov_norm·(F(x'²) − mc²)``. For a pair, with ``k = 2·cov_norm``:
    ``SSIM map = (2μμ' + C1)(k·F(x'y') − k·mc·mc' + C2) / ((μ² + μ'² + C1)(varh + varh'))``.
    """

    centred: NDArray[np.float32]
    mc: NDArray[np.float32]
    cbar: NDArray[np.float32]
    varh: NDArray[np.float32]
    params: SSIMParams
    c1: float
    c2: float

    @property
    def n(self) -> int:
        return int(self.centred.shape[0])


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


def _filt(
    fh: NDArray[np.float64], fw: NDArray[np.float64], x: NDArray[np.float64]
) -> NDArray[np.float64]:
    """F_h · x · F_wᵀ for x in (N, H, W, C) layout → (N, H', W', C)."""
    t = np.tensordot(x, fh, axes=([1], [1]))  # (N, W, C, H')
    return np.tensordot(t, fw, axes=([1], [1])).transpose(0, 2, 3, 1)  # (N,H',W',C)


def compute_ssim_stats(
    images: ArrayLike, params: SSIMParams | None = None, *, name: str = "images"
) -> SSIMStats:
    """Precompute each image's filtered mean and variance maps once.

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
    n, h, w, c = a.shape
    ws = p.resolved_win_size()
    if ws % 2 != 1 or ws < 3:
        raise ConfigError(f"win_size must be an odd integer ≥ 3. Got {ws}.")
    if ws > min(h, w):
        raise InputValidationError(
            f"win_size {ws} exceeds the {h}×{w} {name}; use an odd win_size ≤ {min(h, w)}."
        )
    rng = _data_range(p, a.dtype)
    fh, fw = filter_matrix(h, p), filter_matrix(w, p)
    hp, wp = fh.shape[0], fw.shape[0]
    centred = np.empty((n, h, w, c), np.float32)
    mc = np.empty((n, hp, wp, c), np.float32)
    varh = np.empty((n, hp, wp, c), np.float32)
    cbar = np.empty((n, c), np.float32)
    c1, c2 = (p.K1 * rng) ** 2, (p.K2 * rng) ** 2
    step = max(1, (1 << 24) // (h * w * c))  # float64 temporaries of ≈ 128 MB
    for s0 in range(0, n, step):
        x = a[s0 : s0 + step].astype(np.float64)
        mean = x.mean(axis=(1, 2))
        xc = x - mean[:, None, None, :]
        m = _filt(fh, fw, xc)
        centred[s0 : s0 + step] = xc
        mc[s0 : s0 + step] = m
        cbar[s0 : s0 + step] = mean
        varh[s0 : s0 + step] = _cov_norm(p) * (_filt(fh, fw, xc * xc) - m * m) + c2 / 2
    return SSIMStats(centred, mc, cbar, varh, p, c1, c2)


def _check_compatible(q: SSIMStats, r: SSIMStats) -> None:
    if q.params != r.params or q.centred.shape[1:] != r.centred.shape[1:]:
        h, w, c = q.centred.shape[1:]
        h2, w2, c2 = r.centred.shape[1:]
        raise InputValidationError(
            "SSIM needs both image sets at one size and one parameter set: "
            f"{h}×{w}×{c} vs {h2}×{w2}×{c2}. Resize both sides first."
        )


def _taps(p: SSIMParams) -> tuple[NDArray[np.float32] | None, int]:
    """The window taps and their offset when every cropped output sees all of them.

    Output row ``i`` (input centre ``i + pad``) reads rows ``i + off …`` with
    ``off = pad − radius``; only when ``pad ≥ radius`` does no tap reach past the
    border (skimage's defaults: uniform ``win_size``, gaussian ``2·⌈3.5σ⌋ + 1``).
    """
    w = _kernel(p)
    off = (p.resolved_win_size() - 1) // 2 - w.size // 2
    return (w.astype(np.float32), off) if off >= 0 else (None, 0)


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


def _make_kernels(
    q: SSIMStats, r: SSIMStats, backend: str
) -> tuple[Callable[[], NativeKernel | NumpyKernel], int]:
    """A per-thread kernel factory and its default batch size."""
    p = r.params
    k = 2.0 * _cov_norm(p)
    taps, off = _taps(p)
    if _backend(backend, taps is not None) == "native":
        lib = _native.load(_NATIVE)
        assert lib is not None and taps is not None
        fn, terms = bind(lib), query_terms(q, k)
        return (lambda: NativeKernel(fn, terms, r, taps, off)), 256
    h, w = r.centred.shape[1:3]
    fh = filter_matrix(h, p).astype(np.float32)
    fw = filter_matrix(w, p).astype(np.float32)
    return (lambda: NumpyKernel(q, r, k, taps, off, fh, fw)), 64


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
    value is independent of batching and threads; the two backends agree with
    skimage (and each other) to ~1e-6.
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
    """Mean SSIM of two images with skimage's signature and result (to ~1e-6).

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
