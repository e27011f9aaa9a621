"""Grid-task composition and the MTurk batch round trip on a real SQLite store.

See docs/algorithms.md#crowd-tasks.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import ConfigError, InputValidationError
from retest.labeling.tasks import compose_tasks, control_accuracy, image_token
from retest.project import Project
from retest.stages.crowd import (
    create_tasks,
    export_mturk,
    import_mturk,
    worker_report,
)
from retest.store import open_store
from retest.store.rows import CandidateRow, ClassRow, ReferenceRow

SECRET = b"0123456789abcdef0123456789abcdef"


def _originals(k: int, n: int) -> dict[int, list[str]]:
    return {c: [f"test:{c * 1000 + i}" for i in range(n)] for c in range(k)}


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 130), min_size=1, max_size=4), seed=st.integers(0, 99)
)
def test_every_candidate_shown_and_grids_full(sizes: list[int], seed: int) -> None:
    cands = {c: [f"c{c}_{i}" for i in range(n)] for c, n in enumerate(sizes)}
    k = len(sizes) + 1  # one class more, so every class has another nearest class
    near = {c: (c + 1) % k for c in range(k)}
    tasks = compose_tasks(cands, _originals(k, 60), near, random_state=seed)
    for c, ids in cands.items():
        mine = [t for t in tasks if t.class_id == c]
        shown = [i for t in mine for i in t.candidates]
        assert set(shown) == set(ids)  # every candidate is shown at least once
        assert len(mine) == -(-len(ids) // 42)
        for t in mine:
            assert len(t.items) == 48 and len(set(t.items)) == 48
            assert set(t.pos_controls) <= set(_originals(k, 60)[c])
            assert set(t.neg_controls) <= set(_originals(k, 60)[(c + 1) % k])
            extra = 42 - len(t.candidates)
            assert len(t.pos_controls) - len(t.neg_controls) == extra % 2
    again = compose_tasks(cands, _originals(k, 60), near, random_state=seed)
    assert again == tasks


def test_tail_is_topped_up_from_the_class() -> None:
    cands = {0: [f"c{i}" for i in range(50)]}
    tasks = compose_tasks(cands, _originals(2, 10), {0: 1}, random_state=1)
    assert [len(t.candidates) for t in tasks] == [42, 42]
    tail = tasks[1].candidates
    assert set(tail[:8]) == {f"c{i}" for i in range(42, 50)}
    assert set(tail[8:]) <= {f"c{i}" for i in range(42)}  # top-up from earlier grids


def test_bad_task_parameters() -> None:
    with pytest.raises(ConfigError, match="images_per_task"):
        compose_tasks({0: ["a"]}, _originals(2, 5), {0: 1}, images_per_task=6)
    with pytest.raises(InputValidationError, match="need 3 distinct original"):
        compose_tasks(
            {0: ["a"] * 1},
            {0: ["x", "y"]},
            {0: 1},
            pos_controls=3,
            neg_controls=0,
            images_per_task=4,
        )
    with pytest.raises(ConfigError, match="must be another class"):
        compose_tasks({0: ["a"]}, _originals(1, 5), {0: 0}, images_per_task=8)


def test_control_accuracy() -> None:
    t = compose_tasks(
        {0: ["a"]},
        _originals(2, 50),
        {0: 1},
        images_per_task=8,
        pos_controls=1,
        neg_controls=1,
        random_state=0,
    )[0]
    all_pos = set(t.pos_controls)
    assert control_accuracy(t, all_pos)["overall"] == 1.0
    assert control_accuracy(t, set(t.neg_controls))["overall"] == 0.0


@pytest.fixture
def store(tmp_path: Path):
    s = open_store(tmp_path / "retest.db")
    s.classes.put(
        [ClassRow(0, "cat", "a small domesticated feline"), ClassRow(1, "dog")]
    )
    s.references.add(ReferenceRow("test", i, i % 2, f"ref{i}") for i in range(40))
    s.candidates.add(
        CandidateRow(id=f"cand{c}_{i}", source="arrays", source_ref=str(i), class_id=c)
        for c in range(2)
        for i in range(10)
    )
    yield s
    s.close()


@pytest.fixture
def project(tmp_path: Path, store) -> Project:
    return Project.from_store(tmp_path, store)


def _results(path: Path, rows: list[dict[str, str]], drop: str | None = None) -> Path:
    cols = [
        "HITId",
        "AssignmentId",
        "WorkerId",
        "AssignmentStatus",
        "AcceptTime",
        "SubmitTime",
        "Input.task_id",
        "Answer.selected",
        "Approve",
        "Reject",
    ]
    cols = [c for c in cols if c != drop]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    "HITId": "H",
                    "AcceptTime": "Wed Mar 04 10:10:01 PST 2026",
                    "SubmitTime": "Wed Mar 04 10:12:31 PST 2026",
                    **r,
                }
            )
    return path


def _tok(task_id: str, item: str) -> str:
    return image_token(f"{task_id}|{item}", SECRET)


def test_mturk_round_trip(store, project, tmp_path: Path) -> None:
    tasks = create_tasks(
        project, images_per_task=16, pos_controls=3, neg_controls=3, seed=4
    )
    assert len(tasks) == 2  # 10 candidates per class, one grid each
    files = export_mturk(
        project,
        tasks,
        tmp_path / "batch",
        secret=SECRET,
        base_url="https://example.org/img",
        image_bytes=lambda item: item.encode(),
    )
    batch = list(csv.DictReader(files["batch"].open()))
    assert [r["task_id"] for r in batch] == [t.id for t in tasks]
    # workers see opaque tokens only: no candidate or original id leaks into the batch
    text = files["batch"].read_text()
    assert "cand" not in text and "test:" not in text
    assert len(list((tmp_path / "batch" / "images").iterdir())) == 32

    cat = next(t for t in tasks if t.class_id == 0)
    pos, neg = cat.controls["pos"], cat.controls["neg"]
    cands = [i for i in cat.items if i not in set(pos) | set(neg)]
    good = "|".join(_tok(cat.id, i) for i in [*pos, *cands[:4]])  # controls right
    bad = "|".join(_tok(cat.id, i) for i in [*neg, cands[0]])  # controls all wrong
    rows = [
        {
            "AssignmentId": "A1",
            "WorkerId": "W1",
            "AssignmentStatus": "Approved",
            "Input.task_id": cat.id,
            "Answer.selected": good,
        },
        {
            "AssignmentId": "A2",
            "WorkerId": "W2",
            "AssignmentStatus": "Submitted",
            "Input.task_id": cat.id,
            "Answer.selected": bad,
        },
        {
            "AssignmentId": "A3",
            "WorkerId": "W3",
            "AssignmentStatus": "Rejected",
            "Input.task_id": cat.id,
            "Answer.selected": good,
        },
    ]
    res = import_mturk(project, _results(tmp_path / "r.csv", rows), secret=SECRET)
    assert res.assignments == 3 and not res.rejected_rows
    assert res.assignment_control_accuracy == {"A1": 1.0, "A2": 0.0, "A3": 1.0}
    counts = store.annotations.item_counts(kinds=["task"])  # rejected A3 excluded
    assert counts[cands[0]] == (2, 2)  # selected by A1 and A2 → frequency 1.0
    assert counts[cands[1]] == (2, 1)  # selected by A1 only → 0.5
    assert counts[cands[9]] == (2, 0)
    report = {r["worker"][:4]: r for r in worker_report(project)}
    accs = sorted((r["control_accuracy"], r["decision"]) for r in report.values())
    assert accs == [(0.0, "reject"), (1.0, "approve"), (1.0, "approve")]
    # raw worker ids never reach the store
    assert all(
        e.worker not in ("W1", "W2", "W3") for e in store.annotations.list(kind="task")
    )


def test_bad_rows_are_listed_and_the_rest_imported(
    store, project, tmp_path: Path
) -> None:
    tasks = create_tasks(project, images_per_task=16, seed=1)
    t = tasks[0]
    ok = _tok(t.id, t.items[0])
    rows = [
        {
            "AssignmentId": "A1",
            "WorkerId": "W1",
            "AssignmentStatus": "Submitted",
            "Input.task_id": t.id,
            "Answer.selected": ok,
        },
        {
            "AssignmentId": "A2",
            "WorkerId": "W1",
            "AssignmentStatus": "Submitted",
            "Input.task_id": "no-such-task",
            "Answer.selected": ok,
        },
        {
            "AssignmentId": "A3",
            "WorkerId": "W1",
            "AssignmentStatus": "Submitted",
            "Input.task_id": t.id,
            "Answer.selected": ok[:-1] + ("0" if ok[-1] != "0" else "1"),
        },
        {
            "AssignmentId": "A1",
            "WorkerId": "W2",
            "AssignmentStatus": "Submitted",
            "Input.task_id": t.id,
            "Answer.selected": ok,
        },
    ]
    res = import_mturk(project, _results(tmp_path / "r.csv", rows), secret=SECRET)
    assert res.assignments == 1
    reasons = dict(res.rejected_rows)
    assert "unknown task id" in reasons[3]
    assert "unknown image token" in reasons[4]
    assert "duplicate assignment id" in reasons[5]
    assert store.annotations.count(kind="task") == len(t.items)
    # importing the same file again adds nothing
    again = import_mturk(project, tmp_path / "r.csv", secret=SECRET)
    assert again.assignments == 0 and store.annotations.count(kind="task") == len(
        t.items
    )


def test_missing_columns_write_nothing(store, project, tmp_path: Path) -> None:
    tasks = create_tasks(project, images_per_task=16, seed=1)
    rows = [
        {
            "AssignmentId": "A1",
            "WorkerId": "W1",
            "AssignmentStatus": "Submitted",
            "Input.task_id": tasks[0].id,
            "Answer.selected": "",
        }
    ]
    path = _results(tmp_path / "r.csv", rows, drop="Answer.selected")
    with pytest.raises(
        InputValidationError, match=r"missing columns \['Answer.selected'\]"
    ):
        import_mturk(project, path, secret=SECRET)
    assert store.annotations.count(kind="task") == 0
