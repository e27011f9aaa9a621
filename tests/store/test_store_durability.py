"""Artifacts, atomic writes, two writers at once, and SIGKILL in the middle of ingest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retest.errors import DataIntegrityError, InputValidationError, StoreError
from retest.store.artifacts import (
    PixelArray,
    read_npy,
    save_json,
    save_npy,
    sha256_file,
    verify_file,
    write_bytes,
    write_image_file,
    write_parquet,
)
from retest.store.rows import content_id
from retest.store.sqlite import SQLiteStore


def test_atomic_write_and_manifest(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "retest.db") as store:
        a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
        rec = save_npy(store, tmp_path, "arrays/a.npy", a, stage="t", params={"x": 1})
        assert rec.path == "arrays/a.npy" and rec.version
        assert store.artifacts.get("arrays/a.npy") == rec
        assert rec.sha256 == sha256_file(tmp_path / "arrays/a.npy")
        m = read_npy(tmp_path / "arrays/a.npy")
        assert isinstance(m, np.memmap) and np.array_equal(m, a)
        rec2 = save_json(
            store, tmp_path, "reports/x.json", {"b": 1, "a": [1]}, stage="t"
        )
        text = (tmp_path / "reports/x.json").read_text()
        assert text.index('"a"') < text.index('"b"') and text.endswith("\n")
        verify_file(tmp_path / rec2.path, rec2.sha256)
        (tmp_path / rec2.path).write_text("{}")
        with pytest.raises(DataIntegrityError, match="sha256 mismatch"):
            verify_file(tmp_path / rec2.path, rec2.sha256)
        with pytest.raises(DataIntegrityError, match="missing"):
            read_npy(tmp_path / "nope.npy")
        assert not list(tmp_path.rglob("*.tmp"))  # no temp files left behind


def test_atomic_write_keeps_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.bin"
    write_bytes(target, b"old")

    def boom(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        write_bytes(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_parquet_is_deterministic(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="Parquet needs the [parquet] extra")
    t = pa.table({"a": [1, 2], "b": [b"x", b"y"]})
    assert write_parquet(tmp_path / "1.parquet", t) == write_parquet(
        tmp_path / "2.parquet", t
    )


def test_image_files_are_content_addressed(tmp_path: Path) -> None:
    sha, p = write_image_file(tmp_path / "images", b"\x89PNG fake")
    assert p == tmp_path / "images" / sha and p.read_bytes() == b"\x89PNG fake"
    assert write_image_file(tmp_path / "images", b"\x89PNG fake") == (sha, p)


def test_pixel_array_append_read(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (5, 4, 3, 3), dtype=np.uint8)
    px = PixelArray.create(tmp_path, "p", shape=(4, 3, 3))
    assert len(px) == 0 and px.array().shape == (0, 4, 3, 3)
    assert px.append(a[:2]) == range(0, 2)
    assert PixelArray.create(tmp_path, "p", shape=(4, 3, 3)).append(a[2:]) == range(
        2, 5
    )
    again = PixelArray(tmp_path, "p")
    assert np.array_equal(again.array(), a)
    assert np.array_equal(again.read([4, 0, 4]), a[[4, 0, 4]])
    with pytest.raises(InputValidationError, match=r"shape \(4, 3, 3\)"):
        px.append(np.zeros((1, 3, 4, 3), np.uint8))
    with pytest.raises(InputValidationError, match="not"):
        PixelArray.create(tmp_path, "p", shape=(2, 2))
    with pytest.raises(InputValidationError, match=r"\[0, 5\)"):
        px.read([5])
    with pytest.raises(StoreError, match="does not exist"):
        PixelArray(tmp_path, "q")


def test_pixel_array_ignores_and_truncates_uncommitted_bytes(tmp_path: Path) -> None:
    """Bytes past the header's count (a writer killed mid-append) never show up."""
    px = PixelArray.create(tmp_path, "p", shape=(2, 2))
    px.append(np.ones((3, 2, 2), np.uint8))
    with open(px.data_path, "ab") as f:
        f.write(b"\xff" * 7)  # half-written row
    assert len(px) == 3 and px.array().max() == 1
    rows = px.append(np.full((1, 2, 2), 5, np.uint8))
    assert rows == range(3, 4)
    assert px.data_path.stat().st_size == 4 * 4
    assert px.read([3]).tolist() == [[[5, 5], [5, 5]]]
    px.data_path.write_bytes(b"")
    with pytest.raises(DataIntegrityError, match="truncated"):
        px.array()


def _direct_io_works(folder: Path) -> bool:
    try:
        fd = os.open(folder / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT)
    except (OSError, AttributeError):
        return False
    os.close(fd)
    return True


