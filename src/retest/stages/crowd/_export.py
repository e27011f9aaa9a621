"""Writing a project's tasks as an MTurk batch (template, input CSV, images)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from retest._atomic import atomic_write_bytes
from retest._output import RULES, check_output, claim_output_dir
from retest.errors import InputValidationError
from retest.labeling.instructions import (
    GRID_INSTRUCTIONS,
    pick_instructions,
    render_markdown,
)
from retest.labeling.tasks import image_token
from retest.project import Checkpoint, Project, project_secret, stage_runs
from retest.stages.crowd.mturk import BatchRow, batch_input_csv, question_html
from retest.store.rows import ClassRow, TaskRow

__all__ = ["EXPORT_STAGE", "export_mturk", "exported_task_ids", "task_instructions"]


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


def task_instructions(instructions: Mapping[str, str], cls: ClassRow) -> str:
    """The HTML a class's tasks show under the question, on one line.

    The class's definition (its stored description) when it has one, then the
    most specific ``[instructions]`` entry for the class
    (:func:`~retest.labeling.instructions.pick_instructions`, the web pages' rule),
    else the built-in :data:`~retest.labeling.instructions.GRID_INSTRUCTIONS`.
    """
    text = pick_instructions(instructions, cls.name)
    parts = [f"**Definition:** {cls.description}"] if cls.description else []
    parts.append(GRID_INSTRUCTIONS if text is None else text)
    return render_markdown("\n\n".join(parts)).replace("\n", "")


def export_mturk(
    project: Project,
    tasks: Sequence[TaskRow],
    out_dir: str | os.PathLike[str],
    *,
    base_url: str,
    secret: bytes | None = None,
    image_bytes: Callable[[str], bytes] | None = None,
    instructions: Mapping[str, str] | None = None,
) -> dict[str, Path]:
    """Write ``question.html``, ``batch_input.csv`` and ``images/<token>.jpg``.

    Tokens are an HMAC of task and image id under the project secret, so the same
    project and secret always produce the same files. Each task written is marked
    exported (:func:`exported_task_ids`) once the files are in place. Under the
    question each task shows its class's :func:`task_instructions` (a column of
    the batch input), so the template itself says nothing about any project.

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
    instructions : mapping of str to str, optional
        Markdown per class name or ``default`` (default: the project's
        ``[instructions]``, which the web pages show too); see
        :func:`task_instructions`.

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
    classes = {c.id: c for c in store.classes.list()}
    for t in tasks:
        classes.setdefault(t.class_id, ClassRow(t.class_id, str(t.class_id)))
    text = project.config.instructions if instructions is None else instructions
    base = base_url.rstrip("/")
    rows = []
    for t in tasks:
        tokens = [image_token(f"{t.id}|{item}", secret) for item in t.items]
        rows.append(
            BatchRow(
                t.id,
                classes[t.class_id].name,
                task_instructions(text, classes[t.class_id]),
                [f"{base}/{tok}.jpg" for tok in tokens],
                tokens,
            )
        )
        if image_bytes is not None:
            for tok, item in zip(tokens, t.items, strict=True):
                target = out / "images" / f"{tok}.jpg"
                if not target.exists():
                    atomic_write_bytes(target, image_bytes(item))
    width = max(len(t.items) for t in tasks)
    atomic_write_bytes(out / "question.html", question_html(width).encode())
    atomic_write_bytes(out / "batch_input.csv", batch_input_csv(rows).encode())
    batch = str((out / "batch_input.csv").resolve())
    for t in tasks:
        Checkpoint(project, EXPORT_STAGE, t.id).finish(artifact=batch)
    return {
        "question": out / "question.html",
        "batch": out / "batch_input.csv",
        "images": out / "images",
    }
