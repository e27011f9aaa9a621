"""Time and peak memory of the label-error finders, against plain cleanlab.

Sets
----
cifar   50,000 × 10: the confident-learning CIFAR-10 data in ../shared/data/cl
        (float16 upcast to float32), synthetic of the same size if absent.
medium  128,117 × 1,000 (a tenth of ImageNet), synthetic float16.
imagenet 1,281,167 × 1,000 synthetic, stored as float16 (2.6 GB) in a .npy file
        generated once in row chunks; float32 would be 5.1 GB.

Every (set, implementation, method) runs in a fresh subprocess; its wall time
covers the call only (data loading excluded) and its peak memory is the
process's ``ru_maxrss`` (which includes the loaded data; the data-only RSS is
reported too). Implementations: ``retest`` = ``retest.label_errors.find_label_errors``
(cleanlab engine on small arrays, the chunked engine when N·K > 2**24);
``cleanlab`` = plain ``cleanlab.filter.find_label_issues(labels, pred_probs,
filter_by=...)`` with default arguments on a float32 copy. Plain cleanlab is not
run on the ImageNet-sized set unless ``--cleanlab-imagenet`` is given: on this
shared 24 GiB machine it would need well over 8 GiB (see the medium set's
figures, which scale linearly in N·K).

Usage: ``python3 benchmarks/bench_label_errors.py [--quick] [--reps 3]``.
Writes benchmarks/results/label_errors.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHARED = Path(
    os.environ.get("RETEST_SHARED_DATA", HERE.parents[0].parent / "shared" / "data")
)
CACHE = Path(os.environ.get("RETEST_BENCH_CACHE", "/tmp/retest_bench_label_errors"))
METHODS = ["argmax", "confident-joint", "prune-by-class", "prune-by-noise-rate", "both"]
CLEANLAB_FILTER = {
    "argmax": "predicted_neq_given",
    "confident-joint": "confident_learning",
    "prune-by-class": "prune_by_class",
    "prune-by-noise-rate": "prune_by_noise_rate",
    "both": "both",
}
SIZES = {"medium": (128_117, 1000), "imagenet": (1_281_167, 1000)}


def _synthetic(n: int, k: int, seed: int = 0) -> tuple[Path, Path]:
    """Float16 softmax probabilities around true labels; 20 % uniform label noise."""
    CACHE.mkdir(parents=True, exist_ok=True)
    probs_path = CACHE / f"probs_{n}x{k}_s{seed}.npy"
    labels_path = CACHE / f"labels_{n}x{k}_s{seed}.npy"
    if probs_path.exists() and labels_path.exists():
        return probs_path, labels_path
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % k)
    flip = rng.random(n) < 0.2
    s = np.where(flip, (y + rng.integers(1, k, n)) % k, y)
    tmp = probs_path.with_suffix(".tmp.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=(n, k))
    for start in range(0, n, 32768):
        stop = min(n, start + 32768)
        z = rng.standard_normal((stop - start, k), dtype=np.float32) * 1.5
        z[np.arange(stop - start), y[start:stop]] += 7.0
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        out[start:stop] = z
    out.flush()
    del out
    os.replace(tmp, probs_path)
    np.save(labels_path, s.astype(np.int32))
    return probs_path, labels_path


def _inputs(name: str) -> tuple[Path, Path]:
    if name == "cifar":
        d = SHARED / "cl"
        if (d / "pred_probs.npy").exists():
            return d / "pred_probs.npy", d / "noisy_labels.npy"
        return _synthetic(50_000, 10)
    return _synthetic(*SIZES[name])


def _worker(set_name: str, impl: str, method: str) -> None:
    # Import outside the timing: the figures are per call, not per interpreter start.
    import cleanlab.count
    import cleanlab.filter
    import cleanlab.rank  # noqa: F401

    import retest.label_errors  # noqa: F401

    probs_path, labels_path = _inputs(set_name)
    labels = np.load(labels_path).astype(np.int64)
    probs = np.load(probs_path)
    if impl == "cleanlab" or probs.shape[1] <= 10:
        probs = probs.astype(np.float32)  # small sets: upcast as the data README says
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    base = r0.ru_maxrss
    t0 = time.perf_counter()
    if impl == "retest":
        from retest.label_errors.finders import find_label_errors

        mask = find_label_errors(labels, probs, method=method)
    else:
        from cleanlab.filter import find_label_issues

        mask = find_label_issues(labels, probs, filter_by=CLEANLAB_FILTER[method])
    secs = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    print(
        json.dumps(
            {
                "seconds": secs,
                "cpu_seconds": cpu,
                "peak_kib": r1.ru_maxrss,
                "data_kib": base,
                "flagged": int(mask.sum()),
            }
        )
    )


def _run_one(
    set_name: str, impl: str, method: str, timeout: float
) -> dict[str, float] | None:
    cmd = [sys.executable, __file__, "--worker", set_name, impl, method]
    try:
        res = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    if res.returncode != 0:
        sys.stderr.write(res.stderr[-2000:])
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the ImageNet-sized set")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cleanlab-imagenet", action="store_true")
    ap.add_argument("--worker", nargs=3, metavar=("SET", "IMPL", "METHOD"))
    args = ap.parse_args()
    if args.worker:
        _worker(*args.worker)
        return
    plan = [("cifar", i) for i in ("retest", "cleanlab")] + [
        ("medium", i) for i in ("retest", "cleanlab")
    ]
    if not args.quick:
        plan.append(("imagenet", "retest"))
        if args.cleanlab_imagenet:
            plan.append(("imagenet", "cleanlab"))
    for set_name in {s for s, _ in plan}:
        _inputs(set_name)  # generate data outside the timings
    rows = []
    for set_name, impl in plan:
        for method in METHODS:
            runs = [_run_one(set_name, impl, method, 900) for _ in range(args.reps)]
            ok = [r for r in runs if r is not None]
            row = {"set": set_name, "impl": impl, "method": method, "reps": len(ok)}
            if ok:
                row |= {
                    "seconds": statistics.median(r["seconds"] for r in ok),
                    "cpu_seconds": statistics.median(r["cpu_seconds"] for r in ok),
                    "peak_gib": statistics.median(r["peak_kib"] for r in ok) / 2**20,
                    "data_gib": statistics.median(r["data_kib"] for r in ok) / 2**20,
                    "flagged": ok[0]["flagged"],
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    _report(rows)


def _report(rows: list[dict]) -> None:
    best = {}
    for r in rows:
        if "seconds" in r:
            key = (r["set"], r["method"])
            best[key] = min(best.get(key, float("inf")), r["seconds"])
    print(
        f"\n{'set':9} {'impl':9} {'method':20} {'wall s':>8} {'cpu s':>8} {'×best':>6} "
        f"{'peak GiB':>9} {'data GiB':>9} {'flagged':>8}"
    )
    for r in rows:
        if "seconds" not in r:
            print(f"{r['set']:9} {r['impl']:9} {r['method']:20} {'failed':>8}")
            continue
        ratio = r["seconds"] / best[(r["set"], r["method"])]
        print(
            f"{r['set']:9} {r['impl']:9} {r['method']:20} {r['seconds']:8.3f} "
            f"{r['cpu_seconds']:8.3f} {ratio:6.2f} "
            f"{r['peak_gib']:9.2f} {r['data_gib']:9.2f} {r['flagged']:8d}"
        )
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    out = HERE / "results" / "label_errors.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": {"cpu": cpu, "cores": os.cpu_count()},
        "note": "median of reps",
        "rows": rows,
    }
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
