"""Selection frequency: the share of crowd workers who said an image shows its class.

docs/algorithms.md#selection-frequency (``mturk_data.MTurkData``): an assignment is
*valid* when its status is Submitted or Approved (Rejected ones are ignored). For image
``x`` and class ``w``, over all tasks of class ``w`` that contain ``x``::

    n_assignments[x][w] = number of valid assignments
    frequency[x][w]     = valid assignments whose answer contains x / n_assignments
                          (0.0 when there is no valid assignment)

Applied to the original (reference) images shown as controls, the frequencies give
each class's target histogram for the MatchedFrequency sampler
(docs/algorithms.md#matched-frequency step 1). Inputs are plain records and arrays, so
CIFAR-10H label counts work as well.

One vote per worker and task. A crowd platform can hand the same worker a task
more than once (MTurk does when a HIT is extended or re-posted); each copy would
be an extra vote of the same person. When an assignment names its worker, only
that worker's *latest submitted valid* assignment of the task counts; the others
stay stored but count for nothing. "Latest" is the submit time (``when``), then
the later write (event id), then the assignment id, so the choice never depends on
input order. Rejecting the counted assignment lets the worker's previous valid
one count again. Assignments without a worker (records from elsewhere) cannot be
matched and each counts.

``compat="authors"`` counts as the published ``mturk_data.MTurkData`` did: every
valid assignment, repeat workers included, and an image shown twice in one task
once per appearance (docs/algorithms.md#two-modes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest.errors import ConfigError, InputValidationError
from retest.sampling.compat import AUTHORS, check_compat
from retest.sampling.histogram import (
    DEFAULT_BINS,
    check_bins,
    histogram_counts,
    round_histogram,
)

__all__ = [
    "VALID_STATUSES",
    "AssignmentRecord",
    "FrequencyStat",
    "TargetHistogram",
    "TaskRecord",
    "TaskVote",
    "aggregate_item_events",
    "class_target_histograms",
    "compute_selection_frequencies",
    "latest_assignments",
    "selection_frequency_from_counts",
]

VALID_STATUSES = frozenset({"submitted", "approved"})
K = TypeVar("K")
K_co = TypeVar("K_co", covariant=True)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One labeling task (an MTurk HIT): the class asked about and the images shown.

    ``images`` holds every image of the grid, candidates and controls alike.
    """

    task_id: str
    class_name: str
    images: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AssignmentRecord:
    """One worker's answer to a task: the images they selected and the status.

    ``worker`` (a pseudonymous id) and ``submitted`` (a sortable time) let repeated
    assignments of one worker on one task count once (see the module docstring).
    """

    task_id: str
    status: str
    selected: frozenset[str]
    worker: str | None = None
    submitted: str = ""
    assignment_id: str = ""

    @property
    def is_valid(self) -> bool:
        """Submitted or Approved (case-insensitive); Rejected and others are not."""
        return self.status.lower() in VALID_STATUSES


@dataclass(frozen=True, slots=True)
class FrequencyStat:
    """Selection frequency of one (image, class) and the valid assignments behind it."""

    frequency: float
    n_assignments: int


class TaskVote(Protocol[K_co]):
    """One per-(assignment, image) event, as the project store keeps them.

    :class:`retest.store.base.AnnotationEvent` has these fields.
    """

    @property
    def item_id(self) -> str: ...
    @property
    def class_id(self) -> K_co: ...
    @property
    def value(self) -> int: ...
    @property
    def assignment_status(self) -> str | None: ...
    @property
    def task_id(self) -> str | None: ...
    @property
    def assignment_id(self) -> str | None: ...
    @property
    def worker(self) -> str | None: ...
    @property
    def when(self) -> str | None: ...
    @property
    def id(self) -> int | None: ...


def _is_valid(status: str | None) -> bool:
    return status is None or status.lower() in VALID_STATUSES


_Order = tuple[str, int, str]


