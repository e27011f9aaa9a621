"""The SSIM kernels behind :mod:`retest.dedup.ssim`: per-image statistics and pairs.

The compiled loops in ``_ssim_kernel.c`` and the numpy expressions here do the same
float64 operations in the same order (window taps applied row by row, then column
by column; the map's mean summed in four fixed lanes), so both backends give the
same values. The compiled loops are used when a C compiler is present and every
cropped output sees all window taps; the numpy ones otherwise (with dense filter
matrices when the window has reflected border taps). Each kernel instance belongs
to one thread.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from retest import _native


class SSIMStats(Protocol):
    """What the kernels read of :class:`retest.dedup.ssim.SSIMStats` (a protocol,
    so that this module does not import the one that imports it)."""

    @property
    def image(self) -> NDArray[Any]: ...
    @property
    def c1(self) -> float: ...
    @property
    def c2(self) -> float: ...


_P = ctypes.c_void_p
_I32, _I64, _F64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_double
_BOX_PAIR_ARGS: list[Any] = [_I64, *[_P] * 4, *[_I32] * 6, *[_F64] * 4, *[_P] * 3]
_PAIR_ARGS: list[Any] = [
    _I64,
    _P,
    _P,
    _I32,
    _P,
    _P,
    *[_I32] * 7,
    _P,
    *[_F64] * 4,
    _P,
    _P,
]


def image_kind(images: NDArray[Any]) -> int:
    """0 for uint8 storage, 1 for float64 (the two layouts the C loops read)."""
    return 0 if images.dtype == np.uint8 else 1


class Native:
    """The two compiled entry points with their argument types."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.pairs = _native.function(lib, "ssim_pairs_f64", _PAIR_ARGS)
        self.box_pairs = _native.function(lib, "ssim_pairs_box_u8", _BOX_PAIR_ARGS)


def box_window(dtype: np.dtype[Any], taps: NDArray[np.float64] | None) -> int:
    """The side ``L`` when uint8 images meet a uniform window whose sums of pixel
    products stay exact in int32 (``L²·255² < 2³¹``, up to L = 181), else 0.

    Then every window sum is an exact integer computed from the pixels per pair,
    and nothing per image is stored (:class:`BoxKernel`)."""
    if dtype != np.uint8 or taps is None or not (taps == taps[0]).all():
        return 0
    return taps.size if taps.size**2 * 255**2 < 2**31 else 0


def box_sums(x: NDArray[np.int64], hp: int, wp: int, size: int) -> NDArray[np.int64]:
    """Exact ``size × size`` window sums of (b, H, W, C) integers, cropped."""
    t = x[:, :hp].copy()
    for i in range(1, size):
        t += x[:, i : i + hp]
    out = t[:, :, :wp].copy()
    for i in range(1, size):
        out += t[:, :, i : i + wp]
    return out


def taps_along(
    x: NDArray[np.float64], axis: int, n: int, taps: NDArray[np.float64], off: int
) -> NDArray[np.float64]:
    """``Σ_i taps[i] · x[off + i : off + i + n]`` along ``axis``, in the C loop's order
    (the taps are symmetric: uniform or gaussian)."""

    def sl(i: int) -> tuple[slice, ...]:
        s = [slice(None)] * x.ndim
        s[axis] = slice(off + i, off + i + n)
        return tuple(s)

    h = taps.size // 2  # symmetric taps: centre, then pairs (as the C loop)
    acc: NDArray[np.float64] = taps[h] * x[sl(h)]
    for i in range(h):
        acc += taps[i] * (x[sl(i)] + x[sl(taps.size - 1 - i)])
    return acc


