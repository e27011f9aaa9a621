"""The two SSIM pair kernels behind :func:`retest.dedup.ssim.ssim_pairs`.

``NativeKernel`` calls the fused C loop in ``_ssim_kernel.c`` (one pass per pair
through cache-resident buffers; 2–4× the numpy kernel). ``NumpyKernel`` is the
same algebra as whole-batch numpy expressions, used when no C compiler is present
or the window has reflected border taps. Both take a batch of pairs and return
mean SSIM per pair in float64; each instance belongs to one thread.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from retest import _native

if TYPE_CHECKING:
    from retest.dedup.ssim import SSIMStats

_P = ctypes.c_void_p
_I32, _I64, _F64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_double
_ARGTYPES: list[Any] = [
    _I64,
    _P,
    _P,
    *[_I32] * 7,
    _P,
    *[_P] * 5,
    *[_P] * 4,
    _F64,
    _F64,
    _P,
    _P,
]


def bind(lib: ctypes.CDLL) -> Any:
    return _native.function(lib, "ssim_pairs_f32", _ARGTYPES)


def query_terms(q: SSIMStats, k: float) -> list[NDArray[np.float32]]:
    """Query-side factors: ``k·x'``, ``k·μ'``, ``2μ``, ``μ² + C1``, ``v + C2/2``."""
    mu = q.mc + q.cbar[:, None, None, :]
    f32 = np.float32
    return [
        np.ascontiguousarray(q.centred * f32(k)),
        np.ascontiguousarray(q.mc * f32(k)),
        np.ascontiguousarray(mu * f32(2.0)),
        np.ascontiguousarray(mu * mu + f32(q.c1)),
        q.varh,
    ]


class NativeKernel:
    """Pairs through the compiled loop; ``terms`` are shared, the work buffer is not."""

    def __init__(
        self,
        fn: Any,
        terms: list[NDArray[np.float32]],
        r: SSIMStats,
        taps: NDArray[np.float32],
        off: int,
    ) -> None:
        self.fn, self.terms, self.r, self.taps, self.off = fn, terms, r, taps, off
        _, h, w, c = r.centred.shape
        _, hp, wp, _ = r.mc.shape
        self.dims = (h, w, c, hp, wp)
        self.work = np.empty(h * w * c + hp * w * c + hp * wp * c + wp * c, np.float32)

    def run(self, qi: NDArray[np.int64], ri: NDArray[np.int64]) -> NDArray[np.float64]:
        r, out = self.r, np.empty(qi.size, np.float64)
        h, w, c, hp, wp = self.dims
        ptrs = [a.ctypes.data for a in self.terms]
        self.fn(
            qi.size, qi.ctypes.data, ri.ctypes.data, h, w, c, hp, wp,
            self.taps.size, self.off, self.taps.ctypes.data, *ptrs,
            r.centred.ctypes.data, r.mc.ctypes.data, r.cbar.ctypes.data,
            r.varh.ctypes.data, r.c1, r.c2, self.work.ctypes.data, out.ctypes.data,
        )  # fmt: skip
        return out


class NumpyKernel:
    """The same map as whole-batch numpy expressions (N, H, W, C layout)."""

    def __init__(
        self,
        q: SSIMStats,
        r: SSIMStats,
        k: float,
        taps: NDArray[np.float32] | None,
        off: int,
        fh: NDArray[np.float32],
        fw: NDArray[np.float32],
    ) -> None:
        self.q, self.r, self.k = q, r, np.float32(k)
        self.taps, self.off, self.fh, self.fw = taps, off, fh, fw

    def _filter(self, prod: NDArray[np.float32]) -> NDArray[np.float32]:
        hp, wp = self.fh.shape[0], self.fw.shape[0]
        if self.taps is None:  # reflected border taps: dense filter matrices
            dense: NDArray[np.float32] = np.einsum(
                "ih,jw,bhwc->bijc", self.fh, self.fw, prod, optimize=True
            )
            return dense
        flat = bool(
            (self.taps == self.taps[0]).all()
        )  # box: sums, one scale at the end
        g = self._taps_along(self._taps_along(prod, 1, hp, flat), 2, wp, flat)
        if flat:
            g *= self.taps[0] * self.taps[0]
        return g

    def _taps_along(
        self, x: NDArray[np.float32], axis: int, n: int, flat: bool
    ) -> NDArray[np.float32]:
        """``Σ_i taps[i] · x[off + i : off + i + n]`` along ``axis`` (weights 1 if flat)."""
        assert self.taps is not None

        def sl(i: int) -> tuple[slice, ...]:
            s = [slice(None)] * x.ndim
            s[axis] = slice(self.off + i, self.off + i + n)
            return tuple(s)

        acc = x[sl(0)].copy() if flat else self.taps[0] * x[sl(0)]
        for i in range(1, self.taps.size):
            acc += x[sl(i)] if flat else self.taps[i] * x[sl(i)]
        return acc

    def run(self, qi: NDArray[np.int64], ri: NDArray[np.int64]) -> NDArray[np.float64]:
        q, r = self.q, self.r
        one = bool((qi == qi[0]).all())
        qsel = slice(int(qi[0]), int(qi[0]) + 1) if one else qi
        r0 = int(ri[0])  # a run of consecutive references is a view, not a gather
        run = ri.size == int(ri[-1]) - r0 + 1 and bool((np.diff(ri) == 1).all())
        rsel = slice(r0, r0 + ri.size) if run else ri
        prod = r.centred[rsel] * q.centred[qsel]
        g = self._filter(prod)
        g *= self.k
        g += np.float32(r.c2)
        mcx, mcy = q.mc[qsel], r.mc[rsel]
        g -= (self.k * mcx) * mcy
        mux = mcx + q.cbar[qsel][:, None, None, :]
        muy = mcy + r.cbar[rsel][:, None, None, :]
        a = mux * muy
        a *= np.float32(2.0)
        a += np.float32(r.c1)
        g *= a
        np.multiply(muy, muy, out=a)
        a += mux * mux + np.float32(r.c1)
        a *= q.varh[qsel] + r.varh[rsel]
        g /= a
        means: NDArray[np.float64] = g.reshape(g.shape[0], -1).sum(
            axis=1, dtype=np.float64
        )
        means /= g[0].size
        return means