def _latest_per_worker(
    candidates: Iterable[tuple[Hashable, Hashable, _Order]],
) -> set[Hashable]:
    """The assignments that count: per (task, worker) group, the greatest order key.

    ``candidates`` holds ``(group, assignment, order)`` of valid assignments only
    (one assignment may appear many times: its largest order is used).
    """
    best: dict[Hashable, tuple[_Order, Hashable]] = {}
    for group, assignment, order in candidates:
        cur = best.get(group)
        if cur is None or (order, str(assignment)) > (cur[0], str(cur[1])):
            best[group] = (order, assignment)
    return {a for _, a in best.values()}


def compute_selection_frequencies(
    tasks: Iterable[TaskRecord],
    assignments: Iterable[AssignmentRecord],
    *,
    compat: str | None = None,
) -> dict[tuple[str, str], FrequencyStat]:
    """Selection frequency of every (image, class) pair shown in a task.

    Parameters
    ----------
    tasks : iterable of TaskRecord
    assignments : iterable of AssignmentRecord
        Assignments of unknown tasks raise; invalid ones are ignored, and of one
        worker's assignments on one task only the latest valid one counts.
    compat : {"exact", "authors"}, optional
        ``"authors"``: every valid assignment counts, and an image shown twice
        in a task counts twice (the published counting).

    Returns
    -------
    dict
        ``{(image_id, class_name): FrequencyStat}``; images shown only in tasks
        without a valid assignment get ``FrequencyStat(0.0, 0)``.

    Examples
    --------
    >>> t = [TaskRecord("h1", "cat", ("a", "b"))]
    >>> a = [AssignmentRecord("h1", "Approved", frozenset({"a"})),
    ...      AssignmentRecord("h1", "Submitted", frozenset({"a", "b"})),
    ...      AssignmentRecord("h1", "Rejected", frozenset({"b"}))]
    >>> s = compute_selection_frequencies(t, a)
    >>> s[("a", "cat")], s[("b", "cat")]
    (FrequencyStat(frequency=1.0, n_assignments=2), FrequencyStat(frequency=0.5, n_assignments=2))
    """
    by_task: dict[str, TaskRecord] = {}
    for t in tasks:
        by_task[t.task_id] = t
    records = list(assignments)
    for a in records:
        if a.task_id not in by_task:
            raise InputValidationError(
                f"assignment refers to unknown task {a.task_id!r}; every assignment "
                "needs its task record."
            )
    authors = check_compat(compat) == AUTHORS
    counted = _latest_per_worker(
        ((a.task_id, a.worker), i, (a.submitted, i, a.assignment_id))
        for i, a in enumerate(records)
        if a.is_valid and a.worker is not None and not authors
    )
    valid: dict[str, list[frozenset[str]]] = defaultdict(list)
    for i, a in enumerate(records):
        if a.is_valid and (authors or a.worker is None or i in counted):
            valid[a.task_id].append(a.selected)
    n: dict[tuple[str, str], int] = defaultdict(int)
    k: dict[tuple[str, str], int] = defaultdict(int)
    for task_id in sorted(by_task):
        task = by_task[task_id]
        answers = valid.get(task_id, [])
        # a repeated image counts once (authors: once per appearance)
        for image in task.images if authors else dict.fromkeys(task.images):
            key = (image, task.class_name)
            n[key] += len(answers)
            k[key] += sum(image in sel for sel in answers)
    return {
        key: FrequencyStat(k[key] / n[key] if n[key] else 0.0, n[key])
        for key in sorted(n)
    }


