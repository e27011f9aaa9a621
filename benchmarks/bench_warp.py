"""Warp-distance benchmark: retest ``warped_sqdist_pairs`` on kNN-shortlist pairs.

    python3 benchmarks/bench_warp.py [--reps 3] [--queries 200] [--per-query 30]

Each query is paired with ``--per-query`` random references (the pattern of
``retest dedup``, which computes warp on the l2/features shortlists), default grid
(225 warps, both directions). The baseline in the same run is the direct way: each
query's 225 warps materialised with ``scipy.ndimage.affine_transform`` (order 1)
and compared with its references by numpy, forward direction only (so it does
half of retest's work). Results: benchmarks/results/warp.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
from scipy import ndimage

from retest.dedup.warp import warp_grid, warped_sqdist_pairs

OUT = Path(__file__).parent / "results" / "warp.json"


def scipy_forward(q: np.ndarray, r: np.ndarray, qi: np.ndarray, ri: np.ndarray):
    """min over the grid of ‖w(q) − r‖², warps by scipy (upscale-style bilinear)."""
    h, w = q.shape[1:3]
    gy, gx = warp_grid((h, w))
    out = np.full(qi.size, np.inf)
    for j in np.unique(qi):
        sel = np.flatnonzero(qi == j)
        refs = r[ri[sel]].reshape(sel.size, -1).astype(np.float64)
        img = q[j].astype(np.float64)
        for sy, ty in gy:
            for sx, tx in gx:
                scale = np.array([1 / sy, 1 / sx, 1.0])
                centre = np.array([(h - 1) / 2, (w - 1) / 2, 0.0])
                offset = centre - scale * (centre + np.array([ty, tx, 0.0]))
                wq = ndimage.affine_transform(
                    img, scale, offset=offset, order=1, mode="nearest"
                ).ravel()
                out[sel] = np.minimum(out[sel], ((refs - wq) ** 2).sum(1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--per-query", type=int, default=30)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    results = {"load_start": os.getloadavg(), "shapes": {}}
    for shape in [(32, 32, 3), (28, 28, 1)]:
        q = rng.integers(0, 256, (args.queries, *shape), dtype=np.uint8)
        r = rng.integers(0, 256, (5000, *shape), dtype=np.uint8)
        qi = np.repeat(np.arange(args.queries), args.per_query)
        ri = rng.integers(0, len(r), qi.size)
        base_q = max(1, args.queries // 20)  # the baseline is slow: a subset
        nb = base_q * args.per_query
        ours, base = [], []
        for _ in range(args.reps):
            t = time.perf_counter()
            warped_sqdist_pairs(q, r, qi, ri)
            ours.append(qi.size / (time.perf_counter() - t))
            t = time.perf_counter()
            scipy_forward(q, r, qi[:nb], ri[:nb])
            base.append(nb / (time.perf_counter() - t))
        row = {
            "pairs": int(qi.size),
            "retest_pairs_per_s": ours,
            "scipy_forward_pairs_per_s": base,
            "median_retest": statistics.median(ours),
            "median_scipy_forward": statistics.median(base),
            "median_ratio": statistics.median(
                a / b for a, b in zip(ours, base, strict=True)
            ),
        }
        results["shapes"]["x".join(map(str, shape))] = row
        print(
            f"{shape}: retest {row['median_retest']:,.0f} pairs/s (both directions), "
            f"scipy forward only {row['median_scipy_forward']:,.0f} pairs/s, "
            f"ratio {row['median_ratio']:.1f}×"
        )
    results["load_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
