"""The command ``status`` names to finish an interrupted dedup run repeats its
SSIM settings (``--win-size``, ``--gaussian``): they are part of the run's
fingerprint, and the command without them started a new run of every metric
with other settings. A run given other settings than the checkpoint's never
mixes the two: it computes every chunk of dssim again, as a fresh run would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dedup_helpers import fm_images, fm_project, fm_with_copies  # type: ignore[import-not-found]

from checkout_cli import run_retest
from retest.dedup.ssim import SSIMParams
from retest.project import Project, load_neighbours
from retest.stages.dedup import run_dedup

METRICS = ["l2", "dssim"]


def _interrupted(root: Path, fm: Path) -> None:
    train, labels, cands = fm_with_copies(fm)
    fm_project(root, train, labels, cands).close()

    def stop(task: str, done: int, total: int | None) -> None:
        if task == "dedup" and done == 4:  # l2: 3 chunks, dssim: 1 of 3
            raise KeyboardInterrupt

    ssim = SSIMParams(win_size=5, gaussian_weights=True)
    with Project.open(root) as proj, pytest.raises(KeyboardInterrupt):
        run_dedup(proj, metrics=METRICS, k=5, chunk_size=8, ssim=ssim, progress=stop)


def test_the_named_command_repeats_the_ssim_settings_and_resumes(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    _interrupted(tmp_path, fashion_mnist_dir)
    st = run_retest(tmp_path, "status", "--json")
    assert st.returncode == 0, st.stderr
    stale = json.loads(st.stdout)["stale"]
    want = "retest dedup --metrics l2,dssim --k 5 --win-size 5 --gaussian"
    assert f"`{want}`" in stale, stale
    out = run_retest(tmp_path, *want.split()[1:], "--chunk-size", "8", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["chunks_computed"], got["chunks_skipped"]) == (2, 4)  # resumed
    assert json.loads(run_retest(tmp_path, "status", "--json").stdout)["stale"] is None


def test_other_settings_recompute_every_chunk_as_a_fresh_run(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    _interrupted(tmp_path / "resumed", fashion_mnist_dir)
    train, labels, cands = fm_with_copies(fashion_mnist_dir)
    fm_project(tmp_path / "fresh", train, labels, cands).close()
    other = SSIMParams(win_size=3)
    lists = {}
    # l2's lists do not depend on the SSIM settings: its finished chunks hold
    for name, want in (("resumed", (3, 3)), ("fresh", (6, 0))):
        with Project.open(tmp_path / name) as proj:
            res = run_dedup(proj, metrics=METRICS, k=5, chunk_size=8, ssim=other)
            assert (res.chunks_computed, res.chunks_skipped) == want
            lists[name] = load_neighbours(proj, METRICS)
    # candidate ids are content ids: the same in both projects
    assert lists["resumed"] == lists["fresh"]
    st = run_retest(tmp_path / "resumed", "status", "--json")
    assert json.loads(st.stdout)["stale"] is None


def test_back_to_earlier_settings_recomputes_the_lists_another_run_replaced(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    """One list per candidate and metric is stored: a run with other settings in
    between replaced the first run's dssim lists, and the first run's settings
    again skipped every chunk as done, keeping the other run's lists."""
    train, labels, test = fm_images(fashion_mnist_dir, 200, 24)
    w5, w7 = SSIMParams(win_size=5), SSIMParams(win_size=7)
    for name in ("back", "fresh"):
        fm_project(tmp_path / name, train, labels, test).close()
    runs = ((METRICS, w5, (6, 0)), (["dssim"], w7, (3, 0)), (METRICS, w5, (3, 3)))
    for metrics, ssim, want in runs:
        with Project.open(tmp_path / "back") as proj:
            res = run_dedup(proj, metrics=metrics, k=5, chunk_size=8, ssim=ssim)
            # l2's lists are still the first run's: only dssim is computed again
            assert (res.chunks_computed, res.chunks_skipped) == want
    with Project.open(tmp_path / "fresh") as proj:
        run_dedup(proj, metrics=METRICS, k=5, chunk_size=8, ssim=w5)
        fresh = load_neighbours(proj, METRICS)
    with Project.open(tmp_path / "back") as proj:
        assert load_neighbours(proj, METRICS) == fresh


def test_a_run_stopped_before_its_later_metrics_is_finished_with_all(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    """Stopped in l2, before dssim began: the command named ``--metrics l2``
    alone (dssim had no state yet), and running it never computed dssim."""
    train, labels, test = fm_images(fashion_mnist_dir, 200, 24)
    fm_project(tmp_path, train, labels, test).close()

    def stop(task: str, done: int, total: int | None) -> None:
        if task == "dedup" and done == 1:  # l2: 1 chunk of 3
            raise KeyboardInterrupt

    with Project.open(tmp_path) as proj, pytest.raises(KeyboardInterrupt):
        run_dedup(proj, metrics=METRICS, k=5, chunk_size=8, progress=stop)
    stale = json.loads(run_retest(tmp_path, "status", "--json").stdout)["stale"]
    assert "`retest dedup --metrics l2,dssim --k 5`" in stale, stale
