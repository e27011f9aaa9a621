"""An ingest leaves the store's id-order cache (``retest.db-idorder``) up to date.

The first ``sample`` after an ingest used to build or extend the cache (about a
minute at 10 M candidates); now the ingest does it at its end, so ``sample``
finds it valid. The cache is derived: a failure to write it costs the ingest a
warning, never the ingest, and a reader in another process never sees a file
half-written. Through the real CLI on a real SQLite file.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import retest.store._idorder_cache as cache_file
import retest.store._sqlite_columns as cols
from checkout_cli import retest_cli  # type: ignore[import-not-found]
from ingest_kill import INSERTED, python  # type: ignore[import-not-found]
from retest.store.sqlite import SQLiteStore

CACHE = "retest.db-idorder"


def _cli(*args: str | Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return retest_cli(*args, ok=ok)


def _arrays(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
    np.savez(path, images=imgs, labels=rng.integers(0, 3, n))
    return path


def _reader(db: Path) -> Callable[[Callable[[Any], Any]], Any]:
    def read(fn: Callable[[Any], Any]) -> Any:
        con = sqlite3.connect(db)
        try:
            return fn(con)
        finally:
            con.close()

    return read


def _current(proj: Path) -> bool:
    return cols.cache_is_current(_reader(proj / "retest.db"), proj / CACHE)


def _members(proj: Path, name: str) -> list[Any]:
    out = _cli(
        "sample", "--strategy", "class-balanced", "--per-class", "20", "--seed", "3",
        "--no-dedup", "--json", "--name", name, "-p", proj,
    )  # fmt: skip
    got = json.loads(out.stdout)
    assert got["valid"] and got["members"]
    return got["members"]


def _orders(proj: Path) -> dict[int, list[str]]:
    """Every class's candidate ids in id order, as the store reads them."""
    with SQLiteStore(proj / "retest.db") as s:
        return {k: s.candidates.ids_at(h) for k, h in s.candidates.id_orders().items()}


def test_ingest_writes_then_extends_the_cache(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    _cli("init", proj, "--classes", "x,y,z")
    _cli("source", "add", "arrays", _arrays(tmp_path / "a.npz", 300, 1), "-p", proj)
    assert (proj / CACHE).is_file()  # on main only the first reader writes it
    assert _current(proj)
    first = cache_file.load(proj / CACHE)
    assert first is not None and sum(len(h) for h in first.handles) == 300

    _cli("source", "add", "arrays", _arrays(tmp_path / "b.npz", 200, 2),
         "--name", "more", "-p", proj)  # fmt: skip
    assert _current(proj)
    second = cache_file.load(proj / CACHE)
    assert second is not None and second.top > first.top
    assert sum(len(h) for h in second.handles) == 500
    # the extended cache orders exactly as a cache rebuilt from the table does
    with_cache = _members(proj, "r1")
    (proj / CACHE).unlink()
    assert _members(proj, "r2") == with_cache
    assert _current(proj)  # the reader rebuilt it


def test_a_killed_ingest_leaves_no_cache_trusted_wrongly(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    _cli("init", proj, "--classes", "x,y,z")
    _cli("source", "add", "arrays", _arrays(tmp_path / "a.npz", 200, 5), "-p", proj)
    # the second ingest dies with rows of two batches stored, before its end
    more = ("source", "add", "arrays", _arrays(tmp_path / "b.npz", 300, 6),
            "--name", "more", "--batch-size", "50", "-p", proj)  # fmt: skip
    killed = subprocess.run(
        [*python(INSERTED, 2), "-m", "retest", *map(str, more)],
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -9
    assert (proj / CACHE).is_file() and not _current(proj)  # of the first ingest
    # (sample refuses while an ingest is interrupted: the store is read directly)
    with_old = _orders(proj)  # the reader extends the first ingest's cache
    assert _current(proj) and sum(map(len, with_old.values())) > 200
    (proj / CACHE).unlink()
    assert _orders(proj) == with_old
    _cli(*more)  # resumed to its end: the cache is current again
    assert _current(proj)
    got = cache_file.load(proj / CACHE)
    assert got is not None and sum(len(h) for h in got.handles) == 500


def test_a_cache_that_cannot_be_written_costs_only_a_warning(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    _cli("init", proj, "--classes", "x,y,z")
    (proj / CACHE).mkdir()  # no file can be renamed over a folder
    out = _cli("source", "add", "arrays", _arrays(tmp_path / "a.npz", 120, 4),
               "-p", proj, "--json")  # fmt: skip
    assert json.loads(out.stdout)["new"] == 120
    warned = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and "id-order cache" in warned[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not _current(proj)
    (proj / CACHE).rmdir()
    assert len(_members(proj, "r1")) == 60  # the reader builds the order itself
    assert _current(proj)


_READ_LOOP = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import retest.store._idorder_cache as cache_file

    path, stop, ready = (Path(a) for a in sys.argv[1:4])
    seen, bad = set(), 0
    ready.touch()
    while not stop.exists():
        got = cache_file.load(path)
        if got is None or len(got.handles[0]) != got.top:
            bad += 1
            continue
        seen.add(got.top)
        # every value of the version read, not just its header
        ok = all((h == got.top).all() for h in got.handles)
        bad += not ok
    print(bad, sorted(seen))
    """
)


def test_a_reader_in_another_process_never_sees_a_half_written_cache(
    tmp_path: Path,
) -> None:
    path, stop, ready = tmp_path / CACHE, tmp_path / "stop", tmp_path / "ready"

    def version(top: int) -> cache_file.IdOrders:
        # a few MB, so a non-atomic write would be caught midway
        h = np.full(top, top, np.int64)
        return cache_file.IdOrders(top, 0, [0, 1], [h, h], [h.view(np.uint64)] * 2)

    tops = (400_000, 300_000)
    cache_file.write(path, version(tops[0]))
    reader = subprocess.Popen(
        [sys.executable, "-c", _READ_LOOP, str(path), str(stop), str(ready)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        while not ready.exists() and reader.poll() is None:
            time.sleep(0.01)  # polls a condition; no outcome depends on time
        for i in range(60):
            cache_file.write(path, version(tops[i % 2]))
        assert not list(tmp_path.glob(".*.tmp"))  # no temporary left behind
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=120)
    assert reader.returncode == 0
    bad, seen = out.split(" ", 1)
    assert bad == "0", out
    assert set(json.loads(seen)) <= set(tops)
