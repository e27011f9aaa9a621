"""Time and score the built-in testbed on real Fashion-MNIST.

Usage: ``python3 benchmarks/bench_models.py [--quick] [--reps N] [--train N]``

Each model of the preset is trained on the first ``--train`` (default 50,000)
Fashion-MNIST training images (as in the demo, where 10,000 are held out as the
candidate pool) and evaluated on the 10,000 test images. Prints one row per model
(median over repetitions of fit and predict seconds, test accuracy, fit time
relative to the fastest model of the same run) and writes
``benchmarks/results/models_<preset>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

from retest.datasets.idx import read_idx
from retest.models.testbed import build_testbed

FMNIST = Path("/usr/share/datasets/fashion-mnist")
OUT = Path(__file__).resolve().parent / "results"


def _load() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    def rd(name: str) -> np.ndarray:
        return np.asarray(read_idx(FMNIST / name))

    return (
        rd("train-images-idx3-ubyte.gz"),
        rd("train-labels-idx1-ubyte.gz").astype(np.int64),
        rd("t10k-images-idx3-ubyte.gz"),
        rd("t10k-labels-idx1-ubyte.gz").astype(np.int64),
    )


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(
            (
                ln.split(":", 1)[1].strip()
                for ln in out.splitlines()
                if "Model name" in ln
            ),
            platform.processor(),
        )
    except OSError:
        return platform.processor()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--train", type=int, default=50_000)
    ap.add_argument("--models", nargs="*", default=None)
    args = ap.parse_args()
    preset = "quick" if args.quick else "full"
    xtr, ytr, xte, yte = _load()
    xtr, ytr = xtr[: args.train], ytr[: args.train]
    rows: dict[str, dict[str, list[float]]] = {}
    wall = []
    for rep in range(args.reps):
        t_rep = time.perf_counter()
        for runner in build_testbed(preset, n_classes=10, names=args.models):
            t0 = time.perf_counter()
            runner.fit(xtr, ytr)  # type: ignore[attr-defined]
            t1 = time.perf_counter()
            pred = runner.predict(xte, dataset="fashion-mnist-test")
            t2 = time.perf_counter()
            acc = float((pred.top1 == yte).mean())
            r = rows.setdefault(runner.name, {"fit_s": [], "predict_s": [], "acc": []})
            r["fit_s"].append(t1 - t0)
            r["predict_s"].append(t2 - t1)
            r["acc"].append(acc)
            print(
                f"rep {rep} {runner.name:18s} fit {t1 - t0:6.1f}s predict {t2 - t1:5.1f}s acc {acc:.4f}",
                flush=True,
            )
        wall.append(time.perf_counter() - t_rep)
    med = {m: {k: statistics.median(v) for k, v in r.items()} for m, r in rows.items()}
    fastest = min(v["fit_s"] for v in med.values())
    print(
        f"\npreset {preset}, {args.train} training images, median of {args.reps} rep(s)"
    )
    print(
        f"{'model':18s} {'fit s':>7s} {'pred s':>7s} {'acc %':>6s} {'fit/fastest':>11s}"
    )
    for m, v in med.items():
        print(
            f"{m:18s} {v['fit_s']:7.1f} {v['predict_s']:7.1f} {100 * v['acc']:6.2f} {v['fit_s'] / fastest:11.1f}"
        )
    total = statistics.median(wall)
    print(f"total wall (median): {total:.1f}s")
    OUT.mkdir(exist_ok=True)
    result = {
        "preset": preset,
        "train_images": args.train,
        "test_images": int(xte.shape[0]),
        "reps": args.reps,
        "machine": {"cpu": _cpu(), "cores": os.cpu_count()},
        "total_wall_s_median": total,
        "models": med,
        "raw": rows,
    }
    (OUT / f"models_{preset}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
