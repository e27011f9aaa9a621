"""Exact kNN benchmark: retest's blocked GEMM engine vs GEMM peak, faiss, sklearn.

    python3 benchmarks/bench_knn.py [--quick] [--reps 3] [--skip-memory]

d = 3072 uint8 pixels (CIFAR-like synthetic images), k = 10. For each size the
float32 GEMM rate of the same machine is measured in the same run (torch.mm and
numpy matmul on the kernel's block shape), then retest ``knn`` (torch and numpy
backends), faiss ``IndexFlatL2`` and scikit-learn ``NearestNeighbors(brute)``.
GFLOP/s = 2·Q·N·d / t. Peak memory of a 500,000-row memory-mapped reference set is
measured in a subprocess as its ``VmHWM`` (peak RSS of the process's own address
space). Not ``ru_maxrss``: Linux carries that over fork+exec, so a child started by a
parent that has just written the 1.4 GiB file would report the parent's RSS.
Results: benchmarks/results/knn.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from retest.dedup.knn import knn

D, K = 3072, 10
OUT = Path(__file__).parent / "results" / "knn.json"


def images(n: int, seed: int) -> np.ndarray:
    """Smooth-ish 32×32×3 uint8 images (8×8 noise upsampled plus pixel noise)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, D), np.uint8)
    for s in range(0, n, 5000):
        m = min(5000, n - s)
        base = rng.integers(0, 256, (m, 8, 8, 3)).astype(np.float32)
        img = np.repeat(np.repeat(base, 4, 1), 4, 2)
        img += rng.normal(0, 20, img.shape).astype(np.float32)
        out[s : s + m] = np.clip(img, 0, 255).astype(np.uint8).reshape(m, -1)
    return out


def timed(fn):
    t = time.perf_counter()
    res = fn()
    return time.perf_counter() - t, res


def gemm_rates(q: int) -> dict[str, float]:
    """float32 GEMM GFLOP/s on the kernel's block shape (q × d)·(d × 8192)."""
    import torch

    a = np.random.default_rng(0).random((min(q, 4096), D), dtype=np.float32)
    b = np.random.default_rng(1).random((8192, D), dtype=np.float32)
    flops = 2 * a.shape[0] * b.shape[0] * D
    out = {}
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    torch.mm(ta, tb.T)
    out["torch"] = (
        flops / min(timed(lambda: torch.mm(ta, tb.T))[0] for _ in range(3)) / 1e9
    )
    a @ b.T
    out["numpy"] = flops / min(timed(lambda: a @ b.T)[0] for _ in range(3)) / 1e9
    return out


def run_size(nq: int, nr: int, reps: int) -> dict:
    refs, queries = images(nr, 1), images(nq, 2)
    flops = 2 * nq * nr * D
    rows: dict[str, list[float]] = {}
    gemm: dict[str, list[float]] = {"torch": [], "numpy": []}
    import faiss
    from sklearn.neighbors import NearestNeighbors

    rf, qf = refs.astype(np.float32), queries.astype(np.float32)
    agree = None
    for rep in range(reps):
        for name, rate in gemm_rates(nq).items():
            gemm[name].append(rate)
        t, ours = timed(lambda: knn(queries, refs, K, backend="torch"))
        rows.setdefault("retest knn (torch)", []).append(t)
        t, _ = timed(lambda: knn(queries, refs, K, backend="numpy"))
        rows.setdefault("retest knn (numpy)", []).append(t)

        def fa():
            index = faiss.IndexFlatL2(D)
            index.add(rf)
            return index.search(qf, K)

        t, (_, fi) = timed(fa)
        rows.setdefault("faiss IndexFlatL2", []).append(t)
        # faiss needs float32: what a user holding uint8 pixels pays first
        t_conv, _ = timed(lambda: (refs.astype(np.float32), queries.astype(np.float32)))
        rows.setdefault("uint8 → float32 conversion (faiss input)", []).append(t_conv)
        if rep == 0:
            agree = float((fi == ours.indices).mean())
            nn = NearestNeighbors(n_neighbors=K, algorithm="brute").fit(rf)
            t, _ = timed(functools.partial(nn.kneighbors, qf))
            rows.setdefault("sklearn brute", []).append(t)
        print(
            f"  rep {rep + 1}/{reps}: "
            + ", ".join(f"{k}={v[-1]:.2f}s" for k, v in rows.items()),
            flush=True,
        )
    med = {k: statistics.median(v) for k, v in rows.items()}
    g = {k: statistics.median(v) for k, v in gemm.items()}
    pair = [
        a / b
        for a, b in zip(
            rows["retest knn (torch)"], rows["faiss IndexFlatL2"], strict=True
        )
    ]
    pair_np = [
        a / b
        for a, b in zip(
            rows["retest knn (numpy)"], rows["faiss IndexFlatL2"], strict=True
        )
    ]
    pair_np_conv = [
        a / (b + c)
        for a, b, c in zip(
            rows["retest knn (numpy)"],
            rows["faiss IndexFlatL2"],
            rows["uint8 → float32 conversion (faiss input)"],
            strict=True,
        )
    ]
    return {
        "Q": nq,
        "N": nr,
        "d": D,
        "k": K,
        "reps": reps,
        "seconds": rows,
        "median_seconds": med,
        "gflops": {k: flops / v / 1e9 for k, v in med.items()},
        "queries_per_s": {k: nq / v for k, v in med.items()},
        "gemm_gflops": gemm,
        "gemm_gflops_median": g,
        "torch_vs_best_gemm": flops / med["retest knn (torch)"] / 1e9 / max(g.values()),
        "numpy_vs_numpy_gemm": flops / med["retest knn (numpy)"] / 1e9 / g["numpy"],
        "median_pair_ratio_torch_vs_faiss": statistics.median(pair),
        "median_pair_ratio_numpy_vs_faiss": statistics.median(pair_np),
        "median_pair_ratio_numpy_vs_faiss_incl_conversion": statistics.median(
            pair_np_conv
        ),
        "loadavg": os.getloadavg(),
        "index_agreement_with_faiss": agree,
    }


