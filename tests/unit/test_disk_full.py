"""A full disk during a command is one line and leaves a consistent project (#23).

On aad0cc2 ``retest dedup`` on a nearly full disk died with
``sqlite3.OperationalError: database or disk is full`` at COMMIT (a traceback).
Two ways to fill the disk: a real small tmpfs (needs the right to mount; skipped
with the reason otherwise) and SQLite's own page limit (``max_page_count``, the
same SQLITE_FULL error from the store's own path, anywhere).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from bad_input_helpers import assert_one_line, build_project, invoke

from retest.store import sqlite as store_sqlite

DEDUP = ("dedup", "--metrics", "l2,dssim")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("disk-full")
    return build_project(base / "proj", base / "inputs")


def _after_space_is_back(root: Path) -> None:
    """The rerun completes and `retest check` finds nothing wrong."""
    res = invoke(*DEDUP, "--project", root)
    assert res.exit_code == 0, (res.stdout, res.stderr)
    res = invoke("check", "--project", root)
    assert res.exit_code == 0, (res.stdout, res.stderr)


def _mount_tmpfs(where: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``where``; None, else why it cannot be done."""
    if shutil.which("mount") is None:
        return "mount is not installed"
    where.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return f"cannot mount a tmpfs here: {proc.stderr.strip() or proc.returncode}"
    return None


@pytest.mark.parametrize("free", [0, 16384, 65536, 131072])
def test_dedup_on_a_full_tmpfs(built: Path, tmp_path: Path, free: int) -> None:
    mnt = tmp_path / "mnt"
    why = _mount_tmpfs(mnt, "2m")
    if why is not None:
        pytest.skip(why)
    try:
        root = mnt / "proj"
        shutil.copytree(built, root)
        filler = mnt / "filler"
        left = shutil.disk_usage(mnt).free - free
        with filler.open("wb") as f:
            try:
                f.write(b"\0" * max(0, left))
            except OSError:  # the last block does not fit: full is full
                pass
        line = assert_one_line(invoke(*DEDUP, "--project", root), 1, "disk is full")
        assert "retest.db" in line
        filler.unlink()
        _after_space_is_back(root)
    finally:
        # lazily: a file still open in this process must not keep it mounted
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_sqlite_full_at_any_write_is_one_line(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    shutil.copytree(built, root)
    pages = sqlite3.connect(root / "retest.db").execute("PRAGMA page_count")
    limit = int(pages.fetchone()[0]) + 1
    connect = store_sqlite._DB._connect

    def limited(self: store_sqlite._DB) -> sqlite3.Connection:
        c = connect(self)
        c.execute(f"PRAGMA max_page_count = {limit}")
        return c

    monkeypatch.setattr(store_sqlite._DB, "_connect", limited)
    line = assert_one_line(invoke(*DEDUP, "--project", root), 1, "disk is full")
    assert "Free space" in line
    monkeypatch.undo()
    _after_space_is_back(root)
