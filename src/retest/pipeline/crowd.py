"""The crowd path: grid tasks → MTurk batch files → results import.

``export_mturk`` writes what a requester uploads (an HTML question template, the
batch input CSV and the images named by opaque tokens); ``import_mturk`` reads the
batch results CSV that the requester UI downloads, maps tokens back to image ids,
validates every row and records one annotation event per (assignment, image shown):
a file with bad rows imports its good rows and lists the bad ones with line numbers
and reasons. The same file downloaded again after review re-imports cleanly: only
the assignments' statuses (approved / rejected) change, so rejected work stops
counting in selection frequencies.

Format notes. One checkbox per image, all named ``selected`` with the image token as
value; MTurk joins the checked values of a same-named field with ``|`` in the
``Answer.selected`` column (ImageNetV2 read its answers the same way). Worker ids
are stored only as ``sha256(worker_id + secret)``.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from retest._atomic import atomic_write_bytes
from retest._output import RULES, check_output, claim_output_dir
from retest.errors import DataIntegrityError, InputValidationError
from retest.labeling.tasks import (
    Task,
    compose_tasks,
    control_accuracy,
    hash_worker_id,
    image_token,
)
from retest.project import (
    ORIGINAL_COPY_REASONS,
    Checkpoint,
    Project,
    candidate_eligibility,
    excluded_workers,
    stage_runs,
    stale_candidates,
)
from retest.sampling.selection_frequency import aggregate_item_events
from retest.store.base import Store
from retest.store.rows import (
    ASSIGNMENT_STATUSES,
    AnnotationEvent,
    TaskRow,
)

__all__ = [
    "COPY_REASONS",
    "EXPORT_STAGE",
    "MIN_CONTROL_ACCURACY",
    "REQUIRED_RESULT_COLUMNS",
    "CrowdImport",
    "StatusChange",
    "TaskBatch",
    "create_task_batch",
    "create_tasks",
    "export_mturk",
    "exported_task_ids",
    "import_mturk",
    "original_copies",
    "pending_task_candidates",
    "project_secret",
    "task_from_row",
    "worker_ids_from_results",
    "worker_report",
]

UI_VERSION = "mturk-batch-1"
REQUIRED_RESULT_COLUMNS = (
    "AssignmentId",
    "WorkerId",
    "AssignmentStatus",
    "Input.task_id",
    "Answer.selected",
)


def task_from_row(row: TaskRow) -> Task:
    """The pure :class:`~retest.labeling.tasks.Task` view of a stored task."""
    pos = tuple(row.controls.get("pos", ()))
    neg = tuple(row.controls.get("neg", ()))
    controls = set(pos) | set(neg)
    return Task(
        row.id,
        row.class_id,
        tuple(row.items),
        tuple(i for i in row.items if i not in controls),
        pos,
        neg,
        int(row.extra.get("neg_class_id", -1)),
    )


COPY_REASONS = ORIGINAL_COPY_REASONS
"""Eligibility reasons that make a candidate a copy of an original image: it can
never enter a revision, so :func:`create_tasks` pays no worker to label it.
``pool_duplicate`` and ``unreviewed`` are not among them: a group of pool images
still needs one labeled member (which one is kept can change with the votes), and
an unreviewed pair may turn out to be two distinct images."""


@dataclass(frozen=True, slots=True)
class TaskBatch:
    """What :func:`create_task_batch` stored and what it left out.

    Attributes
    ----------
    rows : list of TaskRow
        The tasks added.
    left_out : dict of str to int
        Candidates that would have had a task but are copies of originals, per
        reason of :data:`COPY_REASONS` (each under its first one).
    copies_checked : bool
        False when no dedup run exists (or copies were asked for): nothing could
        be left out.
    unchecked : int
        Candidates given a task that arrived after the last dedup run, so only
        their exact copies could be told.
    """

    rows: list[TaskRow]
    left_out: dict[str, int] = field(default_factory=dict)
    copies_checked: bool = True
    unchecked: int = 0


def original_copies(project: Project) -> dict[str, str] | None:
    """Candidates the eligibility decision excludes as copies of an original image
    → their first reason of :data:`COPY_REASONS`; None before any dedup run (near
    copies are unknown then, and exact copies alone would be a partial answer).

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of str to str, or None
    """
    from retest.project import metrics_run

    if not metrics_run(project):
        return None
    out = {}
    for cid, reasons in candidate_eligibility(project).excluded():
        first = next((r for r in reasons if r in COPY_REASONS), None)
        if first is not None:
            out[cid] = first
    return out


def create_tasks(
    project: Project,
    *,
    nearest_class: Mapping[int, int] | None = None,
    images_per_task: int = 48,
    pos_controls: int = 3,
    neg_controls: int = 3,
    min_assignments: int = 10,
    seed: int = 0,
    control_split: str = "test",
    include_copies: bool = False,
) -> list[TaskRow]:
    """The tasks :func:`create_task_batch` adds (same parameters)."""
    return create_task_batch(
        project,
        nearest_class=nearest_class,
        images_per_task=images_per_task,
        pos_controls=pos_controls,
        neg_controls=neg_controls,
        min_assignments=min_assignments,
        seed=seed,
        control_split=control_split,
        include_copies=include_copies,
    ).rows


def create_task_batch(
    project: Project,
    *,
    nearest_class: Mapping[int, int] | None = None,
    images_per_task: int = 48,
    pos_controls: int = 3,
    neg_controls: int = 3,
    min_assignments: int = 10,
    seed: int = 0,
    control_split: str = "test",
    include_copies: bool = False,
    dry_run: bool = False,
) -> TaskBatch:
    """Make grid tasks for candidates that still need annotations and store them.

    Candidates need annotations when they are not blacklisted, not excluded as a
    copy of an original image (:func:`original_copies`, the eligibility decision
    that ``retest sample`` applies; unless ``include_copies``) and have fewer than
    ``min_assignments`` counted task assignments (the same votes selection
    frequencies count; docs/algorithms.md#crowd-tasks). Members of a near-duplicate
    group of pool images and candidates with unreviewed pairs do get tasks. Before
    any dedup run no copy can be told, and every candidate gets a task
    (``copies_checked`` is False). A candidate that already sits in a stored task
    not yet answered by ``min_assignments`` workers (created or exported, see
    :func:`pending_task_candidates`) gets no new task, so running this again
    creates tasks only for new candidates, or for candidates whose answered tasks
    left them short of votes (rejected work).
    Controls come from the original ``control_split``. ``nearest_class`` defaults to
    the next class id (wrapping), a placeholder for a similarity map the user gives.
    The tasks of the candidates that remain are those the same seed gives a pool
    without the copies.

    Parameters
    ----------
    project : Project
    nearest_class : mapping of class id to class id, optional
        The class whose originals are each class's negative controls.
    images_per_task, pos_controls, neg_controls : int
        Grid size and controls per task.
    min_assignments : int
        Counted assignments a candidate needs.
    seed : int
    control_split : str
    include_copies : bool
        Give copies of originals tasks too (nothing is left out).
    dry_run : bool
        Compose the tasks but store nothing (to see what settings allow).

    Returns
    -------
    TaskBatch
        The tasks added (none when nothing is new) and what was left out.

    Raises
    ------
    InputValidationError
        The project has no classes.
    """
    store = project.store
    classes = [c.id for c in store.classes.list()]
    if not classes:
        raise InputValidationError(
            "the project has no classes; run `retest init` first."
        )
    events = store.annotations.list(kind="task")
    counts: dict[str, int] = defaultdict(int)
    excluded = excluded_workers(store)
    for (item, _), stat in aggregate_item_events(events, excluded=excluded).items():
        counts[item] += stat.n_assignments
    existing = store.tasks.list()
    pending = _pending_candidates(existing, events, min_assignments)
    black = store.blacklist.current()
    copies = None if include_copies else original_copies(project)
    left_out: dict[str, int] = defaultdict(int)
    by_class: dict[int, list[str]] = defaultdict(list)
    for cand in store.candidates.iter():
        if cand.class_id is None or cand.id in black or cand.id in pending:
            continue
        if counts.get(cand.id, 0) < min_assignments:
            why = copies.get(cand.id) if copies else None
            if why is None:
                by_class[cand.class_id].append(cand.id)
            else:
                left_out[why] += 1
    unchecked = 0
    if copies is not None:
        stale = set(stale_candidates(project))
        if stale:
            unchecked = sum(1 for ids in by_class.values() for i in ids if i in stale)
    originals: dict[int, list[str]] = defaultdict(list)
    for ref in store.references.list(split=control_split):
        originals[ref.class_id].append(ref.id)
    near = (
        dict(nearest_class)
        if nearest_class
        else {c: classes[(i + 1) % len(classes)] for i, c in enumerate(classes)}
    )
    tasks = compose_tasks(
        {c: sorted(by_class[c]) for c in classes if by_class[c]},
        originals,
        near,
        images_per_task=images_per_task,
        pos_controls=pos_controls,
        neg_controls=neg_controls,
        random_state=seed,
    )
    rows = [
        TaskRow(
            id=t.task_id,
            class_id=t.class_id,
            items=t.items,
            controls={"pos": t.pos_controls, "neg": t.neg_controls},
            seed=seed,
            kind="grid",
            extra={"neg_class_id": t.neg_class_id},
        )
        for t in tasks
    ]
    known = {t.id for t in existing}
    rows = [r for r in rows if r.id not in known]
    if not dry_run:
        store.tasks.add(rows)
    return TaskBatch(
        rows,
        {r: left_out[r] for r in COPY_REASONS if left_out[r]},
        copies_checked=copies is not None,
        unchecked=unchecked,
    )


def _pending_candidates(
    tasks: Sequence[TaskRow], events: Sequence[AnnotationEvent], min_assignments: int
) -> dict[str, str]:
    """Candidate id → the first stored task that shows it and still awaits answers."""
    answered: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e.task_id is not None and e.assignment_id is not None:
            answered[e.task_id].add(e.assignment_id)
    out: dict[str, str] = {}
    for row in tasks:
        if len(answered.get(row.id, ())) >= min_assignments:
            continue
        for item in task_from_row(row).candidates:
            out.setdefault(item, row.id)
    return out


def pending_task_candidates(
    project: Project, *, min_assignments: int = 10
) -> dict[str, str]:
    """Candidates that sit in a task not yet answered by ``min_assignments`` workers.

    Such a task is either not exported yet or exported and awaiting answers, so
    :func:`create_tasks` gives its candidates no second task (a second one would be
    published and paid for as well).

    Parameters
    ----------
    project : Project
    min_assignments : int

    Returns
    -------
    dict of candidate id to task id
    """
    store = project.store
    return _pending_candidates(
        store.tasks.list(), store.annotations.list(kind="task"), min_assignments
    )


EXPORT_STAGE = "crowd-export"
"""Checkpoint stage whose runs are task ids: tasks written to a batch file before."""


def exported_task_ids(project: Project) -> set[str]:
    """Ids of the tasks some earlier :func:`export_mturk` wrote to a batch file.

    Parameters
    ----------
    project : Project

    Returns
    -------
    set of str
    """
    return {r.key for r in stage_runs(project, EXPORT_STAGE) if r.done}


_TEMPLATE = """<!-- retest MTurk question template: one task per row of batch_input.csv -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<crowd-form>
<h3>Which of these images contain at least one object of type <b>${class_name}</b>?</h3>
<p>Definition: ${definition}</p>
<p>Check the box next to an image if it contains at least one object of type
${class_name}. Select an image if it contains the object regardless of occlusions,
other objects, and clutter or text in the scene. Only select images that are
photographs (no drawings or paintings).</p>
<input type="hidden" name="task_id" value="${task_id}">
<div style="display:flex;flex-wrap:wrap">
%s
</div>
</crowd-form>
"""
_CELL = (
    '<label style="margin:4px"><img src="${image_url_%d}" width="160"><br>'
    '<input type="checkbox" name="selected" value="${token_%d}"></label>'
)


def export_mturk(
    project: Project,
    tasks: Sequence[TaskRow],
    out_dir: str | os.PathLike[str],
    *,
    base_url: str,
    secret: bytes | None = None,
    image_bytes: Callable[[str], bytes] | None = None,
    descriptions: Mapping[int, str] | None = None,
) -> dict[str, Path]:
    """Write ``question.html``, ``batch_input.csv`` and ``images/<token>.jpg``.

    Tokens are an HMAC of task and image id under the project secret, so the same
    project and secret always produce the same files. Each task written is marked
    exported (:func:`exported_task_ids`) once the files are in place.

    Parameters
    ----------
    project : Project
    tasks : sequence of TaskRow
    out_dir : path
        A new or empty folder, or one this function wrote; inside a project
        only under ``reports/crowd/`` (:func:`retest._output.check_output`).
    base_url : str
        Where the requester hosts ``images/`` (the URLs in the batch file).
    secret : bytes, optional
        Token key (default: :func:`project_secret`).
    image_bytes : callable, optional
        Item id → JPEG bytes; without it no image files are written.
    descriptions : mapping of class id to str, optional
        Class definitions shown to workers (default: the stored descriptions).

    Returns
    -------
    dict of str to Path
        ``question``, ``batch`` and ``images``.

    Raises
    ------
    InputValidationError
        No tasks.
    ConfigError
        A refused ``out_dir``.
    """
    store = project.store
    secret = project_secret(project) if secret is None else secret
    rule = RULES["crowd export"]
    out = check_output(out_dir, rule)
    if not tasks:
        raise InputValidationError(
            "no tasks to export; run `retest crowd tasks` first."
        )
    claim_output_dir(out, rule)
    (out / "images").mkdir(exist_ok=True)
    width = max(len(t.items) for t in tasks)
    names = {c.id: c.name for c in store.classes.list()}
    desc = descriptions or {c.id: c.description for c in store.classes.list()}
    header = ["task_id", "class_name", "definition"]
    for i in range(width):
        header += [f"image_url_{i}", f"token_{i}"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    base = base_url.rstrip("/")
    for t in tasks:
        tokens = [image_token(f"{t.id}|{item}", secret) for item in t.items]
        row = [t.id, names.get(t.class_id, str(t.class_id)), desc.get(t.class_id, "")]
        for tok in tokens:
            row += [f"{base}/{tok}.jpg", tok]
        row += [""] * (len(header) - len(row))
        writer.writerow(row)
        if image_bytes is not None:
            for tok, item in zip(tokens, t.items, strict=True):
                target = out / "images" / f"{tok}.jpg"
                if not target.exists():
                    atomic_write_bytes(target, image_bytes(item))
    cells = "\n".join(_CELL % (i, i) for i in range(width))
    atomic_write_bytes(out / "question.html", (_TEMPLATE % cells).encode())
    atomic_write_bytes(out / "batch_input.csv", buf.getvalue().encode())
    batch = str((out / "batch_input.csv").resolve())
    for t in tasks:
        Checkpoint(project, EXPORT_STAGE, t.id).finish(artifact=batch)
    return {
        "question": out / "question.html",
        "batch": out / "batch_input.csv",
        "images": out / "images",
    }


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


def _decode(path: Path) -> str:
    """The file's text, or one :class:`InputValidationError` saying what to do."""
    hint = "Download it from the requester UI (Manage → Results → Download CSV)."
    if path.is_dir():
        raise InputValidationError(
            f"{path} is a directory; expected an MTurk batch results CSV file. "
            "Pass the CSV inside it."
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataIntegrityError(
            f"results file {path} does not exist; expected an MTurk batch results "
            f"CSV. {hint}"
        ) from None
    except OSError as err:
        raise InputValidationError(
            f"cannot read {path} ({err.strerror}); expected a readable MTurk batch "
            "results CSV. Check the path and its permissions."
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputValidationError(
            f"{path} is not UTF-8 text (byte 0x{data[err.start]:02x} on line {line}); "
            "expected the UTF-8 CSV that MTurk downloads. Re-save it as UTF-8 "
            "(e.g. `iconv -f latin1 -t utf-8`), or download it again."
        ) from None
    if not text.strip():
        raise InputValidationError(
            f"{path} is empty; expected an MTurk batch results CSV with a header "
            f"line ({', '.join(REQUIRED_RESULT_COLUMNS)}) and one row per "
            f"assignment. {hint}"
        )
    return text


_PHYSICAL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_KEY_COLUMNS = (*REQUIRED_RESULT_COLUMNS, "Approve", "Reject")


def _parse_record(text: str, ncols: int) -> list[str] | str:
    """The fields of one CSV record, or why it is not one record of ``ncols`` fields."""
    try:
        records = list(csv.reader(io.StringIO(text), strict=True))
    except csv.Error as err:
        if text.count('"') % 2:
            return 'unbalanced quote (") in this line; quote the whole field or remove the stray "'
        return f"not valid CSV ({err})"
    records = [r for r in records if r]
    if len(records) != 1:
        return f"holds {len(records)} CSV records, expected 1"
    if len(records[0]) != ncols:
        return f"has {len(records[0])} fields, the header has {ncols}"
    return records[0]


def _read_results(
    path: Path,
) -> tuple[list[tuple[int, dict[str, str]]], list[tuple[int, str]]]:
    """Rows of an MTurk batch results CSV as ``(line, row)``, and unparsable lines.

    A record normally is one line; a quoted field may span lines. When a record
    spanning lines does not parse to one row of the header's width (a stray ``"``
    opens a quoted field that swallows the following lines), each of its lines is
    parsed on its own, so one broken line costs one row, not the rest of the file.
    Blank lines are not data rows.
    """
    text = _decode(path)
    lines = _PHYSICAL_LINE.findall(text)
    try:
        header = next(csv.reader([lines[0]], strict=True), [])
    except csv.Error:
        header = []
    missing = [c for c in REQUIRED_RESULT_COLUMNS if c not in header]
    if missing:
        raise InputValidationError(
            f"{path}: not an MTurk batch results file; missing columns {missing} "
            f"in its first line (expected {', '.join(REQUIRED_RESULT_COLUMNS)}). "
            "Download it from the requester UI (Manage → Results → Download CSV)."
        )
    ncols = len(header)
    key_idx = [header.index(c) for c in _KEY_COLUMNS if c in header]
    rows: list[tuple[int, dict[str, str]]] = []
    bad: list[tuple[int, str]] = []

    def take(lineno: int, chunk: list[str], *, split_bad: bool) -> None:
        joined = "".join(chunk)
        if not joined.strip():
            return
        fields = _parse_record(joined, ncols)
        if not isinstance(fields, str) and len(chunk) > 1:
            if any("\n" in fields[i] or "\r" in fields[i] for i in key_idx):
                fields = "a line break inside an id, status or answer column"
        if not isinstance(fields, str):
            rows.append((lineno, dict(zip(header, fields, strict=True))))
        elif split_bad and len(chunk) > 1:
            for k, line in enumerate(chunk):
                take(lineno + k, [line], split_bad=False)
        else:
            bad.append((lineno, fields))

    chunk: list[str] = []
    start = 2
    quotes = 0
    for lineno, line in enumerate(lines[1:], start=2):
        if not chunk:
            start = lineno
        chunk.append(line)
        quotes += line.count('"')
        if quotes % 2 == 0:  # every quoted field closed: the record ends here
            take(start, chunk, split_bad=True)
            chunk, quotes = [], 0
    if chunk:
        take(start, chunk, split_bad=True)
    return rows, bad


_TZ_HOURS = {"UTC": 0, "GMT": 0, "PST": -8, "PDT": -7}


def _submit_time(text: str) -> str | None:
    """MTurk's ``SubmitTime`` (``Tue Mar 05 10:12:33 PST 2024``) as the store's
    sortable UTC form, or None when it is empty or in another format."""
    parts = text.split()
    if len(parts) != 6 or parts[4] not in _TZ_HOURS:
        return None
    try:
        local = datetime.strptime(" ".join(parts[1:4] + parts[5:]), "%b %d %H:%M:%S %Y")
    except ValueError:
        return None
    utc = local - timedelta(hours=_TZ_HOURS[parts[4]])
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _row_status(row: Mapping[str, str | None]) -> str:
    """The assignment's status after the requester's marks.

    MTurk's downloaded results have ``Approve`` and ``Reject`` columns the requester
    fills before uploading the file back: ``x`` in Approve approves, any text in
    Reject rejects (the text is the reason shown to the worker). Without a mark the
    platform's ``AssignmentStatus`` stands.
    """
    status = (row.get("AssignmentStatus") or "").strip()
    if status not in ASSIGNMENT_STATUSES:
        raise InputValidationError(
            f"unknown AssignmentStatus {status!r} (expected one of "
            f"{', '.join(ASSIGNMENT_STATUSES)})"
        )
    approve = (row.get("Approve") or "").strip()
    reject = (row.get("Reject") or "").strip()
    if approve and approve.lower() != "x":
        raise InputValidationError(
            f"Approve holds {approve!r}; mark an approval with x or leave it empty"
        )
    if approve and reject:
        raise InputValidationError(
            "both Approve and Reject are marked; keep one of them"
        )
    if reject:
        return "Rejected"
    if approve:
        return "Approved"
    return status


def _row_events(
    row: dict[str, str],
    task: TaskRow,
    secret: bytes,
    valid_tokens: Mapping[str, str],
    status: str,
) -> tuple[list[AnnotationEvent], set[str]]:
    answer = row["Answer.selected"].strip()
    tokens = [t for t in answer.split("|") if t] if answer else []
    unknown = [t for t in tokens if t not in valid_tokens]
    if unknown:
        raise InputValidationError(
            f"answer contains unknown image token {unknown[0]!r}"
        )
    selected = {valid_tokens[t] for t in tokens}
    worker = hash_worker_id(row["WorkerId"].strip(), secret)
    events = [
        AnnotationEvent(
            who=f"mturk:{worker[:12]}",
            kind="task",
            class_id=task.class_id,
            item_id=item,
            value=int(item in selected),
            when=_submit_time(row.get("SubmitTime") or ""),
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
    marks, an unknown task id, an answer token that does not belong to the task
    (tampered), and a row contradicting the imported assignment's task, worker or
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
    rows, unparsable = _read_results(path)
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
            status = _row_status(row)
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


MIN_CONTROL_ACCURACY = 0.6
"""Default bar for :func:`worker_report`, applied to positive and negative controls
separately. Both must be above chance (0.5): a worker who checks every box gets
positive-control accuracy 1.0 but negative-control accuracy 0.0, one who checks
none the reverse, and either averages 0.5 overall, which a single overall bar of
0.5 would approve. 0.6 lets an honest worker miss one control in three."""


def _pooled(hits: int, total: int) -> float | None:
    return hits / total if total else None


def worker_report(
    project: Project,
    *,
    min_accuracy: float = MIN_CONTROL_ACCURACY,
    worker_ids: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Per worker: assignments, control accuracies, statuses and a suggested decision.

    ``pos_accuracy`` is the share of positive controls (originals of the task's
    class) the worker selected, ``neg_accuracy`` the share of negative controls
    (originals of the nearest other class) left unselected, both pooled over the
    worker's assignments; ``control_accuracy`` is the mean per-assignment overall
    accuracy. The decision is ``reject`` when either kind is below
    ``min_accuracy`` (a kind the worker never saw is not judged), ``approve``
    otherwise, and ``review`` when the worker's tasks had no controls at all.
    ``statuses`` counts the worker's assignments by their stored status, so a
    re-import that rejected them shows here. ``worker_ids`` maps hashed worker ids
    to the raw MTurk WorkerIds (see :func:`worker_ids_from_results`); the raw id is
    only reported (``worker_id``), never stored. Computed from the stored events, so
    it covers every import so far.

    Parameters
    ----------
    project : Project
    min_accuracy : float
    worker_ids : mapping of str to str, optional

    Returns
    -------
    list of dict
        One row per worker.
    """
    tasks: dict[str, Task] = {}
    by_assignment: dict[str, dict[str, object]] = {}
    selected: dict[str, set[str]] = defaultdict(set)
    store = project.store
    for e in store.annotations.list(kind="task"):
        if e.assignment_id is None or e.task_id is None:
            continue
        by_assignment.setdefault(
            e.assignment_id,
            {"worker": e.worker, "task": e.task_id, "status": e.assignment_status},
        )
        if e.value:
            selected[e.assignment_id].add(e.item_id)
    stats: dict[str, dict[str, Any]] = {}
    for aid, info in by_assignment.items():
        tid = str(info["task"])
        if tid not in tasks:
            tasks[tid] = task_from_row(store.tasks.get(tid))
        task = tasks[tid]
        w = stats.setdefault(
            str(info["worker"]),
            {"accs": [], "pos": [0, 0], "neg": [0, 0], "statuses": defaultdict(int)},
        )
        w["statuses"][str(info["status"] or "Submitted")] += 1
        chosen = selected[aid]
        w["pos"][0] += sum(1 for i in task.pos_controls if i in chosen)
        w["pos"][1] += len(task.pos_controls)
        w["neg"][0] += sum(1 for i in task.neg_controls if i not in chosen)
        w["neg"][1] += len(task.neg_controls)
        acc = control_accuracy(task, chosen)["overall"]
        if not math.isnan(acc):
            w["accs"].append(acc)
    ids = worker_ids or {}
    report = []
    for worker, w in sorted(stats.items()):
        pos, neg = _pooled(*w["pos"]), _pooled(*w["neg"])
        accs = w["accs"]
        low = [
            f"{name} {v:.2f} < {min_accuracy:g}"
            for name, v in (("pos", pos), ("neg", neg))
            if v is not None and v < min_accuracy
        ]
        if pos is None and neg is None:
            decision, reason = "review", "no control images in their tasks"
        elif low:
            decision, reason = "reject", "; ".join(low)
        else:
            decision, reason = "approve", ""
        report.append(
            {
                "worker": worker,
                "worker_id": ids.get(worker),
                "assignments": sum(w["statuses"].values()),
                "control_accuracy": sum(accs) / len(accs) if accs else None,
                "pos_accuracy": pos,
                "neg_accuracy": neg,
                "statuses": dict(sorted(w["statuses"].items())),
                "decision": decision,
                "reason": reason,
            }
        )
    return report


def worker_ids_from_results(
    results_csv: str | os.PathLike[str], *, secret: bytes
) -> dict[str, str]:
    """Hashed worker id → raw MTurk WorkerId for every worker of a results file.

    The store keeps only the hashes; the requester needs the raw ids to approve or
    reject on MTurk, and the results file they downloaded has them. Nothing is
    written.
    """
    rows, _ = _read_results(Path(results_csv))
    out: dict[str, str] = {}
    for _, row in rows:
        raw = (row.get("WorkerId") or "").strip()
        if raw:
            out[hash_worker_id(raw, secret)] = raw
    return out


def project_secret(project: Project) -> bytes:
    """The project's secret for image tokens and worker-id hashes.

    Created once (``.retest-secret``, mode 0600) and never shown to workers; losing it
    makes exported batches unreadable, so it lives next to ``retest.db``.

    Parameters
    ----------
    project : Project

    Returns
    -------
    bytes
    """
    path = project.root / ".retest-secret"
    if not path.exists():
        import secrets

        fd = os.open(
            path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
        )
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        os.replace(path.with_suffix(".tmp"), path)
    return bytes.fromhex(path.read_text().strip())
