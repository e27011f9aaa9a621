"""Column reads of the candidates (what eligibility and the samplers use at ten
million candidates): the same values as the row objects, without them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retest.store.base import CandidateRepo
from retest.store.rows import CandidateRow, content_id
from retest.store.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "retest.db")
    yield s
    s.close()


def _cand(i: int, **kw: object) -> CandidateRow:
    px = np.full((2, 2, 3), i % 256, np.uint8)
    px[0, 0, 0] = i // 256
    base: dict[str, object] = {
        "id": content_id(px),
        "source": "arrays",
        "source_ref": str(i),
        "class_id": None if i % 5 == 0 else i % 3,
        "keyword": f"kw{i % 4}",
        "array_name": "pool",
        "array_row": i,
    }
    base.update(kw)
    return CandidateRow(**base)  # type: ignore[arg-type]


def test_columns_match_the_rows_in_insertion_order(store: SQLiteStore) -> None:
    rows = [_cand(i) for i in range(40)]
    # a file-backed candidate and one whose id is not a content hash
    rows += [_cand(40, array_name=None, array_row=None, file_path="images/x")]
    rows += [_cand(41, id="not-a-hash", class_id=2)]
    store.candidates.add(rows)
    names = ("id", "class_id", "keyword", "array_row", "file_path", "source_ref")
    every = store.candidates.columns(names)
    want = [tuple(getattr(r, n) for n in names) for r in store.candidates.iter()]
    assert list(zip(*every.values(), strict=True)) == want
    with_class = store.candidates.columns(("id",), has_class=True)["id"]
    assert with_class == [r.id for r in rows if r.class_id is not None]
    # the default implementation (rows) agrees with SQLite's
    assert CandidateRepo.columns(store.candidates, names) == every


def test_columns_of_given_ids_keep_their_order_and_drop_the_unknown(
    store: SQLiteStore,
) -> None:
    rows = [_cand(i) for i in range(12)]
    store.candidates.add(rows)
    ask = [rows[7].id, "f" * 64, rows[2].id, rows[7].id, rows[5].id, "nope"]
    got = store.candidates.columns(("id", "class_id"), ids=ask)
    assert got == {
        "id": [rows[7].id, rows[2].id, rows[5].id],
        "class_id": [rows[7].class_id, rows[2].class_id, rows[5].class_id],
    }
    assert rows[5].class_id is None  # i % 5 == 0
    kept = store.candidates.columns(("id",), ids=ask, has_class=True)["id"]
    assert kept == [rows[7].id, rows[2].id]
    assert CandidateRepo.columns(store.candidates, ("id", "class_id"), ids=ask) == got


def test_columns_refuse_an_unknown_name(store: SQLiteStore) -> None:
    with pytest.raises(ValueError, match="extra"):
        store.candidates.columns(("id", "extra"))
    with pytest.raises(ValueError, match="candidate columns"):
        store.candidates.columns(())


def test_source_groups_link_candidates_sharing_a_source_id(
    store: SQLiteStore,
) -> None:
    rows = [_cand(i) for i in range(10)]
    rows += [_cand(10, source_ref="3"), _cand(11, source_ref="3")]  # photo 3, 3 times
    rows += [_cand(12, source="other", source_ref="3")]  # another source
    # "a:b" + "c" and "a" + "b:c" are one source id, "a:b:c", as the rule reads it
    rows += [_cand(13, source="a:b", source_ref="c"), _cand(14, source="a", source_ref="b:c")]  # fmt: skip
    store.candidates.add(rows)
    groups = store.candidates.source_groups()
    assert groups == sorted(
        [sorted([rows[3].id, rows[10].id, rows[11].id]), sorted([rows[13].id, rows[14].id])]
    )  # fmt: skip
    assert CandidateRepo.source_groups(store.candidates) == groups
