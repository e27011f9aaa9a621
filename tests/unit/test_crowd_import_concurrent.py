"""Two ``retest crowd import`` of one results file at once (#23).

On aad0cc2 both processes checked "already imported?" before either wrote, so
both reported every assignment as new and the store held every event twice. The
store now decides "new" inside its write transaction (BEGIN IMMEDIATE): whatever
the interleaving, each assignment is stored once and the two reports add up to
one import. Two real processes are released together by a barrier file after
both have imported retest (no sleeps decide the order).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_input_helpers import build_project, invoke

from retest.project import Project

N_PER_TASK = 60  # assignments per task: the check phase takes long enough to overlap

_WORKER = """
import sys
import time
from pathlib import Path
from typer.testing import CliRunner
from retest.cli.main import app
ready, go, results, project = map(Path, sys.argv[1:5])
ready.write_text("ready")
while not go.exists():
    time.sleep(0.001)
res = CliRunner().invoke(app, ["crowd", "import", str(results), "--project",
                               str(project), "--json"])
sys.stdout.write(res.stdout)
sys.stderr.write(res.stderr)
sys.exit(res.exit_code)
"""


def _results(batch: Path, out: Path) -> int:
    rows = list(csv.DictReader(batch.open(encoding="utf-8")))
    fields = ["AssignmentId", "WorkerId", "AssignmentStatus", "Input.task_id",
              "Input.class_name", "Answer.selected"]  # fmt: skip
    n = 0
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            for j in range(N_PER_TASK):
                w.writerow({
                    "AssignmentId": f"A-{r['task_id']}-{j}", "WorkerId": f"W{j}",
                    "AssignmentStatus": "Submitted", "Input.task_id": r["task_id"],
                    "Input.class_name": r["class_name"],
                    "Answer.selected": r[f"token_{j % 3}"],
                })  # fmt: skip
                n += 1
    return n


def _wait_for(paths: list[Path], procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 300
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"worker exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, "workers never got ready"
        time.sleep(0.01)


def test_two_imports_at_once_store_each_assignment_once(tmp_path: Path) -> None:
    root = build_project(tmp_path / "proj", tmp_path / "inputs")
    res = invoke("crowd", "export", "--out", tmp_path / "batch", "--base-url",
                 "https://example.org/b", "--project", root)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    n_rows = _results(tmp_path / "batch" / "batch_input.csv", tmp_path / "res.csv")
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(2)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(r),
                str(go),
                str(tmp_path / "res.csv"),
                str(root),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in ready
    ]
    try:
        _wait_for(ready, procs)
        go.write_text("go")
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    reports = [json.loads(o) for o, _ in outs]
    assert sorted(r["rows"] for r in reports) == [n_rows, n_rows]
    assert sum(r["new"] for r in reports) == n_rows, reports
    assert sum(r["unchanged"] for r in reports) == n_rows, reports
    with Project.open(root) as proj:
        events = proj.store.annotations.list(kind="task")
        per_task = {t.id: len(t.items) for t in proj.store.tasks.list()}
    assert len({e.assignment_id for e in events}) == n_rows
    want = sum(per_task[t] for t in per_task) * N_PER_TASK
    assert len(events) == want, (len(events), want)
    # and a third import afterwards finds nothing new
    again = invoke("crowd", "import", tmp_path / "res.csv", "--project", root,
                   "--json")  # fmt: skip
    assert json.loads(again.stdout)["new"] == 0


@pytest.mark.parametrize("raced", [0, 2])
def test_record_import_skips_assignments_stored_meanwhile(
    tmp_path: Path, raced: int
) -> None:
    from retest.store.rows import AnnotationEvent

    root = build_project(tmp_path / "proj", tmp_path / "inputs")

    def ev(aid: str, item: str) -> AnnotationEvent:
        return AnnotationEvent(
            who="mturk:x", kind="task", class_id=0, item_id=item, value=1,
            task_id="t", assignment_id=aid, assignment_status="Submitted",
            worker="w",
        )  # fmt: skip

    with Project.open(root) as proj:
        ann = proj.store.annotations
        ann.add([ev(f"a{i}", "x") for i in range(raced)])  # "the other process"
        got = ann.record_import([ev(f"a{i}", "y") for i in range(4)], {})
        assert got == {f"a{i}" for i in range(raced)}
        stored = ann.list(kind="task")
    assert len(stored) == 4
    assert sorted(e.assignment_id for e in stored if e.item_id == "y") == [
        f"a{i}" for i in range(raced, 4)
    ]
