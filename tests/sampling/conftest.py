"""Fixtures of the sampling tests: a project store with classes, originals,
candidates and crowd votes whose selection frequencies fall one per bin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retest.store.base import Store
from retest.store.rows import AnnotationEvent, CandidateRow, ClassRow, ReferenceRow

CLASSES = ["cat", "dog", "fox"]
# selected-out-of-10 counts giving one value per bin: 0.1, 0.3, 0.5, 0.7, 0.9
PER_BIN = [1, 3, 5, 7, 9]


def _votes(
    item: str, cid: int, k: int, n: int = 10, rejected: int = 2
) -> list[AnnotationEvent]:
    ev = [
        AnnotationEvent(
            "crowd",
            "task",
            cid,
            item,
            int(j < k),
            task_id=f"t-{cid}",
            assignment_id=f"{item}-{j}",
            assignment_status="Approved",
        )
        for j in range(n)
    ]
    # rejected assignments that selected everything must not count
    ev += [
        AnnotationEvent(
            "crowd",
            "task",
            cid,
            item,
            1,
            task_id=f"t-{cid}",
            assignment_id=f"{item}-r{j}",
            assignment_status="Rejected",
        )
        for j in range(rejected)
    ]
    return ev


def populate_store(store: Store) -> None:
    store.classes.put([ClassRow(i, n) for i, n in enumerate(CLASSES)])
    refs, cands, events = [], [], []
    for cid in range(len(CLASSES)):
        # 25 originals: bins (0,5,5,5,10) → target for 10 = (0,2,2,2,4)
        for j, b in enumerate([1] * 5 + [2] * 5 + [3] * 5 + [4] * 10):
            idx = cid * 100 + j
            refs.append(ReferenceRow("test", idx, cid, f"ref{idx}"))
            events += _votes(f"test:{idx}", cid, PER_BIN[b])
        for b in range(5):
            for j in range(5):
                cand = f"{CLASSES[cid]}-{b}-{j}"
                cands.append(CandidateRow(cand, "arrays", cand, class_id=cid))
                events += _votes(cand, cid, PER_BIN[b])
    store.references.add(refs)
    store.candidates.add(cands)
    store.annotations.add(events)


@pytest.fixture
def populate() -> Callable[[Store], None]:
    """Fill a store: 3 classes × (25 originals, 25 candidates = 5 per bin)."""
    return populate_store
