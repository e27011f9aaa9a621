"""Time ``retest sample ...`` without ``CandidateRepo.source_groups``.

Not a test: it times things. Branch s10 makes ``source_groups`` (one GROUP BY
over every candidate, 30 s of a 10 M ``sample`` under load) sparse; this runs the
CLI in one process with it answering ``[]`` (the synthetic ``bench_scale.py``
project shares no source id, so the answer is the same) to time what ``sample``
costs besides it. Prints wall, CPU and peak ``RssAnon`` (sampled every 20 ms) as
JSON on stderr. Run with either checkout's ``src`` on PYTHONPATH::

    PYTHONPATH=src python3 benchmarks/sample_without_source_groups.py sample \\
        -p D/proj --strategy class-balanced --per-class 100 --no-dedup --seed 1 --json
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def _watch(peak: list[int]) -> None:
    while True:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    peak[0] = max(peak[0], int(line.split()[1]))
        time.sleep(0.02)


def main() -> None:
    peak = [0]
    threading.Thread(target=_watch, args=(peak,), daemon=True).start()
    load = os.getloadavg()[0]
    t, c = time.perf_counter(), time.process_time()
    import retest.store._sqlite_candidates as sc
    from retest.cli.main import main as cli

    sc._Candidates.source_groups = lambda self: []  # type: ignore[method-assign]
    sys.argv = ["retest", *sys.argv[1:]]
    code: object = 0
    try:
        cli()
    except SystemExit as e:
        code = e.code or 0
    out = {
        "wall_s": round(time.perf_counter() - t, 2),
        "cpu_s": round(time.process_time() - c, 2),
        "peak_anon_mib": peak[0] // 1024,
        "load_before": load,
        "exit": code,
        "src": os.environ.get("PYTHONPATH"),
    }
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    main()
