"""MTurk results through the CLI: re-import after review, one vote per worker and
task, and results files that cannot be read.

A real project (SQLite, pixel arrays) gets its tasks and batch files from
``retest crowd tasks`` / ``retest crowd export``; the results CSVs are written in
MTurk's downloaded layout (every field quoted, Input.* copied from the batch file,
Approve / Reject columns last) and imported with ``retest crowd import``.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project, selection_frequencies
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, ReferenceRow, content_id

MTURK_HEAD = [
    "HITId", "HITTypeId", "Title", "Description", "Keywords", "Reward",
    "CreationTime", "MaxAssignments", "RequesterAnnotation",
    "AssignmentDurationInSeconds", "AutoApprovalDelayInSeconds", "Expiration",
    "NumberOfSimilarHITs", "LifetimeInSeconds", "AssignmentId", "WorkerId",
    "AssignmentStatus", "AcceptTime", "SubmitTime", "AutoApprovalTime",
    "ApprovalTime", "RejectionTime", "RequesterFeedback", "WorkTimeInSeconds",
    "LifetimeApprovalRate", "Last30DaysApprovalRate", "Last7DaysApprovalRate",
]  # fmt: skip
runner = CliRunner()


@dataclass
class Crowd:
    root: Path
    batch: list[dict[str, str]]  # batch_input.csv rows, one per task
    items: dict[str, list[str]]  # task id → item ids in display order
    controls: dict[str, set[str]]  # task id → control item ids

    def task(self, class_id: int) -> dict[str, str]:
        with Project.open(self.root) as proj:
            tid = next(t.id for t in proj.store.tasks.list() if t.class_id == class_id)
        return next(b for b in self.batch if b["task_id"] == tid)

    def token(self, batch_row: dict[str, str], item: str) -> str:
        return batch_row[f"token_{self.items[batch_row['task_id']].index(item)}"]

    def candidates(self, batch_row: dict[str, str]) -> list[str]:
        tid = batch_row["task_id"]
        return [i for i in self.items[tid] if i not in self.controls[tid]]

    def frequencies(self) -> dict[tuple[str, int], tuple[float, int]]:
        with Project.open(self.root) as proj:
            stats = selection_frequencies(proj)
        return {k: (v.frequency, v.n_assignments) for k, v in stats.items()}


def cli(*args: str) -> object:
    return runner.invoke(app, list(args))


@pytest.fixture
def crowd(tmp_path: Path) -> Iterator[Crowd]:
    root = tmp_path / "proj"
    rng = np.random.default_rng(0)
    with Project.init(root, name="crowd", classes=["cat", "dog"]) as proj:
        refs = rng.integers(0, 255, (20, 8, 8, 3), dtype=np.uint8)
        cands = rng.integers(0, 255, (16, 8, 8, 3), dtype=np.uint8)
        PixelArray.create(proj.arrays_dir, "ref_test", shape=(8, 8, 3)).append(refs)
        PixelArray.create(proj.arrays_dir, "pool", shape=(8, 8, 3)).append(cands)
        proj.store.references.add(
            ReferenceRow("test", i, i % 2, content_id(refs[i]), None, "ref_test", i)
            for i in range(20)
        )
        proj.store.candidates.add(
            CandidateRow(
                id=content_id(c),
                source="arrays",
                source_ref=str(i),
                class_id=i % 2,
                array_name="pool",
                array_row=i,
            )
            for i, c in enumerate(cands)
        )
    p = ["--project", str(root)]
    res = cli("crowd", "tasks", *p, "--images-per-task", "12", "--controls", "2")
    assert res.exit_code == 0, res.output
    out = tmp_path / "batch"
    res = cli("crowd", "export", *p, "--out", str(out), "--base-url", "https://h/i")
    assert res.exit_code == 0, res.output
    with (out / "batch_input.csv").open(newline="") as f:
        batch = list(csv.DictReader(f))
    with Project.open(root) as proj:
        tasks = proj.store.tasks.list()
    assert len(tasks) == 2 == len(batch)  # 8 candidates per class, one grid each
    yield Crowd(
        root,
        batch,
        {t.id: list(t.items) for t in tasks},
        {t.id: set(t.controls["pos"]) | set(t.controls["neg"]) for t in tasks},
    )


def result_row(
    crowd: Crowd,
    batch_row: dict[str, str],
    *,
    assignment: str,
    worker: str,
    selected: Sequence[str],
    status: str = "Submitted",
    submit: str = "Tue Mar 05 10:12:33 PST 2024",
    approve: str = "",
    reject: str = "",
) -> dict[str, str]:
    """One row as MTurk's requester UI downloads it."""
    row = dict.fromkeys(MTURK_HEAD, "")
    row.update(
        HITId=f"HIT{batch_row['task_id'][:6]}",
        HITTypeId="3ABCTYPE",
        Title="Find images of a class, check every match",
        Reward="$0.10",
        MaxAssignments="10",
        AssignmentId=assignment,
        WorkerId=worker,
        AssignmentStatus=status,
        AcceptTime="Tue Mar 05 10:10:01 PST 2024",
        SubmitTime=submit,
        WorkTimeInSeconds="152",
        LifetimeApprovalRate="100% (12/12)",
        Last30DaysApprovalRate="100% (12/12)",
        Last7DaysApprovalRate="100% (3/3)",
    )
    row.update({f"Input.{k}": v for k, v in batch_row.items()})
    row["Answer.selected"] = "|".join(crowd.token(batch_row, i) for i in selected)
    row["Approve"], row["Reject"] = approve, reject
    return row


