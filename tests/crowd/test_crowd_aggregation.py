"""Which crowd votes count: the one-vote-per-worker-and-task rule of
``aggregate_item_events`` and its agreement with ``compute_selection_frequencies``."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from retest.sampling.selection_frequency import (
    AssignmentRecord,
    FrequencyStat,
    TaskRecord,
    aggregate_item_events,
    compute_selection_frequencies,
)
from retest.store.rows import AnnotationEvent

ITEMS = ("a", "b", "c")


def _events(
    aid: str, task: str, worker: str | None, status: str, when: str, sel: set[str]
) -> list[AnnotationEvent]:
    return [
        AnnotationEvent(
            "w",
            "task",
            0,
            item,
            int(item in sel),
            when=when,
            task_id=task,
            assignment_id=aid,
            assignment_status=status,
            worker=worker,
        )
        for item in ITEMS
    ]


def test_latest_valid_assignment_of_a_worker_counts() -> None:
    ev = [
        *_events("x1", "t", "W1", "Submitted", "2024-01-01T10:00:00.000000Z", {"a"}),
        *_events("x2", "t", "W1", "Approved", "2024-01-01T11:00:00.000000Z", {"b"}),
        *_events("x3", "t", "W1", "Rejected", "2024-01-01T12:00:00.000000Z", {"c"}),
        *_events("y1", "t", "W2", "Submitted", "2024-01-01T09:00:00.000000Z", {"a"}),
        *_events("y2", "u", "W2", "Submitted", "2024-01-01T09:00:00.000000Z", {"a"}),
    ]
    s = aggregate_item_events(ev)
    # W1: x3 is rejected, so x2 (the latest valid) counts and x1 does not; W2's
    # assignment of another task ("u") is another vote
    assert s == {
        ("a", 0): FrequencyStat(2 / 3, 3),
        ("b", 0): FrequencyStat(1 / 3, 3),
        ("c", 0): FrequencyStat(0.0, 3),
    }
    # without a worker every assignment counts, like bare tuples
    anon = [
        *_events("x1", "t", None, "Submitted", "2024-01-01T10:00:00.000000Z", {"a"}),
        *_events("x2", "t", None, "Submitted", "2024-01-01T11:00:00.000000Z", {"a"}),
    ]
    assert aggregate_item_events(anon)[("a", 0)] == FrequencyStat(1.0, 2)
    tuples = [(e.item_id, e.class_id, e.assignment_status, e.value) for e in anon]
    assert aggregate_item_events(tuples) == aggregate_item_events(anon)


def test_same_submit_time_the_later_write_wins() -> None:
    t = "2024-01-01T10:00:00.000000Z"
    first = _events("x1", "t", "W1", "Submitted", t, {"a"})
    second = _events("x2", "t", "W1", "Submitted", t, {"b"})
    stamped = [dataclasses.replace(e, id=i) for i, e in enumerate([*first, *second], 1)]
    s = aggregate_item_events(reversed(stamped))
    assert s[("b", 0)] == FrequencyStat(1.0, 1) and s[("a", 0)].frequency == 0.0


assignment = st.tuples(
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(["W1", "W2", "W3", None]),
    st.sampled_from(["Submitted", "Approved", "Rejected"]),
    st.integers(0, 5),  # submit hour, ties on purpose
    st.sets(st.sampled_from(ITEMS)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(assignment, max_size=12), st.integers(0, 2**32 - 1))
def test_order_independent_and_equal_to_record_form(asgs, seed: int) -> None:
    ev: list[AnnotationEvent] = []
    recs: list[AssignmentRecord] = []
    for k, (task, worker, status, hour, sel) in enumerate(asgs):
        when = f"2024-01-01T{hour:02d}:00:00.000000Z"
        ev += _events(f"A{k:02d}", task, worker, status, when, sel)
        recs.append(
            AssignmentRecord(task, status, frozenset(sel), worker, when, f"A{k:02d}")
        )
    got = aggregate_item_events(ev)
    shuffled = ev[:]
    random.Random(seed).shuffle(shuffled)
    assert aggregate_item_events(shuffled) == got
    tasks = [TaskRecord(t, "0", ITEMS) for t in ("t1", "t2")]
    by_record = compute_selection_frequencies(tasks, recs)
    for (item, _), stat in by_record.items():
        expect = got.get((item, 0), FrequencyStat(0.0, 0))
        assert stat.n_assignments == expect.n_assignments
        assert abs(stat.frequency - expect.frequency) < 1e-12
    # at most one counted vote per (task, worker)
    counted_workers = {(t, w) for t, w, s, _, _ in asgs if w and s != "Rejected"}
    anon = sum(1 for _, w, s, _, _ in asgs if not w and s != "Rejected")
    n_a = got.get(("a", 0), FrequencyStat(0.0, 0)).n_assignments
    assert n_a == len(counted_workers) + anon
