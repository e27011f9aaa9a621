"""``count_by_keyword`` reads classes from the id-order cache when it matches.

The web's keyword progress counts candidates per (keyword, class). Grouping by
class in SQL looks every keyword row up in the table (the keyword index does
not hold the class); with a current id-order cache the classes come from the
cache and SQL reads only the keyword index. Both must give the same counts, the
cache's only when it describes the table as it is.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from retest.project import Project
from retest.store._sqlite_columns import cached_keyword_class_counts
from retest.store.rows import CandidateRow


def _cid(i: int) -> str:
    return f"{i:064x}"


def _sql_counts(db: Path, keywords: list[str]) -> dict[tuple[str, int | None], int]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT keyword, class_id, COUNT(*) FROM candidates WHERE keyword IN "
            "(SELECT value FROM json_each(?)) GROUP BY keyword, class_id",
            (json.dumps(keywords),),
        ).fetchall()
    finally:
        con.close()
    return {(k, c): n for k, c, n in rows}


def _add(p: Project, lo: int, hi: int, rng: np.random.Generator) -> None:
    cls = rng.integers(-1, 4, hi - lo)  # -1: classless
    kws = rng.integers(0, 7, hi - lo)
    p.store.candidates.add(
        CandidateRow(
            _cid(i),
            "s",
            str(i),
            class_id=None if c < 0 else int(c),
            keyword=None if k == 6 else f"kw{k}",
        )
        for i, c, k in zip(range(lo, hi), cls.tolist(), kws.tolist(), strict=True)
    )


def test_cache_counts_equal_sql_and_go_stale_with_the_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    keywords = [f"kw{k}" for k in range(6)] + ["absent"]
    with Project.init(tmp_path / "p", name="p", classes=list("abcd")) as p:
        _add(p, 0, 3000, rng)
        store = p.store.candidates
        cache = store._order_cache()  # type: ignore[attr-defined]
        read = p.store._db.read  # type: ignore[attr-defined]
        store.update_id_orders()
        expected = _sql_counts(p.db_path, keywords)
        assert len({c for _, c in expected}) == 5  # four classes and classless
        got = cached_keyword_class_counts(read, cache, keywords)
        assert got == expected
        assert store.count_by_keyword(keywords) == expected
        _add(p, 3000, 3500, rng)  # the cache no longer matches: not used
        assert cached_keyword_class_counts(read, cache, keywords) is None
        assert store.count_by_keyword(keywords) == _sql_counts(p.db_path, keywords)
        store.update_id_orders()
        got = cached_keyword_class_counts(read, cache, keywords)
        assert got == _sql_counts(p.db_path, keywords)
