"""Chunk-level machinery of the exact kNN engine (see :mod:`retest.dedup.knn`).

Reference chunks are scored straight from their stored rows by the packed GEMM
(:mod:`retest.dedup._knn_gemm`) where it applies, else copied into reusable float32
buffers and scored with one BLAS GEMM (a memmap's pages are released after each
chunk either way); running shortlists
keep each query's k' best scores. The selection after each GEMM is one fused C loop
(``_knn_kernel.c``, built on first use by :mod:`retest._native`) that reads each
score once; without a compiler, numpy passes select the same entries. The same
library converts float16 chunks and sums their squared norms in float64 in one
vectorised pass (F16C), the work besides the GEMM that a float16 reference set
pays per query block.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest import _native
from retest._parallel import available_cpus
from retest.dedup._knn_gemm import LD_PAD, PackedQueries, rows_gemm_applies
from retest.errors import ConfigError, InputValidationError

INNER_BLOCK = 4096


class NeedsScale(Exception):
    """A block's squared norms could overflow float32 scores (or are NaN/inf);
    :func:`retest.dedup.knn.knn` then measures the whole input and starts over."""


_MAX_NORM = 2.0**125  # every float32 step is at most 4·max‖·‖² (faiss: ‖x‖²+‖y‖²−2x·y)


def check_norms(norms: NDArray[np.float64]) -> NDArray[np.float64]:
    """``norms`` if no float32 step on their rows can overflow, else
    :class:`NeedsScale`. Reads the norms, not the data: free on the common path."""
    if norms.size and not float(norms.max()) <= _MAX_NORM:
        raise NeedsScale  # NaN compares false too: the input pass names it
    return norms


def safe_abs_limit(d: int) -> float:
    """|value| below which ``d`` features keep every squared norm under 2**124,
    half the limit of :func:`check_norms`: float32 rounding cannot cross it."""
    return math.sqrt(2.0**124 / d)


def _abs_max(a: Any, name: str) -> float:
    """Max |value| of a (possibly memory-mapped) 2-d array, read in row blocks."""
    step = max(1, 2**22 // max(1, a.shape[1]))
    hi = 0.0
    for s in range(0, a.shape[0], step):
        block = np.asarray(a[s : s + step])
        if block.dtype.kind == "f" and not np.isfinite(block).all():
            rows = np.flatnonzero(~np.isfinite(block).all(axis=1)) + s
            raise InputValidationError(
                f"{name} contains NaN or infinite values in rows {rows[:5].tolist()}. "
                "Remove or impute them first."
            )
        hi = max(hi, abs(float(block.max())), abs(float(block.min())))
    return hi


def input_scale(q: Any, refs: Any) -> float:
    """Power-of-two factor that brings the inputs within :func:`safe_abs_limit`.

    Scaling by a power of two is exact in float32 (above the subnormal range), so
    the error bound holds unchanged in the scaled units; exact distances are still
    computed from the original values in float64. Inputs whose squared distances
    could overflow float64 are refused.
    """
    d = q.shape[1]
    hi = max(_abs_max(q, "queries"), _abs_max(refs, "references"))
    lim64 = math.sqrt(np.finfo(np.float64).max / (4 * d))
    if hi > lim64:
        raise InputValidationError(
            f"kNN inputs hold values up to {hi:.3g} in magnitude; with {d} features "
            f"squared distances could overflow float64 (limit {lim64:.3g}). "
            "Divide both sides by a common factor first."
        )
    lim = safe_abs_limit(d)
    if hi <= lim:
        return 1.0
    scale = 2.0 ** -math.ceil(math.log2(hi / lim))
    while hi * scale > lim:
        scale /= 2.0
    return scale


def torch_module() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is optional
        return None
    return torch


def drop_pages(arr: Any, r0: int, r1: int) -> None:
    """Tell the kernel we are done with rows r0:r1 of a memmap (keeps RSS bounded)."""
    mm = getattr(arr, "_mmap", None)
    if not isinstance(arr, np.memmap) or mm is None or r1 <= r0:
        return
    try:
        base = np.frombuffer(mm, dtype=np.uint8, count=1).ctypes.data
        start = arr[r0:r1].ctypes.data - base
        stop = start + (r1 - r0) * abs(arr.strides[0])
        lo = (start // mmap.PAGESIZE) * mmap.PAGESIZE
        mm.madvise(mmap.MADV_DONTNEED, lo, max(0, min(stop, len(mm)) - lo))
    except (ValueError, OSError, AttributeError, TypeError):  # pragma: no cover
        pass


_KEEP_BYTES = 2**28
"""Scratch bytes a thread keeps between calls (see :func:`borrow`)."""
_POOL = threading.local()


def borrow(n: int, dtype: Any) -> NDArray[Any]:
    """A 1-d buffer of at least ``n`` items: one this thread gave back earlier if
    one fits, else a new one. Pass it to :func:`give_back` when done.

    A fresh 128 MiB chunk buffer is a new mapping whose 32,768 pages fault in on
    first write: 0.03-0.1 s, up to a tenth of a Dask worker's 32,768-row shard
    task, paid again by every task. A thread keeps up to 256 MiB of these."""
    free: list[NDArray[Any]] = getattr(_POOL, "free", [])
    fits = [i for i, a in enumerate(free) if a.dtype == dtype and a.size >= n]
    if not fits:
        return _aligned_empty(n, np.dtype(dtype))
    return free.pop(min(fits, key=lambda i: free[i].size))


def _aligned_empty(n: int, dtype: np.dtype[Any]) -> NDArray[Any]:
    """``np.empty(n)`` starting on a 64-byte boundary (a cache line; what the
    non-temporal stores of :func:`streams_into` need)."""
    pad = -(-64 // dtype.itemsize)
    raw = np.empty(n + pad, dtype=dtype)
    skip = (-raw.ctypes.data % 64) // dtype.itemsize
    return raw[skip : skip + n]


def give_back(*arrays: NDArray[Any]) -> None:
    """Return buffers from :func:`borrow`; the largest are kept, within
    :data:`_KEEP_BYTES` per thread (the rest are freed as usual)."""
    pool = [*getattr(_POOL, "free", []), *arrays]
    pool.sort(key=lambda a: a.nbytes)
    kept, total = [], 0
    for a in pool[::-1]:
        if total + a.nbytes <= _KEEP_BYTES:
            kept.append(a)
            total += a.nbytes
    _POOL.free = kept


class Scorer:
    """Float32 scores ``ẽ = ‖y‖² − 2x·y`` (or faiss top lists) per reference chunk.

    Its buffers are borrowed (:func:`borrow`); :meth:`release` gives them back."""

    def __init__(
        self,
        backend: str,
        xq: NDArray[np.float32],
        rows: int,
        xq_m2: NDArray[np.float32] | None = None,
        scale: float = 1.0,
    ) -> None:
        self.backend = backend
        self.scale = scale
        self.xq = xq
        nq, self.d = xq.shape
        # −2·x (exact: a power of two) makes the GEMM yield −2 x·y, saving a pass
        self.xq_m2 = None
        if backend == "numpy" and self.d <= INNER_BLOCK:
            self.xq_m2 = scaled_queries(xq) if xq_m2 is None else xq_m2
        self.rows = rows
        # scores with rows LD_PAD floats longer than needed (see LD_PAD); the
        # float32 chunk buffer is borrowed only if a chunk is converted (load)
        self._held: list[NDArray[Any]] = [borrow(nq * (rows + LD_PAD), np.float32)]
        self.out = self._held[0]
        self._buf: NDArray[np.float32] | None = None
        self._packed: PackedQueries | None = None

    @property
    def buf(self) -> NDArray[np.float32]:
        """The float32 chunk buffer (rows × d), borrowed on first use."""
        if self._buf is None:
            self._held.append(borrow(self.rows * self.d, np.float32))
            self._buf = self._held[-1][: self.rows * self.d].reshape(self.rows, self.d)
        return self._buf

    def release(self) -> None:
        """Give the buffers back for the next scorer of this thread (this one
        must not be used afterwards)."""
        give_back(*self._held)
        self._held = []

    def rows_scores(
        self, refs: Any, r0: int, r1: int, norms: RefNorms
    ) -> tuple[NDArray[np.float32], NDArray[np.float64]] | None:
        """``(−2x·y, ‖y‖²)`` for rows r0:r1 read straight from ``refs`` by the
        packed GEMM (:mod:`retest.dedup._knn_gemm`: no float32 copy of the
        chunk, whichever GEMM engine was picked), the norms filled in ``norms``
        if missing; ``None`` where it does not apply (faiss, scaled input, rows
        longer than one float32 block, or rows it cannot read)."""
        if self.backend == "faiss" or self.scale != 1.0 or self.d > INNER_BLOCK:
            return None
        src = refs[r0:r1]
        if not rows_gemm_applies(src):
            return None
        if self._packed is None:
            xq_m2 = scaled_queries(self.xq) if self.xq_m2 is None else self.xq_m2
            self._packed = PackedQueries(xq_m2)
        n, nq = r1 - r0, self.xq.shape[0]
        g = self.out[: nq * (n + LD_PAD)].reshape(nq, n + LD_PAD)[:, :n]
        missing = not norms.done[r0:r1].all()
        rn = np.empty(n) if missing else None
        self._packed.scores(src, g, rn)
        if rn is not None:
            norms.fill(r0, rn)
        return g, norms.rn[r0:r1]

    def load(
        self, refs: Any, r0: int, r1: int, norms: RefNorms | None = None
    ) -> NDArray[np.float32]:
        """Rows r0:r1 as float32 in the chunk buffer. With ``norms``, float16 rows
        whose norms are still missing get them from the same native pass (the
        values are in registers then; a second pass would read the chunk again)."""
        chunk = self.buf[: r1 - r0]
        src = refs[r0:r1]
        if norms is not None and self.scale == 1.0 and not norms.done[r0:r1].all():
            rn = _f16_load_norms(chunk, src)
            if rn is not None:
                norms.fill(r0, rn)
                return chunk
        _load_scaled(chunk, src, self.scale)
        return chunk

    def scores(
        self, chunk: NDArray[np.float32], rn: NDArray[np.float64]
    ) -> NDArray[Any]:
        n, nq = chunk.shape[0], self.xq.shape[0]
        if self.d > INNER_BLOCK:
            acc = np.zeros((nq, n), dtype=np.float64)
            for b0 in range(0, self.d, INNER_BLOCK):
                b1 = min(self.d, b0 + INNER_BLOCK)
                acc += self.xq[:, b0:b1] @ chunk[:, b0:b1].T
            acc *= -2.0
            acc += rn[None, :]
            return acc
        out = self.out[: nq * n].reshape(nq, n)
        rn32 = rn.astype(np.float32)
        if self.backend == "torch":
            torch = torch_module()
            torch.addmm(
                torch.from_numpy(rn32)[None, :],
                torch.from_numpy(self.xq),
                torch.from_numpy(chunk).T,
                beta=1,
                alpha=-2,
                out=torch.from_numpy(out),
            )
            return out
        assert self.xq_m2 is not None
        np.matmul(self.xq_m2, chunk.T, out=out)
        out += rn32[None, :]
        return out

    def partial_scores(
        self, chunk: NDArray[np.float32], rn: NDArray[np.float64]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32] | None]:
        """Scores for the native selection: ``(−2x·y, rn32)`` when the norms are
        still to be added (numpy engine: the C loop adds them while it reads),
        else ``(ẽ, None)``."""
        if self.xq_m2 is None or self.backend != "numpy":
            return self.scores(chunk, rn), None
        n, nq = chunk.shape[0], self.xq.shape[0]
        out = self.out[: nq * n].reshape(nq, n)
        np.matmul(self.xq_m2, chunk.T, out=out)
        return out, rn.astype(np.float32)


def scaled_queries(xq: NDArray[np.float32]) -> NDArray[np.float32]:
    """``−2·xq``, shared by the chunk threads of one query block."""
    return np.multiply(xq, np.float32(-2.0))


def _chunk_norms(
    chunk: NDArray[np.float32], exact_small_int: bool
) -> NDArray[np.float64]:
    """Squared row norms in float64 (exact for 8-bit integer data)."""
    n, d = chunk.shape
    out = np.empty(n, dtype=np.float64)
    if exact_small_int and d % 128 == 0:
        # squares ≤ 255², so float32 partial sums of 128 of them are exact integers
        for s in range(0, n, 256):
            sq = chunk[s : s + 256] * chunk[s : s + 256]
            out[s : s + 256] = (
                sq.reshape(sq.shape[0], -1, 128).sum(-1).sum(-1, dtype=np.float64)
            )
        return out
    fn = native_kernel()
    if fn is not None and chunk.strides[1] == 4 and n:  # float64 sums, no cast pass
        fn.norms(n, d, chunk.ctypes.data, chunk.strides[0] // 4, out.ctypes.data)
        return out
    for s in range(0, n, 512):
        out[s : s + 512] = np.einsum(
            "ij,ij->i", chunk[s : s + 512], chunk[s : s + 512], dtype=np.float64
        )
    return out


@dataclass
class Plan:
    q_block: int
    chunk: int
    threads: int = 1
    scale: float = 1.0  # power of two applied to both sides (see input_scale)


def make_plan(
    nq: int,
    nr: int,
    d: int,
    budget: int,
    chunk_size: int | None,
    n_threads: int | None = None,
) -> Plan:
    """Block sizes: each chunk thread holds a chunk buffer and a score block."""
    if budget < 2**20:
        raise ConfigError(f"memory_budget must be at least 1 MiB. Got {budget} bytes.")
    if n_threads is not None and n_threads < 1:
        raise ConfigError(f"n_threads must be at least 1. Got {n_threads}.")
    threads = n_threads or min(4, available_cpus())
    chunk = min(nr, chunk_size or 8192)
    chunk = max(1, min(chunk, budget // (4 * 4 * d * threads)))
    n_chunks = -(-nr // chunk)
    threads = max(1, min(threads, n_chunks))
    # equal chunks, a multiple of the thread count: no thread idles at the end
    n_chunks = -(-n_chunks // threads) * threads
    chunk = max(1, -(-nr // n_chunks))
    # queries + their −2·x copy + scores (+ mask and selection temporaries
    # unless the native loop selects while it reads float32 scores)
    per_q = 8 * d + (4 if native_selection(d) else 20) * chunk * threads
    q_block = max(1, min(nq, (budget // 2) // per_q))
    return Plan(q_block=q_block, chunk=chunk, threads=threads)


@dataclass
class Shortlist:
    """Running k' smallest float32 scores per query (ties by index)."""

    vals: NDArray[np.float64]
    idx: NDArray[np.int64]
    bnd: NDArray[np.float64]

    @classmethod
    def empty(cls, nq: int, kp: int) -> Shortlist:
        return cls(
            np.full((nq, kp), np.inf),
            np.full((nq, kp), -1, np.int64),
            np.zeros((nq, kp)),
        )

    def tau(self) -> NDArray[np.float64]:
        return self.vals[:, -1]

    def merge(
        self,
        rows: NDArray[np.int64],
        idx: NDArray[np.int64],
        vals: NDArray[np.float64],
        bnd: NDArray[np.float64],
    ) -> None:
        if rows.size == 0:
            return
        kp = self.vals.shape[1]
        ar, local = _groups(rows)
        nloc = ar.size
        r_all = np.concatenate([np.repeat(np.arange(nloc), kp), local])
        v_all = np.concatenate([self.vals[ar].ravel(), vals])
        i_all = np.concatenate([self.idx[ar].ravel(), idx])
        b_all = np.concatenate([self.bnd[ar].ravel(), bnd])
        order = _row_val_idx_order(r_all, v_all, i_all)
        rs = r_all[order]
        first = np.flatnonzero(np.r_[True, rs[1:] != rs[:-1]])
        rank = np.arange(rs.size) - np.repeat(first, np.diff(np.r_[first, rs.size]))
        keep = order[rank < kp]
        pos = (r_all[keep], rank[rank < kp])
        for arr, src in ((self.vals, v_all), (self.idx, i_all), (self.bnd, b_all)):
            sub = arr[ar]
            sub[pos] = src[keep]
            arr[ar] = sub

    def absorb(
        self,
        scores: NDArray[np.float32],
        rn32: NDArray[np.float32] | None,
        rn: NDArray[np.float64],
        r0: int,
        ex: NDArray[np.int64] | None,
        qn: NDArray[np.float64],
        c: float,
    ) -> None:
        """Native selection + merge of one score block (``scores + rn32``)."""
        fn = native_kernel()
        assert fn is not None and scores.dtype == np.float32
        nq, n = scores.shape
        # the converted arrays are named so they outlive the native call
        ex64 = None if ex is None else np.ascontiguousarray(ex, np.int64)
        ex_p = None if ex64 is None else ex64.ctypes.data
        rn64 = np.ascontiguousarray(rn, np.float64)
        fn.select(
            nq,
            n,
            scores.ctypes.data,
            scores.strides[0] // 4,
            None if rn32 is None else rn32.ctypes.data,
            rn64.ctypes.data,
            r0,
            ex_p,
            qn.ctypes.data,
            c,
            self.vals.shape[1],
            self.vals.ctypes.data,
            self.idx.ctypes.data,
            self.bnd.ctypes.data,
        )

    def merge_list(self, other: Shortlist) -> None:
        """Merge another thread's shortlist (disjoint references) into this one."""
        fn = native_kernel()
        if fn is None:
            rows, col = np.nonzero(other.idx >= 0)
            self.merge(
                rows, other.idx[rows, col], other.vals[rows, col], other.bnd[rows, col]
            )
            return
        nq, kp = self.vals.shape
        tmp = (np.empty(kp), np.empty(kp, np.int64), np.empty(kp))
        arrays = (self.vals, self.idx, self.bnd, other.vals, other.idx, other.bnd)
        fn.merge(nq, kp, *(a.ctypes.data for a in (*arrays, *tmp)))


