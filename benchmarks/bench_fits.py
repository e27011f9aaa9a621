"""Time the evaluation core: pairs bootstrap of the linear fit and Clopper-Pearson.

Run ``python3 benchmarks/bench_fits.py [--quick]``. Prints a table and writes
``benchmarks/results/fits.json``. Each timing is the median of ``--repeat`` runs
(default 3; the machine may be shared, so medians, not minima or means).

Compared in the same run:

* bootstrap: ``retest.evaluate.fits.bootstrap_lines`` (index matrix (B, M),
  gathered values, OLS sums as row sums) vs a count-matrix alternative
  (``W (B, M) @ [1, x, y, x², xy]``) and, for scale, a per-resample
  ``np.polyfit`` loop on a subset (extrapolated to 100,000 resamples);
  also the full ``fit_new_vs_orig`` (bootstrap + percentile intervals + band).
* Clopper-Pearson: vectorised ``clopper_pearson`` over 10,000 (k, n) pairs vs a
  per-pair loop calling ``scipy.stats.beta.ppf``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from scipy import stats

from retest.evaluate.fits import bootstrap_lines, fit_new_vs_orig
from retest.evaluate.intervals import clopper_pearson

RESULTS = Path(__file__).resolve().parent / "results" / "fits.json"


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _count_matrix_bootstrap(
    x: np.ndarray, y: np.ndarray, n_boot: int, seed: int
) -> np.ndarray:
    """Alternative: (B, M) resample-count matrix W, all sums as W @ [1, x, y, x², xy]."""
    rng = np.random.default_rng(seed)
    m = x.size
    xc, yc = x - x.mean(), y - y.mean()
    feats = np.stack([np.ones(m), xc, yc, xc * xc, xc * yc], axis=1)
    out = []
    for s in range(0, n_boot, 8192):
        b = min(8192, n_boot - s)
        idx = rng.integers(0, m, size=(b, m)) + (np.arange(b) * m)[:, None]
        w = np.bincount(idx.ravel(), minlength=b * m).reshape(b, m)
        s0, sx, sy, sxx, sxy = (w @ feats).T
        out.append((s0 * sxy - sx * sy) / (s0 * sxx - sx * sx))
    return np.concatenate(out)


def _polyfit_loop(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [
        float(np.polyfit(x[i], y[i], 1)[0])
        for i in (rng.integers(0, x.size, x.size) for _ in range(n_boot))
    ]


def _cpu() -> str:
    try:
        out = subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=True
        ).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("Model name"))
        return line.split(":", 1)[1].strip()
    except (OSError, StopIteration, subprocess.CalledProcessError):
        return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="10,000 resamples only")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n_boot = 10_000 if args.quick else 100_000
    loop_boot = 500 if args.quick else 2_000
    rng = np.random.default_rng(0)
    rows: list[dict[str, object]] = []

    for m in (30, 200):
        o = rng.uniform(0.8, 0.98, m)
        n = 1.69 * o - 0.727 + rng.normal(0, 0.01, m)
        x, y = 100 * o, 100 * n
        t_ours = _median_time(
            partial(bootstrap_lines, x, y, n_boot=n_boot), args.repeat
        )
        t_alt = _median_time(
            partial(_count_matrix_bootstrap, x, y, n_boot, 0), args.repeat
        )
        t_loop = _median_time(partial(_polyfit_loop, x, y, loop_boot, 0), 1)
        t_loop *= n_boot / loop_boot
        t_fit = _median_time(partial(fit_new_vs_orig, o, n, n_boot=n_boot), args.repeat)
        best_alt = min(t_alt, t_loop)
        rows += [
            {"task": f"bootstrap {n_boot:,} x {m} models", "method": "retest (gather + row sums)",
             "seconds": t_ours, "ratio_vs_best_alternative": t_ours / best_alt},
            {"task": f"bootstrap {n_boot:,} x {m} models", "method": "count matrix W @ [1,x,y,x²,xy]",
             "seconds": t_alt, "ratio_vs_best_alternative": None},
            {"task": f"bootstrap {n_boot:,} x {m} models",
             "method": f"np.polyfit loop (extrapolated from {loop_boot:,})",
             "seconds": t_loop, "ratio_vs_best_alternative": None},
            {"task": f"full fit {n_boot:,} x {m} models",
             "method": "fit_new_vs_orig (bootstrap + CIs + band + residuals)",
             "seconds": t_fit, "ratio_vs_best_alternative": None},
        ]  # fmt: skip

    n_pairs = 10_000
    nn = rng.integers(100, 50_000, n_pairs)
    kk = rng.integers(0, nn + 1)
    t_vec = _median_time(lambda: clopper_pearson(kk, nn), args.repeat)

    def loop() -> None:
        for k, n in zip(kk.tolist(), nn.tolist(), strict=True):
            lo = stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
            hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
            del lo, hi

    t_loop_cp = _median_time(loop, args.repeat)
    rows += [
        {"task": f"Clopper-Pearson {n_pairs:,} (k, n)", "method": "retest vectorised",
         "seconds": t_vec, "ratio_vs_best_alternative": t_vec / t_loop_cp},
        {"task": f"Clopper-Pearson {n_pairs:,} (k, n)", "method": "per-pair scipy.stats.beta.ppf loop",
         "seconds": t_loop_cp, "ratio_vs_best_alternative": None},
    ]  # fmt: skip

    print(f"{'task':34} {'method':56} {'median s':>9} {'ratio':>7}")
    for r in rows:
        ratio = r["ratio_vs_best_alternative"]
        rs = f"{ratio:.3f}" if isinstance(ratio, float) else ""
        print(f"{r['task']!s:34} {r['method']!s:56} {r['seconds']:9.3f} {rs:>7}")
    meta = {"machine": {"cpu": _cpu(), "cores": __import__("os").cpu_count(),
                        "python": platform.python_version(), "numpy": np.__version__},
            "repeat": args.repeat, "statistic": "median", "quick": args.quick}  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
