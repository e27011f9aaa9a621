"""Benchmark: keyword-filtered TinyImages ingest into a project (issue 3).

Writes a TinyImages pair in the real layout (default 1,000,000 records = 3 GB of
images + 768 MB of metadata, in chunks) to a temporary folder under /tmp, then
measures, in the same run:

* ``scan``   – building the keyword index (one pass over tiny_metadata.bin);
* ``memmap`` – raw memory-mapped read + canonical decode of the selected records
  (the upper bound any ingest can reach);
* ``hash``   – read + decode + sha256 content id per record;
* ``ingest`` – the full stage into a fresh SQLite project (ids, dedup check,
  pixel-array append, batched inserts, checkpoints, report).

Each is repeated (default 3 times; the machine is shared, so the median is
reported). Results: a table on stdout and ``benchmarks/results/ingest.json``.
All files are deleted at the end.

Usage: ``python3 benchmarks/bench_ingest.py [--quick] [--records N] [--reps R] [--out F]``
(``PYTHONPATH=<old checkout>/src`` with ``--out`` measures another version of
retest with the same script, for before/after comparisons).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import retest
from retest.datasets.tinyimages import (
    IMAGE_FILE,
    METADATA_FILE,
    TinyImages,
    _metadata_record,
    build_keyword_index,
)
from retest.project import Project
from retest.sources.arrays import TinyImagesSource
from retest.stages.ingest import ingest_source
from retest.store import open_store
from retest.store.rows import content_id

RESULTS = Path(__file__).resolve().parent / "results" / "ingest.json"


def write_pair(folder: Path, n: int, n_keywords: int, seed: int = 0) -> list[str]:
    """A sorted-by-keyword TinyImages pair, written in 65,536-record chunks."""
    rng = np.random.default_rng(seed)
    keywords = [f"kw{i:05d}" for i in range(n_keywords)]
    per = n // n_keywords
    meta_of = {k: _metadata_record(k, f"{k}.png", {}) for k in keywords}
    chunk = 65_536
    with (
        (folder / IMAGE_FILE).open("wb") as fi,
        (folder / METADATA_FILE).open("wb") as fm,
    ):
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            fi.write(
                rng.integers(0, 256, size=(e - s) * 3072, dtype=np.uint8).tobytes()
            )
            fm.write(
                b"".join(
                    meta_of[keywords[min(i // per, n_keywords - 1)]]
                    for i in range(s, e)
                )
            )
    return keywords


_CPU: dict[str, list[float]] = {}


def _timed(fn, key: str = "") -> float:
    """Wall seconds of ``fn()``; its process CPU seconds go to ``_CPU[key]``."""
    c = time.process_time()
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    if key:
        _CPU.setdefault(key, []).append(time.process_time() - c)
    return wall


def _load() -> float:
    return os.getloadavg()[0]


def _spans(ti: TinyImages, index, kws: list[str]) -> list[tuple[int, int]]:
    return [r for k in kws for r in index.ranges[k]]


def bench_memmap(ti: TinyImages, spans, hashing: bool) -> None:
    for s, e in spans:
        for a in range(s, e, 16_384):
            imgs = ti.image_range(a, min(e, a + 16_384))
            if hashing:
                for img in imgs:
                    content_id(img)


def bench_ingest(folder: Path, work: Path, kws: list[str], index) -> int:
    proj = work / "proj"
    if proj.exists():
        shutil.rmtree(proj)
    proj.mkdir()
    with open_store(proj / "retest.db") as store:
        src = TinyImagesSource(folder, keywords=dict.fromkeys(kws, "c"), index=index)
        rep = ingest_source(Project.from_store(proj, store), src, add_classes=True)
    shutil.rmtree(proj)
    return rep.new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="100,000 records, 1 repetition"
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--fraction", type=float, default=0.5, help="share of keywords ingested"
    )
    ap.add_argument("--out", type=Path, default=RESULTS, help="JSON results file")
    args = ap.parse_args()
    n = 100_000 if args.quick else args.records
    reps = 1 if args.quick else args.reps
    work = Path(tempfile.mkdtemp(prefix="retest-bench-ingest-", dir="/tmp"))
    try:
        folder = work / "ti"
        folder.mkdir()
        t_write = _timed(lambda: write_pair(folder, n, 1000))
        ti = TinyImages(folder)
        index = build_keyword_index(folder / METADATA_FILE)
        kws = index.keywords()[: max(1, int(len(index) * args.fraction))]
        spans = _spans(ti, index, kws)
        selected = sum(e - s for s, e in spans)
        times: dict[str, list[float]] = {
            "scan": [],
            "memmap": [],
            "hash": [],
            "ingest": [],
        }
        loads = [_load()]
        got: list[int] = []
        for _ in range(reps):
            times["scan"].append(
                _timed(lambda: build_keyword_index(folder / METADATA_FILE), "scan")
            )
            times["memmap"].append(
                _timed(lambda: bench_memmap(ti, spans, False), "memmap")
            )
            times["hash"].append(_timed(lambda: bench_memmap(ti, spans, True), "hash"))
            times["ingest"].append(
                _timed(
                    lambda: got.append(bench_ingest(folder, work, kws, index)), "ingest"
                )
            )
            assert got[-1] == selected, (got, selected)
            loads.append(_load())
        med = {k: statistics.median(v) for k, v in times.items()}
        cpu_med = {k: statistics.median(v) for k, v in _CPU.items()}
        per_cpu = {k: (n if k == "scan" else selected) / v for k, v in cpu_med.items()}
        rates = {
            "scan": n / med["scan"],
            "memmap": selected / med["memmap"],
            "hash": selected / med["hash"],
            "ingest": selected / med["ingest"],
        }
        rows = [
            ("keyword index scan (metadata records/s)", rates["scan"], med["scan"]),
            ("raw memmap read+decode (records/s)", rates["memmap"], med["memmap"]),
            ("read+decode+sha256 (records/s)", rates["hash"], med["hash"]),
            ("ingest into project (records/s)", rates["ingest"], med["ingest"]),
        ]
        print(
            f"TinyImages file: {n:,} records ({n * 3072 / 1e9:.2f} GB), written in {t_write:.1f} s"
        )
        print(
            f"keyword filter: {len(kws)} of {len(index)} keywords -> {selected:,} records"
        )
        print(f"median of {reps} repetition(s)\n")
        print(f"load average (1 min) before/after each repetition: {loads}\n")
        print(f"{'measure':45s} {'rate':>14s} {'seconds':>9s} {'per CPU-s':>11s}")
        for (name, rate, sec), key in zip(rows, per_cpu, strict=True):
            print(f"{name:45s} {rate:14,.0f} {sec:9.2f} {per_cpu[key]:11,.0f}")
        print(f"\ningest / raw memmap rate: {rates['ingest'] / rates['memmap']:.3f}")
        print(f"ingest / read+hash rate:  {rates['ingest'] / rates['hash']:.3f}")
        print(
            f"target >= 50,000 records/s: {'met' if rates['ingest'] >= 50_000 else 'NOT met'}"
        )
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in cpu.splitlines()
                if ln.startswith("Model name")
            ),
            "",
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "records_in_file": n, "records_ingested": selected, "keywords": len(kws),
            "repetitions": reps, "seconds_median": med, "seconds_all": times,
            "records_per_s": rates, "cpu_seconds_all": _CPU,
            "records_per_cpu_s": per_cpu, "load_average_1min": loads,
            "ratio_ingest_vs_memmap": rates["ingest"] / rates["memmap"],
            "ratio_ingest_vs_hash": rates["ingest"] / rates["hash"],
            "target_records_per_s": 50_000, "machine": {"cpu": model, "python": platform.python_version()},
            "retest_source": str(Path(retest.__file__).parent),
        }, indent=2) + "\n")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
