"""Grid tasks for the candidates that still need crowd annotations."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from retest.errors import InputValidationError
from retest.labeling.tasks import Task, compose_tasks
from retest.project import (
    ORIGINAL_COPY_REASONS,
    Project,
    candidate_eligibility,
    excluded_workers,
    stale_candidates,
)
from retest.sampling.selection_frequency import aggregate_item_events
from retest.store.rows import AnnotationEvent, TaskRow

__all__ = [
    "COPY_REASONS",
    "TaskBatch",
    "create_task_batch",
    "create_tasks",
    "original_copies",
    "pending_task_candidates",
    "task_from_row",
]


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
    for_originals : int
        Of ``rows``, the tasks added only to show more originals of a class
        (``min_originals``).
    originals_short : dict of int to int
        Classes whose tasks still show fewer than ``min_originals`` originals
        (class id → how many they show): the control split has no more, or the
        class has no candidate to show them with.
    """

    rows: list[TaskRow]
    left_out: dict[str, int] = field(default_factory=dict)
    copies_checked: bool = True
    unchecked: int = 0
    for_originals: int = 0
    originals_short: dict[int, int] = field(default_factory=dict)


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
    min_originals: int = 0,
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
        min_originals=min_originals,
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
    min_originals: int = 0,
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

    Then each class whose tasks (stored and new) show fewer than ``min_originals``
    distinct originals as positive controls gets tasks that show originals not
    shown yet (matched-frequency needs 20 per class for its target histogram,
    :func:`retest.stages.sample._feasibility.originals_needed`), their other cells
    filled with the class's candidates shown least so far. So running this again
    with a larger ``min_originals`` extends the project's tasks: stored tasks,
    exported or not, are never changed, and no task is made twice.

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
    min_originals : int
        Distinct originals each class's tasks should show as positive controls.
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
    pool: dict[int, list[str]] = defaultdict(list)  # may still be sampled
    for cand in store.candidates.iter():
        if cand.class_id is None or cand.id in black:
            continue
        why = copies.get(cand.id) if copies else None
        if why is None:
            pool[cand.class_id].append(cand.id)
        if cand.id in pending or counts.get(cand.id, 0) >= min_assignments:
            continue
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
    known = {t.id for t in existing}
    rows = [_row(t, seed) for t in tasks if t.task_id not in known]
    extra, short = _originals_tasks(
        [*existing, *rows],
        {c: sorted(pool[c]) for c in classes},
        originals,
        near,
        min_originals=min_originals,
        images_per_task=images_per_task,
        pos_controls=max(pos_controls, 1),
        neg_controls=neg_controls,
        seed=seed,
    )
    rows += [_row(t, seed) for t in extra if t.task_id not in known]
    if not dry_run:
        store.tasks.add(rows)
    return TaskBatch(
        rows,
        {r: left_out[r] for r in COPY_REASONS if left_out[r]},
        copies_checked=copies is not None,
        unchecked=unchecked,
        for_originals=len(extra),
        originals_short=short,
    )


def _row(t: Task, seed: int) -> TaskRow:
    return TaskRow(
        id=t.task_id,
        class_id=t.class_id,
        items=t.items,
        controls={"pos": t.pos_controls, "neg": t.neg_controls},
        seed=seed,
        kind="grid",
        extra={"neg_class_id": t.neg_class_id},
    )


def _originals_tasks(
    tasks: Sequence[TaskRow],
    pool: Mapping[int, Sequence[str]],
    originals: Mapping[int, Sequence[str]],
    near: Mapping[int, int],
    *,
    min_originals: int,
    images_per_task: int,
    pos_controls: int,
    neg_controls: int,
    seed: int,
) -> tuple[list[Task], dict[int, int]]:
    """Tasks that show each class's originals not shown in ``tasks`` until the
    class shows ``min_originals`` (one task at a time, each with fresh positive
    controls), and the classes left short → how many they show."""
    shown: dict[int, set[str]] = defaultdict(set)
    times: Counter[str] = Counter()
    for row in tasks:
        shown[row.class_id].update(row.controls.get("pos", ()))
        times.update(task_from_row(row).candidates)
    rng = np.random.default_rng([seed, 1])  # apart from the candidates' tasks
    out: list[Task] = []
    short: dict[int, int] = {}
    for c, ids in pool.items():
        rank = {i: k for k, i in enumerate(rng.permutation(len(ids)).tolist())}
        while len(shown[c]) < min_originals:
            fresh = [o for o in originals.get(c, ()) if o not in shown[c]]
            if not fresh or not ids:
                short[c] = len(shown[c])
                break
            n_pos = min(pos_controls, len(fresh))
            order = sorted(range(len(ids)), key=lambda k: (times[ids[k]], rank[k]))
            line = [ids[k] for k in order[: images_per_task - n_pos - neg_controls]]
            neg = near.get(c)  # compose_tasks says what is wrong with it
            (task,) = compose_tasks(
                {c: line},
                {c: fresh} if neg is None else {neg: originals.get(neg, ()), c: fresh},
                {} if neg is None else {c: neg},
                images_per_task=len(line) + n_pos + neg_controls,
                pos_controls=n_pos,
                neg_controls=neg_controls,
                random_state=rng,
            )
            shown[c].update(task.pos_controls)
            times.update(line)
            out.append(task)
    return out, short


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
