"""Importing MTurk batch results: one annotation event per (assignment, image shown).

``import_mturk`` reads the batch results CSV that the requester UI downloads
(:func:`retest.stages.crowd.mturk.read_results`), maps tokens back to image ids,
validates every row and records the events: a file with bad rows imports its good
rows and lists the bad ones with line numbers and reasons. The same file
downloaded again after review re-imports cleanly: only the assignments' statuses
(approved / rejected) change, so rejected work stops counting in selection
frequencies. Worker ids are stored only as ``sha256(worker_id + secret)``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retest.errors import InputValidationError
from retest.labeling.tasks import control_accuracy, hash_worker_id, image_token
from retest.project import Project, project_secret
from retest.stages.crowd._tasks import task_from_row
from retest.stages.crowd.mturk import (
    answer_tokens,
    parse_time,
    read_results,
    row_status,
)
from retest.store.base import Store
from retest.store.rows import AnnotationEvent, TaskRow

__all__ = ["CrowdImport", "StatusChange", "import_mturk"]

UI_VERSION = "mturk-batch-1"


@dataclass(frozen=True, slots=True)
class StatusChange:
    """An already imported assignment whose status the results file changes."""

    line: int
    assignment_id: str
    old: str | None
    new: str


@dataclass
class CrowdImport:
    """What :func:`import_mturk` did with each data row of the results file.

    Every data row is exactly one of: a new assignment (``assignments``), a status
    change of an imported one (``status_changes``), an unchanged re-import
    (``unchanged``) or a rejected row (``rejected_rows``, with line and reason), so
    the four counts add up to ``rows``.
    """

    rows: int = 0
    assignments: int = 0
    events: int = 0
    unchanged: int = 0
    status_changes: list[StatusChange] = field(default_factory=list)
    rejected_rows: list[tuple[int, str]] = field(default_factory=list)
    assignment_control_accuracy: dict[str, float] = field(default_factory=dict)


def _row_events(
    row: dict[str, str],
    task: TaskRow,
    secret: bytes,
    valid_tokens: Mapping[str, str],
    status: str,
) -> tuple[list[AnnotationEvent], set[str]]:
    tokens = answer_tokens(row)
    unknown = [t for t in tokens if t not in valid_tokens]
    if unknown:
        raise InputValidationError(
            f"answer contains unknown image token {unknown[0]!r}"
        )
    selected = {valid_tokens[t] for t in tokens}
    when = parse_time(row.get("SubmitTime") or "")
    worker = hash_worker_id(row["WorkerId"].strip(), secret)
    events = [
        AnnotationEvent(
            who=f"mturk:{worker[:12]}",
            kind="task",
            class_id=task.class_id,
            item_id=item,
            value=int(item in selected),
            when=when,
            ui_version=UI_VERSION,
            task_id=task.id,
            assignment_id=row["AssignmentId"].strip(),
            assignment_status=status,
            worker=worker,
            extra={
                "submit_time": row.get("SubmitTime") or "",
                "accept_time": row.get("AcceptTime") or "",
            },
        )
        for item in task.items
    ]
    return events, selected


def _check_class_name(
    row: Mapping[str, str], task: TaskRow, names: Mapping[int, str]
) -> None:
    """The class the worker was asked about (``Input.class_name``, exported with
    the task) must be the task's class: otherwise the answers mean another class."""
    shown = row.get("Input.class_name")
    want = names.get(task.class_id, str(task.class_id))
    if shown is not None and shown.strip() != want:
        raise InputValidationError(
            f"Input.class_name {shown.strip()!r} differs from task {task.id!r}'s class "
            f"{want!r}; the answers would be counted for the wrong class (was the "
            "batch input edited?)"
        )


def _check_same_assignment(
    aid: str, stored: Sequence[AnnotationEvent], new: Sequence[AnnotationEvent]
) -> None:
    """A re-imported row may change the status only, never what was answered."""
    old = stored[0]
    if old.task_id != new[0].task_id:
        raise InputValidationError(
            f"assignment {aid!r} was imported for task {old.task_id!r}, this row "
            f"names task {new[0].task_id!r}; a results file cannot move an assignment"
        )
    if old.worker != new[0].worker:
        raise InputValidationError(
            f"assignment {aid!r} was imported for another worker; a results file "
            "cannot change an assignment's worker"
        )
    before = {e.item_id for e in stored if e.value}
    after = {e.item_id for e in new if e.value}
    if before != after:
        raise InputValidationError(
            f"assignment {aid!r} was imported with a different answer "
            f"({len(before)} images selected, this row {len(after)}); an answer "
            "cannot change after submission"
        )


def _task_exists(store: Store, task_id: str) -> bool:
    try:
        store.tasks.get(task_id)
    except LookupError:
        return False
    return True


