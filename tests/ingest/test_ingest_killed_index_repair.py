"""An ingest SIGKILLed while it deferred the keyword index (``defer_indexes``) and
never resumed: ``retest status`` says so in one line naming the command that
fixes it, and that command (``retest check --repair``) or the next ingest to
complete, of any source, builds the index again. Through the real CLI."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ingest_kill import INSERTED, python  # type: ignore[import-not-found]

INDEX = "candidates_keyword"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retest", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


def _arrays(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
    np.savez(path, images=imgs, labels=rng.integers(0, 3, n))
    return path


def _has_index(proj: Path) -> bool:
    with sqlite3.connect(proj / "retest.db") as con:
        q = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?"
        return con.execute(q, (INDEX,)).fetchone() is not None


def _notice(proj: Path) -> list[str]:
    st = _cli("status", "-p", proj)
    assert st.returncode == 0, st.stderr
    assert "Traceback" not in st.stderr
    return [ln for ln in st.stderr.splitlines() if INDEX in ln]


@pytest.fixture
def killed(tmp_path: Path) -> Path:
    """A project whose first ingest died after two of six batches."""
    proj = tmp_path / "p"
    assert _cli("init", proj, "--classes", "x,y,z").returncode == 0
    args = ("source", "add", "arrays", _arrays(tmp_path / "a.npz", 300, 1),
            "--batch-size", "50", "-p", proj)  # fmt: skip
    run = subprocess.run(
        [*python(INSERTED, 2), "-m", "retest", *map(str, args)],
        capture_output=True,
        check=False,
    )
    assert run.returncode == -9
    assert not _has_index(proj)
    return proj


def test_status_names_the_fix_and_check_repair_applies_it(killed: Path) -> None:
    lines = _notice(killed)
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: the candidates' index candidates_keyword")
    assert f"`retest check --repair --project {killed}`" in lines[0]
    before = _cli("check", "-p", killed)
    assert "candidates_keyword is missing" in before.stdout + before.stderr
    assert not _has_index(killed)  # without --repair it only reports
    fixed = _cli("check", "--repair", "-p", killed)
    assert "Traceback" not in fixed.stderr
    assert _has_index(killed)
    assert _notice(killed) == []
    # the interrupted ingest is still there to finish: nothing was lost
    assert "an ingest was interrupted" in _cli("status", "-p", killed).stderr


def test_the_next_ingest_of_another_source_rebuilds_it(
    killed: Path, tmp_path: Path
) -> None:
    other = _arrays(tmp_path / "b.npz", 20, 2)  # small: it defers nothing itself
    add = _cli("source", "add", "arrays", other, "--name", "more", "-p", killed)
    assert add.returncode == 0, add.stderr
    assert _has_index(killed)
    assert _notice(killed) == []
