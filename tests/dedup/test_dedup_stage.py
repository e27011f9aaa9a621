"""The dedup stage on a real project (SQLite store) with Fashion-MNIST images."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dedup_helpers import (  # type: ignore[import-not-found]
    brighter,
    fm_images,
    fm_project,
    forget_checkpoints,
)
from typer.testing import CliRunner

import retest.stages.dedup._dedup as dd
from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.cli.main import app
from retest.cluster import cluster_client
from retest.errors import InputValidationError
from retest.project import Project, dedup_review_queue, record_review
from retest.project._eligibility import DUPLICATE_REASONS, candidate_eligibility
from retest.stages.dedup import run_dedup
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow

N_REF, N_PLANT, N_NEW = 200, 12, 24


def _make(root: Path, fm: Path) -> Project:
    train, labels, test = fm_images(fm, N_REF, N_NEW)
    cands = np.concatenate([brighter(train[:N_PLANT]), test])
    return fm_project(root, train, labels, cands, source="fm-test")


@pytest.fixture
def project(tmp_path: Path, fashion_mnist_dir: Path):
    p = _make(tmp_path / "proj", fashion_mnist_dir)
    yield p
    p.close()


def _lists(p: Project) -> dict:
    return {
        m: [
            (n.candidate_id, n.ref_ids, n.distances)
            for n in p.store.neardup.iter_neighbours(metric=m)
        ]
        for m in dd.BUILTIN_METRICS
    }


def test_run_stores_neighbours_and_finds_planted(project: Project) -> None:
    res = run_dedup(project, k=5, chunk_size=16, backend="numpy")
    assert (
        res.n_candidates == N_PLANT + N_NEW
        and res.n_references == N_REF + N_PLANT + N_NEW
    )
    lists = _lists(project)
    for m in dd.BUILTIN_METRICS:
        assert len(lists[m]) == res.n_candidates
        for cid, refs, dist in lists[m]:
            assert cid not in refs and len(refs) == 5 and list(dist) == sorted(dist)
    ids = {c.source_ref: c.id for c in project.store.candidates.iter()}
    l2 = {cid: refs for cid, refs, _ in lists["l2"]}
    dssim = {cid: refs for cid, refs, _ in lists["dssim"]}
    hits = sum(
        f"train:{i}" in l2[ids[str(i)]][:5] + dssim[ids[str(i)]][:2]
        for i in range(N_PLANT)
    )
    assert hits == N_PLANT


def test_resume_after_interrupt_skips_finished_chunks(
    project: Project, monkeypatch
) -> None:
    calls = []

    def boom(task, done, total):
        if done == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_dedup(project, k=4, chunk_size=12, backend="numpy", progress=boom)
    real = dd.knn
    monkeypatch.setattr(dd, "knn", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    res = run_dedup(project, k=4, chunk_size=12, backend="numpy")
    assert (res.chunks_skipped, res.chunks_computed) == (4, 8)  # 4 metrics × 3
    assert len(calls) == 2  # l2: 3 chunks done before; features: 1 of 3 done
    resumed = _lists(project)
    forget_checkpoints(project, res)
    again = run_dedup(project, k=4, chunk_size=12, backend="numpy")
    assert again.chunks_computed == 12
    assert _lists(project) == resumed


def test_dask_stage_equals_local(project: Project) -> None:
    res = run_dedup(project, metrics=["l2"], k=3, backend="numpy")
    local = _lists(project)["l2"]
    forget_checkpoints(project, res)
    with cluster_client(workers=2, processes=False) as client:
        run_dedup(project, metrics=["l2"], k=3, backend="numpy", client=client)
    assert _lists(project)["l2"] == local


def test_review_verdicts_and_status(project: Project) -> None:
    run_dedup(project, k=5, backend="numpy")
    status = candidate_eligibility(project).reasons
    assert set(status) == {c.id for c in project.store.candidates.iter()}
    queue = dedup_review_queue(project, thresholds={"l2": 2e6})
    assert queue, "planted copies must be queued"
    for item in queue:
        dup = [r for r in item.references[:1] if r.startswith("train:")]
        record_review(
            project,
            item.candidate_id,
            item.metric,
            reviewer="ann",
            shown=item.references,
            duplicates=dup,
        )
    assert dedup_review_queue(project, thresholds={"l2": 2e6}) == []
    status = candidate_eligibility(project).reasons
    planted = {
        c.id for c in project.store.candidates.iter() if int(c.source_ref) < N_PLANT
    }
    # +12 grey levels: within the automatic rule, and confirmed by the reviewer
    assert all(status[c][:1] == ("near_original",) for c in planted)
    confirmed = {c for c, _ in project.store.neardup.duplicate_pairs()}
    copies = {c for c, r in status.items() if set(r) & DUPLICATE_REASONS}
    assert copies == planted | confirmed  # the rule's copies and the reviewer's


def test_bad_inputs_write_nothing(project: Project, tmp_path: Path) -> None:
    with pytest.raises(InputValidationError, match="k=999 exceeds"):
        run_dedup(project, k=999, backend="numpy")
    other = PixelArray.create(project.arrays_dir, "big", shape=(32, 32))
    r = other.append(np.zeros((1, 32, 32), np.uint8))
    project.store.candidates.add(
        [CandidateRow("odd", "x", "1", array_name="big", array_row=r[0])]
    )
    with pytest.raises(InputValidationError, match=r"different sizes.*--resize"):
        run_dedup(project, k=3, backend="numpy")
    assert list(project.store.neardup.iter_neighbours(metric="l2")) == []
    assert not (project.arrays_dir / "dedup").exists()  # nothing written
    res = run_dedup(project, k=3, resize=28, metrics=["l2"], backend="numpy")
    assert res.image_shape == (28, 28, 1)


def test_cli_dedup_report_and_queue(project: Project) -> None:
    runner = CliRunner()
    root = str(project.root)
    out = runner.invoke(
        app,
        [
            "dedup",
            "-p",
            root,
            "--k",
            "4",
            "--metrics",
            "l2,dssim",
            "--report",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["metrics"] == ["l2", "dssim"]
    sheet = project.root / data["report"]["l2"]["contact_sheet"]
    assert_png(sheet)
    pair = data["report"]["l2"]["pairs"][0]
    assert (project.root / pair["candidate_thumb"]).is_file()
    q = runner.invoke(app, ["dedup-queue", "-p", root, "--json"])
    assert q.exit_code == 0 and isinstance(json.loads(q.stdout), list)
    bad = runner.invoke(app, ["dedup", "-p", root, "--metrics", "l3"])
    assert bad.exit_code == 2 and "l2, features, dssim, warp" in bad.output
