"""A crowd import is applied whole or not at all: new assignments and status
changes go in one SQLite transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from retest.store import open_store
from retest.store.rows import AnnotationEvent, ClassRow


def _ev(aid: str, status: str) -> AnnotationEvent:
    return AnnotationEvent(
        "w", "task", 0, f"item-{aid}", 1, task_id="t", assignment_id=aid,
        assignment_status=status,
    )  # fmt: skip


def test_status_change_failure_rolls_back_the_new_events(tmp_path: Path) -> None:
    db = tmp_path / "retest.db"
    with open_store(db) as st:
        st.classes.put([ClassRow(0, "a")])
        st.annotations.add([_ev("a1", "Submitted")])
    con = sqlite3.connect(db)  # a failure in the middle of the import's writes
    con.execute(
        "CREATE TRIGGER no_reject BEFORE UPDATE ON annotations "
        "WHEN NEW.assignment_status = 'Rejected' BEGIN SELECT RAISE(ABORT, 'x'); END"
    )
    con.commit()
    con.close()
    with open_store(db) as st:
        with pytest.raises(Exception, match="x"):
            st.annotations.record_import([_ev("a2", "Submitted")], {"a1": "Rejected"})
        assert [e.assignment_id for e in st.annotations.list(kind="task")] == ["a1"]
        st.annotations.record_import([_ev("a2", "Submitted")], {"a1": "Approved"})
        got = {e.assignment_id: e.assignment_status for e in st.annotations.list()}
        assert got == {"a1": "Approved", "a2": "Submitted"}
