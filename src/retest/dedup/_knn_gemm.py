"""Scores straight from stored reference rows: the native packed GEMM (``_knn_gemm.c``).

The BLAS path converts each reference chunk to a float32 copy and multiplies
that; the BLAS then packs the copy again. :class:`PackedQueries` instead reads
the rows in their stored type (float16, float32 or uint8), converting and
packing 16 rows at a time into a buffer that stays in the L1 cache, and
multiplies them at once against every query. On the 1 M float16 benchmark's
shape (256 queries, 8,192-row chunks, d = 4,096) it runs at the rate of
OpenBLAS's best float32 product on data already converted, and a kNN task no
longer pays the conversion or OpenBLAS's transposing pack (benchmarks/README.md).

The sums are float32 fused multiply-adds in blocks of 256 terms: one summation
order of the float32 inner product, which is what :mod:`retest.dedup.knn`'s
error bound covers. Norms come out bit-equal to the float32 path's.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest import _native

__all__ = ["PackedQueries", "rows_gemm_applies"]

_KINDS = {np.dtype(np.float16): 0, np.dtype(np.float32): 1, np.dtype(np.uint8): 2}
LD_PAD = 16
"""Scores are written with rows ``n + LD_PAD`` floats apart: rows exactly 32 KiB
apart (8,192 references) all fall in one cache set and evict each other."""


class _Lib:
    def __init__(self, lib: ctypes.CDLL) -> None:
        p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        self.size = lib.rows_gemm_packed_size
        self.size.argtypes, self.size.restype = [i64, i64], i64
        self.pack = _native.function(
            lib, "rows_gemm_pack_queries", [i64, i64, i64, p, i64, p]
        )
        self.gemm = _native.function(
            lib, "rows_gemm", [i64, i64, i64, i64, p, p, i64, i32, p, i64, p, p, p]
        )


_LIB: list[_Lib | None] = []


def _lib() -> _Lib | None:
    """The compiled kernel, or ``None`` (no compiler, ``RETEST_NATIVE=0``, or a
    build without AVX2/FMA/F16C)."""
    if not _LIB:
        lib = _native.load("dedup/_knn_gemm")
        ok = lib is not None and bool(lib.rows_gemm_available())
        _LIB.append(_Lib(lib) if ok and lib is not None else None)
    return _LIB[0]


_NR = 16  # references per micro-kernel (the C file's NR)
_L2_BYTES = 512 * 2**10  # when the OS does not say


def block_terms(nq: int) -> int:
    """Terms per GEMM block (a multiple of 8, 256 to 2,048): as many as keep the
    packed queries' block (``nq`` rounded up to 6, × terms, float32) within one
    core's L2 cache. More terms mean fewer read-add-write passes over the
    scores — with 64 queries, 2,048-term blocks ran 1.2× faster than 256 — but
    blocks that spill the L2 slow every micro-kernel (2,000 queries: 0.8×).
    Beyond ~500 queries even 256 terms spill it; the queries' block then streams
    from L3, which still ran at the BLAS's rate (1,000 float16 queries: 1.09× the
    convert-then-BLAS path; 2,000 uint8: 1.03×), while packing all of a block's
    panels first and taking the queries in L2-sized blocks ran at 0.94-0.98."""
    l2 = _l2_bytes()
    nqp = -(-max(nq, 1) // 6) * 6
    return int(min(2048, max(256, l2 // (4 * nqp) // 8 * 8)))


def _l2_bytes() -> int:
    """One core's L2 cache (sysfs, then sysconf, else :data:`_L2_BYTES`)."""
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text()
        units = {"K": 2**10, "M": 2**20}
        text = text.strip()
        return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_LEVEL2_CACHE_SIZE")) or _L2_BYTES
    except (ValueError, OSError, AttributeError):
        return _L2_BYTES


def rows_gemm_applies(rows: Any) -> bool:
    """Whether :meth:`PackedQueries.scores` can read ``rows`` (2-d, float16,
    float32 or uint8, values contiguous within a row, aligned) — the one rule
    every scorer asks."""
    if not isinstance(rows, np.ndarray) or rows.ndim != 2:
        return False
    dt = rows.dtype
    if dt not in _KINDS or _lib() is None:
        return False
    isz = dt.itemsize
    return bool(
        rows.strides[1] == isz
        and rows.strides[0] % isz == 0
        and rows.ctypes.data % isz == 0
    )


class PackedQueries:
    """Float32 queries packed once for :meth:`scores` over many reference chunks."""

    def __init__(self, xq: NDArray[np.float32]) -> None:
        lib = _lib()
        assert lib is not None and xq.dtype == np.float32
        self._lib = lib
        self.nq, self.d = xq.shape
        self.kc = block_terms(self.nq)
        self.packed = np.empty(lib.size(self.nq, self.d), dtype=np.float32)
        xq = np.ascontiguousarray(xq)
        lib.pack(
            self.nq, self.d, self.kc, xq.ctypes.data, self.d, self.packed.ctypes.data
        )
        self._panel = _aligned(self.kc * _NR)
        self._scratch = np.empty(0)

    def scores(
        self, rows: Any, out: NDArray[np.float32], norms: NDArray[np.float64] | None
    ) -> None:
        """``out = xq · rowsᵀ`` (``out`` (nq, n) float32 with unit column stride);
        with ``norms``, also the rows' float64 squared norms, as
        :func:`retest.dedup._knn_chunks.chunk_norms` of their float32 values.
        ``rows`` must pass :func:`rows_gemm_applies`."""
        n = rows.shape[0]
        if n == 0:
            return
        assert out.shape == (self.nq, n) and (out.strides[1] == 4 or n == 1)
        assert rows.shape[1] == self.d and rows_gemm_applies(rows)
        scratch = None
        if norms is not None:
            assert norms.shape == (n,) and norms.flags.c_contiguous
            if self._scratch.size < 8 * n:
                self._scratch = np.empty(8 * n)
            scratch = self._scratch.ctypes.data
        self._lib.gemm(
            self.nq,
            n,
            self.d,
            self.kc,
            self.packed.ctypes.data,
            rows.ctypes.data,
            rows.strides[0],
            _KINDS[rows.dtype],
            out.ctypes.data,
            out.strides[0] // 4,
            self._panel.ctypes.data,
            None if norms is None else norms.ctypes.data,
            scratch,
        )


def _aligned(n: int) -> NDArray[np.float32]:
    """n float32 values starting on a 64-byte boundary (the panel's aligned loads)."""
    raw = np.empty(n + 16, dtype=np.float32)
    off = (-raw.ctypes.data % 64) // 4
    return raw[off : off + n]
