"""An ingest SIGKILLed right after batches whose insert rebuilt the candidate
index tiers resumes to the same project: every image once, in order, findable.

The tier threshold is lowered in the child process so a rebuild happens every few
batches (at 10 M candidates they happen at 2.1, 4.2, 6.3 and 9.4 M).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ingest_kill import INSERTED, python  # type: ignore[import-not-found]
from retest.project import Project
from retest.store.rows import content_id

N, BATCH, TIER = 1200, 50, 120

_CHILD = """
import sys
import retest.store._sqlite_candidates as sc
sc.TIER_MIN_ROWS = int(sys.argv[4])
from retest.stages.ingest import ingest_source
from retest.project._project import Project
from retest.stages.ingest._ingest import ingest_source
from retest.project import Project
from retest.sources.base import make_source
from retest.store import open_store
project, path, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open_store(f"{project}/retest.db") as store:
    ingest_source(Project.from_store(project, store),
                  make_source("arrays", path, class_name="a"), batch_size=batch)
"""


def _run(root: Path, data: Path, crash_after: int | None) -> int:
    exe = [sys.executable] if crash_after is None else python(INSERTED, crash_after)
    proc = subprocess.run(
        [*exe, "-c", _CHILD, str(root), str(data), str(BATCH), str(TIER)],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    return proc.returncode


def _boundary(root: Path) -> int:
    c = sqlite3.connect(f"file:{root / 'retest.db'}?mode=ro", uri=True)
    try:
        return int(c.execute("SELECT boundary FROM candidate_tiers").fetchone()[0])
    finally:
        c.close()


@pytest.mark.parametrize("crashes", [(3, 6, 9), (5, 8, 7)])
def test_killed_ingest_across_tier_rebuilds_resumes_exactly(
    tmp_path: Path, crashes: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(sum(crashes))
    images = rng.integers(0, 256, size=(N, 4, 4, 3), dtype=np.uint8)
    images[:, 0, 0, :2] = np.stack([np.arange(N) % 256, np.arange(N) // 256], 1)
    data = tmp_path / "imgs.npy"
    np.save(data, images)
    root = tmp_path / "proj"
    Project.init(root, name="p", classes=["a"]).close()
    boundaries = []
    for n in crashes:  # each run dies right after committing its n-th batch (of 24)
        assert _run(root, data, n) == -9
        boundaries.append(_boundary(root))
    assert _run(root, data, None) == 0
    boundaries.append(_boundary(root))
    assert len(set(boundaries)) >= 3  # the kills straddled several tier rebuilds
    with Project.open(root) as p:
        rows = list(p.store.candidates.iter())
        ids = [content_id(img) for img in images]
        assert [r.source_ref for r in rows] == [str(i) for i in range(N)]
        assert [r.id for r in rows] == ids  # once each, in source order
        assert p.store.candidates.existing(ids) == set(ids)
        assert p.store.candidates.get(ids[N // 2]).source_ref == str(N // 2)
        assert p.store.integrity_problems() == []  # type: ignore[attr-defined]
