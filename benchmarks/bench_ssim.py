"""SSIM benchmark: one query vs 10,000 32×32 RGB images, pairs/s.

    python3 benchmarks/bench_ssim.py [--quick] [--reps 3] [--threads N]

Times retest's SSIM over all pairs (precomputed per-image mean/variance maps; per
pair only the filtered cross term and the SSIM map) with the default backend (the
compiled loop, ``backend="native"``) and with the numpy fallback, against
``skimage.metrics.structural_similarity`` called per pair (on a 400-pair sample,
scaled) in the same repetition, with skimage's defaults (uniform 7×7 window,
``channel_axis=-1``) and with the gaussian window. Also reports the pair rate of
real near-duplicate use (each query against its own 30 random references), the
max |difference| to skimage and the 1-minute load average. Results:
benchmarks/results/ssim.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
from skimage.metrics import structural_similarity as sk_ssim

from retest.dedup.ssim import (
    SSIMParams,
    compute_ssim_stats,
    native_available,
    ssim_pairs,
)

OUT = Path(__file__).parent / "results" / "ssim.json"


def _rate(n: int, fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t)


def _images(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (n, 8, 8, 3)).astype(np.float32)
    imgs = np.repeat(np.repeat(base, 4, 1), 4, 2) + rng.normal(0, 20, (n, 32, 32, 3))
    return np.clip(imgs, 0, 255).astype(np.uint8)


def _setting(
    imgs: np.ndarray, params: SSIMParams, reps: int, threads: int | None
) -> dict:
    n = len(imgs)
    q = imgs[0]
    kw = {"gaussian_weights": params.gaussian_weights}
    qs = compute_ssim_stats(q[None], params)
    t_pre = time.perf_counter()
    rs = compute_ssim_stats(imgs, params)
    t_pre = time.perf_counter() - t_pre
    qi, ri = np.zeros(n, np.intp), np.arange(n)
    # shortlist use: 300 queries × their own 30 random references
    rng = np.random.default_rng(1)
    sq = compute_ssim_stats(imgs[:300], params)
    sqi, sri = np.repeat(np.arange(300), 30), rng.integers(0, n, 300 * 30)
    rows: dict[str, list[float]] = {
        "native": [],
        "numpy": [],
        "shortlist": [],
        "sk": [],
    }
    loads = []
    for _ in range(reps):
        loads.append(os.getloadavg()[0])
        rows["native"].append(
            _rate(n, lambda: ssim_pairs(qs, rs, qi, ri, n_threads=threads))
        )
        rows["numpy"].append(
            _rate(
                n,
                lambda: ssim_pairs(qs, rs, qi, ri, backend="numpy", n_threads=threads),
            )
        )
        rows["shortlist"].append(
            _rate(sqi.size, lambda: ssim_pairs(sq, rs, sqi, sri, n_threads=threads))
        )
        m = 400
        t = time.perf_counter()
        ref = [
            sk_ssim(q, imgs[i], channel_axis=-1, data_range=255, **kw) for i in range(m)
        ]
        rows["sk"].append(m / (time.perf_counter() - t))
    vals = ssim_pairs(qs, rs, qi[:400], ri[:400])
    vals_np = ssim_pairs(qs, rs, qi[:400], ri[:400], backend="numpy")
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {
        "pairs_per_s": rows,
        "median": med,
        "speedup_median_of_pair_ratios": statistics.median(
            a / b for a, b in zip(rows["native"], rows["sk"], strict=True)
        ),
        "numpy_speedup_median_of_pair_ratios": statistics.median(
            a / b for a, b in zip(rows["numpy"], rows["sk"], strict=True)
        ),
        "max_abs_diff_vs_skimage": float(np.abs(vals - np.asarray(ref)).max()),
        "max_abs_diff_numpy_vs_skimage": float(np.abs(vals_np - np.asarray(ref)).max()),
        "precompute_seconds_all_images": t_pre,
        "load_1min": loads,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="default: all cores")
    args = ap.parse_args()
    why = native_available()
    if why:
        print(f"note: compiled SSIM loop unavailable ({why}); default = numpy")
    imgs = _images(2000 if args.quick else 10_000)
    result: dict = {
        "n_pairs": len(imgs),
        "reps": args.reps,
        "cpus": os.cpu_count(),
        "native": not why,
        "settings": {},
    }
    for label, params in [
        ("uniform 7x7 (skimage default)", SSIMParams()),
        ("gaussian sigma 1.5", SSIMParams(gaussian_weights=True)),
    ]:
        row = _setting(imgs, params, args.reps, args.threads)
        result["settings"][label] = row
        med = row["median"]
        print(
            f"{label}: retest {med['native']:,.0f} pairs/s (numpy fallback "
            f"{med['numpy']:,.0f}, shortlists {med['shortlist']:,.0f}), skimage "
            f"{med['sk']:,.0f} pairs/s, speed-up {row['speedup_median_of_pair_ratios']:.0f}x"
            f" (numpy {row['numpy_speedup_median_of_pair_ratios']:.0f}x), max |diff| "
            f"{row['max_abs_diff_vs_skimage']:.1e}, precompute "
            f"{row['precompute_seconds_all_images']:.2f}s, load {row['load_1min']}"
        )
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