def test_pixel_array_bulk_appends_direct_and_through_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """32×32×3 rows (O_DIRECT-sized, bounce buffer chunked) read back exactly."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (5804, 32, 32, 3), dtype=np.uint8)
    px = PixelArray.create(tmp_path, "c", shape=(32, 32, 3))
    assert px.append(a[:1]) == range(0, 1)
    assert px.append(a[1:2900]) == range(1, 2900)  # > the 8 MiB bounce buffer
    with open(px.data_path, "ab") as f:
        f.write(b"\xff" * 5000)  # a killed writer's tail, cut by the next append
    # the direct write fails after its first chunk: the page-cache path redoes it
    real = os.pwrite
    calls: list[int] = []

    def flaky(fd: int, data: object, offset: int) -> int:
        calls.append(offset)
        if len(calls) > 1:
            raise OSError(22, "Invalid argument")
        return real(fd, data, offset)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "pwrite", flaky)
    assert px.append(a[2900:5803]) == range(2900, 5803)
    monkeypatch.undo()
    assert len(calls) == 2 or not _direct_io_works(tmp_path)
    assert px.append(a[5803:]) == range(5803, 5804)
    assert px.data_path.stat().st_size == 5804 * 3072
    assert np.array_equal(PixelArray(tmp_path, "c").array(), a)


_WRITER = textwrap.dedent(
    """
    import sys
    from retest.store.rows import AnnotationEvent
    from retest.store.sqlite import SQLiteStore

    db, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with SQLiteStore(db) as s:
        for i in range(n):
            # small transactions interleave with the other process
            s.annotations.add([AnnotationEvent(who, "select", 0, f"{who}-{i}", 1)])
    """
)


def test_two_processes_append_annotations_none_lost(tmp_path: Path) -> None:
    db = tmp_path / "retest.db"
    SQLiteStore(db).close()  # schema exists before the race
    n = 300
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db), who, str(n)])
        for who in ("alice", "bob")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with SQLiteStore(db) as s:
        events = s.annotations.list()
        assert len(events) == 2 * n
        for who in ("alice", "bob"):
            items = [e.item_id for e in events if e.who == who]
            assert items == [f"{who}-{i}" for i in range(n)]  # in order, none lost
        assert [e.id for e in events] == list(range(1, 2 * n + 1))


_INGEST = textwrap.dedent(
    """
    import sys
    import numpy as np
    from retest.store.artifacts import PixelArray
    from retest.store.rows import CandidateRow, content_id
    from retest.store.sqlite import SQLiteStore

    root, total, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pause_at = int(sys.argv[4]) if len(sys.argv) > 4 else -1

    def image(i):
        rng = np.random.default_rng(i)
        return rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)

    px = PixelArray.create(root + "/arrays", "cand", shape=(32, 32, 3))
    with SQLiteStore(root + "/retest.db") as s:
        for start in range(0, total, batch):
            imgs = np.stack([image(i) for i in range(start, min(total, start + batch))])
            ids = [content_id(x) for x in imgs]
            have = s.candidates.existing(ids)
            keep = [k for k, c in enumerate(ids) if c not in have]
            if not keep:
                continue
            rows = px.append(imgs[keep])
            if start == pause_at:  # pixels appended, rows not committed: wait here
                print("paused", flush=True)
                sys.stdin.readline()
            s.candidates.add(
                CandidateRow(ids[k], "arrays", str(start + k), array_name="cand",
                             array_row=r)
                for k, r in zip(keep, rows)
            )
            print(start, flush=True)
    """
)


def _check_consistent(root: Path) -> int:
    px = PixelArray(root / "arrays", "cand")
    with SQLiteStore(root / "retest.db") as s:
        rows = list(s.candidates.iter())
    assert len({r.id for r in rows}) == len(rows)
    assert len({r.array_row for r in rows}) == len(rows)
    assert all(r.array_row is not None and r.array_row < len(px) for r in rows)
    pixels = px.read([r.array_row for r in rows])
    for r, img in zip(rows, pixels, strict=True):
        assert content_id(img) == r.id
        rng = np.random.default_rng(int(r.source_ref))
        assert np.array_equal(img, rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))
    return len(rows)


def test_sigkill_mid_ingest_then_rerun(tmp_path: Path) -> None:
    """Killed at the worst point (a batch's pixels appended, its rows not yet
    committed) after three committed batches; the child says when it is there."""
    total, batch = 4000, 250
    args = [sys.executable, "-c", _INGEST, str(tmp_path), str(total), str(batch)]
    proc = subprocess.Popen(
        [*args, str(3 * batch)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    lines = [proc.stdout.readline().strip() for _ in range(4)]
    assert lines == ["0", "250", "500", "paused"], lines
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stdin.close()
    assert _check_consistent(tmp_path) == 3 * batch
    header = json.loads((tmp_path / "arrays" / "cand.json").read_text())
    assert header["count"] == 4 * batch  # the killed batch's pixels, no rows

    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _check_consistent(tmp_path) == total  # nothing lost, nothing twice
