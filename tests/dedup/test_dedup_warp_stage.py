"""The ``warp`` metric in the dedup stage: CLI, review targets, resume, bad options.

A real project (SQLite store, pixel arrays) with 200 Fashion-MNIST training
images as originals; the candidates are rescaled copies (±1 px on 28 px, anchored
top-left, as in ``test_dedup_planted``) of 12 originals plus 24 test images.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dedup_helpers import (  # type: ignore[import-not-found]
    fm_images,
    fm_project,
    forget_checkpoints,
)
from fastapi.testclient import TestClient
from PIL import Image
from typer.testing import CliRunner

import retest.dedup.warp as warp_mod
from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.cli.main import app
from retest.dedup.warp import WarpParams, warp_threshold
from retest.project import Project, candidate_eligibility, review_targets
from retest.stages.dedup import run_dedup
from retest.web.app import create_app

N_REF, N_PLANT, N_NEW = 200, 12, 24


def _rescaled(a: np.ndarray, size: int) -> np.ndarray:
    b = np.asarray(Image.fromarray(a).resize((size, size), Image.Resampling.BILINEAR))
    return b[:28, :28] if size > 28 else np.pad(b, ((0, 28 - size), (0, 28 - size)))


@pytest.fixture
def project(tmp_path: Path, fashion_mnist_dir: Path):
    train, labels, test = fm_images(fashion_mnist_dir, N_REF, N_NEW)
    planted = np.stack([_rescaled(train[i], 27 + 2 * (i % 2)) for i in range(N_PLANT)])
    cands = np.concatenate([planted, test])
    p = fm_project(tmp_path / "proj", train, labels, cands, source="fm")
    yield p
    p.close()


def _lists(p: Project, metric: str) -> dict[str, tuple]:
    return {
        n.candidate_id: (n.ref_ids, n.distances)
        for n in p.store.neardup.iter_neighbours(metric=metric)
    }


def _planted(p: Project) -> dict[str, str]:
    """candidate id → id of the original it was rescaled from."""
    return {
        c.id: f"train:{c.source_ref}"
        for c in p.store.candidates.iter()
        if int(c.source_ref) < N_PLANT
    }


def test_cli_warp_flags_rescaled_copies_at_rank_1(project: Project) -> None:
    runner = CliRunner()
    root = str(project.root)
    out = runner.invoke(
        app, ["dedup", "-p", root, "--k", "5", "--report", "--json"]
    )  # default metrics include warp
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["metrics"] == ["l2", "features", "dssim", "warp"]
    warp, l2 = _lists(project, "warp"), _lists(project, "l2")
    assert len(warp) == N_PLANT + N_NEW
    target = warp_threshold((28, 28, 1))
    for cid, orig in _planted(project).items():
        refs, dist = warp[cid]
        assert refs[0] == orig and dist[0] <= target
        assert list(dist) == sorted(dist) and cid not in refs
        # warp ≤ l2: the identity is one of the warps
        assert dist[0] <= dict(zip(*l2[cid], strict=True)).get(orig, np.inf)
        if int(orig.split(":")[1]) % 2:  # upscaled: warping the original forward
            assert dist[0] < 1e3  # reproduces PIL's resize up to rounding
    l2_hits = sum(l2[c][0][0] == o for c, o in _planted(project).items())
    print(f"rank 1: warp {N_PLANT}/{N_PLANT}, l2 {l2_hits}/{N_PLANT}")
    sheet = project.root / data["report"]["warp"]["contact_sheet"]
    assert_png(sheet)
    assert review_targets(project)["warp"] == pytest.approx(1e6 * 784 / 3072)

    queue = json.loads(runner.invoke(app, ["dedup-queue", "-p", root, "--json"]).stdout)
    queued = {r["candidate"] for r in queue if r["metric"] == "warp"}
    # each planted copy is either excluded by the automatic rule (no review
    # needed, so not queued) or waits in the queue
    elig = candidate_eligibility(project)
    for cid in _planted(project):
        auto = "near_original" in elig.reasons[cid]
        assert auto != (cid in queued), (cid, elig.reasons[cid])
    none = runner.invoke(
        app, ["dedup-queue", "-p", root, "--threshold", "warp=0", "--json"]
    )
    assert none.exit_code == 0, none.output
    assert not [r for r in json.loads(none.stdout) if r["metric"] == "warp"]
    for bad in ("warp", "warp=-1", "fc8=3"):
        res = runner.invoke(app, ["dedup-queue", "-p", root, "--threshold", bad])
        assert res.exit_code == 2 and "--threshold must look like" in res.output
        assert res.output.strip().count("\n") == 0  # one line, no traceback


def test_resume_skips_finished_warp_chunks(project: Project, monkeypatch) -> None:
    calls: list[int] = []
    real = warp_mod.warped_sqdist_pairs

    def spy(q, *a, **kw):
        calls.append(len(q))
        return real(q, *a, **kw)

    monkeypatch.setattr(warp_mod, "warped_sqdist_pairs", spy)

    def boom(task, done, total):
        if done == 5:  # l2: 3 chunks, warp: 2 of 3
            raise KeyboardInterrupt

    kw = {"metrics": ["l2", "warp"], "k": 4, "chunk_size": 12, "backend": "numpy"}
    with pytest.raises(KeyboardInterrupt):
        run_dedup(project, progress=boom, **kw)
    assert calls == [12, 12]
    calls.clear()
    res = run_dedup(project, **kw)
    assert (res.chunks_skipped, res.chunks_computed) == (5, 1)
    assert calls == [12]  # only the unfinished warp chunk
    resumed = _lists(project, "warp")
    forget_checkpoints(project, res)
    calls.clear()
    again = run_dedup(project, **kw)
    assert again.chunks_computed == 6 and calls == [12, 12, 12]
    assert _lists(project, "warp") == resumed
    shifted = run_dedup(project, **kw, warp=WarpParams(shift_step=1.0))
    assert shifted.fingerprint != res.fingerprint  # warp grid is in the fingerprint


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ("warp", "warp is computed on the shortlist"),
        ("dssim,warp", "dssim and warp are computed on the shortlist"),
        ("l2,wrap", "--metrics takes l2, features, dssim, warp. Got 'wrap'"),
    ],
)
def test_bad_metric_combinations_one_line_nothing_written(
    project: Project, metrics: str, message: str
) -> None:
    res = CliRunner().invoke(
        app, ["dedup", "-p", str(project.root), "--metrics", metrics]
    )
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert line.startswith("error: ") and message in line and "\n" not in line
    assert not (project.arrays_dir / "dedup").exists()
    for m in ("l2", "features", "dssim", "warp"):
        assert list(project.store.neardup.iter_neighbours(metric=m)) == []


def test_web_review_page_lists_warp(project: Project) -> None:
    # with the automatic near-original rule off, the rescaled copies await review
    project.config = replace(project.config, thresholds={"near_original": 0.0})
    run_dedup(project, metrics=["l2", "warp"], k=3, backend="numpy")
    client = TestClient(
        create_app(project, reviewer_token="r", secret=b"s" * 32),
        headers={"X-Retest-Token": "r"},  # the review pages are the reviewer's
    )
    html = client.get("/neardup?metric=warp").text
    assert "metric warp" in html and f"{warp_threshold((28, 28, 1)):.4g}" in html
    cid, orig = sorted(_planted(project).items())[0]
    assert cid in html
    body = {"candidate_id": cid, "metric": "warp", "shown": [orig],
            "duplicates": [orig], "reviewed": True}  # fmt: skip
    auth = {"X-Retest-Token": "r"}  # the owner's
    assert client.post("/api/neardup", json=body, headers=auth).status_code == 200
    assert [v.metric for v in project.store.neardup.verdicts()] == ["warp"]
