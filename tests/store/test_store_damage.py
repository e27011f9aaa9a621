"""A damaged, emptied or lost retest.db is refused with one line, never replaced.

Projects are made and damaged through the real CLI (subprocesses), like a user
would meet them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.errors import DataIntegrityError
from retest.project import Project
from retest.stages.export import export_revision
from retest.store.rows import Revision, RevisionMember
from retest.store.sqlite import SQLiteStore


def _cli_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *args], capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip


def _project(tmp_path: Path, n: int = 300) -> Path:
    rng = np.random.default_rng(5)
    src = tmp_path / "a.npz"
    np.savez(
        src,
        images=rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8),
        labels=rng.integers(0, 2, n),
    )
    proj = tmp_path / "p"
    assert _cli_run("init", str(proj), "--classes", "cat,dog").returncode == 0
    r = _cli_run("source", "add", "arrays", str(src), "--project", str(proj))
    assert r.returncode == 0, r.stderr
    with Project.open(proj) as p:
        members = [
            RevisionMember(c.id, c.class_id or 0) for c in p.store.candidates.iter()
        ]
        p.store.revisions.create(
            Revision("r0", "all", created="2020-01-01T00:00:00Z"), members
        )
    return proj


def _one_error_line(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_zero_length_db_is_refused_not_recreated(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    arrays_before = {p.name: p.read_bytes() for p in (proj / "arrays").iterdir()}
    (proj / "retest.db").write_bytes(b"")
    for args in (["status"], ["source", "list"], ["check"]):
        r = _cli_run(*args, "--project", str(proj))
        if args == ["check"]:
            assert r.returncode == 1 and "empty" in r.stdout
            continue
        _one_error_line(r, str(proj / "retest.db"), "empty", "retest check")
    # nothing was created over the old project's data
    assert (proj / "retest.db").stat().st_size == 0
    after = {p.name: p.read_bytes() for p in (proj / "arrays").iterdir()}
    assert after == arrays_before


def test_damaged_pages_make_status_sample_and_export_fail(tmp_path: Path) -> None:
    proj = _project(tmp_path, n=3000)
    db = proj / "retest.db"
    size = db.stat().st_size
    with open(db, "r+b") as f:  # a run of garbage in the middle of the file
        f.seek(size // 2)
        f.write(np.random.default_rng(1).bytes(2048))
    for args in (["status"], ["sample", "--strategy", "threshold", "--seed", "1"],
                 ["export", "r0", "--format", "npy"]):  # fmt: skip
        r = _cli_run(*args, "--project", str(proj))
        _one_error_line(r, str(db), "damaged")
    with pytest.raises(DataIntegrityError, match="damaged"):
        Project.open(proj)
    assert not (proj / "revisions" / "r0").exists()


def test_missing_db_with_stored_pixels_is_refused(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    (proj / "retest.db").unlink()
    r = _cli_run("status", "--project", str(proj))
    _one_error_line(r, "retest.db is missing", "arrays/", "backup")
    assert not (proj / "retest.db").exists()


def test_missing_db_of_a_project_without_data_is_created(tmp_path: Path) -> None:
    with Project.init(tmp_path / "p", classes=["a", "b"]):
        pass
    (tmp_path / "p" / "retest.db").unlink()
    with Project.open(tmp_path / "p") as p:
        assert [c.name for c in p.store.classes.list()] == ["a", "b"]


def test_header_checks(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with SQLiteStore(db):
        pass
    data = db.read_bytes()
    db.write_bytes(data[: len(data) - 100])  # not a whole number of pages
    with pytest.raises(DataIntegrityError, match="whole number"):
        SQLiteStore(db)
    bad = bytearray(data)
    bad[16:18] = (3000).to_bytes(2, "big")  # impossible page size
    db.write_bytes(bytes(bad))
    with pytest.raises(DataIntegrityError, match="page size 3000"):
        SQLiteStore(db)


def test_export_refuses_when_pages_damaged_in_process(tmp_path: Path) -> None:
    """The library path (no CLI) refuses as well: Project.open verifies the file."""
    proj = _project(tmp_path, n=2000)
    with Project.open(proj) as p:
        export_revision(p, "r0", format="npy", out=tmp_path / "ok")
    db = proj / "retest.db"
    with open(db, "r+b") as f:
        f.seek(db.stat().st_size // 3)
        f.write(b"\xab" * 4096)
    with pytest.raises(DataIntegrityError):
        with Project.open(proj) as p:
            export_revision(p, "r0", format="npy", out=tmp_path / "bad")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write read-only files")
def test_read_only_project_says_so(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    os.chmod(proj / "retest.db", 0o444)
    os.chmod(proj, 0o555)
    try:
        r = _cli_run("status", "--project", str(proj))
        _one_error_line(r, "read-only")
    finally:
        os.chmod(proj, 0o755)
        os.chmod(proj / "retest.db", 0o644)
