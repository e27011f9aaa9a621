"""A class's id order (what ``class-balanced`` draws positions from) is read from
the two ``kp`` tier indexes: it must be the id strings' order whichever tier holds
a row, with equal prefixes inside and across tiers, and with text ids mixed in."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

import retest.store._sqlite_candidates as sc
from retest.store.rows import CandidateRow, ClassRow
from retest.store.sqlite import SQLiteStore


def _boundary(path: Path) -> int:
    with sqlite3.connect(path) as c:
        b = c.execute("SELECT boundary FROM candidate_tiers").fetchone()[0]
    c.close()
    return int(b)


@pytest.mark.parametrize("mixed", [False, True], ids=["content-ids", "mixed-ids"])
def test_id_order_across_tiers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mixed: bool
) -> None:
    monkeypatch.setattr(sc, "TIER_MIN_ROWS", 50)
    rng = np.random.default_rng(11)
    raw = rng.integers(0, 256, size=(900, 32), dtype=np.uint8)
    raw[1::15, :8] = raw[0:-1:15, :8]  # equal kp, different keys
    raw[700::40, :8] = raw[5:205:40, :8][: len(raw[700::40])]  # kp of older rows
    raw[::7, 0] |= 0x80  # top bit set: sorts after the others as unsigned
    ids = [bytes(r).hex() for r in raw]
    classes = rng.integers(0, 3, size=len(ids)).tolist()
    if mixed:
        ids[600] = "text-id"
    path = tmp_path / "retest.db"
    with SQLiteStore(path) as s:
        s.classes.put([ClassRow(0, "a"), ClassRow(1, "b"), ClassRow(2, "c")])
        for k in range(0, len(ids), 100):  # several tier rebuilds
            s.candidates.add(
                [
                    CandidateRow(i, "s", str(n), classes[n])
                    for n, i in enumerate(ids[k : k + 100], start=k)
                ]
            )
        s.candidates.add([CandidateRow("classless", "s", "x")])
        b = _boundary(path)
        assert 0 < b < len(ids)  # rows in both tiers
        orders = s.candidates.id_orders()
        assert sorted(orders) == [0, 1, 2]
        for k in range(3):
            want = sorted(i for i, c in zip(ids, classes, strict=True) if c == k)
            assert s.candidates.ids_at(orders[k]) == want
