"""``prepare_columns`` (rows encoded before the insert) stores what ``add`` does."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from retest.store import open_store
from retest.store.rows import CandidateRow


def _batch(rng: np.random.Generator, start: int, n: int, text_ids: bool):
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(start, start + n)]
    if text_ids:
        ids[1] = f"odd{start}"  # a non-content id sends the batch the general way
    refs = [f"r{i}" for i in range(start, start + n)]
    classes = [None if x == 3 else int(x) for x in rng.integers(0, 4, n)]
    kws = [None if x == 0 else f"k\u00e9\"{x}'" for x in rng.integers(0, 5, n)]
    return ids, refs, classes, kws


@pytest.mark.parametrize("text_ids", [False, True])
def test_prepared_columns_store_what_add_stores(tmp_path: Path, text_ids: bool) -> None:
    rng = np.random.default_rng(3)
    where = {"source": "ti", "width": 8, "height": 8, "array_name": "a"}
    layouts = [range(10, 60), range(200, 250), list(range(400, 500, 2)), range(0, 100, 2)]
    with open_store(tmp_path / "p.db") as got, open_store(tmp_path / "w.db") as want:
        for j, rows in enumerate(layouts):
            ids, refs, classes, kws = _batch(rng, 30 * j, 50, text_ids)  # overlaps
            insert = got.candidates.prepare_columns(ids, refs, classes, kws, **where)
            _, mark = got.candidates.existing_mark(ids)
            added = insert(rows, mark)
            expect = want.candidates.add(
                CandidateRow(i, "ti", r, c, k, width=8, height=8, array_name="a",
                             array_row=a)
                for i, r, c, k, a in zip(ids, refs, classes, kws, rows, strict=True)
            )  # fmt: skip
            assert added == expect and (j == 0 or added < 50)
        assert list(got.candidates.iter()) == list(want.candidates.iter())
        # 20 of each later 50 known (an odd id is one of them: new)
        assert got.candidates.count() == 140 + (3 if text_ids else 0)


def test_prepared_columns_check_the_row_count(tmp_path: Path) -> None:
    ids, refs, classes, kws = _batch(np.random.default_rng(0), 0, 5, False)
    with open_store(tmp_path / "p.db") as store:
        insert = store.candidates.prepare_columns(
            ids, refs, classes, kws, source="s", width=1, height=1, array_name="a"
        )
        with pytest.raises(ValueError):
            insert(range(4), None)
        with pytest.raises(ValueError):
            store.candidates.prepare_columns(
                ids, refs[:4], classes, kws, source="s", width=1, height=1,
                array_name="a",
            )  # fmt: skip
        assert store.candidates.count() == 0
