"""The live project the web app serves: one writer thread, per-thread readers, the
event aggregates kept current, cached derived state and background jobs.

:class:`Live` feeds :class:`~retest.project._events.EventAggregates` the events appended since the last page (ids are handed
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
import gc
import multiprocessing
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar, cast

from retest._gc import no_cyclic_gc
from retest._progress import ProgressCallback, report
from retest.config import ProjectConfig
from retest.project._events import WITHDRAWN, EventAggregates
from retest.project._people import excluded_workers
from retest.project._project import DB_NAME, Project
from retest.store.base import Store
from retest.store.rows import AnnotationEvent, TaskRow, utc_now
from retest.store.sqlite import SQLiteStore
from retest.store.sqlite_reader import (
    SQLiteReadStore,
    checkpoint,
    external_data_version,
    external_data_version_if_idle,
    set_autocheckpoint,
    table_fingerprint,
)

__all__ = ["EventWriter", "Live", "NotReady"]

T = TypeVar("T")
_Key = tuple[str, int]
_Order = tuple[str, int, str]


class NotReady(Exception):
    """Derived state still being computed for the first time. Pages show
    ``str(err)`` (what is being computed, how far) instead of waiting for it."""


class _Cached:
    __slots__ = ("at", "cost", "fingerprint", "last_id", "value")

    def __init__(self, value: Any, fingerprint: Any, last_id: int, cost: float) -> None:
        self.value, self.fingerprint, self.last_id = value, fingerprint, last_id
        self.cost = cost
        self.at = time.monotonic()


@dataclasses.dataclass
class _Job:
    name: str
    compute: Callable[[Project], Any]
    label: str
    progress: ProgressCallback | None = None
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    error: Exception | None = None
    started: float = 0.0
    step: str = ""
    offload: bool = False


_Submission = tuple[list[AnnotationEvent], str | None, "Future[tuple[int, bool]]"]


class EventWriter:
    """Appends the events of many requests in one transaction (group commit).

    Requests hand their events to :meth:`submit` and wait for the returned
    future; one thread takes everything queued since its last commit and
    appends it with one ``annotations.add`` (one transaction). A future is
    resolved only after its events are committed, so an answered request
    survives a crash of the server. When a batch fails, its requests are
    retried one by one: a bad request fails alone.

    A submission may name the assignment id all its events carry: when events
    with that id are already stored (a resent request, also after a restart
    of the server), nothing is written. The check runs on this thread, the
    only one in the process that appends events, so it cannot race a write.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_events: int = 20_000,
        on_commit: Callable[[list[AnnotationEvent], list[int]], None] | None = None,
    ) -> None:
        self.store = store
        self.max_events = max_events
        self.on_commit = on_commit
        """Called with each committed batch and its ids, after its requests
        were answered (:class:`Live` feeds its aggregates from it)."""
        self._queue: queue.SimpleQueue[_Submission | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._checkpointer: _Checkpointer | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(
        self, events: list[AnnotationEvent], assignment: str | None = None
    ) -> Future[tuple[int, bool]]:
        """Queue ``events`` for appending; the future gives (events stored,
        whether ``assignment`` was already stored and nothing was written)."""
        fut: Future[tuple[int, bool]] = Future()
        with self._lock:
            if self._closed:
                fut.set_exception(RuntimeError("the web app is shutting down."))
                return fut
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="retest-event-writer", daemon=True
                )
                self._thread.start()
                if isinstance(self.store, SQLiteStore):
                    self._checkpointer = _Checkpointer(self.store)
            self._queue.put((events, assignment, fut))
        return fut

    def close(self) -> None:
        """Commit what is queued, then stop the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._queue.put(None)
        if thread is not None:
            thread.join()
        if self._checkpointer is not None:
            self._checkpointer.close()

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            if item is None:
                return
            batch, n = [item], len(item[0])
            while n < self.max_events:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
                n += len(nxt[0])
            self._commit(batch)

    def _commit(self, batch: list[_Submission]) -> None:
        new: list[_Submission] = []
        seen: set[str] = set()
        for sub in batch:
            events, assignment, fut = sub
            try:
                stored = (
                    len(self.store.annotations.list(assignment_id=assignment))
                    if assignment is not None
                    else 0
                )
            except Exception as err:
                fut.set_exception(err)
                continue
            if stored or (assignment is not None and assignment in seen):
                fut.set_result((stored or len(events), True))
                continue
            if assignment is not None:
                seen.add(assignment)
            new.append(sub)
        if new:
            self._append(new)

    def _append(self, batch: list[_Submission]) -> None:
        events = [e for evs, _, _ in batch for e in evs]
        try:
            ids = self.store.annotations.add(events)
        except Exception as err:
            if len(batch) > 1:
                for one in batch:
                    self._append([one])
            else:
                batch[0][2].set_exception(err)
            return
        for evs, _, fut in batch:
            fut.set_result((len(evs), False))
        if self.on_commit is not None:
            self.on_commit(events, ids)


class _Checkpointer:
    """Copies the write-ahead log into the database file from a thread of its own.

    SQLite does this inside the commit that fills the log past 1,000 pages, so
    about every tenth answer waited for a checkpoint (and its fsync) while
    holding the write lock: measured at a million events, writes from 8
    threads went from 120 to 230 answers/s with it moved here. A ``PASSIVE``
    checkpoint (it blocks neither readers nor the writer) runs at most every
    ``seconds`` while the log has grown; the store's own automatic checkpoint
    stays as a backstop at ``backstop_pages``. Durability is unchanged: a
    commit is in the log, which survives a crash of the process, before its
    request is answered; the log is synced to disk at each checkpoint, as before.
    """

    def __init__(
        self,
        store: SQLiteStore,
        *,
        seconds: float = 1.0,
        min_bytes: int = 4 << 20,
        backstop_pages: int = 16_384,
    ) -> None:
        self.store, self.path = store, store.path
        self.seconds, self.min_bytes = seconds, min_bytes
        self._stop = threading.Event()
        set_autocheckpoint(store, backstop_pages)
        self._thread = threading.Thread(
            target=self._run, name="retest-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        wal = self.path.with_name(self.path.name + "-wal")
        reader = SQLiteReadStore(self.path)
        try:
            while not self._stop.wait(self.seconds):
                try:
                    if wal.stat().st_size >= self.min_bytes:
                        checkpoint(reader)
                except Exception:
                    continue  # the next round tries again; the backstop remains
        finally:
            reader.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        set_autocheckpoint(self.store, 1000)  # SQLite's default again


class Live:
    """Per-thread readers, the incremental aggregates and cached derived state.

    Parameters
    ----------
    project : Project
        The open project; its store stays the one writer (label and task
        answers through :attr:`writer`).
    refresh_seconds : float
        How old expensive derived state (eligibility, near-duplicate queue)
        may get while only votes arrive; a recomputation also waits at least
        four times its last duration, so it never takes more than a fifth of
        a core from the pages.
    sync_seconds : float
        Derived state whose computation takes at most this long is recomputed
        before the page is shown; see :meth:`derived`.
    first_wait : float
        How long a page waits for derived state computed for the first time
        before it shows :class:`NotReady` instead.
    processes : bool
        Compute the expensive derived state (the eligibility decision, the
        near-duplicate queue) in a worker process. In a thread it holds the
        interpreter lock for tens of seconds at a million events, and every
        request waits for the lock meanwhile: writes went from 146 to 22 per
        second while it ran.
    """

    def __init__(
        self,
        project: Project,
        *,
        refresh_seconds: float = 5.0,
        sync_seconds: float = 0.2,
        first_wait: float = 2.0,
        processes: bool = False,
    ) -> None:
        self.project = project
        self.refresh_seconds = refresh_seconds
        self.sync_seconds = sync_seconds
        self.first_wait = first_wait
        self.processes = processes
        self._child: _Child | None = None
        self.lock = threading.RLock()
        self.aggregates = EventAggregates()
        self.generation = 0
        """Counts rebuilds of :attr:`aggregates` (their change counters restart)."""
        # batches the writer committed, fed to the aggregates without reading
        # them back: at hundreds of answers a second a page's sync() read and
        # decoded ~10,000 events per second of writes
        self._committed: deque[tuple[list[AnnotationEvent], list[int]]] = deque()
        self.writer = EventWriter(project.store, on_commit=self._on_commit)
        self._local = threading.local()
        self._readers: list[SQLiteReadStore] = []
        self._readers_lock = threading.Lock()
        self._sqlite = isinstance(project.store, SQLiteStore)
        self._seen_version = (
            external_data_version(cast(SQLiteStore, project.store))
            if self._sqlite
            else 0
        )
        self._version = self._seen_version
        self._cache: dict[str, _Cached] = {}
        self._cache_lock = threading.Lock()
        self._memo: dict[str, tuple[Hashable, Any]] = {}
        self._tasks: dict[str, TaskRow] = {}
        self._memo_locks = [threading.Lock() for _ in range(32)]
        # the background worker: one derived computation at a time
        self._wake = threading.Condition(self._cache_lock)
        self._jobs: dict[str, _Job] = {}
        self._queue: deque[_Job] = deque()
        self._running: _Job | None = None
        self._steps = [0, 0]  # [done, queued] since the warm-up was last idle
        self._costs: dict[str, float] = {}
        self._worker: threading.Thread | None = None
        self._closed = False

    def mine(
        self, task_id: str, worker: str
    ) -> tuple[dict[str, int] | None, bool, tuple[int, int]]:
        """(the worker's counted answer to the task, whether they have an answer
        to undo, (tasks done, done today)), from memory: the batches committed
        so far are fed first, the store is not read (a task page costs no more
        than before)."""
        today = utc_now()[:10]
        with self.lock:
            self._drain()
            agg = self.aggregates
            return (
                agg.answer_of(task_id, worker),
                agg.last_answer(worker) is not None,
                agg.progress(worker, today),
            )

    def rebuild(self) -> None:
        """Read every event again at the next page (after this process changed
        what counts other than by appending: a worker excluded or included)."""
        with self.lock:
            self.aggregates = EventAggregates()
            self._committed.clear()
            self.generation += 1

    def withdraw_last(self, worker: str) -> tuple[str, str] | None:
        """Undo the worker's latest grid answer: its assignment becomes
        ``Withdrawn`` in the store (no longer valid, so by the one vote rule
        their previous answer to the task, if any, counts again) and in the
        aggregates. Returns (task id, assignment id), or None when there is
        nothing to undo."""
        with self.lock:
            agg = self.sync()
            last = agg.last_answer(worker)
            if last is None:
                return None
            task_id, assignment = last
            self.project.store.annotations.set_assignment_status(
                assignment, status=WITHDRAWN
            )
            agg.withdraw(task_id, worker, assignment)
            return last

    def task(self, task_id: str) -> TaskRow:
        """A grid task, kept in memory once read (stored tasks never change)."""
        row = self._tasks.get(task_id)
        if row is None:
            row = self.store().tasks.get(task_id)
            if len(self._tasks) >= 100_000:
                self._tasks.clear()
            self._tasks[task_id] = row
        return row

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

    def close(self) -> None:
        """Commit queued writes; stop the threads and the worker process; close
        the readers."""
        self.writer.close()
        with self._cache_lock:
            self._closed = True
            self._wake.notify_all()
            child, self._child = self._child, None
        if child is not None:
            child.close()
        with self._readers_lock:
            for r in self._readers:
                r.close()
            self._readers.clear()

    def external_version(self) -> int:
        """:meth:`_external_version` (the sign-in cache drops what it knows when
        another process changed the database: a person revoked)."""
        return self._external_version()

    def _external_version(self) -> int:
        """The writer connection's ``data_version`` (changed by other processes'
        commits). While that connection is busy with a write of this process,
        the last value read: pages do not wait for the write."""
        if not self._sqlite:
            return 0
        v = external_data_version_if_idle(cast(SQLiteStore, self.project.store))
        if v is None:
            return self._seen_version
        self._seen_version = v
        return v

    def fingerprint(self) -> Any:
        """Changes when any table but the event log changes (or another process writes)."""
        if not self._sqlite:
            return time.monotonic()  # no cheap fingerprint: never reuse
        store = cast(SQLiteStore, self.store())
        return (
            self._external_version(),
            # sign-ins change no page: only the audit log (exclusions) does
            table_fingerprint(store, skip=("annotations", "sessions", "people")),
        )

    # -- the event log
    def _on_commit(self, events: list[AnnotationEvent], ids: list[int]) -> None:
        """The writer's hook: queue the batch; feed it now unless a page holds
        the lock (the writer never waits for a page)."""
        if len(ids) != len(events) or any(e.when is None for e in events):
            return  # stamped by the store: read back by sync() instead
        self._committed.append((events, ids))
        if self.lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self.lock.release()

    def _drain(self) -> None:
        """Feed committed batches that continue the aggregates without a gap
        (call under :attr:`lock`). Another process's events in between end the
        draining: :meth:`sync` then reads everything new from the store."""
        agg = self.aggregates
        while self._committed:
            events, ids = self._committed.popleft()
            if not agg.built or ids[-1] <= agg.last_id:
                continue  # not built yet (the first sync reads all), or read already
            if ids[0] != agg.last_id + 1:
                self._committed.clear()
                return
            agg.feed_ids(events, ids)

    def sync(self) -> EventAggregates:
        """Bring the aggregates up to the last committed event; call under :attr:`lock`."""
        with self.lock:
            version = self._external_version()
            if version != self._version:
                # another process committed: statuses may have changed in place
                self._version = version
                self.aggregates = EventAggregates()
                self.generation += 1
            agg = self.aggregates
            self._drain()
            if not agg.built:
                agg.excluded = excluded_workers(self.store())
                with no_cyclic_gc():  # a million new objects: no collections meanwhile
                    agg.feed(self.store().annotations.list(after_id=agg.last_id))
                gc.freeze()  # and later collections do not walk them again
                agg.built = True
            else:
                agg.feed(self.store().annotations.list(after_id=agg.last_id))
            return agg

    # -- caches
    def memo(self, name: str, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, kept until ``key`` changes (one computation at a time
        per name; the latest 256 names are kept).

        For state derived from the aggregates: a key such as ``(fingerprint(),
        generation, aggregates.class_version[c])`` changes with every write
        that could change the value, so the next page shows it.
        """
        with self._cache_lock:
            hit = self._memo.get(name)
        if hit is not None and hit[0] == key:
            return cast(T, hit[1])
        with self._memo_locks[hash(name) % len(self._memo_locks)]:
            with self._cache_lock:
                hit = self._memo.get(name)
            if hit is not None and hit[0] == key:
                return cast(T, hit[1])
            value = compute()
            with self._cache_lock:
                self._memo.pop(name, None)
                self._memo[name] = (key, value)
                while len(self._memo) > 256:
                    del self._memo[next(iter(self._memo))]
        return value

    def derived(
        self,
        name: str,
        compute: Callable[[Project], T],
        *,
        votes: bool = True,
        label: str | None = None,
        offload: bool = False,
    ) -> T:
        """``compute(read_project)``, cached per fingerprint (and event id when
        ``votes``: it reads the votes). ``offload``: in the background it runs
        in the worker process (see ``processes``; ``compute`` must pickle).

        Never computed yet: the background worker computes it; the page waits
        up to ``first_wait`` seconds, then raises :class:`NotReady` (the worker
        goes on). Out of date and cheap (the last computation took at most
        ``sync_seconds``): recomputed now, so small projects always show the
        latest state. Out of date and expensive: the cached value is shown and
        the worker recomputes it (at once after a change of the other tables;
        while only votes arrive, at most every ``refresh_seconds`` and four
        times its last duration).
        """
        fp = self.fingerprint()
        last_id = self.sync().last_id
        job = None
        with self._cache_lock:
            c = self._cache.get(name)
            if c is None:
                job = self._schedule(name, compute, label or name, offload=offload)
            elif c.fingerprint == fp and (not votes or c.last_id == last_id):
                return cast(T, c.value)
            elif c.cost > self.sync_seconds:
                gap = max(self.refresh_seconds, 4 * c.cost)
                if c.fingerprint != fp or time.monotonic() - c.at > gap:
                    self._schedule(name, compute, label or name, offload=offload)
                return cast(T, c.value)
        if job is None:
            return self._refresh(name, compute)
        if not job.done.wait(self.first_wait):
            raise NotReady(self.progress(name))
        if job.error is not None:
            raise job.error
        with self._cache_lock:
            return cast(T, self._cache[name].value)

    def warm_up(
        self,
        steps: Iterable[tuple[str, Callable[[Project], Any], str]],
        progress: ProgressCallback | None = None,
    ) -> None:
        """Queue ``(name, compute, label)`` computations for the background
        worker (at server start: the pages that need them do not wait); they
        run in the worker process when there is one.

        ``progress(text, done, total)`` is called when each step starts
        ("computing <label>") and ends ("<label> ready in 51.2 s")."""
        with self._cache_lock:
            for name, compute, label in steps:
                if name not in self._cache:
                    self._schedule(
                        name, compute, label, progress, in_order=True, offload=True
                    )

    def progress(self, name: str) -> str:
        """How far the computation of ``name`` is, e.g. "Computing the
        eligibility decision (step 1 of 2): 14 s so far, 51 s last time."."""
        with self._cache_lock:
            job = self._jobs.get(name)
            if job is None:
                return "Almost ready."
            running = job if job.started else self._running
            if running is None:
                return f"Waiting to compute {job.label}."
            text = f"Computing {running.label}{running.step}: "
            text += f"{time.monotonic() - running.started:.0f} s so far"
            if running.name in self._costs:
                text += f", {self._costs[running.name]:.0f} s last time"
            if running is not job:
                text += f"; this page then needs {job.label}"
        return text + "."

    def _schedule(
        self,
        name: str,
        compute: Callable[[Project], Any],
        label: str,
        progress: ProgressCallback | None = None,
        *,
        in_order: bool = False,
        offload: bool = False,
    ) -> _Job:
        """Start a job unless one for ``name`` is queued or running; call under
        ``_cache_lock``. ``in_order`` jobs run one after the other in the
        warm-up thread; others in a thread of their own (a cheap page must
        not wait behind the eligibility decision)."""
        job = self._jobs.get(name)
        if job is not None:
            return job
        job = self._jobs[name] = _Job(name, compute, label, progress, offload=offload)
        if not in_order:
            threading.Thread(
                target=self._run, args=(job,), name="retest-derived", daemon=True
            ).start()
            return job
        self._queue.append(job)
        self._steps[1] += 1
        if self._worker is None:
            self._worker = threading.Thread(
                target=self._work, name="retest-warm-up", daemon=True
            )
            self._worker.start()
        self._wake.notify()
        return job

    def _work(self) -> None:
        while True:
            with self._cache_lock:
                while not self._queue and not self._closed:
                    self._steps = [0, 0]
                    self._wake.wait()
                if self._closed:
                    return
                job = self._running = self._queue.popleft()
                done, total = self._steps
                job.step = f" (step {done + 1} of {total})"
            report(job.progress, f"computing {job.label}", done, total)
            took = self._run(job)
            with self._cache_lock:
                self._running = None
                self._steps[0] += 1
            outcome = f"failed: {job.error}" if job.error else "ready"
            report(
                job.progress, f"{job.label} {outcome} in {took:.1f} s", done + 1, total
            )

    def _run(self, job: _Job) -> float:
        with self._cache_lock:
            job.started = time.monotonic()
        try:
            self._refresh(job.name, job.compute, job.offload)
        except Exception as err:
            job.error = err
        with self._cache_lock:
            self._jobs.pop(job.name, None)
            took = time.monotonic() - job.started
        job.done.set()
        return took

    def _in_process(self, compute: Callable[[Project], T]) -> tuple[bool, T | None]:
        """(True, ``compute`` run in the worker process, started on first use),
        or (False, None) without one (no ``processes``, or it died: the caller
        computes here)."""
        if not (self.processes and self._sqlite):
            return False, None
        with self._cache_lock:
            if self._closed:
                return False, None
            if self._child is None:
                self._child = _Child()
            child = self._child
        try:
            return True, child.run(self.project.root, self.project.config, compute)
        except (EOFError, OSError):  # it died (or was stopped by close)
            with self._cache_lock:
                if self._child is child:
                    self._child = None
            child.close()
            return False, None

    def _refresh(
        self, name: str, compute: Callable[[Project], T], offload: bool = False
    ) -> T:
        fp = self.fingerprint()
        last_id = self.sync().last_id
        t0 = time.perf_counter()
        done, value = self._in_process(compute) if offload else (False, None)
        if not done:
            value = compute(self.read_project())
        cost = time.perf_counter() - t0
        with self._cache_lock:
            self._cache[name] = _Cached(value, fp, last_id, cost)
            self._costs[name] = cost
        return cast(T, value)


