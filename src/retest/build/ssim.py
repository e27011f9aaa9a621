"""Vectorised SSIM / DSSIM that matches ``skimage.metrics.structural_similarity``.

skimage filters each image, its square and the pair's product with a uniform
(``win_size``) or gaussian (``sigma``, truncate 3.5, reflect borders) window, forms
the SSIM map and averages it over the interior (a border of ``(win_size − 1) // 2``
pixels is cropped), channel by channel. Here the cropped filter is a matrix per
axis, ``F_h`` (H' × H) and ``F_w`` (W' × W) with reflected border taps folded in, so
``filter(X)[crop] = F_h · X · F_wᵀ`` exactly. Each image's mean and variance maps
are computed once (float64, then stored as float32); a pair only needs the filtered
cross term ``F_h (X'⊙Y') F_wᵀ`` of its mean-centred images as two float32 GEMMs.
Centring by each image's channel mean leaves the covariance unchanged (the filter
rows sum to one) and keeps float32 rounding far below the 1e-4 agreement target.

Arrays are laid out as (H, W, N, C) internally so filtering a batch of pairs
works on large contiguous slabs (shifted adds for small uniform windows, GEMMs
otherwise) without transposes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest.build._ssim_torch import TorchKernel
from retest.errors import ConfigError, InputValidationError

__all__ = [
    "SSIMParams",
    "SSIMStats",
    "compute_ssim_stats",
    "dssim_pairs",
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
    ``win_size=35`` with the uniform window on 256×256×3 images (SPEC §4.2).
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
        return w / w.sum()
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
    """Per-image SSIM ingredients, float32, in (H', W', N, C) layout.

    With ``μ`` the filtered mean, ``μ'`` the filtered mean of the mean-centred image,
    ``v`` the (co)variance map and ``k = 2·cov_norm``: ``mu_s = √2·μ``,
    ``m = √k·μ'``, ``mu2h = μ² + C1/2``, ``varh = v + C2/2``; ``centred`` is the
    centred image in (H, W, N, C) layout. For a pair,
    ``SSIM map = (mu_s·mu_s' + C1)(k·F(x'y') − m·m' + C2) / ((mu2h + mu2h')(varh + varh'))``.
    """

    centred: NDArray[np.float32]
    mu_s: NDArray[np.float32]
    m: NDArray[np.float32]
    mu2h: NDArray[np.float32]
    varh: NDArray[np.float32]
    params: SSIMParams
    c1: float
    c2: float

    @property
    def n(self) -> int:
        return int(self.mu_s.shape[2])


def _as_nhwc(images: ArrayLike, name: str) -> NDArray[np.generic]:
    a = np.asarray(images)
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4:
        raise InputValidationError(
            f"{name} must have shape (n, H, W) or (n, H, W, C). Got {a.shape}."
        )
    if a.dtype.kind not in "uif":
        raise InputValidationError(f"{name} must be numeric. Got dtype {a.dtype}.")
    return a


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
    """F_h · x · F_wᵀ for x in (H, W, N, C) layout → (H', W', N, C)."""
    h, w, n, c = x.shape
    t = (fh @ x.reshape(h, -1)).reshape(fh.shape[0], w, n * c)
    return np.matmul(fw, t).reshape(fh.shape[0], fw.shape[0], n, c)


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
    a = _as_nhwc(images, name)
    _, h, w, _ = a.shape
    ws = p.resolved_win_size()
    if ws % 2 != 1 or ws < 3:
        raise ConfigError(f"win_size must be an odd integer ≥ 3. Got {ws}.")
    if ws > min(h, w):
        raise InputValidationError(
            f"win_size {ws} exceeds the {h}×{w} {name}; use an odd win_size ≤ {min(h, w)}."
        )
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise InputValidationError(f"{name} contain NaN or infinite pixels.")
    rng = _data_range(p, a.dtype)
    fh, fw = filter_matrix(h, p), filter_matrix(w, p)
    k = 2.0 * _cov_norm(p)
    c1, c2 = (p.K1 * rng) ** 2, (p.K2 * rng) ** 2
    x = np.ascontiguousarray(a.transpose(1, 2, 0, 3), dtype=np.float64)  # (H, W, N, C)
    xc = x - x.mean(axis=(0, 1), keepdims=True)
    mu_c = _filt(fh, fw, xc)
    mu = mu_c + (x - xc)[:1, :1]
    var = (k / 2.0) * (_filt(fh, fw, xc * xc) - mu_c**2)

    def f32(v: NDArray[np.float64]) -> NDArray[np.float32]:
        return np.ascontiguousarray(v, dtype=np.float32)

    return SSIMStats(
        centred=f32(xc),
        mu_s=f32(np.sqrt(2.0) * mu),
        m=f32(np.sqrt(k) * mu_c),
        mu2h=f32(mu**2 + c1 / 2),
        varh=f32(var + c2 / 2),
        params=p,
        c1=c1,
        c2=c2,
    )


def _check_compatible(q: SSIMStats, r: SSIMStats) -> None:
    if (
        q.params != r.params
        or q.centred.shape[:2] != r.centred.shape[:2]
        or (q.centred.shape[3] != r.centred.shape[3])
    ):
        raise InputValidationError(
            "SSIM needs both image sets at one size and one parameter set: "
            f"{q.centred.shape[:2]}×{q.centred.shape[3]} vs "
            f"{r.centred.shape[:2]}×{r.centred.shape[3]}. Resize both sides first."
        )


def _torch_kernel(q: SSIMStats, r: SSIMStats, batch: int, torch: Any) -> TorchKernel:
    _check_compatible(q, r)
    h, w = r.centred.shape[:2]
    p = r.params
    ws = p.resolved_win_size()
    k = 2.0 * _cov_norm(p)
    box = not p.gaussian_weights
    fh = ((1.0 if box else k) * filter_matrix(h, p)).astype(np.float32)
    fw = filter_matrix(w, p).astype(np.float32)
    return TorchKernel(torch, q, r, batch, fh, fw, box, k / ws**2 if box else 1.0)


def _resolve_backend(backend: str) -> Any:
    """The torch module for 'torch', None (numpy kernel) for 'numpy' and 'auto'.

    'auto' is numpy: on the benchmark machine the two kernels were within run-to-run
    noise of each other (bench_ssim.py: numpy 55–66k, torch 35–65k pairs/s), and
    the numpy one leaves torch's process-wide thread setting alone.
    """
    if backend not in ("auto", "numpy", "torch"):
        raise ConfigError(
            f"backend must be 'auto', 'numpy' or 'torch'. Got {backend!r}."
        )
    if backend in ("numpy", "auto"):
        return None
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is optional
        if backend == "torch":
            raise ConfigError(
                "backend 'torch' needs torch: pip install 'retest[torch]'."
            ) from None
        return None
    return torch


class _Kernel:
    """Reusable buffers and filters for one (query stats, reference stats) pairing.

    Uniform windows up to 11 wide are applied as shifted adds (fewer operations
    than a dense 32-wide GEMM); other windows as GEMMs with the filter matrices.
    """

    def __init__(self, q: SSIMStats, r: SSIMStats, batch: int) -> None:
        _check_compatible(q, r)
        self.q, self.r, self.batch = q, r, batch
        h, w, _, c = r.centred.shape
        p = r.params
        self.ws = p.resolved_win_size()
        self.box = not p.gaussian_weights and self.ws <= 11
        k = 2.0 * _cov_norm(p)
        self.scale = k / self.ws**2 if self.box else 1.0
        self.fh = (k * filter_matrix(h, p)).astype(np.float32)
        self.fw = filter_matrix(w, p).astype(np.float32)
        hp, wp = self.fh.shape[0], self.fw.shape[0]
        self.shape = (h, w, hp, wp, c)
        self.bufs = [np.empty(h * w * batch * c, np.float32) for _ in range(4)]
        self.tiled: tuple[int, list[NDArray[np.float32]]] | None = None

    def _query(self, qi: NDArray[np.intp], nb: int) -> list[NDArray[np.float32]]:
        q = self.q
        fields = (q.centred, q.m, q.mu_s, q.mu2h, q.varh)
        if (qi == qi[0]).all():  # one query: tile once, reuse for every batch
            s0 = int(qi[0])
            if self.tiled is None or self.tiled[0] != s0:
                reps = (1, 1, self.batch, 1)
                tiles = [np.tile(f[:, :, s0 : s0 + 1], reps) for f in fields]
                tiles[0] *= np.float32(self.scale)
                self.tiled = (s0, tiles)
            return [t[:, :, :nb] for t in self.tiled[1]]
        out = [np.take(f, qi, axis=2) for f in fields]
        if self.scale != 1.0:
            out[0] *= np.float32(self.scale)
        return out

    def _filter(self, prod: NDArray[np.float32], nb: int) -> NDArray[np.float32]:
        h, w, hp, wp, c = self.shape
        if self.box:
            return self._box(prod, nb)
        t = self.bufs[1][: hp * w * nb * c].reshape(hp, w * nb * c)
        np.matmul(self.fh, prod.reshape(h, -1), out=t)
        t3 = t.reshape(hp, w, nb * c)
        g = self.bufs[2][: hp * wp * nb * c].reshape(hp, wp, nb * c)
        for i in range(hp):
            np.matmul(self.fw, t3[i], out=g[i])
        g += self.r.c2
        return g.reshape(hp, wp, nb, c)

    def _box(self, prod: NDArray[np.float32], nb: int) -> NDArray[np.float32]:
        """Sliding-window sums along H then W (two adds per output, any width).

        ``C2`` is added to the first row so that it rides along every window sum.
        """
        _, w, hp, wp, c = self.shape
        ws = self.ws
        t = self.bufs[1][: hp * w * nb * c].reshape(hp, w, nb, c)
        prod[:ws].sum(axis=0, out=t[0])
        t[0] += self.r.c2 / ws
        for i in range(1, hp):
            np.add(t[i - 1], prod[i + ws - 1], out=t[i])
            t[i] -= prod[i - 1]
        g = self.bufs[2][: hp * wp * nb * c].reshape(hp, wp, nb, c)
        if ws <= 9:  # shifted adds touch big contiguous blocks; sliding would not
            np.add(t[:, 0:wp], t[:, 1 : wp + 1], out=g)
            for j in range(2, ws):
                g += t[:, j : j + wp]
            return g
        t[:, :ws].sum(axis=1, out=g[:, 0])
        for j in range(1, wp):
            np.add(g[:, j - 1], t[:, j + ws - 1], out=g[:, j])
            g[:, j] -= t[:, j - 1]
        return g

    def run(self, qi: NDArray[np.intp], ri: NDArray[np.intp]) -> NDArray[np.float64]:
        """Mean SSIM of pairs (q[qi], r[ri]); at most ``batch`` pairs."""
        r, nb = self.r, ri.size
        r0 = int(ri[0])
        contiguous = int(ri[-1]) - r0 == nb - 1 and bool((np.diff(ri) == 1).all())

        def tr(v: NDArray[np.float32]) -> NDArray[np.float32]:
            return v[:, :, r0 : r0 + nb] if contiguous else np.take(v, ri, axis=2)

        xc, qm, qmu, qmu2, qvar = self._query(qi, nb)
        h, w, hp, wp, c = self.shape
        prod = self.bufs[0][: h * w * nb * c].reshape(h, w, nb, c)
        np.multiply(tr(r.centred), xc, out=prod)
        g = self._filter(prod, nb)  # k·F(x'y') + C2 (the scale rides on the query)
        a = self.bufs[3][: hp * wp * nb * c].reshape(hp, wp, nb, c)
        b = self.bufs[0][: hp * wp * nb * c].reshape(hp, wp, nb, c)
        np.multiply(tr(r.m), qm, out=a)
        g -= a
        np.multiply(tr(r.mu_s), qmu, out=a)
        a += r.c1
        g *= a
        np.add(tr(r.mu2h), qmu2, out=a)
        np.add(tr(r.varh), qvar, out=b)
        a *= b
        g /= a
        return g.sum(axis=(0, 1)).sum(axis=1, dtype=np.float64) / (hp * wp * c)


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

    Pairs are processed in batches (default 64 pairs with torch, 48 with numpy)
    by ``n_threads`` threads (default: CPU count, at most 4); numpy, BLAS and torch
    release the GIL, and BLAS/torch are limited to one thread inside the pool so
    the threads do not oversubscribe the cores. ``backend`` 'auto' means numpy
    (measured faster); 'torch' runs the torch kernel; both agree with skimage to
    ~1e-6. Pairs sharing a query in a run are cheapest (the query is
    tiled once); sort pairs by ``qi`` when possible.
    """
    torch = _resolve_backend(backend)
    batch = batch or (64 if torch is not None else 48)
    qa = np.asarray(qi, dtype=np.intp).ravel()
    ra = np.asarray(ri, dtype=np.intp).ravel()
    if qa.shape != ra.shape:
        raise InputValidationError(
            f"qi and ri must pair up: {qa.size} query indices, {ra.size} reference indices."
        )
    for arr, st, nm in ((qa, q, "qi"), (ra, r, "ri")):
        if arr.size and (arr.min() < 0 or arr.max() >= st.n):
            raise InputValidationError(
                f"{nm} must index rows in [0, {st.n}). Got {int(arr.min())}..{int(arr.max())}."
            )
    out = np.empty(qa.size, dtype=np.float64)
    if qa.size == 0:
        return out
    starts = list(range(0, qa.size, batch))
    threads = max(1, min(n_threads or min(4, _cpu_count()), len(starts)))
    done = [0]

    def work(worker: int) -> None:
        kern = (
            _Kernel(q, r, batch) if torch is None else _torch_kernel(q, r, batch, torch)
        )
        for s0 in starts[worker::threads]:
            out[s0 : s0 + batch] = kern.run(qa[s0 : s0 + batch], ra[s0 : s0 + batch])
            done[0] += 1
            if worker == 0:
                report(progress, "ssim", min(qa.size, done[0] * batch), qa.size)

    torch_threads = torch.get_num_threads() if torch is not None else 0
    try:
        if torch is not None:
            torch.set_num_threads(1)
        if threads == 1:
            work(0)
        else:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1), ThreadPoolExecutor(threads) as pool:
                list(pool.map(work, range(threads)))
    finally:
        if torch is not None:
            torch.set_num_threads(torch_threads)
    report(progress, "ssim", qa.size, qa.size)
    return out


def _cpu_count() -> int:
    import os

    return (
        len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1)
    )


def dssim_pairs(
    q: SSIMStats, r: SSIMStats, qi: ArrayLike, ri: ArrayLike, **kwargs: object
) -> NDArray[np.float64]:
    """DSSIM = (1 − SSIM) / 2 for pairs (0 = identical); see :func:`ssim_pairs`."""
    return (1.0 - ssim_pairs(q, r, qi, ri, **kwargs)) / 2.0  # type: ignore[arg-type]


def ssim_one_to_many(
    query: ArrayLike,
    images: ArrayLike,
    params: SSIMParams | None = None,
    **kwargs: object,
) -> NDArray[np.float64]:
    """SSIM of one image (H, W[, C]) against each of ``images`` (n, H, W[, C])."""
    qarr = np.asarray(query)[None]
    qs = compute_ssim_stats(qarr, params, name="query")
    rs = compute_ssim_stats(images, params, name="images")
    n = rs.n
    return ssim_pairs(qs, rs, np.zeros(n, np.intp), np.arange(n), **kwargs)  # type: ignore[arg-type]


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
