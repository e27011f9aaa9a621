"""The kNN's packed GEMM against OpenBLAS, one thread, shape by shape.

    python3 benchmarks/bench_rows_gemm.py [--reps 5] [--out FILE]

For each stored type (float16, float32, uint8) and shape (queries × d against a
chunk of reference rows), three ways to get the float32 scores ``x · yᵀ``,
interleaved, best and median of ``--reps`` in this thread's CPU time:

* ``rows``: retest's packed GEMM reading the stored rows (``_knn_gemm.c``);
* ``blas, converted``: what the kNN did before — convert the chunk to a float32
  buffer (the native float16 conversion, numpy's cast otherwise), then OpenBLAS
  ``x @ buf.T``;
* ``blas a @ b``: OpenBLAS on rows already converted and laid out as a (d × n)
  block, the best form of the product (no conversion, no transposing pack) —
  the limit the issue measures a worker against.

GFLOP/s = 2·q·n·d / t. Results: benchmarks/results/rows_gemm.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from retest.dedup import _knn_chunks as kc
from retest.dedup import _knn_gemm as kg

OUT = Path(__file__).parent / "results" / "rows_gemm.json"
SHAPES = [  # (stored type, queries, d, chunk rows)
    ("float16", 256, 4096, 8192),  # the 1 M Dask benchmark's task
    ("float16", 32, 4096, 8192),
    ("float32", 256, 4096, 8192),
    ("uint8", 256, 3072, 8192),  # CIFAR-sized pixels
    ("uint8", 2000, 3072, 8192),  # the TinyImages job's query block
    ("float32", 256, 128, 65536),  # small embeddings
]


def _rows(dtype: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    if dtype == "uint8":
        return rng.integers(0, 256, (n, d), dtype=np.uint8)
    bits = rng.integers(0, 1 << 16, (n, d), dtype=np.uint16) & 0xBFFF
    return bits.view(np.float16).astype(dtype)  # finite values in (−2, 2)


def measure(dtype: str, q: int, d: int, n: int, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    rows = _rows(dtype, n, d, rng)
    x = rng.uniform(-2, 2, (q, d)).astype(np.float32)
    b = np.ascontiguousarray(rows.astype(np.float32).T)
    buf = kc._aligned_empty(n * d, np.dtype(np.float32)).reshape(n, d)
    out = np.empty((q, n + kg.LD_PAD), np.float32)[:, :n]
    out2 = np.empty((q, n), np.float32)
    norms = np.empty(n)

    def packed() -> None:
        kg.PackedQueries(x).scores(rows, out, norms)  # the queries' packing included

    def converted() -> None:
        kc._load_scaled(buf, rows, 1.0)
        np.matmul(x, buf.T, out=out2)

    def ab() -> None:
        np.matmul(x, b, out=out2)

    fns = {"rows": packed, "blas, converted": converted, "blas a @ b": ab}
    times: dict[str, list[float]] = {k: [] for k in fns}
    with threadpool_limits(1):
        for fn in fns.values():
            fn()
        for _ in range(reps):
            for name, fn in fns.items():
                t = time.thread_time()
                fn()
                times[name].append(time.thread_time() - t)
    packed()
    converted()
    gamma = d * 2.0**-24 / (1 - d * 2.0**-24)
    assert (np.abs(out - out2) <= 2 * gamma * (np.abs(x) @ np.abs(b)) + 1e-30).all()
    flop = 2.0 * q * n * d / 1e9
    rate = {k: {"best": flop / min(v), "median": flop / float(np.median(v))}
            for k, v in times.items()}  # fmt: skip
    res = {"dtype": dtype, "q": q, "d": d, "n": n, "gflops": rate,
           "rows_vs_ab_median": rate["rows"]["median"] / rate["blas a @ b"]["median"],
           "rows_vs_converted_median":
               rate["rows"]["median"] / rate["blas, converted"]["median"]}  # fmt: skip
    print(f"{dtype:8s} {q:5d} x {d:5d} vs {n:6d} rows: "
          + "  ".join(f"{k} {v['median']:5.1f}" for k, v in rate.items())
          + f" GFLOP/s (median)  rows / a@b {res['rows_vs_ab_median']:.2f}, "
          f"rows / converted {res['rows_vs_converted_median']:.2f}  "
          f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if kg._lib() is None:
        raise SystemExit("the packed GEMM is unavailable here (no compiler or no AVX2)")
    results = [measure(*s, args.reps) for s in SHAPES]
    Path(args.out).write_text(json.dumps({"runs": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
