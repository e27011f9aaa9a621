"""Exact k-nearest neighbours under squared L2, streamed over large reference sets.

The fast pass computes ``‖y‖² − 2 x·y`` with float32 matrix products (torch, numpy
or faiss) over reference chunks sized to a memory budget and keeps a running
shortlist per query. A float64 re-ranking of a provably safe shortlist then makes
the returned top-k equal to a float64 brute force (bit-exact for integer pixel data).

Error bound relied on
---------------------
Let ``u = 2**-24`` and ``m = min(d, 4096)`` (longer inner dimensions are split into
float32 blocks of at most 4096 terms accumulated in float64). For any summation
order of the float32 inner product (no Strassen, no reduced precision), the float32
score ``ẽ`` of the exact ``e = ‖y‖² − 2 x·y`` satisfies::

    |ẽ − e| ≤ B(x, y) = c · (‖x‖² + 2 ‖y‖²) + A,   c = 1.1 (m + 4) u / (1 − (m + 4) u)

(Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1: ``|fl(x·y) − x·y|
≤ γ_m Σ|x_i y_i|``, plus input rounding ``(2u + u²) Σ|x_i y_i|``, the rounding of the
norm and the final subtraction; ``2 Σ|x_i y_i| ≤ ‖x‖² + ‖y‖²``; the factor 1.1 covers
the float64 steps). ``A = (4d + 16)·2**-149`` covers products that fall below
float32's normal range (each loses at most 2**-150 absolutely). No float32 step may
overflow: every step is at most ``4·max ‖·‖²``, and when a block's float64 squared
norms (computed anyway) exceed 2**125 the input is measured once and scaled by a
power of two (exact, so the bound holds in the scaled units); inputs whose float64
squared distances could overflow are refused with an error. With ``T`` the k-th
smallest ``ẽ`` of a query and ``B_T`` the largest bound among those k, every true
top-k neighbour ``j`` has
``ẽ_j ≤ T + B_T + B(x, y_j)``; all such candidates are re-ranked exactly. If a
candidate may have been dropped from the bounded running shortlist, that query is
re-scanned with a range pass, so the guarantee never depends on luck. The faiss
backend computes ``‖x‖² + ‖y‖² − 2x·y`` with float32 norms; its bound is taken as
``2c (‖x‖² + ‖y‖²) + A``.

Exact distances are ``Σ (x_i − y_i)²`` accumulated in float64, per pair, so results
do not depend on chunking (which is what makes a Dask run identical).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._parallel import available_cpus
from retest._progress import ProgressCallback, report
from retest._validation import renamed_keyword
from retest.dedup._knn_chunks import (
    INNER_BLOCK,
    NeedsScale,
    Plan,
    RefNorms,
    RowGather,
    Scorer,
    Shortlist,
    drop_pages,
    faiss_select,
    input_scale,
    is_small_int,
    load_queries,
    make_plan,
    mask_excluded,
    native_kernel,
    native_selection,
    nonzero2d,
    scaled_queries,
    select_topk,
    torch_module,
)
from retest.dedup._knn_inputs import validate_knn_inputs
from retest.errors import ConfigError, InputValidationError

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "KnnResult",
    "RangeResult",
    "error_bound_constant",
    "exact_sqdist",
    "knn",
    "knn_range",
    "merge_knn",
    "topk_from_pairs",
    "validate_knn_inputs",
]

Backend = Literal["auto", "numpy", "torch", "faiss"]
DEFAULT_MEMORY_BUDGET = 4 * 2**30
_U = 2.0**-24
_PAIR_BLOCK = 2**20
"""Bytes of each float64 temporary of :func:`exact_sqdist`: 1 MiB stays in a
core's L2 cache; at 16 MiB the temporaries went through memory and re-ranking a
Dask shard's ~12 pairs per query cost ~8 % of the shard's time."""
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class KnnResult:
    """Top-k neighbours per query, nearest first (ties by reference index).

    ``indices`` (n_queries, k) int64 reference rows (−1 where ``pad`` left a gap);
    ``distances`` (n_queries, k) float64 squared L2 (inf in gaps).
    """

    indices: NDArray[np.int64]
    distances: NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class RangeResult:
    """Pairs with ``low ≤ d ≤ high`` sorted by (query, distance, reference)."""

    query: NDArray[np.int64]
    reference: NDArray[np.int64]
    distances: NDArray[np.float64]


def error_bound_constant(d: int) -> float:
    """The constant ``c`` of the module-level error bound for dimension ``d``."""
    m = min(d, INNER_BLOCK) + 4
    return 1.1 * m * _U / (1.0 - m * _U)


def underflow_slack(d: int) -> float:
    """The absolute term ``A`` of the module-level error bound for dimension ``d``."""
    return (4 * d + 16) * 2.0**-149


def _bound_norms(qn: NDArray[np.float64], c: float, d: int) -> NDArray[np.float64]:
    """``‖x‖² + A/c``: then ``c·(that + 2‖y‖²)`` is the whole bound ``B(x, y)``."""
    return qn + underflow_slack(d) / c


# ----------------------------------------------------------------------------- input


# ----------------------------------------------------------------------------- engine


_ENGINE: list[str] = []


def _fastest_engine() -> str:
    """'torch' or 'numpy', whichever single-threaded float32 GEMM is faster here.

    Measured once per process (~0.25 s: both engines warmed up, then best of 5
    on a kernel-shaped product, interleaved) in this thread's CPU time: wall time
    under load measures the other jobs, and Dask workers under load then picked
    torch at random, whose MKL GEMM ran at 0.6-0.8 of numpy's OpenBLAS here
    (a 32,768-row shard task 1.7-2.0 s instead of 1.1 s). torch must win by 10 %:
    the numpy engine also has the fused native selection, and CPU time still
    carries some noise on a shared machine. The choice only affects speed,
    never results (both passes are re-ranked exactly).
    """
    if _ENGINE:
        return _ENGINE[0]
    import time

    from threadpoolctl import threadpool_limits

    torch = torch_module()
    rng = np.random.default_rng(0)
    a = rng.random((256, 1024), dtype=np.float32)
    b = rng.random((2048, 1024), dtype=np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    best = {"torch": np.inf, "numpy": np.inf}
    with _one_thread_each("torch"), threadpool_limits(limits=1):
        for rep in range(6):  # the first round warms both libraries up
            for name, fn in (
                ("torch", lambda: torch.mm(ta, tb.T)),
                ("numpy", lambda: a @ b.T),
            ):
                t = time.thread_time()
                fn()
                if rep:
                    best[name] = min(best[name], time.thread_time() - t)
    _ENGINE.append("torch" if best["torch"] < 0.9 * best["numpy"] else "numpy")
    return _ENGINE[0]


def _pick_backend(backend: str) -> str:
    if backend not in ("auto", "numpy", "torch", "faiss"):
        raise ConfigError(
            f"backend must be 'auto', 'numpy', 'torch' or 'faiss'. Got {backend!r}."
        )
    if backend == "auto":
        return _fastest_engine() if torch_module() is not None else "numpy"
    if backend == "torch" and torch_module() is None:
        raise ConfigError("backend 'torch' needs torch: pip install 'retest[torch]'.")
    if backend == "faiss":
        try:
            import faiss  # noqa: F401
        except ImportError:
            raise ConfigError(
                "backend 'faiss' needs faiss: pip install 'retest[faiss]'."
            ) from None
    return backend


def _norms64(block: NDArray[Any]) -> NDArray[np.float64]:
    if block.dtype == np.float32 and block.flags.c_contiguous:
        b64 = block.astype(np.float64)
    else:
        b64 = np.asarray(block, dtype=np.float64)
    norms: NDArray[np.float64] = np.einsum("ij,ij->i", b64, b64)
    return norms


def exact_sqdist(
    queries: NDArray[Any],
    references: NDArray[Any],
    qi: NDArray[np.int64],
    ri: NDArray[np.int64],
) -> NDArray[np.float64]:
    """Float64 ``Σ (x − y)²`` for the pairs ``(queries[qi], references[ri])``.

    Per-pair computation: the value does not depend on which other pairs are in the
    batch. Exact for integer data (all partial sums are integers below 2**53).
    """
    out = np.empty(qi.shape[0], dtype=np.float64)
    parts = min(available_cpus(), 4, qi.size // 20_000)
    if parts > 1:  # per-pair values: splitting the pairs cannot change them
        cuts = np.linspace(0, qi.size, parts + 1).astype(int)
        sl = [slice(a, b) for a, b in itertools.pairwise(cuts)]

        def one(s: slice) -> None:
            out[s] = exact_sqdist(queries, references, qi[s], ri[s])

        with ThreadPoolExecutor(parts) as pool:
            list(pool.map(one, sl))
        return out
    if qi.size == 0:
        return out
    small_int = {queries.dtype.kind, references.dtype.kind} <= {"u", "i"} and max(
        queries.dtype.itemsize, references.dtype.itemsize
    ) == 1
    order = np.argsort(ri, kind="stable")  # sorted reads are kind to memmaps
    fns = native_kernel()
    if fns is not None and out.flags.c_contiguous:
        sorted_out = np.empty_like(out)
        if fns.sqdist_u8(queries, references, qi[order], ri[order], sorted_out):
            out[order] = sorted_out
            return out
    step = 256 if small_int else max(1, _PAIR_BLOCK // (8 * max(1, queries.shape[1])))
    if not small_int:
        ref_rows = RowGather(min(step, order.size), queries.shape[1])
        query_rows = RowGather(min(step, order.size), queries.shape[1])
    for s in range(0, order.size, step):
        sel = order[s : s + step]
        if small_int:  # int16 differences and int64 sums: exact and cache-friendly
            rows16 = np.asarray(references[ri[sel]]).astype(np.int16)
            rows16 -= np.asarray(queries[qi[sel]])
            out[sel] = np.einsum("ij,ij->i", rows16, rows16, dtype=np.int64)
            continue
        rows = ref_rows.f64[: sel.size]
        # float16 pairs: gather, convert and subtract in one native pass (the
        # same float64 rows; the numpy passes took 60 % of a Dask shard's re-ranking)
        if fns is None or not fns.pair_diff_f16(
            queries, references, qi[sel], ri[sel], rows
        ):
            rows = ref_rows(references, ri[sel])
            rows -= query_rows(queries, qi[sel])
        out[sel] = np.einsum("ij,ij->i", rows, rows)
    return out


def _scan(
    qdata: tuple[NDArray[np.float32], NDArray[np.float64]],
    refs: Any,
    plan: Plan,
    backend: str,
    norms: RefNorms,
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    ex: NDArray[np.int64] | None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """All pairs whose float32 score may lie in [lo, hi] (per query, plus bounds)."""
    xq, qn = qdata
    be = "numpy" if backend == "numpy" else ("torch" if torch_module() else "numpy")
    sc = Scorer(be, xq, plan.chunk, scale=plan.scale)
    c = error_bound_constant(xq.shape[1]) * (2.0 if backend == "faiss" else 1.0)
    qb = _bound_norms(qn, c, xq.shape[1])
    out_q, out_r = [], []
    for r0 in range(0, refs.shape[0], plan.chunk):
        r1 = min(refs.shape[0], r0 + plan.chunk)
        got = sc.rows_scores(refs, r0, r1, norms)
        if got is not None:
            s, rn = got
            s += rn.astype(np.float32)[None, :]  # the float32 addition of scores()
        else:
            chunk = sc.load(refs, r0, r1, norms)
            rn = norms.get(chunk, r0)
            s = sc.scores(chunk, rn)
        mask_excluded(s, ex, r0, r1)
        b = c * (qb[:, None] + 2.0 * rn[None, :])
        qi, ri = nonzero2d((s >= lo[:, None] - b) & (s <= hi[:, None] + b))
        out_q.append(qi.astype(np.int64))
        out_r.append(ri.astype(np.int64) + r0)
        drop_pages(refs, r0, r1)
    sc.release()
    return np.concatenate(out_q), np.concatenate(out_r)


def topk_from_pairs(
    qi: NDArray[np.int64],
    ri: NDArray[np.int64],
    dist: NDArray[np.float64],
    nq: int,
    k: int,
) -> KnnResult:
    """Top-k per query from scored (query, reference) pairs; ties → smaller index.

    Rows with fewer than ``k`` pairs are padded with index −1 and distance inf;
    a squared distance rounded below 0 is reported as 0.
    """
    order = np.lexsort((ri, dist, qi))
    qs = qi[order]
    rank = np.arange(qs.size) - np.searchsorted(qs, qs, side="left")
    keep = order[rank < k]
    idx = np.full((nq, k), -1, dtype=np.int64)
    dd = np.full((nq, k), np.inf)
    pos = (qi[keep], rank[rank < k])
    idx[pos] = ri[keep]
    dd[pos] = np.maximum(dist[keep], 0.0)  # float rounding of ‖a‖² + ‖b‖² − 2ab
    return KnnResult(indices=idx, distances=dd)


def _knn_block(
    q: Any,
    q0: int,
    q1: int,
    refs: Any,
    k: int,
    plan: Plan,
    backend: str,
    norms: RefNorms,
    ex: NDArray[np.int64] | None,
    tick: Callable[[], None],
) -> KnnResult:
    """Top-k of queries q0:q1; reference chunks are shared out to ``plan.threads``.

    Each thread keeps its own shortlist (own GEMM, selection and merge, so one
    thread's selection overlaps the other's GEMM); the lists are merged at the end.
    A candidate a thread dropped scored at or above that thread's k'-th value, which
    is at or above the merged k'-th value, so the rescan rule of :func:`_finalize`
    still covers it.
    """
    xq, qn = load_queries(q, q0, q1, plan.scale)
    nr = refs.shape[0]
    kp = min(nr, k + max(16, k))
    c = error_bound_constant(xq.shape[1]) * (2.0 if backend == "faiss" else 1.0)
    qb = _bound_norms(qn, c, xq.shape[1])
    starts = list(range(0, nr, plan.chunk))
    nt = 1 if backend == "faiss" else max(1, min(plan.threads, len(starts)))

    be = backend if backend != "faiss" else "numpy"
    fused = backend != "faiss" and native_selection(xq.shape[1])
    xq_m2 = scaled_queries(xq) if be == "numpy" and xq.shape[1] <= INNER_BLOCK else None

    def work(worker: int) -> Shortlist:
        sl = Shortlist.empty(q1 - q0, kp)
        sc = Scorer(be, xq, plan.chunk, xq_m2, plan.scale)
        for n, r0 in enumerate(starts[worker::nt]):
            r1 = min(nr, r0 + plan.chunk)
            first = n == 0 and backend != "faiss" and not fused
            for p0, p1 in _pieces(r0, r1, kp, first=first):
                _scan_piece(sl, sc, p0, p1)
            drop_pages(refs, r0, r1)
            tick()
        sc.release()
        return sl

    def _scan_piece(sl: Shortlist, sc: Scorer, r0: int, r1: int) -> None:
        got = sc.rows_scores(refs, r0, r1, norms) if fused else None
        if got is not None:  # straight from the stored rows (no float32 chunk)
            g, rn = got
            sl.absorb(g, rn.astype(np.float32), rn, r0, ex, qb, c)
            return
        chunk = sc.load(refs, r0, r1, norms)
        rn = norms.get(chunk, r0)
        if fused:
            s, rn32 = sc.partial_scores(chunk, rn)
            sl.absorb(s, rn32, rn, r0, ex, qb, c)
            return
        if backend == "faiss":
            rows, cols, vals = faiss_select(xq, qn, chunk, kp)
            if ex is not None:
                ok = cols + r0 != ex[rows]
                rows, cols, vals = rows[ok], cols[ok], vals[ok]
        else:
            s = sc.scores(chunk, rn)
            mask_excluded(s, ex, r0, r1)
            rows, cols = select_topk(s, sl.tau(), kp, backend)
            vals = s[rows, cols].astype(np.float64)
        sl.merge(rows, cols + r0, vals, c * (qb[rows] + 2.0 * rn[cols]))

    if nt == 1:
        sl = work(0)
    else:
        with _one_thread_each(backend), ThreadPoolExecutor(nt) as pool:
            lists = list(pool.map(work, range(nt)))
        sl = lists[0]
        for other in lists[1:]:
            sl.merge_list(other)
    return _finalize(q, (xq, qn), refs, k, sl, plan, backend, norms, ex, q0, c)


def _pieces(r0: int, r1: int, kp: int, *, first: bool) -> list[tuple[int, int]]:
    """A thread's first chunk is scanned in doubling pieces (numpy selection only:
    the native loop inserts into sorted shortlists and needs no warm-up).

    With empty shortlists every score of the first chunk would need a full
    per-row partition; a first piece of ``max(1024, 32·k')`` references sets each
    query's threshold cheaply, and each doubling piece passes only about
    ``k'/(references seen)`` of its scores on to the merge.
    """
    if not first:
        return [(r0, r1)]
    out, w = [], max(1024, 32 * kp)
    while r1 - r0 > 2 * w:
        out.append((r0, r0 + w))
        r0, w = r0 + w, 2 * w
    return [*out, (r0, r1)]


_THREADS_LOCK = threading.Lock()
_THREADS_USERS = [0, 0]  # active single-threaded sections, saved torch thread count


@contextmanager
def _one_thread_each(backend: str) -> Iterator[None]:
    """BLAS/torch at one thread per calling thread while chunk threads run.

    Independent single-threaded GEMMs degrade gracefully when the cores are shared;
    barrier-synchronised multi-threaded GEMMs stall whenever one of their threads is
    descheduled. Nested/concurrent sections share one saved torch setting.
    """
    from threadpoolctl import threadpool_limits

    torch = torch_module() if backend == "torch" else None
    if torch is not None:
        with _THREADS_LOCK:
            if _THREADS_USERS[0] == 0:
                _THREADS_USERS[1] = torch.get_num_threads()
                torch.set_num_threads(1)
            _THREADS_USERS[0] += 1
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        if torch is not None:
            with _THREADS_LOCK:
                _THREADS_USERS[0] -= 1
                if _THREADS_USERS[0] == 0:
                    torch.set_num_threads(_THREADS_USERS[1])


def _finalize(
    q: Any,
    qdata: tuple[NDArray[np.float32], NDArray[np.float64]],
    refs: Any,
    k: int,
    sl: Shortlist,
    plan: Plan,
    backend: str,
    norms: RefNorms,
    ex: NDArray[np.int64] | None,
    q0: int,
    c: float,
) -> KnnResult:
    xq, qn = qdata
    nq = xq.shape[0]
    kk = min(k, sl.vals.shape[1])
    t = sl.vals[:, kk - 1]
    bt = np.where(np.isfinite(sl.vals[:, :kk]), sl.bnd[:, :kk], 0.0).max(axis=1)
    limit = t + bt
    maxrn = float(norms.rn.max())
    qb = _bound_norms(qn, c, xq.shape[1])
    flagged = np.isfinite(t) & (sl.vals[:, -1] <= limit + c * (qb + 2.0 * maxrn))
    cand = np.isfinite(sl.vals) & (sl.vals <= (limit[:, None] + sl.bnd))
    cand[flagged] = False
    qi, col = np.nonzero(cand)
    ri = sl.idx[qi, col]
    if flagged.any():
        fl = np.flatnonzero(flagged)
        sub_ex = None if ex is None else ex[fl]
        fq, fr = _scan(
            (xq[fl], qn[fl]),
            refs,
            plan,
            backend,
            norms,
            np.full(fl.size, -np.inf),
            limit[fl],
            sub_ex,
        )
        qi = np.concatenate([qi, fl[fq]])
        ri = np.concatenate([ri, fr])
    dist = exact_sqdist(q, refs, qi + q0, ri)
    return topk_from_pairs(qi, ri, dist, nq, k)


def knn(
    queries: ArrayLike,
    references: ArrayLike,
    k: int,
    *,
    exclude: ArrayLike | None = None,
    exclude_self: bool = False,
    pad: bool = False,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: Backend = "auto",
    chunk_rows: int | None = None,
    n_threads: int | None = None,
    progress: ProgressCallback | None = None,
    chunk_size: int | None = None,
) -> KnnResult:
    """Exact k nearest references of each query under squared L2.

    Parameters
    ----------
    queries : array of shape (n_queries, d) or (n_queries, H, W[, C])
        uint8 / integer / float; may be a memmap.
    references : array of shape (n_refs, d) or (n_refs, H, W[, C])
        May be a memory-mapped array larger than RAM; it is streamed in chunks.
    k : int
        Neighbours per query.
    exclude : array of shape (n_queries,), optional
        Reference index to skip for each query (−1 for none), e.g. the query's own
        row when the queries are part of the references.
    exclude_self : bool
        Shorthand for ``exclude=arange(n)`` when queries and references are the same.
    pad : bool
        Allow ``k`` above the available references; gaps get index −1 and
        distance inf (used when merging partial results over reference shards).
    memory_budget : int
        Bytes the working buffers may use (default 4 GiB); sets the chunk sizes.
        The calling thread keeps up to 256 MiB of them for its next call.
    backend : {'auto', 'numpy', 'torch', 'faiss'}
        Engine of the float32 pass; 'auto' takes whichever of torch and numpy
        has the faster single-threaded GEMM on this machine (measured once).
    chunk_rows : int, optional
        Reference rows per chunk (default from the budget, at most 8192).
    n_threads : int, optional
        Threads that each score their share of the reference chunks with a
        single-threaded GEMM (default: CPU count, at most 4; faiss: 1, it threads
        itself). The result does not depend on it.
    progress : ProgressCallback, optional
        Called as ``progress("knn", chunks_done, chunks_total)``.
    chunk_size : int, optional
        Deprecated name of ``chunk_rows`` (a :class:`DeprecationWarning`).

    Returns
    -------
    KnnResult
        ``indices`` (n_queries, k) int64 and ``distances`` (n_queries, k) float64,
        ascending, ties broken by the smaller reference index. Equal to a float64
        brute force (see the module docstring for the bound that guarantees it).

    Raises
    ------
    InputValidationError
        Empty or non-numeric inputs, queries and references of
        different dimensions, ``k`` above the number of references (without
        ``pad``) or a bad ``exclude``.
    ConfigError
        ``k`` below 1, or an unknown or unavailable ``backend``.

    Examples
    --------
    >>> from retest import knn
    >>> import numpy as np
    >>> x = np.array([[0, 0], [1, 0], [5, 5]], dtype=np.uint8)
    >>> r = knn(x, x, 1, exclude_self=True, backend="numpy")
    >>> r.indices.ravel().tolist(), r.distances.ravel().tolist()
    ([1, 0, 1], [1.0, 1.0, 41.0])
    """
    if k is None:  # the input check lets None through for callers without a k
        raise ConfigError("k must be a positive integer. Got None.")
    q, refs, ex = validate_knn_inputs(
        queries, references, k, exclude=exclude, exclude_self=exclude_self, pad=pad
    )
    be = _pick_backend(backend)
    plan = make_plan(
        q.shape[0],
        refs.shape[0],
        q.shape[1],
        int(memory_budget),
        renamed_keyword(
            chunk_rows, chunk_size, new_name="chunk_rows", old_name="chunk_size"
        ),
        n_threads,
    )
    nq, nr = q.shape[0], refs.shape[0]
    n_chunks = -(-nr // plan.chunk)
    total = n_chunks * -(-nq // plan.q_block)
    done = [0]

    def tick() -> None:
        done[0] += 1
        report(progress, "knn", done[0], total)

    def run(plan: Plan) -> KnnResult:
        done[0] = 0
        norms = RefNorms(nr, is_small_int(refs))
        parts = []
        for q0 in range(0, nq, plan.q_block):
            q1 = min(nq, q0 + plan.q_block)
            sub_ex = None if ex is None else ex[q0:q1]
            parts.append(
                _knn_block(q, q0, q1, refs, int(k), plan, be, norms, sub_ex, tick)
            )
        return KnnResult(
            indices=np.concatenate([p.indices for p in parts]),
            distances=np.concatenate([p.distances for p in parts]),
        )

    return _scaled_if_needed(run, q, refs, plan)


def _scaled_if_needed(run: Callable[[Plan], _R], q: Any, refs: Any, plan: Plan) -> _R:
    """``run(plan)``; if a block's values could overflow the float32 pass, measure the
    whole input once and run again on inputs scaled by a power of two (or refuse
    them: see :func:`~retest.dedup._knn_chunks.input_scale`). Data within range —
    all 8/16-bit input, any realistic float features — never pays for that pass."""
    try:
        return run(plan)
    except NeedsScale:
        return run(replace(plan, scale=input_scale(q, refs)))


def merge_knn(parts: Sequence[KnnResult], k: int) -> KnnResult:
    """Merge top-k lists computed over disjoint reference shards (global indices).

    Entries with index −1 (padding) are ignored; the result keeps the ``k`` smallest
    distances per query with ties broken by reference index.
    """
    if not parts:
        raise InputValidationError("merge_knn needs at least one partial result.")
    nq = parts[0].indices.shape[0]
    if any(p.indices.shape[0] != nq for p in parts):
        raise InputValidationError(
            "partial kNN results disagree on the number of queries: "
            f"{[p.indices.shape[0] for p in parts]}."
        )
    idx = np.concatenate([p.indices for p in parts], axis=1)
    dist = np.concatenate([p.distances for p in parts], axis=1)
    qi, col = np.nonzero(idx >= 0)
    return topk_from_pairs(qi.astype(np.int64), idx[qi, col], dist[qi, col], nq, k)


def knn_range(
    queries: ArrayLike,
    references: ArrayLike,
    *,
    low: float,
    high: float,
    exclude: ArrayLike | None = None,
    exclude_self: bool = False,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: Backend = "auto",
    chunk_rows: int | None = None,
    progress: ProgressCallback | None = None,
    chunk_size: int | None = None,
) -> RangeResult:
    """All (query, reference) pairs with ``low ≤ squared L2 ≤ high``, exactly.

    The CIFAR-10.1 helper ``find_near_self_duplicates(images, ind, low, high)`` works
    on plain L2; pass ``low**2`` and ``high**2``. Candidates from the float32 pass
    are widened by the error bound of the module docstring and checked in float64.
    ``chunk_rows`` and the rest are as for :func:`knn` (``chunk_size`` is the
    deprecated name of ``chunk_rows``).
    """
    q, refs, ex = validate_knn_inputs(
        queries, references, None, exclude=exclude, exclude_self=exclude_self
    )
    if not low <= high:
        raise ConfigError(f"knn_range needs low ≤ high. Got low={low}, high={high}.")
    be = _pick_backend(backend)
    plan = make_plan(
        q.shape[0],
        refs.shape[0],
        q.shape[1],
        int(memory_budget),
        renamed_keyword(
            chunk_rows, chunk_size, new_name="chunk_rows", old_name="chunk_size"
        ),
    )

    def run(plan: Plan) -> list[tuple[NDArray[Any], NDArray[Any], NDArray[Any]]]:
        norms = RefNorms(refs.shape[0], is_small_int(refs))
        out = []
        nq = q.shape[0]
        for q0 in range(0, nq, plan.q_block):
            q1 = min(nq, q0 + plan.q_block)
            xq, qn = load_queries(q, q0, q1, plan.scale)
            s2 = plan.scale * plan.scale  # exact: a power of two
            qi, ri = _scan(
                (xq, qn),
                refs,
                plan,
                be,
                norms,
                low * s2 - qn,
                high * s2 - qn,
                None if ex is None else ex[q0:q1],
            )
            dist = exact_sqdist(q, refs, qi + q0, ri)
            ok = (dist >= low) & (dist <= high)
            out.append((qi[ok] + q0, ri[ok], dist[ok]))
            report(progress, "knn_range", q1, nq)
        return out

    found = _scaled_if_needed(run, q, refs, plan)
    out_q, out_r, out_d = (list(col) for col in zip(*found, strict=True))
    qa, ra, da = np.concatenate(out_q), np.concatenate(out_r), np.concatenate(out_d)
    order = np.lexsort((ra, da, qa))
    return RangeResult(query=qa[order], reference=ra[order], distances=da[order])
