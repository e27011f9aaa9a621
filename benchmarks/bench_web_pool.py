"""Time the web's keyword pool reads on a ``bench_scale.py store --keep`` project.

Not a test: it times things. With this checkout's or main's ``src`` on
PYTHONPATH (main's ``Pool.ids`` takes no store): the pool, the keyword progress
of class 0 (its 100 keywords) and one keyword's ids. Prints one JSON line::

    PYTHONPATH=src python3 benchmarks/bench_web_pool.py D/proj [--cold]

``--cold`` drops the project database's pages from the OS page cache before each
read (``posix_fadvise(DONTNEED)`` on that file only: no root, nothing else
evicted), as after a server restart on a machine whose memory went elsewhere.
"""

import json
import os
import resource
import sys
import time

from retest.project import Project
from retest.web import views

root = sys.argv[1]
COLD = "--cold" in sys.argv[2:]


def _evict() -> None:
    if not COLD:
        return
    for name in ("retest.db", "retest.db-wal"):
        try:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


out = {
    "src": os.environ.get("PYTHONPATH"),
    "load_before": os.getloadavg()[0],
    "cold": COLD,
}
with Project.open(root) as p:
    st = p.store
    from retest.store.rows import KeywordRow

    # the synthetic project has no keyword rows: kwNNNN belongs to class NNNN % 10
    every = [KeywordRow(i % 10, f"kw{i:04d}", 10) for i in range(1000)]
    st.classes.keywords = lambda class_id=None: [
        k for k in every if class_id is None or k.class_id == class_id
    ]
    kws = st.classes.keywords(class_id=0)
    out["keywords_class0"] = len(kws)
    _evict()
    t, c = time.perf_counter(), time.process_time()
    pool = views.candidate_pool(st)
    out["candidate_pool_s"] = [
        round(time.perf_counter() - t, 2),
        round(time.process_time() - c, 2),
    ]
    _evict()
    t, c = time.perf_counter(), time.process_time()
    rows, _ = views.keyword_progress(
        p, class_id=0, selected={}, verdicts={}, verified={}, pool=pool
    )
    out["keyword_progress_class0_s"] = [
        round(time.perf_counter() - t, 2),
        round(time.process_time() - c, 2),
    ]
    out["to_select_sum"] = sum(r.to_select for r in rows)
    kw = kws[0].keyword if kws else "kw0000"
    _evict()
    t, c = time.perf_counter(), time.process_time()
    try:
        ids = pool.ids(st, kw, 0)
    except TypeError:  # main's Pool.ids(keyword, class_id)
        ids = pool.ids(kw, 0)
    out["ids_one_keyword_s"] = [
        round(time.perf_counter() - t, 2),
        round(time.process_time() - c, 2),
    ]
    out["ids_one_keyword_n"] = len(ids)
out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(json.dumps(out))
