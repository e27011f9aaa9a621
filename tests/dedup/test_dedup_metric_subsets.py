"""A dedup run of another ``--metrics`` subset skips the chunks it shares with
an earlier run: ``--metrics l2`` after ``l2,features`` computed every l2 chunk
again (the run's fingerprint held the embedder, and the SSIM settings, which
l2's lists do not depend on). The lists stay those of a fresh run."""

from __future__ import annotations

from pathlib import Path

from dedup_helpers import fm_project, fm_with_copies  # type: ignore[import-not-found]

from retest.dedup.ssim import SSIMParams
from retest.project import Project, load_neighbours
from retest.stages.dedup import run_dedup

EMBEDDER = "random-projection:16:3"


def test_a_subset_or_other_ssim_settings_reuse_the_shared_chunks(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    train, labels, cands = fm_with_copies(fashion_mnist_dir)
    for name in ("subsets", "fresh"):
        fm_project(tmp_path / name, train, labels, cands).close()
    w5 = SSIMParams(win_size=5)
    runs = (
        (["l2", "features"], None, (6, 0)),
        (["l2"], None, (0, 3)),  # l2 shared with the first run
        (["l2", "dssim"], w5, (3, 3)),  # dssim is new; l2's lists hold
        (["features", "dssim"], w5, (0, 6)),  # both done before
    )
    for metrics, ssim, want in runs:
        with Project.open(tmp_path / "subsets") as proj:
            res = run_dedup(proj, metrics=metrics, k=5, chunk_size=8,
                            embedder=EMBEDDER, ssim=ssim)  # fmt: skip
            assert (res.chunks_computed, res.chunks_skipped) == want, metrics
    every = ["l2", "features", "dssim"]
    with Project.open(tmp_path / "fresh") as proj:
        run_dedup(proj, metrics=every, k=5, chunk_size=8, embedder=EMBEDDER, ssim=w5)
        fresh = load_neighbours(proj, every)
    with Project.open(tmp_path / "subsets") as proj:
        assert load_neighbours(proj, every) == fresh
