"""Crowd fixes: the worker report judges both control kinds and shows raw WorkerIds;
re-running ``crowd tasks`` / ``crowd export`` never re-publishes tasks.

A real project (SQLite, pixel arrays) through the CLI, results CSVs in MTurk's
downloaded layout.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, ReferenceRow, content_id

runner = CliRunner()
COLS = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime",
        "SubmitTime", "Input.task_id", "Answer.selected", "Approve", "Reject"]  # fmt: skip


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _add_candidates(root: Path, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    cands = rng.integers(0, 255, (n, 8, 8, 3), dtype=np.uint8)
    with Project.open(root) as proj:
        name = f"pool{seed}"
        PixelArray.create(proj.arrays_dir, name, shape=(8, 8, 3)).append(cands)
        proj.store.candidates.add(
            CandidateRow(id=content_id(c), source="arrays", source_ref=f"{seed}:{i}",
                         class_id=i % 2, array_name=name, array_row=i)
            for i, c in enumerate(cands)
        )  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    rng = np.random.default_rng(0)
    with Project.init(root, name="crowd", classes=["cat", "dog"]) as proj:
        refs = rng.integers(0, 255, (20, 8, 8, 3), dtype=np.uint8)
        PixelArray.create(proj.arrays_dir, "ref_test", shape=(8, 8, 3)).append(refs)
        proj.store.references.add(
            ReferenceRow("test", i, i % 2, content_id(refs[i]), None, "ref_test", i)
            for i in range(20)
        )
    _add_candidates(root, 1, 16)
    return root


def _tasks(root: Path, *extra: str) -> str:
    res = cli("crowd", "tasks", "--project", root, "--images-per-task", "12",
              "--controls", "2", *extra)  # fmt: skip
    assert res.exit_code == 0, res.output
    return res.stdout


def _export(root: Path, out: Path, *extra: str):
    return cli("crowd", "export", "--project", root, "--out", out,
               "--base-url", "https://h/i", *extra)  # fmt: skip


def _batch(out: Path) -> list[dict[str, str]]:
    with (out / "batch_input.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_rerunning_tasks_and_export_never_republishes(
    root: Path, tmp_path: Path
) -> None:
    assert _tasks(root).startswith("2 tasks created")
    with Project.open(root) as proj:
        first = {t.id for t in proj.store.tasks.list()}
    out = _tasks(root)  # nothing new: the first two are still awaiting answers
    assert out.startswith("0 tasks created") and "2 earlier tasks" in out
    with Project.open(root) as proj:
        assert {t.id for t in proj.store.tasks.list()} == first
    res = _export(root, tmp_path / "b1")
    assert res.exit_code == 0, res.output
    assert {r["task_id"] for r in _batch(tmp_path / "b1")} == first
    res = _export(root, tmp_path / "b2")  # nothing exported twice by default
    assert res.exit_code == 1 and "exported before" in res.output
    assert not (tmp_path / "b2" / "batch_input.csv").exists()

    _add_candidates(root, 2, 6)  # new candidates get tasks, exported ones do not
    again = json.loads(_tasks(root, "--json"))["tasks"]
    assert len(again) == 2 and not set(again) & first
    with Project.open(root) as proj:
        tasks = proj.store.tasks.list()
        shown = [i for t in tasks for i in t.items]
        old = {i for t in tasks if t.id in first for i in t.items}
        new_cands = {c.id for c in proj.store.candidates.iter()
                     if c.source_ref.startswith("2:")}  # fmt: skip
    assert len(tasks) == 4
    for t in tasks:
        if t.id not in first:  # only the new candidates (and controls) are shown
            cands = set(t.items) - set(t.controls["pos"]) - set(t.controls["neg"])
            assert cands <= new_cands and not cands & old
    assert new_cands <= set(shown)
    res = _export(root, tmp_path / "b3")
    assert res.exit_code == 0, res.output
    assert {r["task_id"] for r in _batch(tmp_path / "b3")} == set(again)
    res = _export(root, tmp_path / "b4", "--all")
    assert res.exit_code == 0, res.output
    assert {r["task_id"] for r in _batch(tmp_path / "b4")} == first | set(again)


def _row(task: dict[str, str], items: list[str], worker: str, aid: str,
         selected: list[str], **kw: str) -> dict[str, str]:  # fmt: skip
    toks = "|".join(task[f"token_{items.index(i)}"] for i in selected)
    return {"HITId": "H", "AssignmentId": aid, "WorkerId": worker,
            "AssignmentStatus": "Submitted", "AcceptTime": "", "SubmitTime": "",
            "Input.task_id": task["task_id"], "Answer.selected": toks,
            "Approve": "", "Reject": "", **kw}  # fmt: skip


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLS, quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
    return path


def test_spammer_is_rejected_and_raw_worker_ids_shown(
    root: Path, tmp_path: Path
) -> None:
    _tasks(root)
    assert _export(root, tmp_path / "b").exit_code == 0
    batch = _batch(tmp_path / "b")
    with Project.open(root) as proj:
        t = {x.id: x for x in proj.store.tasks.list()}[batch[0]["task_id"]]
    items, pos = list(t.items), list(t.controls["pos"])
    honest, spammer = "A2HONESTWORKER7", "A3SPAMMERWORKER9"
    rows = [
        _row(batch[0], items, honest, "AS1", pos),
        _row(batch[0], items, spammer, "AS2", items),  # checks every box
    ]
    res = cli("crowd", "import", _write(tmp_path / "r1.csv", rows),
              "--project", root, "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    workers = {w["worker_id"]: w for w in json.loads(res.stdout)["workers"]}
    spam = workers[spammer]
    assert (spam["pos_accuracy"], spam["neg_accuracy"]) == (1.0, 0.0)
    assert spam["control_accuracy"] == 0.5  # the old rule (≥ 0.5) approved this
    assert spam["decision"] == "reject" and "neg" in spam["reason"]
    assert workers[honest]["decision"] == "approve"
    assert spam["statuses"] == {"Submitted": 1}

    rows[1]["Reject"] = "Selected every image."
    res = cli("crowd", "import", _write(tmp_path / "r2.csv", rows),
              "--project", root, "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    res = cli("crowd", "workers", "--project", root, "--results", tmp_path / "r2.csv",
              "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    workers = {w["worker_id"]: w for w in json.loads(res.stdout)["workers"]}
    assert workers[spammer]["statuses"] == {"Rejected": 1}
    assert workers[honest]["statuses"] == {"Submitted": 1}
    table = cli("crowd", "workers", "--project", root, "--results", tmp_path / "r2.csv")
    assert table.exit_code == 0, table.output
    line = next(x for x in table.stdout.splitlines() if spammer in x)
    assert "1 Rejected" in line and "reject" in line
    # without the results file the hash is all the project knows
    res = cli("crowd", "workers", "--project", root, "--json")
    assert all(w["worker_id"] is None for w in json.loads(res.stdout)["workers"])
    db = (root / "retest.db").read_bytes()
    assert spammer.encode() not in db and honest.encode() not in db
