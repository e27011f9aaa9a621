"""Benchmark: the stale-candidate check (``stale_candidates``, what ``check_fresh``
runs before ``sample``/``status``/``split``/crowd tasks) on a large project.

Builds a project of N candidates (10 classes, content ids, no pixels: the check
reads none) and writes a neighbour list of k references for every candidate
through the store API the dedup stage uses (``put_neighbours``, then
``mark_covered`` where the code has it), for each of ``--metrics``. Then, in child processes, times ``stale_candidates`` with this
checkout's ``src`` and with ``--baseline-src`` (main's), interleaved
(``--reps`` rounds), reporting wall and CPU seconds of the child, its peak RSS
and own (anonymous) memory, and a hash of the answer (both must agree). Then
``--stale`` new classed candidates without lists are added and both run again.

Usage::

    python3 benchmarks/bench_stale.py [--n 1000000] [--k 5] [--metrics l2]
        [--stale 1000] [--reps 2] [--baseline-src /work/main/src] [--dir D]
        [--keep] [--reuse D]

``--reuse D`` takes the project a ``--dir D --keep`` run left (its candidates
without lists get them first).

Every step that writes runs in a child process with the code it belongs to.
With ``--baseline-src`` the project is built (or, with ``--reuse``, made fresh)
by the baseline's code, so it has the baseline's schema; when the checkout's
schema is newer, the baseline is measured on that project and the checkout on a
copy that it migrates (``migrate``: wall and CPU seconds of opening the copy,
timed apart from the checks); the stale candidates are added to both. Without
``--baseline-src`` the project is migrated in place (timed the same way).

Results: ``benchmarks/results/stale_<n>.json``. Scratch data goes under
``scratch_<checkout>`` beside the checkout (never /tmp), deleted unless ``--keep``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _child_measure import measured, remove_scratch, scratch_dir

RESULTS = Path(__file__).resolve().parent / "results"
_BATCH = 50_000


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _cid(i: int, salt: str = "") -> str:
    return hashlib.sha256(f"{salt}{i}".encode()).hexdigest()


def build(root: Path, n: int, k: int, metrics: list[str]) -> dict[str, float]:
    """The project: ``n`` classed candidates, each with a list per metric."""
    from retest.project import init_project
    from retest.store.rows import CandidateRow, NeighbourList

    refs = tuple(f"train:{j}" for j in range(k))
    dists = tuple(float(j + 1) for j in range(k))
    t0 = time.perf_counter()
    with init_project(root, classes=[f"c{i}" for i in range(10)]) as p:
        for lo in range(0, n, _BATCH):
            ids = [_cid(i) for i in range(lo, min(n, lo + _BATCH))]
            p.store.candidates.add(
                CandidateRow(c, "synthetic", str(lo + j), class_id=(lo + j) % 10)
                for j, c in enumerate(ids)
            )
        t1 = time.perf_counter()
        for m in metrics:
            for lo in range(0, n, _BATCH):
                p.store.neardup.put_neighbours(
                    NeighbourList(_cid(i), m, refs, dists)
                    for i in range(lo, min(n, lo + _BATCH))
                )
            _mark(p, m)  # as the dedup stage does after a metric's lists
    return {"candidates_s": t1 - t0, "lists_s": time.perf_counter() - t1}


def _mark(p: Any, metric: str) -> None:
    mark = getattr(p.store.neardup, "mark_covered", None)  # not before schema 8
    if mark is not None:
        mark([metric])


def add_stale(root: Path, n: int) -> None:
    from retest.project import Project
    from retest.store.rows import CandidateRow

    with Project.open(root) as p:
        salt = f"late{p.store.candidates.count()}:"  # new ids on every --reuse
        p.store.candidates.add(
            CandidateRow(_cid(i, salt), "late", str(i), class_id=i % 10)
            for i in range(n)
        )


def make_fresh(root: Path, k: int) -> int:
    """Lists for the candidates that lack them (what ``retest dedup`` does),
    so a ``--reuse`` run starts fresh; returns how many were written."""
    from retest.project import Project, metrics_run
    from retest.store.rows import NeighbourList

    refs = tuple(f"train:{j}" for j in range(k))
    dists = tuple(float(j + 1) for j in range(k))
    with Project.open(root) as p:
        ms = metrics_run(p)
        late = p.store.neardup.without_lists(ms)
        p.store.neardup.put_neighbours(
            NeighbourList(c, m, refs, dists) for c in late for m in ms
        )
        for m in ms:
            _mark(p, m)
    return len(late)


def _open(root: str) -> dict[str, Any]:
    """Open the project (migrating it if its schema is older): the time it took."""
    t0, c0 = time.perf_counter(), time.process_time()
    from retest.project import Project

    with Project.open(root) as p:
        version = p.store.schema_version()
    return {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "schema": version,
    }


def _step(src: str, *args: str) -> Any:
    """Run one writing step (``_build``, ``_fresh``, ``_stale``, ``_open``) in a
    child with ``src`` first on its path; its JSON answer."""
    out = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=src),
        check=False, timeout=24 * 3600,
    )  # fmt: skip
    if out.returncode:
        sys.exit(f"error: step {args[0]} failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child(root: str) -> None:
    """Run ``stale_candidates`` once here; print the measures as one JSON line."""
    from retest.project import Project, stale_candidates

    with Project.open(root) as p, measured() as m:
        stale = stale_candidates(p)
    print(
        json.dumps(
            {
                "wall_s": m["wall_s"],
                "cpu_s": m["cpu_s"],
                "n_stale": len(stale),
                "answer_sha256": hashlib.sha256("\n".join(stale).encode()).hexdigest(),
                "peak_rss_mib": m["peak_rss_mib"],
                "peak_anon_mib": m["peak_anon_mib"],
            }
        )
    )


def _measure(root: Path, src: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=src)
    load = _load()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, __file__, "_child", str(root)],
        capture_output=True, text=True, env=env, check=False, timeout=3600,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        return {"error": out.stderr.strip().splitlines()[-1:], "load_before": load}
    res: dict[str, Any] = json.loads(lines[-1])
    res["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (
        after.ru_stime - before.ru_stime
    )
    res["load_before"] = load
    return res


def _rounds(
    roots: dict[str, Path], srcs: dict[str, str], reps: int
) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {name: [] for name in srcs}
    for r in range(reps):
        order = list(srcs) if r % 2 == 0 else list(reversed(srcs))
        for name in order:
            res = _measure(roots[name], srcs[name])
            out[name].append(res)
            print(f"  {name:9s} {json.dumps(res)}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--metrics", default="l2")
    ap.add_argument("--stale", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--baseline-src", default="")
    ap.add_argument("--dir")
    ap.add_argument("--reuse", help="a project a --keep run left")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    srcs = {"branch": here}
    if args.baseline_src:
        srcs["baseline"] = args.baseline_src
    metrics = args.metrics.split(",")
    res: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "n": args.n,
        "k": args.k,
        "metrics": metrics,
        "load_start": _load(),
    }
    writer = srcs.get("baseline", here)  # the project has the baseline's schema
    scratch: Path | None = None
    if args.reuse:
        root = Path(args.reuse) / "p"
        if "baseline" not in srcs:
            res["migrate"] = _step(here, "_open", str(root))
        res["made_fresh"] = _step(writer, "_fresh", str(root), str(args.k))
    else:
        scratch = scratch_dir("stale-", args.dir)
        root = scratch / "p"
        print(f"building {args.n:,} candidates × {metrics} in {root}", flush=True)
        try:
            res["build"] = _step(
                writer, "_build", str(root), str(args.n), str(args.k), ",".join(metrics)
            )
        except BaseException:  # a failed build leaves no scratch behind
            if not args.keep:
                remove_scratch(scratch)
            raise
        print(f"  {res['build']}", flush=True)
    roots = {"branch": root}
    copy: Path | None = None
    try:
        if "baseline" in srcs:
            roots["baseline"] = root
            # beside the project (same disk)
            copy = (
                scratch_dir("stale-copy-", None)
                if args.dir is None
                else Path(
                    tempfile.mkdtemp(prefix="stale-copy-", dir=Path(args.dir).parent)
                )
            )
            t0 = time.perf_counter()
            shutil.copytree(root, copy / "p")
            res["copy_s"] = time.perf_counter() - t0
            roots["branch"] = copy / "p"
            res["migrate"] = _step(here, "_open", str(roots["branch"]))
            print(f"  branch copy {roots['branch']}: {res['migrate']}", flush=True)
        print("fresh (every candidate has its lists):", flush=True)
        res["fresh"] = _rounds(roots, srcs, args.reps)
        if args.stale:
            for name, src in srcs.items():
                _step(src, "_stale", str(roots[name]), str(args.stale))
            print(f"{args.stale} new candidates without lists:", flush=True)
            res["stale"] = _rounds(roots, srcs, args.reps)
            res["stale_added"] = args.stale
    finally:
        if copy is not None and not args.keep:
            remove_scratch(copy)
        if scratch is not None and not args.keep:
            remove_scratch(scratch)
    res["load_end"] = _load()
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.out) if args.out else RESULTS / f"stale_{args.n}.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")


def _run_step(name: str, args: list[str]) -> None:
    if name == "_build":
        out: Any = build(Path(args[0]), int(args[1]), int(args[2]), args[3].split(","))
    elif name == "_fresh":
        out = make_fresh(Path(args[0]), int(args[1]))
    elif name == "_stale":
        add_stale(Path(args[0]), int(args[1]))
        out = int(args[1])
    else:
        out = _open(args[0])
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        _child(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] in ("_build", "_fresh", "_stale", "_open"):
        _run_step(sys.argv[1], sys.argv[2:])
    else:
        main()
