"""MTurk's file formats (``retest.stages.crowd.mturk``): times, CSV records, purity.

The format module reads MTurk's files without a project; the import on a real
SQLite store rejects a row whose time cannot be read, naming its line.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pytest

from retest.errors import InputValidationError
from retest.labeling.tasks import image_token
from retest.project._project import Project
from retest.stages.crowd import create_tasks, import_mturk, mturk
from retest.store import open_store
from retest.store.rows import ASSIGNMENT_STATUSES, CandidateRow, ClassRow, ReferenceRow

SECRET = b"0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("Wed Mar 04 10:12:31 PST 2026", "2026-03-04T18:12:31.000000Z"),
        ("Sun Jul 05 10:12:31 PDT 2026", "2026-07-05T17:12:31.000000Z"),
        ("Sun Jul 05 10:12:31 EDT 2026", "2026-07-05T14:12:31.000000Z"),
        ("Wed Mar 04 10:12:31 CST 2026", "2026-03-04T16:12:31.000000Z"),
        ("Wed Mar 04 10:12:31 GMT 2026", "2026-03-04T10:12:31.000000Z"),
        ("Wed Mar 04 10:12:31 HST 2026", "2026-03-04T20:12:31.000000Z"),
        # the hour that repeats when clocks go back: the abbreviation settles it
        ("Sun Nov 01 01:30:00 PDT 2026", "2026-11-01T08:30:00.000000Z"),
        ("Sun Nov 01 01:30:00 PST 2026", "2026-11-01T09:30:00.000000Z"),
        ("Wed Mar 04 10:12:31 +0530 2026", "2026-03-04T04:42:31.000000Z"),
        ("2026-03-04T10:12:31-08:00", "2026-03-04T18:12:31.000000Z"),
        ("2026-03-04T18:12:31Z", "2026-03-04T18:12:31.000000Z"),
        ("", None),
    ],
)
def test_times_are_read_in_their_zone(text: str, utc: str | None) -> None:
    assert mturk.parse_time(text) == utc


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Wed Mar 04 10:12:31 CET 2026", "unknown time zone 'CET'"),
        ("Wed Mar 04 10:12:31 PDT 2026", "did not use PDT on that date"),
        ("Wed Mar 32 10:12:31 PST 2026", "expected MTurk's time format"),
        ("2026-03-04T10:12:31", "expected MTurk's time format"),
        ("t1", "expected MTurk's time format"),
    ],
)
def test_unreadable_times_are_errors(text: str, why: str) -> None:
    with pytest.raises(InputValidationError, match=why):
        mturk.parse_time(text)


def test_the_format_module_needs_no_project() -> None:
    """Reading and writing MTurk's files imports nothing of a project or store."""
    tree = ast.parse(Path(mturk.__file__).read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in (n.names if isinstance(n, ast.Import) else [n])
    ]
    retest = sorted(str(m) for m in imported if str(m).startswith("retest"))
    assert retest == ["retest._validation", "retest.errors"]  # the foundation
    # the statuses a results file carries are the ones the store keeps
    assert mturk.ASSIGNMENT_STATUSES == ASSIGNMENT_STATUSES


def test_records_span_lines_only_inside_quotes(tmp_path: Path) -> None:
    """A quoted comment over two lines is one row; line numbers stay the file's."""
    path = tmp_path / "r.csv"
    path.write_bytes(
        "\ufeffAssignmentId,WorkerId,AssignmentStatus,Input.task_id,"
        'Answer.selected,Answer.comment\r\nA1,W1,Submitted,t,a|b,"blurry\r\nall"\r\n'
        "\r\nA2,W2,Submitted,t,,\r\nA3,W3,Submitted,t\r\n"
        'A4,"W4,Submitted,t,,\nA5,W5,Submitted,t,,\n'.encode()
    )
    rows, bad = mturk.read_results(path)
    assert [(line, r["AssignmentId"]) for line, r in rows] == [
        (2, "A1"),
        (5, "A2"),
        (8, "A5"),
    ]
    assert rows[0][1]["Answer.comment"] == "blurry\r\nall"
    assert mturk.answer_tokens(rows[0][1]) == ["a", "b"]
    assert [line for line, _ in bad] == [6, 7]
    assert "has 4 fields, the header has 6" in bad[0][1]
    assert "quote" in bad[1][1]


# ------------------------------------------------------------------ the import


@pytest.fixture
def project(tmp_path: Path):
    s = open_store(tmp_path / "retest.db")
    s.classes.put([ClassRow(0, "cat"), ClassRow(1, "dog")])
    s.references.add(ReferenceRow("test", i, i % 2, f"ref{i}") for i in range(40))
    s.candidates.add(
        CandidateRow(id=f"cand{c}_{i}", source="arrays", source_ref=str(i), class_id=c)
        for c in range(2)
        for i in range(10)
    )
    yield Project.from_store(tmp_path, s)
    s.close()


def test_a_row_with_an_unknown_zone_is_rejected_by_line(
    project: Project, tmp_path: Path
) -> None:
    """Before, any zone but UTC/GMT/PST/PDT silently stored no time at all."""
    task = create_tasks(project, images_per_task=16, seed=4)[0]
    first = image_token(f"{task.id}|{task.items[0]}", SECRET)
    path = tmp_path / "r.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*mturk.REQUIRED_RESULT_COLUMNS, "SubmitTime"])
        for k, when in enumerate(
            ["Sun Jul 05 10:12:31 EDT 2026", "Wed Mar 04 10:12:31 XST 2026"]
        ):
            w.writerow([f"A{k}", f"W{k}", "Submitted", task.id, first, when])
    res = import_mturk(project, path, secret=SECRET)
    assert res.assignments == 1
    assert len(res.rejected_rows) == 1
    line, why = res.rejected_rows[0]
    assert line == 3 and "unknown time zone 'XST'" in why
    events = project.store.annotations.list(kind="task")
    assert {e.when for e in events} == {"2026-07-05T14:12:31.000000Z"}
