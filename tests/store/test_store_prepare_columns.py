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


def _layout(j: int, n: int) -> range | list[int]:
    """Array rows: ranges (the ingest's), a list, a range with gaps."""
    return [range(10, 10 + n), range(200, 200 + n), list(range(400, 400 + 2 * n, 2)),
            range(0, 2 * n, 2)][j % 4]  # fmt: skip


@pytest.mark.parametrize("text_ids", [False, True])
def test_prepared_columns_store_what_add_stores(tmp_path: Path, text_ids: bool) -> None:
    rng = np.random.default_rng(3)
    where = {"source": "ti", "width": 8, "height": 8, "array_name": "a"}
    with open_store(tmp_path / "p.db") as got, open_store(tmp_path / "w.db") as want:
        for j in range(8):
            ids, refs, classes, kws = _batch(rng, 30 * j, 50, text_ids)  # overlaps
            # stored ones: ignored without a check; checked ones: left out first
            found, mark = got.candidates.existing_mark(ids)
            keep = [i for i, x in enumerate(ids) if x not in found or j % 2]
            ids, refs, classes, kws = ([a[i] for i in keep]
                                       for a in (ids, refs, classes, kws))  # fmt: skip
            rows = _layout(j, len(ids))
            insert = got.candidates.prepare_columns(ids, refs, classes, kws, **where)
            added = insert(rows, None if j % 2 else mark)
            expect = want.candidates.add(
                CandidateRow(i, "ti", r, c, k, width=8, height=8, array_name="a",
                             array_row=a)
                for i, r, c, k, a in zip(ids, refs, classes, kws, rows, strict=True)
            )  # fmt: skip
            assert added == expect and (j == 0 or added < 50)
        assert list(got.candidates.iter()) == list(want.candidates.iter())
        # 20 of each later 50 known (an odd id is one of them: new)
        assert got.candidates.count() == 260 + (7 if text_ids else 0)


def test_rows_stored_after_the_check_are_still_refused(tmp_path: Path) -> None:
    """Another writer stores some of the ids between the check and the insert:
    the insert reads the rows stored since its mark and skips those ids."""
    ids, refs, classes, kws = _batch(np.random.default_rng(1), 0, 40, False)
    where = {"source": "s", "width": 1, "height": 1, "array_name": "a"}
    with open_store(tmp_path / "p.db") as a, open_store(tmp_path / "p.db") as b:
        a.candidates.add_columns(ids[30:], refs[30:], classes[30:], kws[30:],
                                 range(30, 40), **where)  # fmt: skip
        found, mark = a.candidates.existing_mark(ids[:30])
        assert not found
        b.candidates.add_columns(ids[5:12], refs[5:12], classes[5:12], kws[5:12],
                                 range(100, 107), **where)  # fmt: skip
        insert = a.candidates.prepare_columns(
            ids[:30], refs[:30], classes[:30], kws[:30], **where
        )
        assert insert(range(0, 30), mark) == 23
        assert a.candidates.count() == 40
        assert [r.array_row for r in a.candidates.iter()][-23:] == [
            *range(0, 5), *range(12, 30)]  # fmt: skip


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