_MEM_CHILD = """
import sys, time, numpy as np
from retest.dedup.knn import knn
path, n, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
refs = np.load(path, mmap_mode="r")
q = np.asarray(refs[:100]).copy()
t = time.perf_counter()
r = knn(q, refs, 10, memory_budget=budget)
t = time.perf_counter() - t
assert (r.indices[:, 0] == np.arange(100)).all()
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0]
print(int(hwm.split()[1]) * 1024, t)
"""


def memory_check(n: int, budgets: list[int]) -> list[dict]:
    with tempfile.TemporaryDirectory(dir=str(Path(__file__).parent)) as d:
        path = Path(d) / "refs.npy"
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(n, D))
        for s in range(0, n, 50_000):
            mm[s : s + 50_000] = images(min(50_000, n - s), 10 + s)
        mm.flush()
        del mm
        out = []
        for b in budgets:
            res = subprocess.run(
                [sys.executable, "-c", _MEM_CHILD, str(path), str(n), str(b)],
                capture_output=True,
                text=True,
                check=True,
            )
            rss, t = res.stdout.split()
            out.append(
                {
                    "N": n,
                    "budget_bytes": b,
                    "peak_rss_bytes": int(rss),
                    "seconds": float(t),
                    "under_budget": int(rss) < b,
                    "file_bytes": n * D,
                }
            )
            print(
                f"  memmap N={n:,} budget {b / 2**30:.1f} GiB → peak RSS "
                f"{int(rss) / 2**30:.2f} GiB in {float(t):.1f}s",
                flush=True,
            )
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--sizes", help="comma-separated QxN, e.g. 2000x60000")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    sizes = (
        [(200, 6000), (1000, 5000)] if args.quick else [(2000, 60000), (10000, 50000)]
    )
    if args.sizes:
        sizes = [
            (int(a), int(b))
            for a, b in (p.lower().split("x") for p in args.sizes.split(","))
        ]
    result = {"sizes": [], "memory": [], "loadavg_start": os.getloadavg()}
    for nq, nr in sizes:
        print(f"Q={nq:,} vs N={nr:,}, d={D}, k={K}", flush=True)
        r = run_size(nq, nr, args.reps)
        result["sizes"].append(r)
        print(f"  GEMM peak (median GFLOP/s): {r['gemm_gflops_median']}")
        for name, t in r["median_seconds"].items():
            print(
                f"  {name:22s} {t:8.2f}s {r['queries_per_s'][name]:9.1f} q/s "
                f"{r['gflops'][name]:7.1f} GFLOP/s"
            )
        print(
            f"  torch/best GEMM {r['torch_vs_best_gemm']:.2f}; numpy/numpy GEMM "
            f"{r['numpy_vs_numpy_gemm']:.2f}; median pair ratio vs faiss: torch "
            f"{r['median_pair_ratio_torch_vs_faiss']:.2f}, numpy "
            f"{r['median_pair_ratio_numpy_vs_faiss']:.2f} (incl. faiss's uint8→float32: "
            f"{r['median_pair_ratio_numpy_vs_faiss_incl_conversion']:.2f})"
        )
    if not args.skip_memory:
        n = 50_000 if args.quick else 500_000
        result["memory"] = memory_check(n, [2**29, 2**30, 4 * 2**30])
    result["loadavg_end"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
