"""The event read model: aggregates of the annotation log kept current incrementally.

Recomputing selection frequencies from every stored event on each page load
takes seconds once a campaign holds a million events. :class:`EventAggregates`
instead reads each event once, in id order, and keeps what the pages need:

* selection frequency per (item, class), by the one vote-counting rule of
  :func:`retest.sampling.selection_frequency.aggregate_item_events` (one counted
  assignment per worker and task, the latest valid one); a newer assignment of a
  worker replaces the previous one's contribution instead of adding to it;
* the latest ``select`` / ``verify`` answer per item;
* the number of counted answers per grid task;
* the label-error queue's events.

:class:`~retest.project._live.Live` feeds it (pure: no database, no threads).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import TypeVar

from retest.project._review_queue import (
    SUSPECT_KIND,
    VERDICT_KIND,
    LabelErrorItem,
    label_error_items,
)
from retest.sampling.selection_frequency import VALID_STATUSES, FrequencyStat
from retest.store.rows import AnnotationEvent

__all__ = ["WITHDRAWN", "EventAggregates"]

WITHDRAWN = "Withdrawn"
"""The status of a grid answer its worker undid (not a valid status)."""

T = TypeVar("T")
_Key = tuple[str, int]
_Order = tuple[str, int, str]


def _valid(status: str | None) -> bool:
    return status is None or status.lower() in VALID_STATUSES


def _same_answer(a: AnnotationEvent, b: AnnotationEvent) -> bool:
    """Whether two task events belong to one stored answer (fed as one run)."""
    return (
        a.assignment_id == b.assignment_id
        and a.task_id == b.task_id
        and a.worker == b.worker
        and a.assignment_status == b.assignment_status
        and a.when == b.when
        and a.class_id == b.class_id
        and a.who == b.who
    )


class _Stats(Mapping[_Key, FrequencyStat]):
    """A read-only view of the counts as ``{(item, class): FrequencyStat}``."""

    def __init__(self, n: dict[_Key, int], k: dict[_Key, int]) -> None:
        self._n, self._k = n, k

    def __getitem__(self, key: _Key) -> FrequencyStat:
        n = self._n[key]
        return FrequencyStat(self._k.get(key, 0) / n if n else 0.0, n)

    def __iter__(self) -> Iterator[_Key]:
        return iter(self._n)

    def __len__(self) -> int:
        return len(self._n)


class EventAggregates:
    """What the pages show, maintained one event at a time (see the module doc).

    Not thread-safe by itself: :class:`Live` feeds and reads it under a lock.
    """

    def __init__(self, excluded: frozenset[str] = frozenset()) -> None:
        self.excluded = excluded
        """Workers left out of the counts (quality on the controls): their
        events count for nothing, as in the one vote rule."""
        self.last_id = 0
        self.built = False
        """Whether the events stored before were read (then, with ``last_id``,
        nothing is missing)."""
        self._n: dict[_Key, int] = {}
        self._k: dict[_Key, int] = defaultdict(int)
        # assignments that belong to a (task, worker) group: their rows, order
        # key, and which one of each group counts
        self._rows: dict[Hashable, list[tuple[_Key, int]]] = defaultdict(list)
        self._order: dict[tuple[Hashable, Hashable], _Order] = {}
        self._nbest: dict[Hashable, int] = {}
        self._best: dict[Hashable, tuple[_Order, str, Hashable]] = {}
        self._members: dict[Hashable, set[Hashable]] = defaultdict(set)
        # per worker, their task assignments in the order fed (for undo)
        self._history: dict[str, list[tuple[str, str]]] = defaultdict(list)
        # per worker: tasks with a counted answer, and on which (UTC) day each
        # was first answered (the labeler's progress)
        self._done: dict[str, int] = defaultdict(int)
        self._first_day: dict[Hashable, str] = {}
        self._days: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._answers: dict[str, set[Hashable]] = defaultdict(set)
        self.latest: dict[str, dict[_Key, int]] = {"select": {}, "verify": {}}
        self.latest_by_item: dict[str, dict[str, int]] = {"select": {}, "verify": {}}
        self.queue_events: dict[str, list[AnnotationEvent]] = {
            SUSPECT_KIND: [],
            VERDICT_KIND: [],
        }
        # change counters, for caches of what is derived from the aggregates:
        # per class (its selection frequencies) and per kind of label
        self.class_version: dict[int, int] = defaultdict(int)
        self._class_keys: dict[int, list[_Key]] = defaultdict(list)
        self.label_version = 0
        self.queue_version = 0

    # -- feeding
    def feed(self, events: Iterable[AnnotationEvent]) -> int:
        """Add events in id order; returns how many were new."""
        evs = events if isinstance(events, list) else list(events)
        return self.feed_ids(evs, [ev.id for ev in evs])

    def feed_ids(
        self, events: Iterable[AnnotationEvent], ids: Iterable[int | None]
    ) -> int:
        """:meth:`feed` with the ids given apart (events as they were appended,
        whose ``id`` field is still empty)."""
        run: list[AnnotationEvent] = []  # task events of one assignment in a row
        run_id: int | None = None
        n = 0
        for ev, eid in zip(events, ids, strict=True):
            if eid is not None and eid <= self.last_id:
                continue
            n += 1
            if eid is not None:
                self.last_id = eid
            if ev.kind == "task":
                if run and not _same_answer(run[0], ev):
                    self._task(run, run_id)
                    run = []
                run.append(ev)
                run_id = eid
                continue
            if run:
                self._task(run, run_id)
                run = []
            if ev.kind in self.latest:
                self.label_version += 1
                self.latest[ev.kind][(ev.item_id, ev.class_id)] = ev.value
                self.latest_by_item[ev.kind][ev.item_id] = ev.value
            elif ev.kind in self.queue_events:
                self.queue_version += 1
                self.queue_events[ev.kind].append(ev)
        if run:
            self._task(run, run_id)
        return n

    def _add(self, rows: list[tuple[_Key, int]], sign: int = 1) -> None:
        n, k = self._n, self._k
        for key, value in rows:
            n[key] += sign
            if value > 0:
                k[key] += sign
        # a replaced assignment may hold rows of another class than the event's
        for class_id in {key[1] for key, _ in rows}:
            self.class_version[class_id] += 1

    def _task(self, run: list[AnnotationEvent], eid: int | None) -> None:
        """One assignment's answers (a run of events that :func:`_same_answer`
        groups), ``eid`` the id of the last. Fed as one, the counts end as if
        fed one event at a time: ids only grow within the run, so the run is
        the latest of its (task, worker) group after its last event exactly
        when it is after its first."""
        ev = run[0]
        rows = [((e.item_id, e.class_id), e.value) for e in run]
        for key, _ in rows:
            if key not in self._n:
                self._n[key] = 0
                self._class_keys[key[1]].append(key)
        self.class_version[ev.class_id] += 1
        if not _valid(ev.assignment_status) or ev.worker in self.excluded:
            return
        if ev.task_id:
            self._answers[ev.task_id].add(
                ("w", ev.worker) if ev.worker else ("a", ev.assignment_id or ev.who)
            )
        if not (ev.worker and ev.task_id and ev.assignment_id):
            self._add(rows)  # no worker: every assignment counts
            return
        akey: Hashable = (ev.task_id, ev.assignment_id)
        group: Hashable = (ev.task_id, ev.worker)
        if akey not in self._members[group]:
            self._members[group].add(akey)
            self._history[ev.worker].append((ev.task_id, ev.assignment_id))
        self._rows[akey].extend(rows)
        if self._nbest.get(akey, 0) > 0:
            self._add(rows)
        order = (ev.when or "", eid or 0, ev.assignment_id)
        prev = self._order.get((group, akey))
        if prev is not None and prev >= order:
            order = prev
        self._order[(group, akey)] = order
        best = self._best.get(group)
        if best is not None and best[2] == akey:
            self._best[group] = (order, str(akey), akey)
        elif best is None or (order, str(akey)) > (best[0], best[1]):
            if best is None:
                day = (ev.when or "")[:10]
                self._first_day[group] = day
                self._done[ev.worker] += 1
                self._days[ev.worker][day] += 1
            else:
                self._count(best[2], -1)
            self._count(akey, +1)
            self._best[group] = (order, str(akey), akey)

    def _count(self, akey: Hashable, step: int) -> None:
        """An assignment became (+1) or stopped being (-1) the latest of a group;
        its rows count while it is the latest of at least one group."""
        before = self._nbest.get(akey, 0)
        self._nbest[akey] = before + step
        if (before == 0) != (before + step == 0):
            self._add(self._rows[akey], 1 if before == 0 else -1)

    def withdraw(self, task_id: str, worker: str, assignment_id: str) -> None:
        """A stored assignment stopped being valid (withdrawn by its worker):
        as if it had never been fed, so the worker's previous valid answer to
        the task (if any) counts again, by the same rule."""
        akey: Hashable = (task_id, assignment_id)
        group: Hashable = (task_id, worker)
        members = self._members.get(group)
        if members is None or akey not in members:
            return
        members.discard(akey)
        self._order.pop((group, akey), None)
        best = self._best.get(group)
        if best is not None and best[2] == akey:
            self._count(akey, -1)
            rest = [(self._order[(group, a)], str(a), a) for a in members]
            if rest:
                new = max(rest, key=lambda r: (r[0], r[1]))
                self._best[group] = new
                self._count(new[2], +1)
            else:
                del self._best[group]
                self._answers[task_id].discard(("w", worker))
                self._done[worker] -= 1
                self._days[worker][self._first_day.pop(group, "")] -= 1
        self._rows.pop(akey, None)
        history = self._history.get(worker, [])
        if (task_id, assignment_id) in history:
            history.remove((task_id, assignment_id))

    # -- reading
    def last_answer(self, worker: str) -> tuple[str, str] | None:
        """(task id, assignment id) of the worker's latest valid grid answer."""
        history = self._history.get(worker)
        if not history:
            return None
        return history[-1]

    def progress(self, worker: str, day: str) -> tuple[int, int]:
        """(tasks the worker has a counted answer to, of those first answered on
        ``day``, a ``YYYY-MM-DD`` UTC date)."""
        return self._done.get(worker, 0), self._days.get(worker, {}).get(day, 0)

    def has_answered(self, task_id: str, worker: str) -> bool:
        """Whether the worker has a valid answer to the task (no lock needed: one
        set look-up)."""
        return ("w", worker) in self._answers.get(task_id, ())

    def answer_of(self, task_id: str, worker: str) -> dict[str, int] | None:
        """The worker's counted answer to the task, item → value, or None."""
        best = self._best.get((task_id, worker))
        if best is None:
            return None
        return {key[0]: value for key, value in self._rows.get(best[2], ())}

    def stats_copy(self) -> Mapping[_Key, FrequencyStat]:
        """:attr:`stats` on copies of the counts (for use outside the lock)."""
        return _Stats(dict(self._n), dict(self._k))

    def class_stats(self, class_id: int) -> Mapping[_Key, FrequencyStat]:
        """:meth:`stats_copy` of one class's keys only."""
        keys = self._class_keys.get(class_id, [])
        n, k = self._n, self._k
        return _Stats({x: n[x] for x in keys}, {x: k[x] for x in keys if x in k})

    @property
    def stats(self) -> Mapping[_Key, FrequencyStat]:
        """Selection frequency per (item, class id), as ``aggregate_item_events``."""
        return _Stats(self._n, self._k)

    def answers(self, task_id: str) -> int:
        """Workers (or worker-less assignments) with a valid answer to the task."""
        return len(self._answers.get(task_id, ()))

    def answered_by(self, task_id: str) -> frozenset[Hashable]:
        """``("w", worker)`` (or ``("a", assignment)``) of everyone who answered."""
        return frozenset(self._answers.get(task_id, ()))

    def label_error_queue(self) -> list[LabelErrorItem]:
        """The label-error queue (:func:`retest.project._review_queue.label_error_items`)
        over the kept events."""
        events = self.queue_events
        return label_error_items(
            list(events.get(SUSPECT_KIND, [])), list(events.get(VERDICT_KIND, []))
        )
