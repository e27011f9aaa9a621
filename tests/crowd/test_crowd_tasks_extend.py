"""`crowd tasks` extends a project's tasks for the strategy it targets.

A project whose tasks show too few originals per class for matched-frequency
(3 controls per task: a class of 30 candidates shows at most 9) used to need a
rebuild: every candidate already sat in a task, so running the command again made
nothing. Now a larger ``min_originals`` (``--originals``, or what ``--strategy``
needs) adds tasks that show originals not shown yet; stored tasks never change
and no task is made twice. On a real SQLite store, and through the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retest.project._project import Project
from retest.stages.crowd import create_task_batch, task_from_row
from retest.stages.sample._feasibility import originals_needed, originals_shown
from retest.store import open_store
from retest.store.rows import CandidateRow, ClassRow, ReferenceRow, Revision

GRID = {"images_per_task": 16, "pos_controls": 3, "neg_controls": 3, "seed": 2}


@pytest.fixture
def project(tmp_path: Path):
    s = open_store(tmp_path / "retest.db")
    s.classes.put([ClassRow(0, "cat"), ClassRow(1, "dog"), ClassRow(2, "owl")])
    # 40 originals of cat and dog, only 22 of owl
    refs = [(c, k) for c in (0, 1) for k in range(40)] + [(2, k) for k in range(22)]
    s.references.add(
        ReferenceRow("test", i, c, f"r{i}") for i, (c, _) in enumerate(refs)
    )
    s.candidates.add(
        CandidateRow(id=f"cand{c}_{i}", source="arrays", source_ref=str(i), class_id=c)
        for c in range(3)
        for i in range(30)
    )
    yield Project.from_store(tmp_path, s)
    s.close()


def _pos(rows) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for r in rows:
        out.setdefault(r.class_id, set()).update(r.controls["pos"])
    return out


def test_a_larger_originals_target_adds_tasks_and_keeps_the_old(
    project: Project,
) -> None:
    first = create_task_batch(project, **GRID)
    assert first.for_originals == 0
    before = project.store.tasks.list()
    assert max(originals_shown(project).values()) < 20  # too few for MF

    more = create_task_batch(project, **GRID, min_originals=20)
    after = project.store.tasks.list()
    assert after[: len(before)] == before  # stored tasks unchanged
    assert more.rows and more.for_originals == len(more.rows)
    assert len({r.id for r in after}) == len(after)  # no task twice
    assert len({tuple(sorted(r.items)) for r in after}) == len(after)
    shown = originals_shown(project)
    assert shown["cat"] >= 20 and shown["dog"] >= 20
    # the owl has 22 originals in the control split: it shows 20 too
    assert shown["owl"] >= 20 and more.originals_short == {}
    old = _pos(before)
    for r in more.rows:
        t = task_from_row(r)
        assert not set(t.pos_controls) & old[r.class_id]  # fresh originals only
        assert {i.split("_")[0] for i in t.candidates} == {f"cand{r.class_id}"}
        assert len(r.items) == GRID["images_per_task"]

    again = create_task_batch(project, **GRID, min_originals=20)
    assert again.rows == []  # idempotent
    most = create_task_batch(project, **GRID, min_originals=30)
    assert originals_shown(project)["cat"] >= 30
    assert most.originals_short == {2: 22}  # owl: no more originals to show


def test_extra_tasks_show_the_least_shown_candidates(project: Project) -> None:
    create_task_batch(project, **GRID)
    extra = create_task_batch(project, **GRID, min_originals=12).rows
    shown: dict[str, int] = {}
    for r in project.store.tasks.list():
        for i in task_from_row(r).candidates:
            shown[i] = shown.get(i, 0) + 1
    for cls in range(3):
        counts = [shown[f"cand{cls}_{i}"] for i in range(30)]
        assert max(counts) - min(counts) <= 1, (cls, counts)  # spread, not piled
    assert extra


def test_dry_run_stores_nothing(project: Project) -> None:
    create_task_batch(project, **GRID)
    n = len(project.store.tasks.list())
    dry = create_task_batch(project, **GRID, min_originals=20, dry_run=True)
    assert dry.for_originals > 0 and len(project.store.tasks.list()) == n
    assert originals_needed("matched-frequency") == 20


# ------------------------------------------------------------------ the CLI


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retest", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def cli_project(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    root = tmp_path / "proj"
    for name, n in (("refs", 120), ("pool", 90)):
        images = rng.integers(0, 256, (n, 8, 8), dtype=np.uint8)
        np.savez(tmp_path / f"{name}.npz", images=images, labels=np.arange(n) % 3)
    assert _cli("init", root, "--classes", "cat,dog,owl").returncode == 0
    res = _cli("reference", "add", "arrays", tmp_path / "refs.npz", "--split",
               "test", "--project", root)  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = _cli("source", "add", "arrays", tmp_path / "pool.npz", "--project", root)
    assert res.returncode == 0, res.stderr
    return root


def test_cli_extends_for_the_strategy(cli_project: Path) -> None:
    grid = ("--images-per-task", "16", "--controls", "3", "--project", cli_project)
    res = _cli("crowd", "tasks", *grid)
    assert res.returncode == 0, res.stderr
    assert "--strategy matched-frequency adds tasks that show more originals" in (
        res.stdout.replace("\n", " ")
    )
    res = _cli("crowd", "tasks", "--strategy", "matched-frequency", "--json", *grid)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["originals"] == 20 and data["for_originals"] == len(data["tasks"]) > 0
    assert min(data["originals_shown"].values()) >= 20
    res = _cli("crowd", "tasks", "--strategy", "matched-frequncy", *grid)
    assert res.returncode == 2 and "matched-frequency" in res.stderr
    assert "Traceback" not in res.stderr


def test_cli_targets_the_newest_revisions_strategy(cli_project: Path) -> None:
    grid = ("--images-per-task", "16", "--controls", "3", "--project", cli_project)
    assert _cli("crowd", "tasks", *grid).returncode == 0
    with Project.open(cli_project) as proj:  # a matched-frequency try that failed
        proj.store.revisions.create(
            Revision("proj-mf-0", "matched-frequency", valid=False), []
        )
    res = _cli("crowd", "tasks", "--json", *grid)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["strategy"] == "matched-frequency" and data["for_originals"] > 0