class _Child:
    """A worker process that runs one computation at a time for :class:`Live`.

    Its only link to the server is a pipe: when the server stops, even killed,
    the pipe closes and the worker exits with it.
    """

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a threaded server
        self._conn, theirs = ctx.Pipe()
        self._proc = ctx.Process(
            target=_child_main, args=(theirs,), name="retest-worker", daemon=True
        )
        self._proc.start()
        theirs.close()
        self._lock = threading.Lock()

    def run(
        self, root: Path, config: ProjectConfig, compute: Callable[[Project], T]
    ) -> T:
        with self._lock:
            self._conn.send((root, config, compute))
            ok, value = self._conn.recv()
        if not ok:
            raise value
        return cast(T, value)

    def close(self) -> None:
        self._conn.close()
        self._proc.terminate()
        self._proc.join(10)


def _exit_with(parent: int) -> None:
    """End this process within a second of its parent's end (even mid-computation)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _child_main(conn: Any) -> None:
    """The worker process: computations on the project's read-only store."""
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()
    projects: dict[Path, Project] = {}
    while True:
        try:
            root, config, compute = conn.recv()
        except (EOFError, OSError):
            return  # the server is gone
        proj = projects.get(root)
        if proj is None or proj.config != config:
            store = proj.store if proj else SQLiteReadStore(root / DB_NAME)
            proj = projects[root] = Project(root, config, store)
        try:
            reply: tuple[bool, Any] = (True, compute(proj))
        except Exception as err:  # the page that waits shows it
            reply = (False, err)
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return
        except Exception as err:  # a result or error that does not pickle
            conn.send((False, RuntimeError(f"{type(err).__name__}: {err}")))