def latest_assignments(
    events: Iterable[TaskVote[Any]], *, excluded: Collection[str] = ()
) -> set[tuple[str, str]]:
    """``(task id, assignment id)`` of every assignment that counts by the rule
    of :func:`aggregate_item_events`: per worker and task the latest valid one
    (events without a worker are left out: they cannot be attributed).

    Examples
    --------
    >>> from types import SimpleNamespace as E
    >>> ev = [E(task_id="t", assignment_id=a, worker="w1", when=w, id=i,
    ...         assignment_status="Submitted") for a, w, i in (("A1", "t1", 1), ("A2", "t2", 2))]
    >>> sorted(latest_assignments(ev)), latest_assignments(ev, excluded={"w1"})
    ([('t', 'A2')], set())
    """
    grouped = [
        (
            (ev.task_id, ev.worker),
            (ev.task_id, ev.assignment_id),
            (ev.when or "", ev.id or 0, ev.assignment_id),
        )
        for ev in events
        if ev.worker
        and ev.task_id
        and ev.assignment_id
        and ev.worker not in excluded
        and _is_valid(ev.assignment_status)
    ]
    return _latest_per_worker(grouped)  # type: ignore[return-value]


def aggregate_item_events(
    events: Iterable[TaskVote[K] | tuple[str, K, str | None, int]],
    *,
    compat: str | None = None,
    excluded: Collection[str] = (),
) -> dict[tuple[str, K], FrequencyStat]:
    """Selection frequencies from per-(assignment, image) events.

    The one place that decides which crowd votes count; every consumer (sampling,
    the web app) goes through it. Each event is a :class:`TaskVote` (e.g. the
    store's ``kind="task"`` annotation events, one per image shown in an
    assignment, value 1 when the worker selected it) or a bare tuple
    ``(image_id, class, assignment_status, value)``. Status ``None`` (a labeler
    outside a crowd platform) counts as valid; otherwise only Submitted/Approved
    do. Of one worker's valid assignments on one task only the latest counts (see
    the module docstring); bare tuples carry no worker, so each of them counts.
    This equals :func:`compute_selection_frequencies` on the same assignments;
    ``compat="authors"`` counts every valid event, as it does there.
    Workers in ``excluded`` (left out of the counts for their quality on the
    controls, :func:`retest.project._people.excluded_workers`) count for nothing.

    Examples
    --------
    >>> ev = [("a", 3, "Approved", 1), ("a", 3, "Rejected", 1), ("a", 3, None, 0)]
    >>> aggregate_item_events(ev)
    {('a', 3): FrequencyStat(frequency=0.5, n_assignments=2)}
    """
    authors = check_compat(compat) == AUTHORS
    rows: list[tuple[str, K, bool, int, Hashable]] = []
    grouped: list[tuple[Hashable, Hashable, _Order]] = []
    for ev in events:
        if isinstance(ev, tuple):
            item, cls, status, value = ev
            rows.append((item, cls, _is_valid(status), value, None))
            continue
        valid = _is_valid(ev.assignment_status) and ev.worker not in excluded
        akey: Hashable = None
        if valid and ev.worker and ev.task_id and ev.assignment_id and not authors:
            akey = (ev.task_id, ev.assignment_id)
            order = (ev.when or "", ev.id or 0, ev.assignment_id)
            grouped.append(((ev.task_id, ev.worker), akey, order))
        rows.append((ev.item_id, ev.class_id, valid, ev.value, akey))
    counted = _latest_per_worker(grouped)
    n: dict[tuple[str, K], int] = defaultdict(int)
    k: dict[tuple[str, K], int] = defaultdict(int)
    for item, cls, valid, value, akey in rows:
        key = (item, cls)
        if not valid or (akey is not None and akey not in counted):
            n.setdefault(key, 0)
            continue
        n[key] += 1
        k[key] += int(value > 0)
    return {key: FrequencyStat(k[key] / n[key] if n[key] else 0.0, n[key]) for key in n}


