"""`retest check [--repair] [--json]` on real projects damaged in each known way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from check_project import arrays_project  # type: ignore[import-not-found]

from checkout_cli import RETEST  # type: ignore[import-not-found]
from ingest_kill import APPENDED, python  # type: ignore[import-not-found]
from retest.project import Project
from retest.store.artifacts import PixelArray


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *args], capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip


def _check(proj: Path, *extra: str) -> tuple[int, dict]:
    r = _cli("check", "--json", "--project", str(proj), *extra)
    return r.returncode, json.loads(r.stdout)


def _kinds(rep: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in rep["problems"]:
        if not p["repaired"]:
            out[p["kind"]] = out.get(p["kind"], 0) + p["count"]
    return out


_project = arrays_project


def test_healthy_project_is_ok(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    code, rep = _check(proj)
    assert code == 0 and rep["ok"] and rep["problems"] == []
    assert rep["stats"]["pixel_rows_verified"] == 300
    assert rep["stats"]["schema_version"] >= 3
    r = _cli("check", "--project", str(proj))
    assert r.returncode == 0 and r.stdout.startswith("ok")


def test_zero_length_db(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    (proj / "retest.db").write_bytes(b"")
    code, rep = _check(proj)
    assert code == 1 and _kinds(rep) == {"database": 1}
    assert "empty" in rep["problems"][0]["detail"]


def test_damaged_page(tmp_path: Path) -> None:
    proj = _project(tmp_path, n=3000)
    db = proj / "retest.db"
    with open(db, "r+b") as f:
        f.seek(db.stat().st_size // 2)
        f.write(b"\x00\xff" * 512)
    code, rep = _check(proj, "--repair")
    assert code == 1 and set(_kinds(rep)) == {"database"}
    assert "damaged" in rep["problems"][0]["detail"]
    # nothing was "repaired" on the word of a damaged database
    assert len(PixelArray(proj / "arrays", "candidates_8x8x3")) == 3000


def test_overwritten_pixel_rows(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    u8 = proj / "arrays" / "candidates_8x8x3.u8"
    row = 8 * 8 * 3
    with open(u8, "r+b") as f:  # rows 10 and 11 (one byte each) and row 200
        f.seek(10 * row + 5)
        f.write(b"\x01\x02")
        f.seek(11 * row)
        f.write(b"\xee")
        f.seek(200 * row + 100)
        f.write(b"\x00" * 50)
    code, rep = _check(proj, "--repair")
    assert code == 1 and _kinds(rep) == {"pixels": 3}
    assert "overwritten" in rep["problems"][0]["detail"]
    # referenced rows are never touched by --repair
    assert len(PixelArray(proj / "arrays", "candidates_8x8x3")) == 300


def test_orphans_of_a_failed_ingest_are_found_and_reclaimed(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    rng = np.random.default_rng(8)
    np.savez(
        tmp_path / "b.npz",
        images=rng.integers(0, 256, (200, 8, 8, 3), dtype=np.uint8),
        labels=rng.integers(0, 2, 200),
    )
    # killed after batch 2's pixels were appended, before its rows were inserted
    r = subprocess.run(
        [*python(APPENDED, 2), "-m", "retest", "source", "add", "arrays",
         str(tmp_path / "b.npz"), "--name", "b", "--batch-size", "100",
         "--project", str(proj)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0
    px = PixelArray(proj / "arrays", "candidates_8x8x3")
    n_rows = len(px)
    with Project.open(proj) as p:
        stored = p.store.candidates.count()
    assert (n_rows, stored) == (500, 400)  # batch 2's pixels without rows
    code_, rep = _check(proj)
    assert code_ == 1
    kinds = _kinds(rep)
    assert kinds["orphan_rows"] == n_rows - stored
    assert kinds["interrupted_ingest"] == 1
    cmd = next(
        p["detail"] for p in rep["problems"] if p["kind"] == "interrupted_ingest"
    )
    assert "retest source add arrays" in cmd and "--batch-size 100" in cmd
    code_, rep = _check(proj, "--repair")
    assert [p["repaired"] for p in rep["problems"] if p["kind"] == "orphan_rows"] == [
        True
    ]
    assert len(px) == stored  # the tail was given back
    code_, rep = _check(proj)
    assert "orphan_rows" not in _kinds(rep)


def test_orphans_in_the_middle_are_listed_free_and_punched(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    px = PixelArray(proj / "arrays", "candidates_8x8x3")
    # pixels appended by a writer that died, then a complete ingest after them
    px.append(np.full((40, 8, 8, 3), 7, np.uint8))
    rng = np.random.default_rng(9)
    np.savez(
        tmp_path / "b.npz",
        images=rng.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8),
        labels=rng.integers(0, 2, 20),
    )
    with Project.open(proj) as p:  # hold the writers lock: no reclaim at start
        from retest.stages.ingest import add_source
        from retest.store.artifacts import writers_lock

        with writers_lock(p.arrays_dir):
            add_source(p, "arrays", tmp_path / "b.npz", name="b")
    assert len(px) == 360
    code, rep = _check(proj)
    assert code == 1 and _kinds(rep) == {"orphan_rows": 40}
    code, rep = _check(proj, "--repair")
    assert code == 0, rep
    assert px.free_ranges() == [(300, 340)] and len(px) == 360
    assert px.read([300]).max() == 0  # bytes punched out (zeros)
    code, rep = _check(proj)
    assert code == 0 and rep["problems"] == []


def test_leftovers_of_killed_exports_and_writers(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    stage = proj / "revisions" / "r0" / f".npy.tmp-{dead}"
    stage.mkdir(parents=True)
    (stage / "x.npy").write_bytes(b"half")
    live = proj / "revisions" / "r0" / f".cifar.tmp-{os.getpid()}"
    live.mkdir()
    temp = proj / "reports" / f".report.json.{dead}.abcd1234.tmp"
    temp.write_bytes(b"{")
    old_temp = proj / "reports" / ".x.json.tmp"
    old_temp.write_bytes(b"{")
    os.utime(old_temp, (time.time() - 7200,) * 2)
    u8 = proj / "arrays" / "candidates_8x8x3.u8"
    with open(u8, "ab") as f:  # a half-written append
        f.write(b"\x01" * 100)
    code, rep = _check(proj)
    assert code == 1 and _kinds(rep) == {"leftover": 4}
    code, rep = _check(proj, "--repair")
    assert code == 0, rep
    assert not stage.exists() and not temp.exists() and not old_temp.exists()
    assert live.exists()  # a running process's folder is left alone
    assert u8.stat().st_size == 300 * 192


def test_pixel_folder_replaced_by_a_file_is_a_finding(tmp_path: Path) -> None:
    """arrays/ turned into a file (a bad copy, a stray `mv`): a finding of the
    report naming the path, not an OS error about a lock file inside it."""
    proj = _project(tmp_path)
    shutil.rmtree(proj / "arrays")
    (proj / "arrays").write_text("not a folder")
    code, rep = _check(proj)
    assert code == 1 and not rep["ok"]
    (problem,) = rep["problems"]
    assert problem["kind"] == "pixels" and str(proj / "arrays") in problem["detail"]
    r = _cli("check", "--project", str(proj))
    assert r.returncode == 1 and "1 problem found" in r.stdout, r.stdout + r.stderr
    assert (proj / "arrays").read_text() == "not a folder"