def write_results(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    """A results CSV in MTurk's layout: every field quoted, CRLF line ends."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
    return path


def import_json(crowd: Crowd, path: Path) -> dict:
    res = cli("crowd", "import", str(path), "--project", str(crowd.root), "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_reimport_after_review_applies_rejections(crowd: Crowd, tmp_path: Path) -> None:
    cat = crowd.task(0)
    cands = crowd.candidates(cat)
    spam = crowd.items[cat["task_id"]]  # W4 selects every image
    rows = [
        result_row(crowd, cat, assignment="A1", worker="W1", selected=cands[:1]),
        result_row(crowd, cat, assignment="A2", worker="W2", selected=cands[:2]),
        result_row(crowd, cat, assignment="A3", worker="W3", selected=cands[:1]),
        result_row(crowd, cat, assignment="A4", worker="W4", selected=spam),
    ]
    first = import_json(crowd, write_results(tmp_path / "r1.csv", rows))
    f = crowd.frequencies()
    assert f[(cands[0], 0)] == (1.0, 4)
    assert f[(cands[1], 0)] == (0.5, 4)  # W2 and the spammer
    assert f[(cands[2], 0)] == (0.25, 4)  # the spammer only

    # the requester reviews the same download: reject W4 (reason in Reject), approve
    # W1 (x in Approve); W3's row was already rejected on MTurk by another batch
    rows[3]["Reject"] = "Selected every image, including the wrong-class ones."
    rows[0]["Approve"] = "x"
    rows[2]["AssignmentStatus"] = "Rejected"
    second = import_json(crowd, write_results(tmp_path / "r2.csv", rows))
    f = crowd.frequencies()
    assert f[(cands[0], 0)] == (1.0, 2)  # W1 (approved) and W2 remain
    assert f[(cands[1], 0)] == (0.5, 2)
    assert f[(cands[2], 0)] == (0.0, 2)  # the spammer's votes no longer count
    assert (first["rows"], first["new"], first["unchanged"]) == (4, 4, 0)
    assert first["status_changes"] == [] and first["rejected"] == []
    assert (second["rows"], second["new"], second["unchanged"]) == (4, 0, 1)
    assert second["rejected"] == [] and second["events"] == 0
    changes = {
        c["assignment_id"]: (c["old"], c["new"], c["line"])
        for c in second["status_changes"]
    }
    assert changes == {
        "A1": ("Submitted", "Approved", 2),
        "A3": ("Submitted", "Rejected", 4),
        "A4": ("Submitted", "Rejected", 5),
    }

    # the same reviewed file again is a no-op; an older download (Submitted, no
    # marks) does not undo the review either
    with Project.open(crowd.root) as proj:
        before = proj.store.annotations.list(kind="task")
    third = import_json(crowd, tmp_path / "r2.csv")
    assert (third["new"], third["unchanged"], third["status_changes"]) == (0, 4, [])
    old = import_json(crowd, tmp_path / "r1.csv")
    assert (old["new"], old["unchanged"], old["status_changes"]) == (0, 4, [])
    with Project.open(crowd.root) as proj:
        assert proj.store.annotations.list(kind="task") == before
    assert crowd.frequencies()[(cands[2], 0)] == (0.0, 2)

    # text output names every change
    rows[3]["Reject"], rows[3]["Approve"] = "", "x"  # the requester changes their mind
    res = cli("crowd", "import", str(write_results(tmp_path / "r3.csv", rows)),
              "--project", str(crowd.root))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (
        "4 data rows: 0 new assignments (0 events), 1 status changes, 3 unchanged, 0 rejected"
        in res.stdout
    )
    assert "line 5: A4 Rejected → Approved" in res.stdout
    assert crowd.frequencies()[(cands[2], 0)] == (1 / 3, 3)


def test_reimport_cannot_change_an_answer(crowd: Crowd, tmp_path: Path) -> None:
    cat = crowd.task(0)
    cands = crowd.candidates(cat)
    rows = [result_row(crowd, cat, assignment="A1", worker="W1", selected=cands[:1])]
    import_json(crowd, write_results(tmp_path / "r1.csv", rows))
    rows[0]["Answer.selected"] = crowd.token(cat, cands[1])
    rows[0]["Approve"] = "x"
    r2 = write_results(tmp_path / "r2.csv", rows)
    out = cli("crowd", "import", str(r2), "--project", str(crowd.root), "--json")
    assert out.exit_code == 1, out.output  # its only row rejected: nothing imported
    res = json.loads(out.stdout)
    assert res["status_changes"] == [] and len(res["rejected"]) == 1
    assert "different answer" in res["rejected"][0]["reason"]
    assert crowd.frequencies()[(cands[0], 0)] == (1.0, 1)


def test_one_counted_assignment_per_worker_and_task(
    crowd: Crowd, tmp_path: Path
) -> None:
    cat, dog = crowd.task(0), crowd.task(1)
    c = crowd.candidates(cat)
    d = crowd.candidates(dog)
    early, late = "Tue Mar 05 10:12:33 PST 2024", "Tue Mar 05 11:40:00 PST 2024"
    rows = [
        # W1 got the cat task twice: the later answer (listed first) is the one
        result_row(crowd, cat, assignment="A1b", worker="W1", selected=c[1:2],
                   submit=late),
        result_row(crowd, cat, assignment="A1a", worker="W1", selected=c[:1],
                   submit=early),
        result_row(crowd, cat, assignment="A2", worker="W2", selected=c[:1]),
        # the same worker on another task is another vote
        result_row(crowd, dog, assignment="A3", worker="W1", selected=d[:1]),
        result_row(crowd, dog, assignment="A4", worker="W2", selected=d[:1]),
    ]  # fmt: skip
    import_json(crowd, write_results(tmp_path / "r.csv", rows))
    f = crowd.frequencies()
    assert f[(c[0], 0)] == (0.5, 2)  # W2 only: W1's earlier answer does not count
    assert f[(c[1], 0)] == (0.5, 2)  # W1's latest answer
    assert f[(d[0], 1)] == (1.0, 2)
    # rejecting W1's counted assignment lets their earlier valid one count
    rows[0]["Reject"] = "answered twice"
    res = import_json(crowd, write_results(tmp_path / "r2.csv", rows))
    assert [c["assignment_id"] for c in res["status_changes"]] == ["A1b"]
    f = crowd.frequencies()
    assert f[(c[0], 0)] == (1.0, 2)
    assert f[(c[1], 0)] == (0.0, 2)


def _stray_quote_rows(crowd: Crowd) -> list[dict[str, str]]:
    rows = []
    for k in range(15):
        task = crowd.task(k % 2)
        sel = crowd.candidates(task)[: k % 3]
        rows.append(
            result_row(crowd, task, assignment=f"A{k}", worker=f"W{k}", selected=sel)
        )
    return rows


@pytest.mark.parametrize("quoting", [csv.QUOTE_ALL, csv.QUOTE_MINIMAL])
def test_stray_quote_costs_one_row(crowd: Crowd, tmp_path: Path, quoting: int) -> None:
    rows = _stray_quote_rows(crowd)
    path = tmp_path / "r.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), quoting=quoting)
        w.writeheader()
        w.writerows(rows)
    lines = path.read_text().splitlines(keepends=True)
    # someone edited line 4 by hand: one " opens a field that never closes
    lines[3] = lines[3].replace("W2", '"W2' if quoting == csv.QUOTE_MINIMAL else 'W"2')
    path.write_text("".join(lines))
    res = import_json(crowd, path)
    with Project.open(crowd.root) as proj:
        ids = {e.assignment_id for e in proj.store.annotations.list(kind="task")}
    assert ids == {f"A{k}" for k in range(15)} - {"A2"}
    assert [r["line"] for r in res["rejected"]] == [4]
    assert "quote" in res["rejected"][0]["reason"]
    assert res["rows"] == 15 and res["new"] == 14
    assert (
        res["new"]
        + len(res["status_changes"])
        + res["unchanged"]
        + len(res["rejected"])
        == 15
    )


def test_malformed_lines_are_listed_with_line_numbers(
    crowd: Crowd, tmp_path: Path
) -> None:
    rows = _stray_quote_rows(crowd)[:5]
    path = write_results(tmp_path / "r.csv", rows)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2].rstrip("\r\n") + ',"extra"\r\n'  # a field too many
    lines.insert(4, "\r\n")  # a blank line is no data row
    lines[5] = lines[5].replace('"A3"', '"A0"')  # a repeated assignment id
    path.write_text("".join(lines))
    res = import_json(crowd, path)
    rejected = {r["line"]: r["reason"] for r in res["rejected"]}
    assert sorted(rejected) == [3, 6]
    assert "fields" in rejected[3]
    assert "duplicate assignment id 'A0' (first on line 2)" in rejected[6]
    assert res["rows"] == 5 and res["new"] == 3


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _latin1(crowd: Crowd, path: Path) -> Path:
    rows = _stray_quote_rows(crowd)[:3]
    rows[1]["RequesterFeedback"] = "Très bien"
    with path.open("w", newline="", encoding="latin-1") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
    return path


def _no_answer_column(crowd: Crowd, path: Path) -> Path:
    rows = _stray_quote_rows(crowd)[:3]
    for r in rows:
        del r["Answer.selected"]
    return write_results(path, rows)


def _other_project(crowd: Crowd, path: Path) -> Path:
    """Rows of another project's batch: its task ids are not this project's."""
    rows = _stray_quote_rows(crowd)[:3]
    for r in rows:
        r["Input.task_id"] = "0f" * 16
    return write_results(path, rows)


@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (_latin1, r"not UTF-8 text \(byte 0xe8 on line 3\).*Re-save it as UTF-8"),
        (lambda c, p: (p.mkdir(), p)[1], r"is a directory; expected an MTurk batch"),
        (lambda c, p: (p.write_bytes(b""), p)[1], r"is empty; expected an MTurk"),
        (lambda c, p: (p.write_text("\n \n"), p)[1], r"is empty; expected an MTurk"),
        (_no_answer_column, r"missing columns \['Answer.selected'\]"),
        (
            _other_project,
            r"none of its 3 rows names a task of this project \(e.g. task id "
            r"'0f0f.*' on line 2\); it comes from another project's .*--project DIR",
        ),
    ],
    ids=["latin1", "directory", "empty", "blank", "missing-column", "other-project"],
)
def test_unreadable_results_file_is_one_line_and_writes_nothing(
    crowd: Crowd, tmp_path: Path, make, expect: str
) -> None:
    import re

    ok = _stray_quote_rows(crowd)[:2]
    import_json(crowd, write_results(tmp_path / "ok.csv", ok))
    db = crowd.root / "retest.db"
    before = _sha(db)
    path = make(crowd, tmp_path / "results.csv")
    res = cli("crowd", "import", str(path), "--project", str(crowd.root))
    assert res.exit_code == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1, res.stderr
    assert err[0].startswith("error: ") and str(path) in err[0]
    assert re.search(expect, err[0]), err[0]
    assert "Traceback" not in res.output
    assert _sha(db) == before
    assert (
        not (crowd.root / "retest.db-wal").exists()
        or (crowd.root / "retest.db-wal").stat().st_size == 0
    )
