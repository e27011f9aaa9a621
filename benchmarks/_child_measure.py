"""What the benchmarks share: a child process's own time and memory, and scratch.

Not a benchmark. ``bench_scale.py`` and ``bench_stale.py`` run each query in a
child process (``python3 bench_X.py _child …``) that measures itself with
:func:`measured` and prints the figures as its last line; both put scratch data
under ``scratch_<checkout>`` beside the checkout (never /tmp: a small tmpfs on
the benchmark machine) with :func:`scratch_dir` and remove it with
:func:`remove_scratch`, which also removes that parent folder once it is empty.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["measured", "remove_scratch", "scratch_dir", "status_kib"]

CHECKOUT = Path(__file__).resolve().parents[1]
SCRATCH_PARENT = CHECKOUT.parent / f"scratch_{CHECKOUT.name}"


def status_kib(field: str) -> int:
    """A ``/proc/self/status`` figure in KiB (``VmHWM``, ``RssAnon``), 0 if absent."""
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


@contextmanager
def measured() -> Iterator[dict[str, Any]]:
    """Measure the block: ``wall_s``, ``cpu_s`` (this process), ``peak_rss_mib``
    and ``peak_anon_mib`` are put into the yielded dict when it ends.

    ``VmHWM`` (peak RSS) counts the database pages SQLite reads through its
    memory map (file-backed page cache, up to the whole file); ``RssAnon`` is
    the process's own memory, sampled every 20 ms for its peak."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], status_kib("RssAnon"))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out: dict[str, Any] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        yield out
    finally:
        out["wall_s"] = time.perf_counter() - t0
        out["cpu_s"] = time.process_time() - c0
        done.set()
        sampler.join()
        out["peak_rss_mib"] = status_kib("VmHWM") / 1024
        out["peak_anon_mib"] = max(peak[0], status_kib("RssAnon")) / 1024


def scratch_dir(prefix: str, given: str | None = None) -> Path:
    """``given`` (``--dir``), or a fresh folder under ``scratch_<checkout>``."""
    if given:
        return Path(given)
    SCRATCH_PARENT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=SCRATCH_PARENT))


def remove_scratch(path: Path) -> None:
    """Delete a scratch folder, and ``scratch_<checkout>`` when that leaves it empty."""
    shutil.rmtree(path, ignore_errors=True)
    if path.parent == SCRATCH_PARENT:
        try:
            SCRATCH_PARENT.rmdir()  # only when empty: another run's data stays
        except OSError:
            pass