class _NativeFns:
    def __init__(self, lib: ctypes.CDLL) -> None:
        p, i64, f64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
        self.select = _native.function(
            lib,
            "knn_select_merge",
            [i64, i64, p, i64, p, p, i64, p, p, f64, i64, p, p, p],
        )
        self.merge = _native.function(lib, "knn_merge_lists", [i64, i64, *[p] * 9])
        self.sqdist = _native.function(
            lib, "sqdist_u8", [i64, p, i64, p, i64, p, p, i64, p]
        )
        self.norms = _native.function(lib, "sq_norms_f32", [i64, i64, p, i64, p])
        i32 = ctypes.c_int
        self.f16 = _native.function(lib, "f16_to_f32", [i64, p, p, i32])
        self.f16_norms = _native.function(
            lib, "f16_to_f32_norms", [i64, i64, p, i64, p, i64, p, i32]
        )
        self.f16_diff = _native.function(
            lib, "f16_pair_diff", [i64, i64, p, i64, p, i64, p, p, p]
        )

    def sqdist_u8(
        self,
        queries: NDArray[np.uint8],
        references: NDArray[np.uint8],
        qi: NDArray[np.int64],
        ri: NDArray[np.int64],
        out: NDArray[np.float64],
    ) -> bool:
        """Exact integer ``Σ (x − y)²`` into ``out``; False if the layout does not fit
        (rows must be byte-contiguous uint8)."""
        arrays = (queries, references)
        if any(a.dtype != np.uint8 or a.ndim != 2 or a.strides[1] != 1 for a in arrays):
            return False
        qi = np.ascontiguousarray(qi, np.int64)
        ri = np.ascontiguousarray(ri, np.int64)
        self.sqdist(
            qi.size,
            queries.ctypes.data,
            queries.strides[0],
            references.ctypes.data,
            references.strides[0],
            qi.ctypes.data,
            ri.ctypes.data,
            queries.shape[1],
            out.ctypes.data,
        )
        return True

    def pair_diff_f16(
        self,
        queries: NDArray[Any],
        references: NDArray[Any],
        qi: NDArray[np.int64],
        ri: NDArray[np.int64],
        out: NDArray[np.float64],
    ) -> bool:
        """``out[p] = float64(references[ri[p]]) − float64(queries[qi[p]])``, bit for
        bit numpy's, in one pass; False (nothing done) unless both are aligned
        float16 with value-contiguous rows and ``out`` is C-ordered."""
        arrays = (queries, references)
        if any(
            a.dtype != np.float16 or a.ndim != 2 or a.strides[1] != 2 for a in arrays
        ):
            return False
        if any(a.strides[0] % 2 or a.ctypes.data % 2 for a in arrays):
            return False  # Dask may hand over odd addresses: numpy's path
        if not out.flags.c_contiguous:
            return False
        qi = np.ascontiguousarray(qi, np.int64)
        ri = np.ascontiguousarray(ri, np.int64)
        self.f16_diff(
            qi.size,
            queries.shape[1],
            queries.ctypes.data,
            queries.strides[0] // 2,
            references.ctypes.data,
            references.strides[0] // 2,
            qi.ctypes.data,
            ri.ctypes.data,
            out.ctypes.data,
        )
        return True


