"""A dedup run resumed with another ``--chunk-size`` gives every candidate its
neighbour lists. Checkpoint keys were chunk numbers alone: two finished chunks of
8 candidates read, at size 32, as the first 64 candidates done, so 32 candidates
were never searched, the run called itself complete, and every later run with
that size skipped them again (``sample`` refused for good)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dedup_helpers import brighter, fm_images, fm_project  # type: ignore[import-not-found]

from retest.project import Project, check_fresh, load_neighbours, stale_candidates
from retest.stages.dedup import run_dedup


@pytest.mark.parametrize(("first", "then"), [(8, 32), (32, 8)])
def test_resume_with_another_chunk_size_searches_every_candidate(
    tmp_path: Path, fashion_mnist_dir: Path, first: int, then: int
) -> None:
    train, labels, test = fm_images(fashion_mnist_dir, 200, 48)
    cands = test.copy()
    cands[40:44] = brighter(train[:4])  # near-copies in the part left undone
    fm_project(tmp_path, train, labels, cands).close()

    def stop(task: str, done: int, total: int | None) -> None:
        if task == "dedup" and done == 1:
            raise KeyboardInterrupt

    with Project.open(tmp_path) as p, pytest.raises(KeyboardInterrupt):
        run_dedup(p, metrics=["l2"], k=5, chunk_size=first, progress=stop)
    with Project.open(tmp_path) as p:
        run_dedup(p, metrics=["l2"], k=5, chunk_size=then)
        assert stale_candidates(p) == []
        check_fresh(p)  # sample would run
        lists = load_neighbours(p, ["l2"])
        ids = [c.id for c in p.store.candidates.iter()]
        assert set(lists) == set(ids)
        for i in range(4):  # the near-copies found their originals
            assert lists[ids[40 + i]]["l2"][0][0] == f"train:{i}"
    with Project.open(tmp_path) as p:  # the same run again: all skipped
        again = run_dedup(p, metrics=["l2"], k=5, chunk_size=then)
        assert again.chunks_computed == 0
