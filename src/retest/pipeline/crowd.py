"""The crowd path: grid tasks → MTurk batch files → results import.

``export_mturk`` writes what a requester uploads (an HTML question template, the
batch input CSV and the images named by opaque tokens); ``import_mturk`` reads the
batch results CSV that the requester UI downloads, maps tokens back to image ids,
validates every row and records one annotation event per (assignment, image shown)
in a single transaction: a file with bad rows imports its good rows and lists the
bad ones with reasons; nothing is written partially.

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
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retest._atomic import atomic_write_bytes
from retest.build.tasks import (
    Task,
    compose_tasks,
    control_accuracy,
    hash_worker_id,
    image_token,
)
from retest.errors import DataIntegrityError, InputValidationError
from retest.store.base import AnnotationEvent, Store, TaskRow

__all__ = [
    "REQUIRED_RESULT_COLUMNS",
    "CrowdImport",
    "create_tasks",
    "export_mturk",
    "import_mturk",
    "project_secret",
    "task_from_row",
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
    """The pure :class:`~retest.build.tasks.Task` view of a stored task."""
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


def create_tasks(
    store: Store,
    *,
    nearest_class: Mapping[int, int] | None = None,
    images_per_task: int = 48,
    pos_controls: int = 3,
    neg_controls: int = 3,
    min_assignments: int = 10,
    seed: int = 0,
    control_split: str = "test",
) -> list[TaskRow]:
    """Make grid tasks for candidates that still need annotations and store them.

    Candidates need annotations when they are not blacklisted and have fewer than
    ``min_assignments`` valid task annotations (SPEC §3.2 HIT candidate selection).
    Controls come from the original ``control_split``. ``nearest_class`` defaults to
    the next class id (wrapping), a placeholder for a similarity map the user gives.
    """
    classes = [c.id for c in store.classes.list()]
    if not classes:
        raise InputValidationError(
            "the project has no classes; run `retest init` first."
        )
    counts = store.annotations.item_counts(kinds=["task"])
    black = store.blacklist.current()
    by_class: dict[int, list[str]] = defaultdict(list)
    for cand in store.candidates.iter():
        if cand.class_id is None or cand.id in black:
            continue
        if counts.get(cand.id, (0, 0))[0] < min_assignments:
            by_class[cand.class_id].append(cand.id)
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
    store.tasks.add(rows)
    return rows


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
    store: Store,
    tasks: Sequence[TaskRow],
    out_dir: str | os.PathLike[str],
    *,
    secret: bytes,
    base_url: str,
    image_bytes: Callable[[str], bytes] | None = None,
    descriptions: Mapping[int, str] | None = None,
) -> dict[str, Path]:
    """Write ``question.html``, ``batch_input.csv`` and ``images/<token>.jpg``.

    The token → id mapping is kept in the store (each task's ``extra["tokens"]``), so
    the same project and secret always produce the same files.
    """
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    if not tasks:
        raise InputValidationError(
            "no tasks to export; run `retest crowd tasks` first."
        )
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
    return {
        "question": out / "question.html",
        "batch": out / "batch_input.csv",
        "images": out / "images",
    }


@dataclass
class CrowdImport:
    """What :func:`import_mturk` did: counts, rejected rows and control accuracies."""

    assignments: int = 0
    events: int = 0
    rejected_rows: list[tuple[int, str]] = field(default_factory=list)
    assignment_control_accuracy: dict[str, float] = field(default_factory=dict)


def _read_results(path: Path) -> list[dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataIntegrityError(f"results file {path} does not exist.") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_RESULT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputValidationError(
            f"{path}: not an MTurk batch results file; missing columns {missing}. "
            "Download it from the requester UI (Manage → Results → Download CSV)."
        )
    return list(reader)


def _row_events(
    row: dict[str, str], task: TaskRow, secret: bytes, valid_tokens: Mapping[str, str]
) -> tuple[list[AnnotationEvent], set[str]]:
    answer = row["Answer.selected"].strip()
    tokens = [t for t in answer.split("|") if t] if answer else []
    unknown = [t for t in tokens if t not in valid_tokens]
    if unknown:
        raise InputValidationError(
            f"answer contains unknown image token {unknown[0]!r}"
        )
    selected = {valid_tokens[t] for t in tokens}
    status = row["AssignmentStatus"].strip()
    worker = hash_worker_id(row["WorkerId"].strip(), secret)
    events = [
        AnnotationEvent(
            who=f"mturk:{worker[:12]}",
            kind="task",
            class_id=task.class_id,
            item_id=item,
            value=int(item in selected),
            ui_version=UI_VERSION,
            task_id=task.id,
            assignment_id=row["AssignmentId"].strip(),
            assignment_status=status,
            worker=worker,
            extra={
                "submit_time": row.get("SubmitTime", ""),
                "accept_time": row.get("AcceptTime", ""),
            },
        )
        for item in task.items
    ]
    return events, selected


def import_mturk(
    store: Store, results_csv: str | os.PathLike[str], *, secret: bytes
) -> CrowdImport:
    """Import an MTurk batch results CSV into the store (one transaction).

    Rows are rejected (and listed with a reason) for: an unknown task id, an answer
    token that does not belong to the task (tampered), a repeated or already
    imported assignment id, an unknown assignment status, or an empty worker id.
    """
    path = Path(results_csv)
    rows = _read_results(path)
    result = CrowdImport()
    seen = {
        e.assignment_id for e in store.annotations.list(kind="task") if e.assignment_id
    }
    events: list[AnnotationEvent] = []
    for lineno, row in enumerate(rows, start=2):
        aid = (row.get("AssignmentId") or "").strip()
        try:
            if not aid or not (row.get("WorkerId") or "").strip():
                raise InputValidationError("empty AssignmentId or WorkerId")
            if aid in seen:
                raise InputValidationError(f"duplicate assignment id {aid!r}")
            if row["AssignmentStatus"].strip() not in (
                "Submitted",
                "Approved",
                "Rejected",
            ):
                raise InputValidationError(
                    f"unknown AssignmentStatus {row['AssignmentStatus']!r}"
                )
            try:
                task = store.tasks.get(row["Input.task_id"].strip())
            except LookupError:
                raise InputValidationError(
                    f"unknown task id {row['Input.task_id']!r}"
                ) from None
            tokens = {image_token(f"{task.id}|{i}", secret): i for i in task.items}
            row_events, selected = _row_events(row, task, secret, tokens)
        except InputValidationError as err:
            result.rejected_rows.append((lineno, str(err)))
            continue
        seen.add(aid)
        events.extend(row_events)
        result.assignments += 1
        acc = control_accuracy(task_from_row(task), selected)["overall"]
        if not math.isnan(acc):
            result.assignment_control_accuracy[aid] = acc
    if events:
        store.annotations.add(events)
    result.events = len(events)
    return result


def worker_report(store: Store, *, min_accuracy: float = 0.5) -> list[dict[str, Any]]:
    """Per worker: assignments, mean control accuracy and a suggested approve/reject.

    Computed from the stored events, so it covers every import so far.
    """
    tasks: dict[str, Task] = {}
    by_assignment: dict[str, dict[str, object]] = {}
    selected: dict[str, set[str]] = defaultdict(set)
    for e in store.annotations.list(kind="task"):
        if e.assignment_id is None or e.task_id is None:
            continue
        by_assignment.setdefault(
            e.assignment_id,
            {"worker": e.worker, "task": e.task_id, "status": e.assignment_status},
        )
        if e.value:
            selected[e.assignment_id].add(e.item_id)
    per_worker: dict[str, list[float]] = defaultdict(list)
    for aid, info in by_assignment.items():
        tid = str(info["task"])
        if tid not in tasks:
            tasks[tid] = task_from_row(store.tasks.get(tid))
        acc = control_accuracy(tasks[tid], selected[aid])["overall"]
        if not math.isnan(acc):
            per_worker[str(info["worker"])].append(acc)
    report = []
    for worker, accs in sorted(per_worker.items()):
        mean = sum(accs) / len(accs)
        report.append(
            {
                "worker": worker,
                "assignments": len(accs),
                "control_accuracy": mean,
                "decision": "approve" if mean >= min_accuracy else "reject",
            }
        )
    return report


def project_secret(root: str | os.PathLike[str]) -> bytes:
    """The project's secret for image tokens and worker-id hashes.

    Created once (``.retest-secret``, mode 0600) and never shown to workers; losing it
    makes exported batches unreadable, so it lives next to ``retest.db``.
    """
    path = Path(root) / ".retest-secret"
    if not path.exists():
        import secrets

        fd = os.open(
            path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
        )
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        os.replace(path.with_suffix(".tmp"), path)
    return bytes.fromhex(path.read_text().strip())
