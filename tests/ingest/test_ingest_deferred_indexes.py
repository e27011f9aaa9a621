"""A bulk ingest builds the keyword index once at its end (``defer_indexes``):
queries are the same with and without it at every batch boundary, and a job
killed while it is missing resumes to the same rows with the index back."""

from __future__ import annotations

import hashlib
import signal
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

import retest.store._sqlite_candidates as sc
from ingest_kill import APPENDED, INSERTED, python  # type: ignore[import-not-found]
from retest.datasets.tinyimages import write_tinyimages
from retest.project import Project
from retest.sources.arrays import TinyImagesSource
from retest.stages.ingest import ingest_source
from retest.store import open_store
from retest.store.artifacts import PixelArray

KWS = ["ant"] * 70 + ["bee"] * 50 + ["cow"] * 80 + ["dog"] * 40
CLASSES = {"ant": "a", "cow": "c", "bee": "b", "dog": "a"}
_HELPER = """
import sys
from retest.project import Project
from retest.sources.arrays import TinyImagesSource
from retest.stages.ingest import ingest_source
from retest.store import open_store
proj, folder = sys.argv[1], sys.argv[2]
kw = {"ant": "a", "cow": "c", "bee": "b", "dog": "a"}
with open_store(proj + "/retest.db") as store:
    src = TinyImagesSource(folder, keywords=kw)
    ingest_source(Project.from_store(proj, store), src, batch_size=16)
"""


def _indexes(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
            "tbl_name = 'candidates' AND name NOT LIKE '%_old' AND name NOT LIKE "
            "'%_new'"
        ).fetchall()
    return dict(rows)


def _answers(cand, kws: list[str]) -> dict[str, object]:
    """Every keyword- and class-filtered query the store answers."""
    rows = list(cand.iter())
    return {
        "rows": [(r.id, r.source_ref, r.class_id, r.keyword) for r in rows],
        "by_keyword": cand.count_by_keyword(kws),
        "by_class": cand.count_by_class(),
        **{f"count {k}": cand.count(keyword=k) for k in kws},
        **{f"iter {k}": [r.id for r in cand.iter(keyword=k)] for k in kws},
        **{
            f"class {c} {k}": cand.count(class_id=c, keyword=k)
            for c in (0, 1, 2)
            for k in kws
        },
    }


def _brute(rows: list[tuple], kws: list[str]) -> dict[str, object]:
    """The same answers computed in Python from the rows in insertion order."""
    by_kw: dict[tuple[str, int | None], int] = {}
    by_class: dict[int | None, int] = {}
    for _, _, c, k in rows:
        if k in kws:
            by_kw[k, c] = by_kw.get((k, c), 0) + 1
        by_class[c] = by_class.get(c, 0) + 1
    return {
        "rows": rows,
        "by_keyword": by_kw,
        "by_class": by_class,
        **{f"count {k}": sum(r[3] == k for r in rows) for k in kws},
        **{f"iter {k}": [r[0] for r in rows if r[3] == k] for k in kws},
        **{
            f"class {c} {k}": sum(r[2] == c and r[3] == k for r in rows)
            for c in (0, 1, 2)
            for k in kws
        },
    }


