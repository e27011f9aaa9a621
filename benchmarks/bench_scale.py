"""Benchmark: retest at ImageNet scale (issue 17). Not a test: it times things.

``store``  – ingest N synthetic candidates (default 10,000,000; 8×8×3 images so
             the project stays under ~3 GB) into one project in a single ingest
             job, recording the rate of every million; then ``retest status``,
             ``retest sample`` (every strategy) and ``candidate_eligibility`` on
             the full project, each in a child process whose own peak RSS
             (``VmHWM``) and peak anonymous memory (``RssAnon``) are reported;
             ``--reuse`` times them again on the project a ``--keep`` run left;
             ``--baseline-src`` runs each query a second time with another
             checkout's ``src`` (main's) back to back and checks that both
             print the same ``--json`` output (revision name aside: the same
             members, parameters and exclusion counts); main's recorded
             figures are printed beside each query.
``dedup``  – exact kNN of Q queries against N references (default 1,048,576 ×
             4,096 float16, memory-mapped; 8 GiB) on a local Dask cluster of 1
             and then 2 worker processes (one thread each), against the best
             1- and 2-thread float32 GEMM this machine does for the shape a task
             runs (Q × d by d × its chunk rows; measured before and after the
             workers, the better kept), per wall second and per CPU second.

Usage::

    python3 benchmarks/bench_scale.py store [--n 10000000] [--dir D] [--keep]
        [--reuse] [--queries status,eligibility,sample] [--baseline-src DIR]
        (--queries '' runs the ingest only)
    python3 benchmarks/bench_scale.py dedup [--n 1048576] [--d 4096] [--q 256]
        [--dtype float16] [--dir D] [--keep] [--paired]

Results go to ``benchmarks/results/scale_<part>.json`` (``scale_queries.json``
with ``--reuse``) and a table on stdout.
Scratch data goes to ``--dir`` (default: a new folder under ``scratch_<checkout>``
beside the checkout, never /tmp) and is deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from _child_measure import measured, remove_scratch, scratch_dir

RESULTS = Path(__file__).resolve().parent / "results"
CLASSES = [f"class{i}" for i in range(10)]
SIDE = 8  # 8×8×3 images: 192 bytes each


def _scratch(args: argparse.Namespace) -> Path:
    """``--dir``, or a fresh folder under ``scratch_<checkout>`` beside the
    checkout (never /tmp: a small tmpfs on the benchmark machine)."""
    return scratch_dir("retest-scale-", args.dir)


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


# ------------------------------------------------------------------ store


def _synthetic_source(path: Path, n: int, seed: int) -> Any:
    """A column source of ``n`` distinct 8×8×3 images with 10 classes and 1,000
    keywords (positions are encoded in the first 4 bytes, so no two repeat)."""
    from retest.sources.base import CandidateSource, ColumnItems, SourceBatch

    class Synthetic(CandidateSource):
        kind = "synthetic"
        default_batch_size = 65_536

        def __len__(self) -> int:
            return n

        def options(self) -> dict[str, Any]:
            return {"n": n, "seed": seed}

        def iter_batches(
            self, *, start: int = 0, batch_size: int = 4096
        ) -> Iterator[SourceBatch]:
            for s in range(start, n, batch_size):
                e = min(n, s + batch_size)
                rng = np.random.default_rng([seed, s])
                px = rng.integers(0, 256, size=(e - s, SIDE, SIDE, 3), dtype=np.uint8)
                pos = np.arange(s, e, dtype="<u4").view(np.uint8).reshape(-1, 4)
                px.reshape(e - s, -1)[:, :4] = pos
                refs = [str(i) for i in range(s, e)]
                kws = [f"kw{i % 1000:04d}" for i in range(s, e)]
                classes = [CLASSES[i % 10] for i in range(s, e)]
                yield SourceBatch(s, e, ColumnItems(refs, classes, kws, SIDE, SIDE), px)

    return Synthetic(path)


def _child(argv: list[str]) -> None:
    """Run ``argv`` (``retest …`` or ``eligibility ROOT``) in this process, then
    print its wall time and this process's own peak RSS as the last line
    (:func:`_child_measure.measured`)."""
    code = 0
    with measured() as m:
        code = _run_child(argv)
    print(json.dumps({"wall_s": m["wall_s"], "peak_rss_mib": m["peak_rss_mib"],
                      "peak_anon_mib": m["peak_anon_mib"], "exit": code}))  # fmt: skip


def _run_child(argv: list[str]) -> int:
    code = 0
    if argv[0] == "eligibility":
        from retest.project import Project, candidate_eligibility

        with Project.open(argv[1]) as p:
            elig = candidate_eligibility(p)
            ok = elig.counts()["eligible"]
            print(f"eligible={ok} of {len(elig.reasons)}", file=sys.stderr)
    else:
        from retest.cli.main import app

        try:
            # without standalone mode click returns an Exit's code instead of raising
            rv = app(argv[1:], standalone_mode=False)
            code = rv if isinstance(rv, int) else 0
        except SystemExit as err:  # typer exits
            code = int(err.code or 0)
        except Exception as err:  # report, keep the timing
            print(f"error: {err}", file=sys.stderr)
            code = 1
    return code


def _measure(
    argv: list[str], timeout: float = 1800, src: str | None = None
) -> dict[str, Any]:
    """Run one query in a child; ``src`` puts another checkout's ``src`` first
    on the path (the baseline of ``--baseline-src``)."""
    load = _load()
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(
            [src, *filter(None, [env.get("PYTHONPATH")])]
        )
    out = subprocess.run(
        [sys.executable, __file__, "_child", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    lines = out.stdout.strip().splitlines()
    last = lines[-1] if lines else "{}"
    try:
        res = json.loads(last)
    except json.JSONDecodeError:
        res = {"exit": out.returncode}
    try:  # the command's --json output without the revision's name
        body = json.loads("\n".join(lines[:-1]))
        body.pop("name", None)
        res["output_sha256"] = hashlib.sha256(
            json.dumps(body, sort_keys=True).encode()
        ).hexdigest()
    except (json.JSONDecodeError, AttributeError):
        pass
    res["stderr_tail"] = out.stderr.strip().splitlines()[-1:] if out.stderr else []
    res["load_before"] = load
    return res


def bench_store(args: argparse.Namespace) -> dict[str, Any]:
    from retest.project import Project
    from retest.stages.ingest import ingest_source

    base = _scratch(args)
    root = base / "proj"
    base.mkdir(parents=True, exist_ok=True)
    if args.reuse and (root / "retest.db").exists():
        print(f"  reusing {root} (no ingest)", flush=True)
        return {"n": args.n, "reused": str(root), **_queries(args, root, base)}
    if root.exists():
        shutil.rmtree(root)
    spec = base / "synthetic.txt"
    spec.write_text(f"synthetic {args.n} 8x8x3\n")
    marks: list[tuple[int, float, float]] = []
    step = 1_000_000
    t0, c0 = time.perf_counter(), time.process_time()

    id_order: dict[int, tuple[float, float]] = {}  # the end-of-ingest cache step
    indexes: dict[int, tuple[float, float]] = {}  # the deferred indexes' build

    def progress(task: str, done: int, total: int | None) -> None:
        if task == "id order":
            id_order[done] = (time.perf_counter(), time.process_time())
        if task == "indexes":
            indexes[done] = (time.perf_counter(), time.process_time())
        if not task.startswith("ingest") or not done:
            return
        if not marks or done // step > marks[-1][0] // step or done == total:
            marks.append((done, time.perf_counter() - t0, time.process_time() - c0))
            print(f"  {done:>10,} records  {marks[-1][1]:8.1f} s  load {_load()}",
                  flush=True)  # fmt: skip

    with Project.init(root, name="scale", classes=CLASSES) as proj:
        t0, c0 = time.perf_counter(), time.process_time()
        rep = ingest_source(
            proj,
            _synthetic_source(spec, args.n, 0),
            name="synthetic",
            progress=progress,
        )
        wall = time.perf_counter() - t0
    per_million = []
    prev_n, prev_t, prev_c = 0, 0.0, 0.0
    for n_done, t, cpu in marks:
        if n_done - prev_n >= step // 2:
            per_million.append({
                "up_to": n_done,
                "rate": (n_done - prev_n) / max(t - prev_t, 1e-9),
                "cpu_us_per_record": (cpu - prev_c) / (n_done - prev_n) * 1e6,
            })  # fmt: skip
            prev_n, prev_t, prev_c = n_done, t, cpu
    du = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    res: dict[str, Any] = {
        "n": args.n,
        "new": rep.new,
        "ingest_wall_s": wall,
        "rate_overall": rep.new / wall,
        "per_million": per_million,
        "id_order_wall_s": id_order[1][0] - id_order[0][0] if 1 in id_order else None,
        "id_order_cpu_s": id_order[1][1] - id_order[0][1] if 1 in id_order else None,
        "indexes_wall_s": indexes[1][0] - indexes[0][0] if 1 in indexes else None,
        "indexes_cpu_s": indexes[1][1] - indexes[0][1] if 1 in indexes else None,
        "project_bytes": du,
    }
    res.update(_queries(args, root, base))
    return res


MAIN_FIGURES: dict[int, dict[str, tuple[float, float]]] = {
    # (wall s, own GiB) of main (aad0cc2) as benchmarks/README.md records them,
    # at load 3.6-5.4 ("10 M after") and 4.5-5.1 ("1 M after")
    10_000_000: {
        "status": (11.9, 0.30),
        "eligibility": (10.2, 0.29),
        "sample class-balanced": (96.0, 3.0),
        "sample keyword-count": (24.5, 1.7),
        "sample matched-frequency": (53.5, 2.8),
        "sample threshold": (60.0, 2.8),
        "sample top-images": (62.1, 2.8),
    },
    1_000_000: {
        "status": (2.1, 0.10),
        "eligibility": (1.9, 0.09),
        "sample class-balanced": (9.6, 0.34),
        "sample keyword-count": (3.5, 0.24),
        "sample matched-frequency": (5.5, 0.33),
        "sample threshold": (5.0, 0.33),
        "sample top-images": (6.1, 0.33),
    },
}
"""Today's (main's) figures, printed beside each query of the same size."""


def _queries(args: argparse.Namespace, root: Path, base: Path) -> dict[str, Any]:
    """Time status, eligibility and every sampling strategy on the project."""
    res: dict[str, Any] = {}
    (root / "kc.json").write_text(
        json.dumps({c: {f"kw{i:04d}": 1 for i in range(3)} for c in CLASSES})
    )
    queries: dict[str, list[str]] = {
        "status": ["retest", "status", "-p", str(root), "--json"],
        "eligibility": ["eligibility", str(root)],
    }
    for strategy in ("class-balanced", "keyword-count", "matched-frequency",
                     "threshold", "top-images"):  # fmt: skip
        cmd = ["retest", "sample", "-p", str(root), "--strategy", strategy,
               "--per-class", "100", "--no-dedup", "--seed", "1", "--json"]  # fmt: skip
        if strategy == "keyword-count":
            cmd += ["--keyword-counts", str(root / "kc.json")]
        queries[f"sample {strategy}"] = cmd
    res["queries"] = {}
    # --queries '' runs none (ingest only); no --queries runs every one
    wanted = list(queries) if args.queries is None else args.queries.split(",")
    wanted = [w for w in wanted if w]
    runs = [("", None)]
    if args.baseline_src:  # the same query on the baseline, back to back
        runs.append(("baseline", args.baseline_src))
    for name, argv in queries.items():
        if not any(name.startswith(w) for w in wanted):
            continue
        for label, src in runs:
            try:
                r = _measure(argv, timeout=args.query_timeout, src=src)
            except subprocess.TimeoutExpired:
                r = {"timeout_s": args.query_timeout}
            res["queries"][f"{name} ({label})" if label else name] = r
            print(f"  {name:28s} {label:8s} {r.get('wall_s', float('nan')):8.1f} s  "
                  f"peak {r.get('peak_rss_mib', float('nan')):6.0f} MiB (own "
                  f"{r.get('peak_anon_mib', float('nan')):5.0f})  exit {r.get('exit')}"
                  f"  load {r.get('load_before')}  {r.get('stderr_tail')}",
                  flush=True)  # fmt: skip
        if args.baseline_src and name.startswith("sample") and "output_sha256" in r:
            same = r["output_sha256"] == res["queries"][name].get("output_sha256")
            res["queries"][name]["same_output_as_baseline"] = same
            print(f"  {'':28s} same output as the baseline: {same}", flush=True)
        main = MAIN_FIGURES.get(args.n, {}).get(name)
        if main:
            print(f"  {'':28s} {'main':8s} {main[0]:8.1f} s  own {main[1] * 1024:5.0f} "
                  "MiB (recorded in README, aad0cc2)", flush=True)  # fmt: skip
    if not (args.keep or args.reuse):
        remove_scratch(base)
    return res


# ------------------------------------------------------------------ dedup


GEMM_FORMS = ("a @ b", "a @ c.T", "c @ a.T")
"""The products a task could run for (q × d) queries ``a`` and m reference rows:
``b`` = the rows as a contiguous (d × m) block, ``c`` = them as (m × d) rows."""


def _gemm_rate(d: int, q: int, m: int, threads: int) -> dict[str, Any]:
    """float32 GEMM GFLOP/s of (q × d) · (d × m) on ``threads``, the best of
    :data:`GEMM_FORMS` (best of 5 each), per wall second and per CPU second of
    this process. The CPU rate is what a core delivers while it runs, so it stays
    meaningful when other jobs share the cores; the wall rate is what this run
    got. ``m`` is a task's chunk: the denominator is the best this machine does
    for the shape a worker runs."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((q, d), dtype=np.float32)
    b = rng.standard_normal((d, m), dtype=np.float32)
    c = np.ascontiguousarray(b.T)
    at = a.T
    reps = max(1, 8192 // m)  # ~the same arithmetic per timing for every m
    forms = {"a @ b": lambda: a @ b, "a @ c.T": lambda: a @ c.T,
             "c @ a.T": lambda: c @ at}  # fmt: skip
    wall = dict.fromkeys(forms, float("inf"))
    cpu = dict.fromkeys(forms, float("inf"))
    with threadpool_limits(threads):
        for fn in forms.values():
            fn()
        for _ in range(5):
            for name, fn in forms.items():
                t, p = time.perf_counter(), time.process_time()
                for _ in range(reps):
                    fn()
                wall[name] = min(wall[name], time.perf_counter() - t)
                cpu[name] = min(cpu[name], time.process_time() - p)
    flop = 2 * q * d * m * reps / 1e9
    return {
        "wall": flop / min(wall.values()),
        "cpu": flop / min(cpu.values()),
        "wall_by_form": {k: flop / v for k, v in wall.items()},
        "cpu_by_form": {k: flop / v for k, v in cpu.items()},
    }


def _gemm_sustained(d: int, q: int, m: int, flop: float) -> dict[str, float]:
    """One thread doing the job's arithmetic (``flop``) as back-to-back float32
    GEMMs of the task's shape on data already in memory, timed as one stretch:
    the rate this core sustains for as long as the job runs. The best-of-5
    burst of :func:`_gemm_rate` is the core's peak; on a shared VM the two
    differ by up to ~20 % (clock and neighbours), so both are reported."""
    wall, cpu, done = _gemm_stretch(q, d, m, flop)
    done /= 1e9
    out = {"wall": done / wall, "cpu": done / cpu, "seconds": wall, "load": _load()}
    print(f"  GEMM sustained, 1 thread, the job's arithmetic ({wall:.1f} s): "
          f"{out['wall']:.1f} GFLOP/s ({out['cpu']:.1f} per CPU second)  "
          f"load {_load()}", flush=True)  # fmt: skip
    return out


def _gemm_rates(d: int, q: int, m: int) -> dict[str, Any]:
    """1- and 2-thread rates (see :func:`_gemm_rate`), printed."""
    g1, g2 = _gemm_rate(d, q, m, 1), _gemm_rate(d, q, m, 2)
    print(f"  GEMM ({q} x {d}) . ({d} x {m}): {g1['wall']:.1f} GFLOP/s on 1 thread "
          f"({g1['cpu']:.1f} per CPU second; by form "
          + ", ".join(f"{k} {v:.1f}" for k, v in g1["cpu_by_form"].items())
          + f"), {g2['wall']:.1f} on 2 ({g2['wall'] / g1['wall']:.2f}x)  load {_load()}",
          flush=True)  # fmt: skip
    return {"1": g1, "2": g2, "load": _load()}


def _gemm_on_worker(q: int, d: int, m: int, flop: float) -> float:
    """Runs on a worker: float32 GEMMs of the task's shape worth ``flop``, one
    thread; their wall seconds (timed inside the task: no Dask overhead)."""
    wall, _, done = _gemm_stretch(q, d, m, flop)
    return wall * flop / done


def _gemm_stretch(q: int, d: int, m: int, flop: float) -> tuple[float, float, float]:
    """Back-to-back one-thread float32 GEMMs (q × d)·(d × m) worth about ``flop``,
    timed as one stretch: (wall s, CPU s, FLOP done)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((q, d), dtype=np.float32)
    b = rng.standard_normal((d, m), dtype=np.float32)
    reps = max(1, round(flop / (2.0 * q * d * m)))
    with threadpool_limits(1):
        a @ b
        t, p = time.perf_counter(), time.process_time()
        for _ in range(reps):
            a @ b
        wall, cpu = time.perf_counter() - t, time.process_time() - p
    return wall, cpu, 2.0 * q * d * m * reps


def _paired(shards: Any, client: Any, q: Any, d: int, m: int) -> dict[str, Any]:
    """Each shard task of the job, one at a time on the single worker, next to
    GEMMs of the same FLOP on that worker: the core's rate measured within a
    second of each task, so the VM's clock swings (sustained one-thread GEMM
    65-80 GFLOP/s minutes apart here) cancel in each pair. The task's time is
    the client's round trip (Dask's overhead included), the GEMM's its own."""
    from retest.cluster._dask import _shard_task
    from retest.dedup.knn import DEFAULT_MEMORY_BUDGET

    q_fut = client.scatter(q, broadcast=True, hash=False)
    ratios, tasks, gemms = [], [], []
    for i in range(shards.n_shards):
        lo, hi = int(shards.bounds[i]), int(shards.bounds[i + 1])
        flop = 2.0 * q.shape[0] * (hi - lo) * d
        g0 = client.submit(_gemm_on_worker, q.shape[0], d, m, flop / 2, pure=False)
        g0 = g0.result()
        t = time.perf_counter()
        client.submit(_shard_task, q_fut, shards._source(i), lo, hi, 10, None,
                      DEFAULT_MEMORY_BUDGET, "auto", shards.threads,
                      pure=False).result()  # fmt: skip
        task = time.perf_counter() - t
        g1 = client.submit(_gemm_on_worker, q.shape[0], d, m, flop / 2, pure=False)
        gemm = g0 + g1.result()  # half before, half after: the same FLOP
        ratios.append(gemm / task)
        tasks.append(task)
        gemms.append(gemm)
    r = np.array(ratios)
    out = {
        "ratio_median": float(np.median(r)),
        "ratio_of_totals": float(sum(gemms) / sum(tasks)),
        "ratio_quartiles": [float(x) for x in np.percentile(r, [25, 75])],
        "task_s": tasks, "gemm_s": gemms, "load": _load(),
    }  # fmt: skip
    print(f"  paired, {len(r)} shard tasks each between one-thread GEMMs of the same "
          f"FLOP on the worker: task rate / GEMM rate median {out['ratio_median']:.3f} "
          f"(quartiles {out['ratio_quartiles'][0]:.3f}-{out['ratio_quartiles'][1]:.3f}), "
          f"totals {out['ratio_of_totals']:.3f}  load {_load()}", flush=True)  # fmt: skip
    return out