_NATIVE_FNS: list[_NativeFns | None] = []


def native_selection(d: int) -> bool:
    """Whether the C loop selects: it reads float32 scores, and rows longer than
    one float32 block are scored in float64."""
    return d <= INNER_BLOCK and native_kernel() is not None


def native_kernel() -> _NativeFns | None:
    """The compiled selection loop (``_knn_kernel.c``), or ``None`` without a compiler
    or with ``RETEST_NATIVE=0`` (the numpy selection gives the same shortlists)."""
    if not _NATIVE_FNS:
        lib = _native.load("dedup/_knn_kernel")
        _NATIVE_FNS.append(None if lib is None else _NativeFns(lib))
    return _NATIVE_FNS[0]


def _groups(rows: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``np.unique(rows, return_inverse=True)``, without a sort when rows are sorted
    (they are: selections come out in row-major order)."""
    if rows.size > 1 and not bool((rows[1:] >= rows[:-1]).all()):
        return np.unique(rows, return_inverse=True)
    new = np.r_[True, rows[1:] != rows[:-1]]
    return rows[new], np.cumsum(new) - 1


def _row_val_idx_order(
    rows: NDArray[np.int64], vals: NDArray[np.float64], idx: NDArray[np.int64]
) -> NDArray[np.intp]:
    """Sort order by (row, value, index); −1 padding sorts after real indices.

    Scores that are float32 values (all but the faiss backend's) pack value and
    index into one uint64 key (IEEE bits made order-preserving), so the sort takes
    two keys instead of three — about twice as fast on the merge's ~500k entries.
    """
    pad = np.where(idx < 0, np.iinfo(np.int64).max, idx)
    v32 = vals.astype(np.float32) + np.float32(0.0)  # −0.0 → +0.0: they tie
    if idx.size == 0 or int(idx.max()) >= 2**32 - 1 or not np.array_equal(v32, vals):
        return np.lexsort((pad, vals, rows))
    bits = v32.view(np.uint32).astype(np.uint64)
    key = np.where(
        bits >> np.uint64(31), ~bits & np.uint64(0xFFFFFFFF), bits | np.uint64(2**31)
    )
    key <<= np.uint64(32)
    key |= np.where(idx < 0, 2**32 - 1, idx).astype(np.uint64)
    return np.lexsort((key, rows))


def nonzero2d(mask: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``np.nonzero`` of a C-ordered 2-d mask, ~10× faster for large sparse masks."""
    flat = np.flatnonzero(mask).astype(np.int64, copy=False)
    return flat // mask.shape[1], flat % mask.shape[1]


def select_topk(
    scores: NDArray[Any], tau: NDArray[np.float64], kp: int, backend: str
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(row, col) of entries that may enter the shortlists."""
    nq, n = scores.shape
    t = tau.astype(scores.dtype)
    mask = scores < t[:, None]
    count = int(np.count_nonzero(mask))
    if count <= 2 * nq * kp + (nq * n) // 16 or kp >= n:
        return nonzero2d(mask)
    if backend == "torch":
        torch = torch_module()
        _, ti = torch.topk(
            torch.from_numpy(scores), kp, dim=1, largest=False, sorted=False
        )
        cols = ti.numpy().astype(np.int64)
    else:
        cols = np.argpartition(scores, kp - 1, axis=1)[:, :kp].astype(np.int64)
    rows = np.repeat(np.arange(nq, dtype=np.int64), kp)
    cols = cols.ravel()
    ok = mask[rows, cols]
    return rows[ok], cols[ok]


def faiss_select(
    xq: NDArray[np.float32],
    qn: NDArray[np.float64],
    chunk: NDArray[np.float32],
    kp: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    import faiss

    n = chunk.shape[0]
    dist, ind = faiss.knn(xq, chunk, min(kp + 1, n))
    rows = np.repeat(np.arange(xq.shape[0], dtype=np.int64), dist.shape[1])
    cols = ind.ravel().astype(np.int64)
    vals = dist.ravel().astype(np.float64) - qn[rows]
    ok = cols >= 0
    return rows[ok], cols[ok], vals[ok]


class RefNorms:
    """Reference norms computed once per row and reused by later query blocks."""

    def __init__(self, nr: int, small_int: bool) -> None:
        self.small_int = small_int
        self.rn = np.zeros(nr)
        self.done = np.zeros(nr, dtype=bool)

    def get(self, chunk: NDArray[np.float32], r0: int) -> NDArray[np.float64]:
        r1 = r0 + chunk.shape[0]
        if not self.done[r0:r1].all():
            self.fill(r0, _chunk_norms(chunk, self.small_int))
        return self.rn[r0:r1]

    def fill(self, r0: int, norms: NDArray[np.float64]) -> None:
        """Record the norms of rows ``r0 : r0 + len(norms)`` (checked for range)."""
        r1 = r0 + norms.shape[0]
        self.rn[r0:r1] = check_norms(norms)
        self.done[r0:r1] = True


def mask_excluded(
    scores: NDArray[Any], ex: NDArray[np.int64] | None, r0: int, r1: int
) -> None:
    if ex is None:
        return
    hit = np.flatnonzero((ex >= r0) & (ex < r1))
    scores[hit, ex[hit] - r0] = np.inf


def is_small_int(a: Any) -> bool:
    return bool(a.dtype.kind in "ui" and a.dtype.itemsize == 1)


def _f16_load_norms(out: NDArray[np.float32], src: Any) -> NDArray[np.float64] | None:
    """``out = float32(src)`` and the rows' float64 squared norms (equal to
    :func:`_chunk_norms` of ``out``) in one native pass, for float16 ``src`` with
    contiguous rows; ``None`` (nothing done) otherwise."""
    fn = native_kernel() if src.dtype == np.float16 and src.ndim == 2 else None
    if fn is None or src.strides[1] != 2 or out.strides[1] != 4 or not src.shape[0]:
        return None
    norms = np.empty(src.shape[0], dtype=np.float64)
    fn.f16_norms(
        src.shape[0],
        src.shape[1],
        src.ctypes.data,
        src.strides[0] // 2,
        out.ctypes.data,
        out.strides[0] // 4,
        norms.ctypes.data,
        streams_into(out),
    )
    return norms


STREAM_BYTES = 2**24
"""A float16 chunk converted into at least this many bytes is written with
non-temporal stores (see :func:`streams_into`)."""


def streams_into(out: NDArray[np.float32]) -> int:
    """1 if the native conversion should write ``out`` with non-temporal stores:
    it is large (:data:`STREAM_BYTES`, beyond what the caches keep until the GEMM
    reads it) and its rows start 32-byte aligned (:func:`borrow` aligns its
    buffers). Ordinary stores read every destination line first; a 32,768-row
    float16 task ran 3.8 % faster without that traffic, with the same bits."""
    rows_aligned = out.ndim == 1 or out.strides[0] % 32 == 0
    return int(
        out.nbytes >= STREAM_BYTES and out.ctypes.data % 32 == 0 and rows_aligned
    )


def _load_scaled(out: NDArray[np.float32], src: Any, scale: float) -> None:
    """``out = float32(src · scale)`` (values out of range show in the norms)."""
    fn = native_kernel() if src.dtype == np.float16 and scale == 1.0 else None
    if fn is not None and src.flags.c_contiguous:
        # numpy's cast: ~20x slower
        fn.f16(out.size, src.ctypes.data, out.ctypes.data, streams_into(out))
        return
    with np.errstate(over="ignore", invalid="ignore"):  # inf: caught by check_norms
        if scale == 1.0:
            np.copyto(out, src, casting="unsafe")
        else:  # in the source's precision, so float64 values beyond float32 fit
            np.multiply(src, scale, out=out, casting="unsafe")


class RowGather:
    """``float64(src[idx])`` for blocks of at most ``rows`` rows, into buffers
    allocated once per call of :func:`retest.dedup.knn.exact_sqdist`. float16 goes
    through the native float32 conversion (both steps exact, so the values are
    numpy's) because numpy's float16 casts run at ~8 ns per value.

    Dask's worker processes run with ``MALLOC_TRIM_THRESHOLD_`` set, which pins
    glibc's mmap threshold at 128 KiB: every fresh 1 MiB temporary was then a new
    mapping, faulted in page by page, and re-ranking a 32,768-row shard took
    0.36 s instead of 0.04 s (a quarter of the task)."""

    def __init__(self, rows: int, d: int) -> None:
        self.rows, self.d = rows, d
        self.f64 = np.empty((rows, d), dtype=np.float64)
        self.f32 = np.empty(0, dtype=np.float32)
        self.raw: dict[np.dtype[Any], NDArray[Any]] = {}

    def __call__(self, src: Any, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        n = idx.size
        raw = self.raw.get(src.dtype)
        if raw is None:
            raw = self.raw[src.dtype] = np.empty((self.rows, self.d), src.dtype)
        if src.flags.c_contiguous and src.flags.aligned:  # idx is valid: no checks
            part = np.take(src, idx, axis=0, out=raw[:n], mode="clip")
        else:  # np.take would copy the whole of ``src`` first, on every call
            part = np.ascontiguousarray(src[idx])
        out = self.f64[:n]
        fn = native_kernel() if src.dtype == np.float16 else None
        if fn is None or not n:
            np.copyto(out, part, casting="unsafe")
            return out
        if self.f32.size < self.rows * self.d:
            self.f32 = np.empty(self.rows * self.d, dtype=np.float32)
        f32 = self.f32[: n * self.d]
        fn.f16(f32.size, part.ctypes.data, f32.ctypes.data, 0)
        np.copyto(out, f32.reshape(n, self.d))
        return out


def load_queries(
    q: Any, q0: int, q1: int, scale: float = 1.0
) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
    xq = np.empty((q1 - q0, q.shape[1]), dtype=np.float32)
    _load_scaled(xq, q[q0:q1], scale)
    return xq, check_norms(_chunk_norms(xq, is_small_int(q)))
