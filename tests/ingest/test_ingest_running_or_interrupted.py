"""An unfinished ingest job is named for what it is: still running in another
process (the pixel writers' lock is held) or interrupted (resume it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from ingest_kill import INSERTED, python  # type: ignore[import-not-found]
from retest.errors import StageError
from retest.project import Project, check_fresh
from retest.store.artifacts import writers_lock


def test_unfinished_ingest_is_running_or_interrupted(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    with Project.init(proj, classes=["cat", "dog"]):
        pass
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (200, 8, 8, 3), dtype=np.uint8)
    np.savez(proj / "a.npz", images=x, labels=rng.integers(0, 2, 200))
    r = subprocess.run(
        [*python(INSERTED, 1), "-m", "retest", "source", "add", "arrays",
         str(proj / "a.npz"), "--batch-size", "50", "--project", str(proj)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0  # died after its first batch: one unfinished job
    with Project.open(proj) as p:
        with pytest.raises(StageError, match=r"was interrupted .*finish it first"):
            check_fresh(p)
        # another process's ingest holds the writers' lock shared while it runs
        with writers_lock(p.arrays_dir):
            with pytest.raises(StageError, match="still running in another process"):
                check_fresh(p)
        with pytest.raises(StageError, match="was interrupted"):
            check_fresh(p)
