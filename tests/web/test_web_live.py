"""The web app's incremental aggregates give what the one vote-counting rule gives."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from retest.project import (
    EventAggregates,
    Live,
    label_error_queue,
    verified_per_keyword,
)
from retest.sampling.selection_frequency import aggregate_item_events
from retest.store.rows import AnnotationEvent
from retest.store.sqlite import SQLiteStore
from retest.web.views import (
    candidate_pool,
    keyword_progress,
    keywords_of,
    verified_counts,
)


def _random_events(seed: int, n: int) -> list[AnnotationEvent]:
    """Grid answers with repeated workers, interleaved assignments, rejected ones,
    worker-less records and equal submit times (the id then decides)."""
    rng = np.random.default_rng(seed)
    events: list[AnnotationEvent] = []
    open_assignments: list[tuple[str, str | None, str, str, list[str]]] = []
    for k in range(n):
        if not open_assignments or rng.random() < 0.3:
            task = f"t{rng.integers(4)}"
            worker = None if rng.random() < 0.15 else f"w{rng.integers(5)}"
            status = str(rng.choice(["Submitted", "Approved", "Rejected", "submitted"]))
            when = f"2024-01-0{rng.integers(1, 4)}"
            items = [f"i{int(j)}" for j in rng.choice(12, size=4, replace=False)]
            open_assignments.append((task, worker, status, when, items))
        a = int(rng.integers(len(open_assignments)))
        task, worker, status, when, items = open_assignments[a]
        item = items.pop()
        events.append(
            AnnotationEvent(
                "x",
                "task",
                int(task[1]) % 2,
                item,
                int(rng.integers(2)),
                when,
                "",
                task,
                f"{task}-a{a}",
                status,
                worker,
                {},
                k + 1,
            )
        )
        if not items:
            open_assignments.pop(a)
    return events


@pytest.mark.parametrize("seed", range(8))
def test_incremental_equals_the_one_rule(seed: int) -> None:
    events = _random_events(seed, 400)
    agg = EventAggregates()
    rng = np.random.default_rng(seed)
    pos = 0
    while pos < len(events):  # fed in chunks of any size, as pages arrive
        step = int(rng.integers(1, 40))
        agg.feed(events[pos : pos + step])
        pos += step
        assert dict(agg.stats) == aggregate_item_events(events[:pos])
    assert agg.feed(events) == 0  # already seen: nothing counted twice


@pytest.mark.parametrize("seed", range(4))
def test_whole_answers_fed_at_once_equal_the_one_rule(seed: int) -> None:
    """The web app appends each answer's events together: runs of one
    assignment are fed as one, and must count exactly as event by event."""
    events = _random_events(seed, 400)
    first = {e.assignment_id: k for k, e in enumerate(reversed(events))}
    events = [
        dataclasses.replace(e, id=k + 1)
        for k, e in enumerate(sorted(events, key=lambda e: first[e.assignment_id]))
    ]
    agg = EventAggregates()
    rng = np.random.default_rng(seed)
    pos = 0
    while pos < len(events):
        step = int(rng.integers(1, 60))
        agg.feed(events[pos : pos + step])
        pos += step
        assert dict(agg.stats) == aggregate_item_events(events[:pos])
        assert {t: agg.answers(t) for t in ("t0", "t1", "t2", "t3")} == {
            t: len(
                {
                    ("w", e.worker) if e.worker else ("a", e.assignment_id)
                    for e in events[:pos]
                    if e.task_id == t and e.assignment_status.lower() != "rejected"
                }
            )
            for t in ("t0", "t1", "t2", "t3")
        }


def test_live_follows_appends_and_other_processes(web_project) -> None:
    proj = web_project.project
    store = proj.store
    live = Live(proj)
    events = _random_events(1, 200)
    store.annotations.add(events[:120])
    with live.lock:
        assert dict(live.sync().stats) == aggregate_item_events(
            store.annotations.list(kind="task")
        )
    store.annotations.add(events[120:])
    # another process rejects a counted assignment in place (no append)
    other = SQLiteStore(proj.db_path)
    stored = store.annotations.list(kind="task")
    target = next(
        e.assignment_id
        for e in stored
        if e.worker and e.assignment_status != "Rejected"
    )
    assert target is not None
    other.annotations.set_assignment_status(target, status="Rejected")
    other.close()
    with live.lock:
        got = dict(live.sync().stats)
    assert got == aggregate_item_events(store.annotations.list(kind="task"))
    live.close()


def test_label_progress_and_queue_from_aggregates(web_project) -> None:
    from retest.project import Suspect, queue_label_errors

    proj = web_project.project
    store = proj.store
    cats = web_project.candidates[0::2]
    store.annotations.add(
        [AnnotationEvent("a", "select", 0, c, int(k < 4)) for k, c in enumerate(cats)]
        + [
            AnnotationEvent("b", "verify", 0, c, int(k != 1))
            for k, c in enumerate(cats[:4])
        ]
        + [AnnotationEvent("b", "verify", 0, cats[1], 1)]  # changed her mind
    )
    queue_label_errors(proj, [Suspect("test:1", 1, 0, rank=1)], method="both")
    agg = EventAggregates()
    agg.feed(store.annotations.list())
    pool = candidate_pool(store)
    names = {c.id: c.name for c in store.classes.list()}
    kw_of = keywords_of(store, {i for i, _ in agg.latest["verify"]})
    assert verified_counts(agg.latest["verify"], kw_of, names) == (
        verified_per_keyword(proj)
    )
    fast = keyword_progress(
        proj, selected=agg.latest_by_item["select"],
        verdicts=agg.latest_by_item["verify"],
        verified=verified_counts(agg.latest["verify"], kw_of, names),
        pool=pool,
    )  # fmt: skip
    assert fast == keyword_progress(proj)
    assert agg.label_error_queue() == label_error_queue(proj)


def test_writer_feeds_the_aggregates_and_they_equal_a_rebuild(web_project) -> None:
    """Committed answers reach the aggregates without being read back (pages
    then sync nothing); answers of another process in between are read from the
    store; either way the counts equal the one rule over the stored events."""
    import threading
    import time

    from retest.store.rows import utc_now

    proj = web_project.project
    store = proj.store
    live = Live(proj)
    events = [
        dataclasses.replace(e, when=utc_now(), id=None) for e in _random_events(3, 600)
    ]
    with live.lock:
        live.sync()
    # whole assignments per submission, sent from 4 threads
    by_assignment: dict[str | None, list[AnnotationEvent]] = {}
    for e in events[:400]:
        by_assignment.setdefault(e.assignment_id, []).append(e)
    subs = list(by_assignment.values())

    def send(part: list[list[AnnotationEvent]]) -> None:
        for evs in part:
            live.writer.submit(evs).result(timeout=30)

    threads = [threading.Thread(target=send, args=(subs[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    last = store.annotations.list()[-1].id
    deadline = time.monotonic() + 10
    while live.aggregates.last_id != last and time.monotonic() < deadline:
        time.sleep(0.01)  # the hook runs just after the answers were given
    assert live.aggregates.last_id == last  # fed by the writer, no sync() called
    with live.lock:
        assert dict(live.aggregates.stats) == aggregate_item_events(
            store.annotations.list(kind="task")
        )
    # another connection appends in between: a gap the writer cannot fill
    other = SQLiteStore(proj.db_path)
    other.annotations.add(events[400:450])
    other.close()
    live.writer.submit(events[450:]).result(timeout=30)
    with live.lock:
        got = dict(live.sync().stats)
    assert got == aggregate_item_events(store.annotations.list(kind="task"))
    live.close()