def selection_frequency_from_counts(
    counts: ArrayLike, labels: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Per-image selection frequency from a label-count matrix (e.g. CIFAR-10H).

    ``frequency[i] = counts[i, labels[i]] / counts[i].sum()`` and
    ``n[i] = counts[i].sum()``; rows without votes get ``(0.0, 0)``.

    Parameters
    ----------
    counts : array-like of shape (n_images, n_classes)
        Number of annotators who chose each class.
    labels : array-like of shape (n_images,)
        The image's class in the dataset.
    """
    c = np.asarray(counts)
    y = np.asarray(labels)
    if c.ndim != 2 or y.ndim != 1 or c.shape[0] != y.shape[0]:
        raise InputValidationError(
            f"counts must have shape (n_images, n_classes) and labels (n_images,). "
            f"Got {c.shape} and {y.shape}."
        )
    if y.size and (y.min() < 0 or y.max() >= c.shape[1]):
        raise InputValidationError(
            f"labels must be class ids in [0, {c.shape[1]}). Got min {y.min()}, "
            f"max {y.max()}."
        )
    if (c < 0).any() or not np.all(c == np.round(c)):
        raise InputValidationError("counts must be non-negative integers.")
    n = c.sum(axis=1).astype(np.int64)
    chosen = c[np.arange(c.shape[0]), y.astype(np.int64)].astype(np.float64)
    freq = np.divide(chosen, n, out=np.zeros(n.shape, np.float64), where=n > 0)
    return freq, n


@dataclass(frozen=True, slots=True)
class TargetHistogram:
    """A class's histogram of original images over selection-frequency bins.

    ``is_valid`` is False when fewer than ``min_images`` original images have
    enough annotations; such a class cannot be MatchedFrequency-sampled, except
    with ``compat="authors"``, which (as published) still samples it from its
    histogram while marking it invalid.
    """

    class_name: str
    counts: tuple[int, ...]
    n_images: int
    is_valid: bool
    bins: tuple[float, ...] = DEFAULT_BINS

    def usable(self, compat: str | None = None) -> bool:
        """Whether a target can be computed: valid, or (authors) any original."""
        if check_compat(compat) == AUTHORS:
            return self.n_images > 0
        return self.is_valid

    def target(self, per_class: int, compat: str | None = None) -> tuple[int, ...]:
        """Per-bin target counts summing to ``per_class`` (largest remainder)."""
        if not self.usable(compat):
            raise ConfigError(
                f"class {self.class_name!r} has only {self.n_images} annotated original "
                "images, too few for a target histogram; annotate more originals."
            )
        return tuple(round_histogram(self.counts, per_class, compat=compat))


def class_target_histograms(
    frequencies: ArrayLike,
    n_assignments: ArrayLike,
    classes: Sequence[str],
    *,
    bins: Sequence[float] = DEFAULT_BINS,
    min_annotations: int = 10,
    min_images: int = 20,
    all_classes: Iterable[str] = (),
) -> dict[str, TargetHistogram]:
    """Per-class target histograms from the original images' selection frequencies.

    Only images with at least ``min_annotations`` valid assignments count; a class
    with fewer than ``min_images`` such images is invalid
    (docs/algorithms.md#matched-frequency step 1).

    Parameters
    ----------
    frequencies, n_assignments : array-like of shape (n_images,)
        Selection frequency of each original image for its own class.
    classes : sequence of str, length n_images
        The class of each original image.
    all_classes : iterable of str, optional
        Classes to report even when no original image of theirs is given.

    Returns
    -------
    dict
        ``{class_name: TargetHistogram}`` in sorted class order.
    """
    edges = check_bins(bins)
    f = np.asarray(frequencies, dtype=np.float64)
    n = np.asarray(n_assignments)
    cls = np.asarray([str(c) for c in classes], dtype=object)
    if not (f.shape == n.shape == cls.shape) or f.ndim != 1:
        raise InputValidationError(
            f"frequencies, n_assignments and classes must be 1-d and of equal length. "
            f"Got {f.shape}, {n.shape} and {cls.shape}."
        )
    usable = n >= min_annotations
    out: dict[str, TargetHistogram] = {}
    for name in sorted(set(cls.tolist()) | {str(c) for c in all_classes}):
        sel = usable & (cls == name)
        hist = histogram_counts(f[sel], edges)
        m = int(sel.sum())
        out[name] = TargetHistogram(
            name, tuple(int(x) for x in hist), m, m >= min_images and m > 0, edges
        )
    return out
