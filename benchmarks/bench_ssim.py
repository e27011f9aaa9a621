"""SSIM benchmark: one query vs 10,000 32×32 RGB images, pairs/s.

    python3 benchmarks/bench_ssim.py [--quick] [--reps 3]

Compares retest's vectorised SSIM (default backend = numpy kernel; the torch
kernel is timed too) (precomputed per-image mean/variance maps; only
the filtered cross term per pair) with ``skimage.metrics.structural_similarity``
called per pair (on a 400-pair sample, scaled), in the same run, with skimage's
defaults (uniform 7×7 window, ``channel_axis=-1``) and with the gaussian window.
Max |difference| to skimage is reported too. Results: benchmarks/results/ssim.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from skimage.metrics import structural_similarity as sk_ssim

from retest.build.ssim import SSIMParams, compute_ssim_stats, ssim_pairs

OUT = Path(__file__).parent / "results" / "ssim.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    n = 2000 if args.quick else 10_000
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (n, 8, 8, 3)).astype(np.float32)
    imgs = np.repeat(np.repeat(base, 4, 1), 4, 2) + rng.normal(0, 20, (n, 32, 32, 3))
    imgs = np.clip(imgs, 0, 255).astype(np.uint8)
    q = imgs[0]
    result = {"n_pairs": n, "reps": args.reps, "settings": {}}
    for label, params in [
        ("uniform 7x7 (skimage default)", SSIMParams()),
        ("gaussian sigma 1.5", SSIMParams(gaussian_weights=True)),
    ]:
        kw = {"gaussian_weights": params.gaussian_weights}
        qs = compute_ssim_stats(q[None], params)
        t_pre = time.perf_counter()
        rs = compute_ssim_stats(imgs, params)
        t_pre = time.perf_counter() - t_pre
        ours, ours_np, sk = [], [], []
        for _ in range(args.reps):
            t = time.perf_counter()
            vals = ssim_pairs(qs, rs, np.zeros(n, np.intp), np.arange(n))
            ours.append(n / (time.perf_counter() - t))
            t = time.perf_counter()
            ssim_pairs(qs, rs, np.zeros(n, np.intp), np.arange(n), backend="torch")
            ours_np.append(n / (time.perf_counter() - t))
            m = 400
            t = time.perf_counter()
            ref = [
                sk_ssim(q, imgs[i], channel_axis=-1, data_range=255, **kw)
                for i in range(m)
            ]
            sk.append(m / (time.perf_counter() - t))
        err = float(np.abs(vals[:400] - np.asarray(ref)).max())
        row = {
            "retest_pairs_per_s": ours,
            "skimage_pairs_per_s": sk,
            "retest_torch_pairs_per_s": ours_np,
            "retest_median": statistics.median(ours),
            "retest_torch_median": statistics.median(ours_np),
            "skimage_median": statistics.median(sk),
            "speedup_median_of_pair_ratios": statistics.median(
                a / b for a, b in zip(ours, sk, strict=True)
            ),
            "precompute_seconds_all_images": t_pre,
            "max_abs_diff_vs_skimage": err,
        }
        result["settings"][label] = row
        print(
            f"{label}: retest {row['retest_median']:,.0f} pairs/s, skimage "
            f"{row['skimage_median']:,.0f} pairs/s, speed-up "
            f"{row['speedup_median_of_pair_ratios']:.0f}x (torch backend "
            f"{row['retest_torch_median']:,.0f} pairs/s), max |diff| {err:.1e}, "
            f"precompute {t_pre:.2f}s for {n:,} images"
        )
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