def _refuse_foreign_file(
    store: Store,
    path: Path,
    rows: list[tuple[int, dict[str, str]]],
    known: Mapping[str, TaskRow],
) -> None:
    """One error, before anything is written, when no row names a task of this
    project: the file was exported by another project (or its tasks were never
    made here), and rejecting every row one by one would hide that."""
    if known:
        return
    tids = {(r.get("Input.task_id") or "").strip(): line for line, r in reversed(rows)}
    tids.pop("", None)
    if not tids or any(_task_exists(store, t) for t in tids):
        return
    tid, line = min(tids.items(), key=lambda x: x[1])
    raise InputValidationError(
        f"{path}: none of its {len(rows)} rows names a task of this project (e.g. "
        f"task id {tid!r} on line {line}); it comes from another project's `retest "
        "crowd export`. Import it into that project (--project DIR)."
    )


def import_mturk(
    project: Project,
    results_csv: str | os.PathLike[str],
    *,
    secret: bytes | None = None,
) -> CrowdImport:
    """Import (or re-import) an MTurk batch results CSV into the store.

    A results file can be downloaded again after review, so a row whose assignment
    is already imported is not an error: its status (``AssignmentStatus`` with the
    requester's ``Approve`` / ``Reject`` marks applied) replaces the stored one when
    it differs and is a no-op when it does not. New assignments get one event per
    image shown. Rows are rejected (listed with line and reason) for: a line that is
    not one CSV row of the header's width, an empty assignment or worker id, an
    assignment id repeated within the file, an unknown status or contradicting
    marks, a ``SubmitTime`` that is not a time (or names an unknown zone, see
    :func:`~retest.stages.crowd.mturk.parse_time`), an unknown task id, an answer
    token that does not belong to the task (tampered), and a row contradicting the imported assignment's task, worker or
    answer. File-level problems (not UTF-8, a directory, empty, missing columns,
    no row naming a task of this project) raise before anything is written. All
    rows are checked before the first write; the new events go in one
    transaction, then the status changes; re-running an interrupted import
    completes it.

    Parameters
    ----------
    project : Project
    results_csv : path
        The batch results file MTurk's requester UI downloads.
    secret : bytes, optional
        Token and worker-id key (default: :func:`project_secret`).

    Returns
    -------
    CrowdImport
        Counts, status changes and rejected rows with their line numbers.

    Raises
    ------
    InputValidationError, DataIntegrityError
        The file as a whole is unusable (nothing is written).
    """
    store = project.store
    secret = project_secret(project) if secret is None else secret
    path = Path(results_csv)
    rows, unparsable = read_results(path)
    result = CrowdImport(rows=len(rows) + len(unparsable))
    result.rejected_rows.extend(unparsable)
    events: list[AnnotationEvent] = []
    first_line: dict[str, int] = {}
    task_cache: dict[str, TaskRow] = {}
    class_names = {c.id: c.name for c in store.classes.list()}
    for lineno, row in rows:
        aid = (row.get("AssignmentId") or "").strip()
        try:
            if not aid or not (row.get("WorkerId") or "").strip():
                raise InputValidationError("empty AssignmentId or WorkerId")
            if aid in first_line:
                raise InputValidationError(
                    f"duplicate assignment id {aid!r} (first on line {first_line[aid]})"
                )
            status = row_status(row)
            tid = (row.get("Input.task_id") or "").strip()
            if tid not in task_cache:
                try:
                    task_cache[tid] = store.tasks.get(tid)
                except LookupError:
                    raise InputValidationError(f"unknown task id {tid!r}") from None
            task = task_cache[tid]
            _check_class_name(row, task, class_names)
            tokens = {image_token(f"{task.id}|{i}", secret): i for i in task.items}
            row_events, selected = _row_events(row, task, secret, tokens, status)
            stored = store.annotations.list(kind="task", assignment_id=aid)
            if stored:
                _check_same_assignment(aid, stored, row_events)
        except InputValidationError as err:
            result.rejected_rows.append((lineno, str(err)))
            continue
        first_line[aid] = lineno
        if stored:
            old = stored[0].assignment_status
            # MTurk never returns a reviewed assignment to Submitted: a row saying
            # Submitted comes from a download older than the review, not a change
            if old == status or (status == "Submitted" and old is not None):
                result.unchanged += 1
            else:
                result.status_changes.append(StatusChange(lineno, aid, old, status))
            continue
        events.extend(row_events)
        result.assignments += 1
        acc = control_accuracy(task_from_row(task), selected)["overall"]
        if not math.isnan(acc):
            result.assignment_control_accuracy[aid] = acc
    result.rejected_rows.sort()
    _refuse_foreign_file(store, path, rows, task_cache)
    raced = store.annotations.record_import(
        events, {c.assignment_id: c.new for c in result.status_changes}
    )
    if raced:  # imported meanwhile by another process: not new after all
        result.assignments -= len(raced)
        result.unchanged += len(raced)
        for aid in raced:
            result.assignment_control_accuracy.pop(aid, None)
        events = [e for e in events if e.assignment_id not in raced]
    result.events = len(events)
    return result
