"""SSIM benchmark, end to end (per-image statistics included), pairs/s vs skimage.

    python3 benchmarks/bench_ssim.py [--quick] [--reps 5] [--threads N]

Headline: pairs/s of ``retest.ssim`` from raw 32×32×3 uint8 images to one value per
pair — every per-image statistic included — on two workloads:

* **disjoint pairs**: 5,000 pairs of different random images (each image used once,
  so nothing per image is amortised);
* **shortlists**: 500 candidates, each against its 30 nearest of 10,000 references
  in pixel L2 (the pairs ``retest dedup`` scores; found with ``retest.knn``, not
  timed), statistics of all 10,500 images included.

Beside each, in the same repetition, ``skimage.metrics.structural_similarity`` per
pair (``channel_axis=-1``; on a 300-pair sample of the same pairs, scaled), with
skimage's defaults (uniform 7×7) and with the gaussian window (σ 1.5). Also: the
numpy fallback (``RETEST_NATIVE=0`` path) end to end, the max |difference| to
skimage over the sample, and the 1-minute load average. Speed-up = median over
repetitions of (retest pairs/s ÷ skimage pairs/s). Results: benchmarks/results/ssim.json.
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

import retest
from retest.dedup.ssim import (
    SSIMParams,
    compute_ssim_stats,
    native_available,
    ssim_pairs,
)

OUT = Path(__file__).parent / "results" / "ssim.json"


def _images(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (n, 8, 8, 3)).astype(np.float32)
    imgs = np.repeat(np.repeat(base, 4, 1), 4, 2) + rng.normal(0, 20, (n, 32, 32, 3))
    return np.clip(imgs, 0, 255).astype(np.uint8)


def _workloads(
    quick: bool,
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    n_pairs = 1000 if quick else 5000
    a, b = _images(n_pairs, 0), _images(n_pairs, 1)
    i = np.arange(n_pairs)
    n_cand, n_ref, k = (200, 2000, 30) if quick else (500, 10_000, 30)
    refs = _images(n_ref, 2)
    # candidates: perturbed copies of some references plus fresh images
    rng = np.random.default_rng(3)
    cands = _images(n_cand, 4)
    cands[::2] = np.clip(
        refs[rng.integers(0, n_ref, n_cand // 2)]
        + rng.integers(-8, 9, cands[::2].shape),
        0,
        255,
    ).astype(np.uint8)
    nn = retest.knn(cands, refs, k).indices
    return {
        "disjoint pairs": (a, b, i, i),
        f"shortlists ({n_cand} x {k} of {n_ref:,})": (
            cands,
            refs,
            np.repeat(np.arange(n_cand), k),
            nn.ravel(),
        ),
    }


def _e2e(x, y, qi, ri, params: SSIMParams, backend: str, threads: int | None):  # type: ignore[no-untyped-def]
    """Statistics of both image sets, then every pair: what ``retest.ssim`` does."""
    qs = compute_ssim_stats(x, params)
    rs = compute_ssim_stats(y, params)
    return ssim_pairs(qs, rs, qi, ri, backend=backend, n_threads=threads)


def _rate(n: int, fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn()
    return n / (time.perf_counter() - t), out


def _setting(work, params: SSIMParams, reps: int, threads: int | None) -> dict:  # type: ignore[no-untyped-def]
    x, y, qi, ri = work
    kw = {"gaussian_weights": params.gaussian_weights}
    sample = np.random.default_rng(5).choice(qi.size, 300, replace=False)
    rows: dict[str, list[float]] = {"retest": [], "numpy": [], "sk": []}
    loads = []
    vals = None
    for _ in range(reps):
        loads.append(os.getloadavg()[0])
        r, vals = _rate(qi.size, lambda: _e2e(x, y, qi, ri, params, "auto", threads))
        rows["retest"].append(r)
        r, _ = _rate(qi.size, lambda: _e2e(x, y, qi, ri, params, "numpy", threads))
        rows["numpy"].append(r)
        r, ref = _rate(
            sample.size,
            lambda: [
                sk_ssim(x[qi[t]], y[ri[t]], channel_axis=-1, data_range=255, **kw)
                for t in sample
            ],
        )
        rows["sk"].append(r)
    assert vals is not None
    diff = float(np.abs(np.asarray(vals)[sample] - np.asarray(ref)).max())
    return {
        "n_pairs": int(qi.size),
        "pairs_per_s": rows,
        "median": {k: statistics.median(v) for k, v in rows.items()},
        "speedup_median_of_ratios": statistics.median(
            a / b for a, b in zip(rows["retest"], rows["sk"], strict=True)
        ),
        "numpy_speedup_median_of_ratios": statistics.median(
            a / b for a, b in zip(rows["numpy"], rows["sk"], strict=True)
        ),
        "max_abs_diff_vs_skimage": diff,
        "load_1min": loads,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="default: all cores")
    args = ap.parse_args()
    why = native_available()
    if why:
        print(f"note: compiled SSIM loop unavailable ({why}); default = numpy")
    result: dict = {
        "reps": args.reps,
        "cpus": os.cpu_count(),
        "native": not why,
        "settings": {},
    }
    works = _workloads(args.quick)
    _e2e(*works["disjoint pairs"], SSIMParams(), "auto", args.threads)  # build/warm
    for wl, work in works.items():
        for label, params in [
            ("uniform 7x7 (skimage default)", SSIMParams()),
            ("gaussian sigma 1.5", SSIMParams(gaussian_weights=True)),
        ]:
            row = _setting(work, params, args.reps, args.threads)
            result["settings"][f"{wl}, {label}"] = row
            med = row["median"]
            print(
                f"{wl}, {label}: retest {med['retest']:,.0f} pairs/s end to end "
                f"(numpy fallback {med['numpy']:,.0f}), skimage {med['sk']:,.0f} "
                f"pairs/s, speed-up {row['speedup_median_of_ratios']:.0f}x (numpy "
                f"{row['numpy_speedup_median_of_ratios']:.1f}x), max |diff| "
                f"{row['max_abs_diff_vs_skimage']:.1e}, load {row['load_1min']}"
            )
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