def test_queries_agree_with_and_without_the_keyword_index_at_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sc, "TIER_MIN_ROWS", 40)  # tier rebuilds inside the job
    rng = np.random.default_rng(7)
    kws = [f"kw{i}" for i in range(9)]
    n, batch = 600, 50
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]
    classes = rng.integers(0, 3, n).tolist()
    words = [kws[i] for i in rng.integers(0, len(kws), n)]
    with open_store(tmp_path / "d.db") as lazy, open_store(tmp_path / "e.db") as eager:
        reader = open_store(tmp_path / "d.db")  # another connection, as the web's
        assert lazy.candidates.defer_indexes(n)
        assert "candidates_keyword" not in _indexes(tmp_path / "d.db")
        want: list[tuple] = []
        for s in range(0, n, batch):
            part = slice(s, s + batch)
            for store in (lazy, eager):
                store.candidates.add_columns(
                    ids[part], [str(i) for i in range(s, s + batch)],
                    classes[part], words[part], list(range(s, s + batch)),
                    source="t", width=8, height=8, array_name="a",
                )  # fmt: skip
            want += [
                (ids[i], str(i), classes[i], words[i]) for i in range(s, s + batch)
            ]
            expect = _brute(want, kws)
            assert _answers(eager.candidates, kws) == expect
            assert _answers(lazy.candidates, kws) == expect
            assert _answers(reader.candidates, kws) == expect
        lazy.candidates.restore_indexes()
        assert _indexes(tmp_path / "d.db") == _indexes(tmp_path / "e.db")
        assert _answers(reader.candidates, kws) == expect
        reader.close()
        with sqlite3.connect(tmp_path / "d.db") as con:
            plan = con.execute(
                "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM candidates WHERE keyword = 'x'"
            ).fetchall()
        assert "candidates_keyword" in str(plan)


def test_a_small_job_into_a_large_table_keeps_the_index(tmp_path: Path) -> None:
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(400)]
    with open_store(tmp_path / "d.db") as store:
        store.candidates.add_columns(
            ids, [str(i) for i in range(400)], [0] * 400, ["k"] * 400,
            list(range(400)), source="t", width=8, height=8, array_name="a",
        )  # fmt: skip
        # building the index again (every row) would cost more than 50 rows' upkeep
        assert not store.candidates.defer_indexes(50)
        assert "candidates_keyword" in _indexes(tmp_path / "d.db")
        assert store.candidates.defer_indexes(400)
        assert "candidates_keyword" not in _indexes(tmp_path / "d.db")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigkill_at_a_random_batch_resumes_to_the_same_rows_and_indexes(
    tmp_path: Path, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    imgs = np.random.default_rng(99).integers(
        0, 256, size=(len(KWS), 32, 32, 3), dtype=np.uint8
    )
    imgs[150] = imgs[10]  # a copy: one row fewer than images
    write_tinyimages(tmp_path / "ti", imgs, KWS)
    folder = tmp_path / "ti"
    moment = [APPENDED, INSERTED][int(rng.integers(2))]
    kill_at = int(rng.integers(1, 15))  # 15 batches of 16
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    for p in (whole, cut):
        p.mkdir()
    with open_store(whole / "retest.db") as store:
        src = TinyImagesSource(folder, keywords=CLASSES)
        ingest_source(Project.from_store(whole, store), src, batch_size=16)
        expect = _answers(store.candidates, sorted(CLASSES))
    proc = subprocess.run(
        [*python(moment, kill_at), "-c", _HELPER, str(cut), str(folder)], check=False
    )
    assert proc.returncode == -signal.SIGKILL, (moment, kill_at)
    assert "candidates_keyword" not in _indexes(cut / "retest.db")
    with open_store(cut / "retest.db") as store:
        # right without the index: what was stored so far, queried
        got = _answers(store.candidates, sorted(CLASSES))
        assert got == _brute(got["rows"], sorted(CLASSES))  # type: ignore[arg-type]
        assert got["rows"] == expect["rows"][: len(got["rows"])]  # type: ignore[index]
        src = TinyImagesSource(folder, keywords=CLASSES)
        rep = ingest_source(
            Project.from_store(cut, store), src, batch_size=16, add_classes=True
        )
        assert rep.complete and rep.new == len(KWS) - 1
        assert _answers(store.candidates, sorted(CLASSES)) == expect
        rows = list(store.candidates.iter())
    assert _indexes(cut / "retest.db") == _indexes(whole / "retest.db")
    assert "candidates_keyword" in _indexes(cut / "retest.db")
    with sqlite3.connect(cut / "retest.db") as con:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    px = PixelArray(cut / "arrays", rows[0].array_name)
    for r in rows:
        np.testing.assert_array_equal(
            px.read([r.array_row])[0], imgs[int(r.source_ref)]
        )