def _engine() -> list[str]:
    """The GEMM engine this worker's kNN chose (``[]`` before the first call)."""
    from retest.dedup import knn as knn_module

    return list(knn_module._ENGINE)


def _workers_cpu(client: Any) -> float:
    """CPU seconds the worker processes have used so far (all their threads)."""
    return float(sum(client.run(time.process_time).values()))


def bench_dedup(args: argparse.Namespace) -> dict[str, Any]:
    from retest.cluster import ClusterReferences, cluster_client
    from retest.cluster._dask import MAX_SHARD_BYTES
    from retest.dedup._knn_chunks import make_plan
    from retest.dedup.knn import DEFAULT_MEMORY_BUDGET, knn

    base = _scratch(args)
    base.mkdir(parents=True, exist_ok=True)
    path = base / "refs.npy"
    dt = np.dtype(args.dtype)
    need = args.n * args.d * dt.itemsize
    free = shutil.disk_usage(base).free
    if need > free - 4 * 2**30:
        raise SystemExit(
            f"{base}: {need / 2**30:.1f} GiB needed, {free / 2**30:.1f} free"
        )
    t = time.perf_counter()
    if not path.exists():
        refs = np.lib.format.open_memmap(path, "w+", dt, (args.n, args.d))
        for s in range(0, args.n, 65_536):
            e = min(args.n, s + 65_536)
            rng = np.random.default_rng([1, s])
            # random bits with the exponent's top bit cleared: finite values in
            # (-2, 2), generated at memory speed (8 GiB of normals takes minutes)
            bits = rng.integers(0, 1 << 16, size=(e - s, args.d), dtype=np.uint16)
            if dt == np.float16:
                refs[s:e] = (bits & 0xBFFF).view(np.float16)
            else:
                refs[s:e] = (bits & 0xBFFF).view(np.float16).astype(dt)
        refs.flush()
        del refs
    write_s = time.perf_counter() - t
    refs = np.load(path, mmap_mode="r")
    q = np.random.default_rng(2).uniform(-2, 2, (args.q, args.d)).astype(dt)
    res: dict[str, Any] = {
        "n": args.n, "d": args.d, "q": args.q, "dtype": args.dtype,
        "file_gib": need / 2**30, "write_s": write_s,
        "runs": [],
    }  # fmt: skip
    # the chunk a task scores per GEMM (one thread, the default budget)
    shard_rows = -(-args.n // max(2, -(-need // MAX_SHARD_BYTES)))
    m = make_plan(args.q, shard_rows, args.d, DEFAULT_MEMORY_BUDGET, None, 1).chunk
    gemm_before = _gemm_rates(args.d, args.q, m)
    flops = 2.0 * args.q * args.n * args.d
    ref_result = None
    sustained = [_gemm_sustained(args.d, args.q, m, flops)]
    for workers in (1, 2):
        if workers == 2:  # the 1-worker run between two sustained GEMMs
            sustained.append(_gemm_sustained(args.d, args.q, m, flops))
        with cluster_client(workers=workers, threads_per_worker=1) as client:
            shards = ClusterReferences(client, refs, transfer="path", task_threads=1)
            shards.knn(q[:8], 10)  # warm-up: page cache, native build, imports
            engines = sorted({e for v in client.run(_engine).values() for e in v})
            times, cpus = [], []
            for _ in range(args.reps):
                c = _workers_cpu(client)
                t = time.perf_counter()
                out = shards.knn(q, 10)
                times.append(time.perf_counter() - t)
                cpus.append(_workers_cpu(client) - c)
            if workers == 1 and args.paired:
                res["paired"] = _paired(shards, client, q, args.d, m)
            if ref_result is None:
                ref_result = out
            same = bool(
                np.array_equal(out.indices, ref_result.indices)
                and np.array_equal(out.distances, ref_result.distances)
            )
        res["runs"].append({
            "workers": workers, "shards": shards.n_shards, "walls": times,
            "wall_s": float(np.median(times)), "worker_cpu_s": float(np.median(cpus)),
            "engines": engines, "same_as_1_worker": same, "load": _load(),
        })  # fmt: skip
        print(f"  {workers} worker(s): {np.median(times):7.1f} s wall, "
              f"{np.median(cpus):7.1f} s worker CPU  engine {engines}  "
              f"load {_load()}", flush=True)  # fmt: skip
    # the denominator: the best GEMM of this run, before or after the workers
    gemm_after = _gemm_rates(args.d, args.q, m)
    g = {t: {c: max(gemm_before[t][c], gemm_after[t][c]) for c in ("wall", "cpu")}
         for t in ("1", "2")}  # fmt: skip
    sus = {c: float(np.mean([x[c] for x in sustained])) for c in ("wall", "cpu")}
    res.update(
        gemm_chunk_rows=m,
        gemm_before=gemm_before,
        gemm_after=gemm_after,
        gemm_sustained=sustained,
        gemm_sustained_gflops_1thread=sus["wall"],
        gemm_gflops_1thread=g["1"]["wall"],
        gemm_gflops_1thread_cpu=g["1"]["cpu"],
        gemm_gflops_2threads=g["2"]["wall"],
        gemm_speedup_2threads=g["2"]["wall"] / g["1"]["wall"],
    )
    for run in res["runs"]:
        w = run["workers"]
        gf, gf_cpu = flops / run["wall_s"] / 1e9, flops / run["worker_cpu_s"] / 1e9
        run.update(
            gflops=gf, gflops_per_worker=gf / w, gflops_per_cpu_s=gf_cpu,
            fraction_of_1thread_gemm=gf / w / g["1"]["wall"],
            fraction_of_1thread_gemm_cpu=gf_cpu / g["1"]["cpu"],
            fraction_of_sustained_gemm=gf / w / sus["wall"],
            fraction_of_sustained_gemm_cpu=gf_cpu / sus["cpu"],
        )  # fmt: skip
        print(f"  {w} worker(s): {gf:6.1f} GFLOP/s = {gf / w / g['1']['wall']:.2f} of "
              f"the 1-thread GEMM's best burst per worker (wall); per CPU second "
              f"{gf_cpu:.1f} = {gf_cpu / g['1']['cpu']:.2f}; of the sustained 1-thread "
              f"GEMM {gf / w / sus['wall']:.2f} (wall), {gf_cpu / sus['cpu']:.2f} "
              "(CPU)", flush=True)  # fmt: skip
    res["speedup_2_vs_1"] = res["runs"][0]["wall_s"] / res["runs"][1]["wall_s"]
    print(f"  2 workers: {res['speedup_2_vs_1']:.2f}x of 1 (2-thread GEMM "
          f"{res['gemm_speedup_2threads']:.2f}x)", flush=True)  # fmt: skip
    if args.check:
        sub = knn(q[:16], refs[: min(args.n, 200_000)], 10)
        res["spot_check_rows"] = 16
        res["spot_check_ok"] = bool(np.isfinite(sub.distances).all())
    if not args.keep:
        remove_scratch(base)
    return res


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        _child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=["store", "dedup"])
    ap.add_argument("--n", type=int)
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--q", type=int, default=256)
    ap.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument(
        "--reuse", action="store_true", help="store: time the queries on the "
        "project a --keep run left in --dir (no ingest)"
    )  # fmt: skip
    ap.add_argument("--check", action="store_true")
    ap.add_argument(
        "--paired", action="store_true", help="dedup: also time each shard task "
        "of the 1-worker run between GEMMs of the same FLOP on that worker"
    )  # fmt: skip
    ap.add_argument("--out")
    ap.add_argument(
        "--queries", help="store: which of status,eligibility,sample ('' = none: "
        "ingest only)"
    )  # fmt: skip
    ap.add_argument("--query-timeout", type=float, default=1800)
    ap.add_argument(
        "--baseline-src", help="store: also run each query with this checkout's "
        "src/ first on the path (e.g. main's), back to back"
    )  # fmt: skip
    args = ap.parse_args()
    if args.n is None:
        args.n = 10_000_000 if args.part == "store" else 1 << 20
    print(f"{args.part}: n={args.n:,}  load {_load()}", flush=True)
    res = bench_store(args) if args.part == "store" else bench_dedup(args)
    res["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    part = "queries" if args.part == "store" and args.reuse else args.part
    out = Path(args.out) if args.out else RESULTS / f"scale_{part}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
