"""The columnar pool decides like the record rules, and the store's bulk id
order is the order of the id strings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.errors import InputValidationError
from retest.sampling.columnar import ColumnarPool, draw_positions, eligible_by_class
from retest.sampling.eligibility import CandidateInfo, EligibilityRules, split_eligible
from retest.store import open_store
from retest.store.rows import CandidateRow, ClassRow


def _random_pool(rng: np.random.Generator, n: int) -> list[CandidateInfo]:
    out = []
    for i in range(n):
        out.append(
            CandidateInfo(
                f"c{int(rng.integers(0, 10**6)):06d}-{i}",
                str(rng.choice(["a", "b", "c"])),
                float(rng.choice([0.0, 0.2, 0.5, 0.7, 0.8, 1.0, rng.random()])),
                int(rng.integers(0, 13)),
                bool(rng.random() < 0.1),
                bool(rng.random() < 0.1),
                bool(rng.random() < 0.8),
                None,
                None if rng.random() < 0.5 else float(rng.uniform(500, 1500)),
            )
        )
    return out


@pytest.mark.parametrize("seed", range(30))
def test_eligible_by_class_equals_split_eligible(seed: int) -> None:
    """Random pools and rules: the same eligible ids per class, in id order,
    and the same exclusion report, as the record-by-record rules."""
    rng = np.random.default_rng(seed)
    pool = _random_pool(rng, int(rng.integers(0, 300)))
    rules = EligibilityRules(
        int(rng.integers(0, 12)),
        None if rng.random() < 0.4 else float(rng.choice([0.0, 0.5, 0.7])),
        {"b": 0.9} if rng.random() < 0.5 else {},
        bool(rng.random() < 0.5),
        None if rng.random() < 0.5 else 1000.0,
    )
    bins = (0.2, 0.4, 0.6, 0.8) if seed % 2 else (0.5, 0.75)
    want, want_report = split_eligible(pool, rules, bins=bins)
    prev = {c.id for c in pool[::3]}
    got, report = eligible_by_class(
        ColumnarPool.from_records(pool), rules, bins=bins, previous=prev
    )
    assert report == want_report
    assert {k: v.ids(range(len(v))) for k, v in got.items()} == {
        k: [c.id for c in v] for k, v in want.items()
    }
    for k, v in got.items():
        cands = want[k]
        assert v.frequency.tolist() == [c.frequency for c in cands]
        assert v.in_previous.tolist() == [c.id in prev for c in cands]


def test_repeated_id_is_refused() -> None:
    with pytest.raises(InputValidationError, match="'x' appears twice"):
        ColumnarPool.from_records([CandidateInfo("x", "a"), CandidateInfo("x", "b")])


def test_draw_positions_draws_as_draw() -> None:
    from retest.sampling.base import draw

    for n, k in [(0, 3), (5, 0), (5, 5), (5, 9), (1000, 17), (10, 9)]:
        a = np.random.default_rng(3)
        b = np.random.default_rng(3)
        items = [f"i{j:04d}" for j in range(n)]
        assert [items[p] for p in draw_positions(a, n, k)] == draw(b, items, k)
        assert a.random() == b.random()  # the same random numbers were used


@pytest.mark.parametrize("mixed", [False, True], ids=["content-ids", "mixed-ids"])
def test_store_id_order_is_the_id_strings_order(tmp_path: Path, mixed: bool) -> None:
    """Content ids (some sharing their 64-bit prefix ``kp``, half with its top
    bit set, which sorts after the others) in two classes: each class's handles
    come back in id order; the same with plain-text ids mixed into one class
    (which makes every class sort by id strings)."""
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, size=(600, 32), dtype=np.uint8)
    raw[1::20, :8] = raw[0:-1:20, :8]  # equal kp, different keys
    ids = [bytes(r).hex() for r in raw]
    by_class = {0: ids[:400], 1: ids[400:]}
    if mixed:
        by_class[1] += [f"img{i}" for i in range(30)]
    rows = [CandidateRow(i, "s", i, k) for k, v in by_class.items() for i in v]
    rows += [CandidateRow("no-class", "s", "n")]
    with open_store(tmp_path / "retest.db") as st:
        st.classes.put([ClassRow(0, "a"), ClassRow(1, "b")])
        st.candidates.add(rows)
        orders = st.candidates.id_orders()
        assert sorted(orders) == [0, 1]
        for k, v in by_class.items():
            assert st.candidates.ids_at(orders[k]) == sorted(v)
        last = by_class[1][-1]
        found = st.candidates.locate([ids[3], last, "no-class", "absent"])
        assert set(found) == {ids[3], last, "no-class"}
        assert found["no-class"][1] is None and found[last][1] == 1
        assert st.candidates.ids_at([found[ids[3]][0]]) == [ids[3]]
