"""Project-store throughput: candidate inserts, annotation appends, pixel appends.

Run ``python3 benchmarks/bench_store.py [--quick]``. Each figure is the median of
3 repetitions; ratios compare against the best alternative measured in the same run
(raw ``sqlite3`` ``executemany`` of the same tuples, a single ``np.save``).
Writes ``benchmarks/results/store.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from retest.store.artifacts import PixelArray
from retest.store.rows import AnnotationEvent, CandidateRow, content_id
from retest.store.sqlite import SQLiteStore

RESULTS = Path(__file__).parent / "results" / "store.json"


def _median_rate(n: int, fn: Callable[[Path], None], reps: int = 3) -> float:
    times = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            fn(Path(d))
            times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def _rows(imgs: np.ndarray) -> list[CandidateRow]:
    return [
        CandidateRow(
            content_id(x),
            "tinyimages",
            str(i),
            i % 10,
            keyword=f"kw{i % 500}",
            array_name="tiny",
            array_row=i,
        )
        for i, x in enumerate(imgs)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    n = 50_000 if ap.parse_args().quick else 300_000
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    res: dict[str, float] = {}

    res["content_id_per_s"] = _median_rate(n, lambda d: [content_id(x) for x in imgs])
    rows = _rows(imgs)

    def store_add(d: Path) -> None:
        with SQLiteStore(d / "retest.db") as s:
            s.candidates.add(rows)

    def raw_sqlite(d: Path) -> None:
        con = sqlite3.connect(d / "raw.db", isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        con.execute(
            "CREATE TABLE c(seq INTEGER PRIMARY KEY, id TEXT UNIQUE, source TEXT, "
            "source_ref TEXT, class_id INT, keyword TEXT, array_name TEXT, array_row INT)"
        )
        con.execute("BEGIN")
        con.executemany(
            "INSERT OR IGNORE INTO c(id, source, source_ref, class_id, keyword, "
            "array_name, array_row) VALUES (?,?,?,?,?,?,?)",
            [
                (
                    r.id,
                    r.source,
                    r.source_ref,
                    r.class_id,
                    r.keyword,
                    r.array_name,
                    r.array_row,
                )
                for r in rows
            ],
        )
        con.execute("COMMIT")
        con.close()

    res["sqlite_candidates_add_per_s"] = _median_rate(n, store_add)
    res["raw_sqlite_executemany_per_s"] = _median_rate(n, raw_sqlite)

    def reingest(d: Path) -> None:  # the idempotent re-run: everything is a duplicate
        with SQLiteStore(d / "retest.db") as s:
            s.candidates.add(rows)
            t0 = time.perf_counter()
            s.candidates.existing(r.id for r in rows)
            res.setdefault("existing_check_per_s", n / (time.perf_counter() - t0))

    _median_rate(n, reingest, reps=1)

    events = [AnnotationEvent("w", "task", i % 10, rows[i].id, i % 2) for i in range(n)]

    def ann(d: Path) -> None:
        with SQLiteStore(d / "retest.db") as s:
            s.annotations.add(events)

    res["sqlite_annotations_add_per_s"] = _median_rate(n, ann)

    def px_append(d: Path) -> None:
        px = PixelArray.create(d, "tiny", shape=(32, 32, 3))
        for s in range(0, n, 10_000):
            px.append(imgs[s : s + 10_000])

    def np_save(d: Path) -> None:
        np.save(d / "a.npy", imgs)

    res["pixel_append_per_s"] = _median_rate(n, px_append)
    res["np_save_per_s"] = _median_rate(n, np_save)

    ratios = {
        "sqlite_store_vs_raw_executemany": res["sqlite_candidates_add_per_s"]
        / res["raw_sqlite_executemany_per_s"],
        "pixel_append_vs_np_save": res["pixel_append_per_s"] / res["np_save_per_s"],
    }
    print(f"{'measure (records/s, median of 3)':40s} {'value':>14s}")
    for k, v in res.items():
        print(f"{k:40s} {v:14,.0f}")
    for k, v in ratios.items():
        print(f"{k:40s} {v:14.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"n": n, "rates": res, "ratios": ratios, "machine": platform.processor()},
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
