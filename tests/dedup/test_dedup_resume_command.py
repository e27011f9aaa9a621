"""The command ``status`` and ``sample`` name to finish an interrupted dedup run
resumes it from its checkpoint: it repeats every metric of the run (they share
one fingerprint), not only the unfinished ones. ``--metrics dssim`` after a run
of ``features,dssim`` had another fingerprint (no embedder in its parameters)
and computed every dssim chunk again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from dedup_helpers import fm_project, fm_with_copies  # type: ignore[import-not-found]

from checkout_cli import run_retest
from retest.project import Project
from retest.stages.dedup import run_dedup

EMBEDDER = "random-projection:16:3"


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_retest(root, *args)


def test_the_named_command_resumes_instead_of_redoing(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    train, labels, cands = fm_with_copies(fashion_mnist_dir)
    fm_project(tmp_path, train, labels, cands).close()

    def stop(task: str, done: int, total: int | None) -> None:
        if task == "dedup" and done == 4:  # features: 3 chunks, dssim: 1 of 3
            raise KeyboardInterrupt

    with Project.open(tmp_path) as proj, pytest.raises(KeyboardInterrupt):
        run_dedup(proj, metrics=["features", "dssim"], k=5, chunk_size=8,
                  embedder=EMBEDDER, progress=stop)  # fmt: skip
    st = _cli(tmp_path, "status", "--json")
    assert st.returncode == 0, st.stderr
    stale = json.loads(st.stdout)["stale"]
    want = f"retest dedup --metrics features,dssim --k 5 --embedder {EMBEDDER}"
    assert "dedup run of dssim was interrupted" in stale and f"`{want}`" in stale
    out = _cli(tmp_path, *want.split()[1:], "--chunk-size", "8", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    # resumed: only the two dssim chunks left were computed
    assert (got["chunks_computed"], got["chunks_skipped"]) == (2, 4)
    assert json.loads(_cli(tmp_path, "status", "--json").stdout)["stale"] is None
