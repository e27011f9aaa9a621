"""Aggregates of the event log kept current incrementally, and per-thread readers.

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

:class:`Live` feeds it the events appended since the last page (ids are handed
out in commit order, so "id > last seen" misses nothing) and rebuilds it from
scratch when another process changed the database (a CLI command may update
assignment statuses in place, which no append reveals). Slower derived state
(the project's eligibility decision, the near-duplicate queue) is cached per
fingerprint of the non-event tables and refreshed in the background when only
votes changed.

Reads run on per-thread :class:`~retest.store.sqlite_reader.SQLiteReadStore`
connections, so they never queue behind a write.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, TypeVar, cast

from retest.pipeline.project import Project
from retest.pipeline.review_queue import (
    SUSPECT_KIND,
    VERDICT_KIND,
    LabelErrorItem,
    label_error_items,
)
from retest.sampling.selection_frequency import VALID_STATUSES, FrequencyStat
from retest.store.base import Store
from retest.store.rows import AnnotationEvent
from retest.store.sqlite import SQLiteStore
from retest.store.sqlite_reader import (
    SQLiteReadStore,
    external_data_version,
    table_fingerprint,
)

__all__ = ["EventAggregates", "Live"]

T = TypeVar("T")
_Key = tuple[str, int]
_Order = tuple[str, int, str]


def _valid(status: str | None) -> bool:
    return status is None or status.lower() in VALID_STATUSES


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

    def __init__(self) -> None:
        self.last_id = 0
        self._n: dict[_Key, int] = {}
        self._k: dict[_Key, int] = defaultdict(int)
        # assignments that belong to a (task, worker) group: their rows, order
        # key, and which one of each group counts
        self._rows: dict[Hashable, list[tuple[_Key, int]]] = defaultdict(list)
        self._order: dict[tuple[Hashable, Hashable], _Order] = {}
        self._nbest: dict[Hashable, int] = {}
        self._best: dict[Hashable, tuple[_Order, str, Hashable]] = {}
        self._answers: dict[str, set[Hashable]] = defaultdict(set)
        self.latest: dict[str, dict[_Key, int]] = {"select": {}, "verify": {}}
        self.latest_by_item: dict[str, dict[str, int]] = {"select": {}, "verify": {}}
        self.queue_events: dict[str, list[AnnotationEvent]] = {
            SUSPECT_KIND: [],
            VERDICT_KIND: [],
        }

    # -- feeding
    def feed(self, events: Iterable[AnnotationEvent]) -> int:
        """Add events in id order; returns how many were new."""
        n = 0
        for ev in events:
            if ev.id is not None and ev.id <= self.last_id:
                continue
            n += 1
            if ev.id is not None:
                self.last_id = ev.id
            if ev.kind == "task":
                self._task(ev)
            elif ev.kind in self.latest:
                self.latest[ev.kind][(ev.item_id, ev.class_id)] = ev.value
                self.latest_by_item[ev.kind][ev.item_id] = ev.value
            elif ev.kind in self.queue_events:
                self.queue_events[ev.kind].append(ev)
        return n

    def _add(self, key: _Key, value: int, sign: int = 1) -> None:
        self._n[key] = self._n.get(key, 0) + sign
        if value > 0:
            self._k[key] += sign

    def _task(self, ev: AnnotationEvent) -> None:
        key = (ev.item_id, ev.class_id)
        self._n.setdefault(key, 0)
        if not _valid(ev.assignment_status):
            return
        if ev.task_id:
            self._answers[ev.task_id].add(
                ("w", ev.worker) if ev.worker else ("a", ev.assignment_id or ev.who)
            )
        if not (ev.worker and ev.task_id and ev.assignment_id):
            self._add(key, ev.value)  # no worker: every assignment counts
            return
        akey: Hashable = (ev.task_id, ev.assignment_id)
        group: Hashable = (ev.task_id, ev.worker)
        counted = self._nbest.get(akey, 0) > 0
        self._rows[akey].append((key, ev.value))
        if counted:
            self._add(key, ev.value)
        order = (ev.when or "", ev.id or 0, ev.assignment_id)
        prev = self._order.get((group, akey))
        if prev is not None and prev >= order:
            order = prev
        self._order[(group, akey)] = order
        best = self._best.get(group)
        if best is not None and best[2] == akey:
            self._best[group] = (order, str(akey), akey)
        elif best is None or (order, str(akey)) > (best[0], best[1]):
            if best is not None:
                self._count(best[2], -1)
            self._count(akey, +1)
            self._best[group] = (order, str(akey), akey)

    def _count(self, akey: Hashable, step: int) -> None:
        """An assignment became (+1) or stopped being (-1) the latest of a group;
        its rows count while it is the latest of at least one group."""
        before = self._nbest.get(akey, 0)
        self._nbest[akey] = before + step
        if (before == 0) != (before + step == 0):
            sign = 1 if before == 0 else -1
            for k, v in self._rows[akey]:
                self._add(k, v, sign)

    # -- reading
    def stats_copy(self) -> Mapping[_Key, FrequencyStat]:
        """:attr:`stats` on copies of the counts (for use outside the lock)."""
        return _Stats(dict(self._n), dict(self._k))

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
        """The label-error queue (:func:`retest.pipeline.review_queue.label_error_items`)
        over the kept events."""
        events = self.queue_events
        return label_error_items(
            list(events.get(SUSPECT_KIND, [])), list(events.get(VERDICT_KIND, []))
        )


class _Cached:
    __slots__ = ("at", "cost", "fingerprint", "last_id", "refreshing", "value")

    def __init__(self, value: Any, fingerprint: Any, last_id: int, cost: float) -> None:
        self.value, self.fingerprint, self.last_id = value, fingerprint, last_id
        self.cost = cost
        self.at = time.monotonic()
        self.refreshing = False


class Live:
    """Per-thread readers, the incremental aggregates and cached derived state.

    Parameters
    ----------
    project : Project
        The open project; its store stays the one writer.
    refresh_seconds : float
        How old expensive derived state (eligibility, near-duplicate queue,
        statistics tables) may get while only votes arrive.
    sync_seconds : float
        Derived state whose computation takes at most this long is recomputed
        before the page is shown; see :meth:`derived`.
    """

    def __init__(
        self,
        project: Project,
        *,
        refresh_seconds: float = 5.0,
        sync_seconds: float = 0.2,
    ) -> None:
        self.project = project
        self.refresh_seconds = refresh_seconds
        self.sync_seconds = sync_seconds
        self.lock = threading.RLock()
        self.aggregates = EventAggregates()
        self._local = threading.local()
        self._readers: list[SQLiteReadStore] = []
        self._readers_lock = threading.Lock()
        self._sqlite = isinstance(project.store, SQLiteStore)
        self._version = self._external_version()
        self._cache: dict[str, _Cached] = {}
        self._cache_lock = threading.Lock()

    # -- readers
    def store(self) -> Store:
        """This thread's read-only store (the project's store for other backends)."""
        if not self._sqlite:
            return self.project.store
        reader = getattr(self._local, "store", None)
        if reader is None:
            reader = SQLiteReadStore(self.project.db_path)
            self._local.store = reader
            with self._readers_lock:
                self._readers.append(reader)
        return cast(Store, reader)

    def read_project(self) -> Project:
        """The project with this thread's read-only store."""
        proj = getattr(self._local, "project", None)
        if proj is None:
            proj = dataclasses.replace(self.project, store=self.store())
            self._local.project = proj
        return cast(Project, proj)

    def _drop_local(self) -> None:
        reader = getattr(self._local, "store", None)
        if reader is not None:
            with self._readers_lock:
                self._readers.remove(reader)
            reader.close()
            self._local.store = self._local.project = None

    def close(self) -> None:
        with self._readers_lock:
            for r in self._readers:
                r.close()
            self._readers.clear()

    def _external_version(self) -> int:
        if not self._sqlite:
            return 0
        return external_data_version(cast(SQLiteStore, self.project.store))

    def fingerprint(self) -> Any:
        """Changes when any table but the event log changes (or another process writes)."""
        if not self._sqlite:
            return time.monotonic()  # no cheap fingerprint: never reuse
        store = cast(SQLiteStore, self.store())
        return (
            self._external_version(),
            table_fingerprint(store, skip=("annotations",)),
        )

    # -- the event log
    def sync(self) -> EventAggregates:
        """Bring the aggregates up to the last committed event; call under :attr:`lock`."""
        with self.lock:
            version = self._external_version()
            if version != self._version:
                # another process committed: statuses may have changed in place
                self._version = version
                self.aggregates = EventAggregates()
            agg = self.aggregates
            agg.feed(self.store().annotations.list(after_id=agg.last_id))
            return agg

    # -- derived state
    def derived(
        self, name: str, compute: Callable[[Project], T], *, votes: bool = True
    ) -> T:
        """``compute(read_project)``, cached per fingerprint (and event id when
        ``votes``: it reads the votes).

        Out of date and cheap (the last computation took at most
        ``sync_seconds``): recomputed now, so small projects always show the
        latest state. Out of date and expensive: the cached value is shown and a
        background thread recomputes it (at once after a change of the other
        tables, at most every ``refresh_seconds`` while only votes arrive).
        """
        fp = self.fingerprint()
        last_id = self.sync().last_id
        with self._cache_lock:
            c = self._cache.get(name)
            if c is not None:
                if c.fingerprint == fp and (not votes or c.last_id == last_id):
                    return cast(T, c.value)
                if c.cost > self.sync_seconds:
                    due = c.fingerprint != fp or (
                        time.monotonic() - c.at > self.refresh_seconds
                    )
                    if due and not c.refreshing:
                        c.refreshing = True
                        threading.Thread(
                            target=self._refresh,
                            args=(name, compute, True),
                            daemon=True,
                        ).start()
                    return cast(T, c.value)
        return self._refresh(name, compute)

    def _refresh(
        self, name: str, compute: Callable[[Project], T], background: bool = False
    ) -> T:
        try:
            fp = self.fingerprint()
            last_id = self.sync().last_id
            t0 = time.perf_counter()
            value = compute(self.read_project())
            cost = time.perf_counter() - t0
        except BaseException:
            with self._cache_lock:
                if name in self._cache:
                    self._cache[name].refreshing = False
            raise
        finally:
            if background:
                self._drop_local()
        with self._cache_lock:
            self._cache[name] = _Cached(value, fp, last_id, cost)
        return value
