"""Benchmark: CPU per record of each ingest thread (main, pixels, commit).

One in-process ingest of ``--n`` synthetic 8×8×3 records (``bench_scale.py``'s
source); each thread's CPU read from ``/proc/self/task/*/stat`` at the last
batch's progress report, while the write threads are still alive. The lowest
thread id is the main thread. Shows which thread bounds the ingest's rate:
``PYTHONPATH=<checkout>/src python benchmarks/bench_ingest_threads.py --n 1000000
--dir D`` once per checkout (Linux only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_scale


def _threads() -> dict[int, float]:
    tck = os.sysconf("SC_CLK_TCK")
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            f = Path(f"/proc/self/task/{t}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[int(t)] = (int(f[11]) + int(f[12])) / tck  # utime + stime
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out")
    args = ap.parse_args()
    from retest.project import Project
    from retest.stages.ingest import ingest_source

    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    spec = base / "synthetic.txt"
    spec.write_text(f"synthetic {args.n} 8x8x3\n")
    snap: dict[int, float] = {}

    def progress(task: str, done: int, total: int | None) -> None:
        if task.startswith("ingest") and done == total:
            snap.update(_threads())

    c0, t0 = time.process_time(), time.perf_counter()
    with Project.init(base / "proj", name="s", classes=bench_scale.CLASSES) as proj:
        src = bench_scale._synthetic_source(spec, args.n, 0)
        ingest_source(proj, src, name="synthetic", progress=progress)
    us = {t: round(v / args.n * 1e6, 1) for t, v in sorted(snap.items()) if v > 0.05}
    res = {
        "n": args.n,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "threads_us_per_record": us,
        "load": Path("/proc/loadavg").read_text().split()[:3],
    }
    print(json.dumps(res), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
