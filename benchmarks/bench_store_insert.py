"""Benchmark: CPU per record of the store's part of ingest, by million.

``existing_mark()`` (or ``existing()`` on code without it) and
``prepare_columns()`` + its insert (or ``add_columns()``) for batches of 65,536
synthetic content ids, as the ingest's bulk path calls them (a job of ``--n``
rows: the keyword index deferred and built at the end, where the code does),
without hashing pixels or writing arrays. CPU seconds of this process
(``time.process_time``), so two checkouts can run side by side on a loaded
machine: ``PYTHONPATH=<checkout>/src python benchmarks/bench_store_insert.py
--n 3000000 --dir D --out results/x.json`` once per checkout, at the same time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3_000_000)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from retest.store.sqlite import SQLiteStore

    d, batch = Path(args.dir), 65_536
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    s = SQLiteStore(d / "retest.db")
    c = s.candidates
    has_mark = hasattr(c, "existing_mark")
    # as the ingest does: a job adding n rows to an empty table defers the
    # keyword index and builds it at the end (code without it: nothing)
    deferred = c.defer_indexes(args.n) if hasattr(c, "defer_indexes") else False
    zero = {"exist": 0.0, "prepare": 0.0, "insert": 0.0}
    out, done, acc = [], 0, dict(zero)
    for start in range(0, args.n, batch):
        e = min(args.n, start + batch)
        ids = [
            hashlib.sha256(i.to_bytes(8, "little")).hexdigest() for i in range(start, e)
        ]
        cols = (
            ids, [str(i) for i in range(start, e)], [i % 10 for i in range(start, e)],
            [f"kw{i % 1000:04d}" for i in range(start, e)],
        )  # fmt: skip
        t = time.process_time()
        if has_mark:
            _, mark = c.existing_mark(ids)
        else:
            c.existing(ids)
            mark = None
        t1 = time.process_time()
        where = {"source": "synthetic", "width": 8, "height": 8, "array_name": "a"}
        if hasattr(c, "prepare_columns"):  # as the ingest: encoded on its thread
            insert = c.prepare_columns(*cols, **where)
            t2 = time.process_time()
            insert(range(start, e), mark)  # the commit thread's part
        else:
            t2 = t1
            extra = {"checked": mark} if has_mark else {}
            c.add_columns(*cols, list(range(start, e)), **where, **extra)
        acc["prepare"] += t2 - t1
        acc["insert"] += time.process_time() - t2
        acc["exist"] += t1 - t
        if e // 1_000_000 > start // 1_000_000 or e == args.n:
            out.append({
                "up_to": e,
                **{f"{k}_us_per_record": v / (e - done) * 1e6 for k, v in acc.items()},
                "load": " ".join(open("/proc/loadavg").read().split()[:3]),
            })  # fmt: skip
            print(out[-1], flush=True)
            done, acc = e, dict(zero)
    t = time.process_time()
    if hasattr(c, "restore_indexes"):
        c.restore_indexes()
    restore = time.process_time() - t
    print(f"deferred {deferred}; index build {restore:.2f} s CPU", flush=True)
    s.close()
    shutil.rmtree(d, ignore_errors=True)
    Path(args.out).write_text(json.dumps({
        "n": args.n, "per_million": out, "deferred": deferred,
        "restore_cpu_s": restore,
        "restore_us_per_record": restore / args.n * 1e6,
    }, indent=1))  # fmt: skip
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
