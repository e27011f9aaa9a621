"""The MTurk question's text comes from the project; docs/mturk.md matches the reader.

``[instructions]`` is one setting for the web pages and the MTurk batch: a class's
tasks show the same text on both. The results-CSV columns, statuses and time zones
that docs/mturk.md lists are those :mod:`retest.stages.crowd.mturk` requires and
reads.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from retest.config import ProjectConfig
from retest.errors import InputValidationError
from retest.labeling.instructions import GRID_INSTRUCTIONS
from retest.labeling.tasks import image_token
from retest.project._project import Project
from retest.stages.crowd import create_tasks, export_mturk, import_mturk, mturk
from retest.store import open_store
from retest.store.rows import CandidateRow, ClassRow, ReferenceRow
from retest.web.views import instructions_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "mturk.md"
SECRET = b"0123456789abcdef0123456789abcdef"


def _project(root: Path, instructions: dict[str, str]) -> Project:
    s = open_store(root / "retest.db")
    s.classes.put([ClassRow(0, "T-shirt/top", "a garment for the upper body"),
                   ClassRow(1, "Sandal"), ClassRow(2, "Bag")])  # fmt: skip
    s.references.add(ReferenceRow("test", i, i % 3, f"ref{i}") for i in range(60))
    s.candidates.add(
        CandidateRow(id=f"c{c}_{i}", source="arrays", source_ref=str(i), class_id=c)
        for c in range(3)
        for i in range(6)
    )
    config = ProjectConfig(
        name="fm", classes=("T-shirt/top", "Sandal", "Bag"), instructions=instructions
    )
    return Project(root, config, s)


def _export(project: Project, out: Path) -> dict[str, str]:
    tasks = create_tasks(project, images_per_task=12, seed=0)
    files = export_mturk(project, tasks, out, secret=SECRET, base_url="https://x.org")
    names = {c.id: c.name for c in project.store.classes.list()}
    shown = {names[t.class_id]: t.id for t in tasks}
    rows = {r["task_id"]: r for r in csv.DictReader(files["batch"].open(newline=""))}
    return {name: rows[tid]["instructions"] for name, tid in shown.items()}


def test_the_question_says_what_the_project_sets(tmp_path: Path) -> None:
    instructions = {
        "default": "Only **product photos**; drawings do not count.",
        "Sandal": "Flip-flops count.\n\n- one shoe is enough\n- <b>not</b> boots",
        "strappy": "keyword entries are for the web's keyword pages",
    }
    project = _project(tmp_path, instructions)
    try:
        text = _export(project, tmp_path / "batch")
        question = (tmp_path / "batch" / "question.html").read_text()
        config = project.config
    finally:
        project.store.close()
    assert text == {
        "T-shirt/top": "<p><strong>Definition:</strong> a garment for the upper "
        "body</p><p>Only <strong>product photos</strong>; drawings do not count.</p>",
        "Sandal": "<p>Flip-flops count.</p><ul><li>one shoe is enough</li>"
        "<li>&lt;b&gt;not&lt;/b&gt; boots</li></ul>",
        "Bag": "<p>Only <strong>product photos</strong>; drawings do not count.</p>",
    }
    # the template holds no wording of its own, only the row's columns
    assert "${instructions}" in question and "${definition}" not in question
    assert "photograph" not in question
    # a class's web task page shows the same text (one setting, one rule)
    for name in ("Sandal", "Bag"):
        web = instructions_for(config, name, default=GRID_INSTRUCTIONS)
        assert str(web).replace("\n", "") == text[name]


def test_without_instructions_the_default_names_no_kind_of_image(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path, {})
    try:
        text = _export(project, tmp_path / "batch")
    finally:
        project.store.close()
    assert text["Bag"] == f"<p>{GRID_INSTRUCTIONS}</p>"
    assert all("photograph" not in t for t in text.values())
    assert text["T-shirt/top"].startswith("<p><strong>Definition:</strong> a garment")


# ------------------------------------------------------------------ docs/mturk.md


def _table(heading: str) -> list[list[str]]:
    """The rows of the first Markdown table after the paragraph starting ``heading``."""
    text = DOC.read_text()
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
            if not set(cells[0]) <= {"-", " "}:
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def _codes(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_documented_required_columns_are_the_readers() -> None:
    rows = _table("**Columns.**")
    required = [_codes(r[0])[0] for r in rows if r[1] == "yes"]
    optional = [_codes(r[0])[0] for r in rows if r[1] == "no"]
    assert tuple(required) == mturk.REQUIRED_RESULT_COLUMNS
    assert {"SubmitTime", "Approve", "Reject", "Input.class_name"} <= set(optional)


def test_documented_statuses_and_zones_are_the_readers() -> None:
    text = DOC.read_text()
    statuses = re.search(r"`AssignmentStatus` must be one of ([^;]+);", text)
    assert statuses is not None
    assert tuple(_codes(statuses.group(1))) == mturk.ASSIGNMENT_STATUSES
    zones = {a: r[1] for r in _table("**Times.**") for a in _codes(r[0])}
    assert zones == dict(mturk.TIME_ZONES)


@pytest.mark.parametrize("drop", mturk.REQUIRED_RESULT_COLUMNS)
def test_each_documented_column_is_required(tmp_path: Path, drop: str) -> None:
    cols = [c for c in mturk.REQUIRED_RESULT_COLUMNS if c != drop]
    path = tmp_path / "r.csv"
    path.write_text(",".join(cols) + "\n" + ",".join("x" for _ in cols) + "\n")
    with pytest.raises(InputValidationError, match=f"missing columns \\['{drop}'\\]"):
        mturk.read_results(path)


def test_the_required_columns_alone_import(tmp_path: Path) -> None:
    """A file with only the documented required columns is enough."""
    project = _project(tmp_path, {})
    try:
        task = create_tasks(project, images_per_task=12, seed=0)[0]
        tok = image_token(f"{task.id}|{task.items[0]}", SECRET)
        path = tmp_path / "r.csv"
        path.write_text(
            ",".join(mturk.REQUIRED_RESULT_COLUMNS)
            + f"\nA1,W1,Submitted,{task.id},{tok}\n"
        )
        res = import_mturk(project, path, secret=SECRET)
    finally:
        project.store.close()
    assert (res.assignments, res.rejected_rows) == (1, [])