def window_filter(
    x: NDArray[np.float64],
    taps: NDArray[np.float64] | None,
    off: int,
    fh: NDArray[np.float64],
    fw: NDArray[np.float64],
) -> NDArray[np.float64]:
    """``F(x)`` cropped, for a batch (b, H, W, C): the taps when every output sees
    all of them, else the dense filter matrices (reflected border taps folded in)."""
    if taps is None:
        dense: NDArray[np.float64] = np.einsum(
            "ih,jw,bhwc->bijc", fh, fw, x, optimize=True
        )
        return dense
    t = taps_along(x, 1, fh.shape[0], taps, off)
    return taps_along(t, 2, fw.shape[0], taps, off)


def lane_mean(maps: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mean of each map (b, …) summed like the C loop: four lanes, then the tail."""
    flat = maps.reshape(maps.shape[0], -1)
    m = flat.shape[1]
    body = m - m % 4
    lanes = np.zeros((flat.shape[0], 4))
    for e in range(0, body, 4):  # sequential per lane, as in C
        lanes += flat[:, e : e + 4]
    acc = (lanes[:, 0] + lanes[:, 1]) + (lanes[:, 2] + lanes[:, 3])
    for e in range(body, m):
        acc += flat[:, e]
    out: NDArray[np.float64] = acc / float(m)
    return out


def ssim_map(
    g: NDArray[np.float64],
    mx: NDArray[np.float64],
    my: NDArray[np.float64],
    vx: NDArray[np.float64],
    vy: NDArray[np.float64],
    k: float,
    c1: float,
    c2: float,
) -> NDArray[np.float64]:
    """The SSIM map from ``G = F(x·y)`` and the two images' statistics."""
    ab = mx * my
    num = (2.0 * ab + c1) * (k * (g - ab) + c2)
    den = (mx * mx + my * my + c1) * (vx + vy)
    out: NDArray[np.float64] = num / den
    return out


class NativeKernel:
    """Pairs through the compiled loop (statistics from the pixels, per pair)."""

    def __init__(
        self,
        fn: Native,
        q: SSIMStats,
        r: SSIMStats,
        taps: NDArray[np.float64],
        off: int,
        cov_norm: float,
    ) -> None:
        self.fn, self.q, self.r, self.taps, self.off = fn, q, r, taps, off
        self.cov_norm = cov_norm
        _, h, w, c = r.image.shape
        hp, wp = h - 2 * off - taps.size + 1, w - 2 * off - taps.size + 1
        self.dims = (h, w, c, hp, wp)
        self.work = np.empty(3 * h * w * c + hp * w * c + 5 * hp * wp * c)

    def run(self, qi: NDArray[np.int64], ri: NDArray[np.int64]) -> NDArray[np.float64]:
        q, r, out = self.q, self.r, np.empty(qi.size, np.float64)
        h, w, c, hp, wp = self.dims
        self.fn.pairs(
            qi.size,
            qi.ctypes.data,
            ri.ctypes.data,
            image_kind(r.image),
            q.image.ctypes.data,
            r.image.ctypes.data,
            h,
            w,
            c,
            hp,
            wp,
            self.taps.size,
            self.off,
            self.taps.ctypes.data,
            self.cov_norm,
            2.0 * self.cov_norm,
            r.c1,
            r.c2,
            self.work.ctypes.data,
            out.ctypes.data,
        )
        return out


Maps = tuple[NDArray[Any], NDArray[np.float64], NDArray[np.float64]]


class NumpyKernel:
    """The same map as whole-batch numpy expressions (N, H, W, C layout), from
    ``(image, mu, varh)`` of each side, computed once per image (:func:`image_maps`)."""

    def __init__(
        self,
        q: Maps,
        r: Maps,
        consts: tuple[float, float, float],
        taps: NDArray[np.float64] | None,
        off: int,
        fh: NDArray[np.float64],
        fw: NDArray[np.float64],
    ) -> None:
        self.q, self.r, self.consts = q, r, consts
        self.taps, self.off, self.fh, self.fw = taps, off, fh, fw

    def run(self, qi: NDArray[np.int64], ri: NDArray[np.int64]) -> NDArray[np.float64]:
        (qx, qm, qv), (rx, rm, rv) = self.q, self.r
        prod = qx[qi].astype(np.float64) * rx[ri].astype(np.float64)
        g = window_filter(prod, self.taps, self.off, self.fh, self.fw)
        k, c1, c2 = self.consts
        return lane_mean(ssim_map(g, qm[qi], rm[ri], qv[qi], rv[ri], k, c1, c2))


def image_maps(
    image: NDArray[Any],
    taps: NDArray[np.float64] | None,
    off: int,
    fh: NDArray[np.float64],
    fw: NDArray[np.float64],
    cov_norm: float,
    c2: float,
) -> Maps:
    """``(image, mu, varh)`` for every image, as the C loop computes them per pair."""
    n, h, w, c = image.shape
    mu = np.empty((n, fh.shape[0], fw.shape[0], c))
    varh = np.empty_like(mu)
    step = max(1, (1 << 22) // (h * w * c))  # float64 temporaries of ≈ 32 MB
    for s0 in range(0, n, step):
        x = image[s0 : s0 + step].astype(np.float64)
        m = window_filter(x, taps, off, fh, fw)
        s2 = window_filter(x * x, taps, off, fh, fw)
        mu[s0 : s0 + step] = m
        varh[s0 : s0 + step] = cov_norm * (s2 - m * m) + c2 / 2.0
    return image, mu, varh


class BoxKernel:
    """uint8 pairs under a uniform window (see :func:`box_window`): compiled loop
    when ``fn`` is given, else the same operations in numpy."""

    def __init__(
        self,
        fn: Native | None,
        q: SSIMStats,
        r: SSIMStats,
        size: int,
        cov_norm: float,
    ) -> None:
        self.fn, self.q, self.r, self.size, self.cov_norm = fn, q, r, size, cov_norm
        _, h, w, c = r.image.shape
        hp, wp = h - size + 1, w - size + 1
        self.dims = (h, w, c, hp, wp)
        self.iwork = np.empty(h * w * c + hp * w * c + 5 * hp * wp * c, np.int32)
        self.vals = np.empty(hp * wp * c)

    def run(self, qi: NDArray[np.int64], ri: NDArray[np.int64]) -> NDArray[np.float64]:
        q, r, out = self.q, self.r, np.empty(qi.size, np.float64)
        h, w, c, hp, wp = self.dims
        if self.fn is None:
            return self._numpy(qi, ri)
        self.fn.box_pairs(
            qi.size,
            qi.ctypes.data,
            ri.ctypes.data,
            q.image.ctypes.data,
            r.image.ctypes.data,
            h,
            w,
            c,
            hp,
            wp,
            self.size,
            self.cov_norm,
            2.0 * self.cov_norm,
            r.c1,
            r.c2,
            self.iwork.ctypes.data,
            self.vals.ctypes.data,
            out.ctypes.data,
        )
        return out

    def _numpy(
        self, qi: NDArray[np.int64], ri: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        _, _, _, hp, wp = self.dims
        x = self.q.image[qi].astype(np.int64)
        y = self.r.image[ri].astype(np.int64)
        s = 1.0 / (float(self.size) * float(self.size))

        def sums(v: NDArray[np.int64]) -> NDArray[np.float64]:
            out: NDArray[np.float64] = box_sums(v, hp, wp, self.size).astype(np.float64)
            out *= s
            return out

        a, b, g = sums(x), sums(y), sums(x * y)
        c2h, cn, k = self.r.c2 / 2.0, self.cov_norm, 2.0 * self.cov_norm
        va = cn * (sums(x * x) - a * a) + c2h
        vb = cn * (sums(y * y) - b * b) + c2h
        ab = a * b
        num = (2.0 * ab + self.r.c1) * (k * (g - ab) + self.r.c2)
        return lane_mean(num / ((a * a + b * b + self.r.c1) * (va + vb)))
