"""The bulk TinyImages ingest path: column batches, pipelined commits, dedup, crash."""

from __future__ import annotations

import hashlib
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ingest_kill import INSERTED, python  # type: ignore[import-not-found]
from retest.datasets.tinyimages import write_tinyimages
from retest.project import Project
from retest.sources.arrays import TinyImagesSource
from retest.sources.base import ColumnItems, SourceItem
from retest.stages.ingest import ingest_source
from retest.store import open_store
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow

KWS = ["ant"] * 70 + ["bee"] * 50 + ["cow"] * 80


def _sha(img: np.ndarray) -> str:
    """Independent content id: sha256 of the header and the HWC bytes."""
    return hashlib.sha256(b"uint8:32,32,3:" + img.tobytes()).hexdigest()


@pytest.fixture
def ti(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, np.ndarray]:
    imgs = rng.integers(0, 256, size=(len(KWS), 32, 32, 3), dtype=np.uint8)
    imgs[60] = imgs[3]  # copy inside one batch
    imgs[150] = imgs[10]  # copy in a later batch (the first is still in flight)
    imgs[199] = imgs[150]
    write_tinyimages(tmp_path / "ti", imgs, KWS)
    return tmp_path / "ti", imgs


def _source(folder: Path) -> TinyImagesSource:
    return TinyImagesSource(folder, keywords={"ant": "a", "cow": "c", "bee": "b"})


def test_column_items_behave_like_the_list_of_items() -> None:
    items = ColumnItems(["5", "6", "7"], ["a", "a", None], ["k", "k", "j"], 32, 32)
    expect = [
        SourceItem(r, class_name=c, keyword=k, width=32, height=32)
        for r, c, k in zip(
            ["5", "6", "7"], ["a", "a", None], ["k", "k", "j"], strict=True
        )
    ]
    assert len(items) == 3 and list(items) == expect and items == expect
    assert items[-1] == expect[-1] and items[1:] == expect[1:]
    with pytest.raises(IndexError):
        items[3]


@pytest.mark.parametrize("batch", [16, 32, 64, 1000])
def test_bulk_ingest_stores_each_content_once_in_source_order(
    tmp_path: Path, ti, batch: int
) -> None:
    folder, imgs = ti
    proj = tmp_path / "p"
    proj.mkdir()
    with open_store(proj / "retest.db") as store:
        rep = ingest_source(
            Project.from_store(proj, store), _source(folder), batch_size=batch
        )
        rows = list(store.candidates.iter())
    # positions: ant 0..69, cow 120..199, bee 70..119 (keyword order of the source)
    order = [*range(70), *range(120, 200), *range(70, 120)]
    dup_refs = {60, 150, 199}
    want = [i for i in order if i not in dup_refs]
    assert rep.new == len(want) == len(rows) and rep.duplicates == 3
    assert sorted(rep.duplicate_refs) == ["150", "199", "60"]
    assert [r.source_ref for r in rows] == [str(i) for i in want]
    px = PixelArray(proj / "arrays", rows[0].array_name)
    for r in rows:
        i = int(r.source_ref)
        assert r.id == _sha(imgs[i]) and r.keyword == KWS[i]
        np.testing.assert_array_equal(px.read([r.array_row])[0], imgs[i])
    with open_store(proj / "retest.db") as store:
        names = {c.id: c.name for c in store.classes.list()}
        assert {names[r.class_id] for r in rows if r.keyword == "cow"} == {"c"}
        again = ingest_source(
            Project.from_store(proj, store), _source(folder), batch_size=batch
        )
        assert store.candidates.count() == len(want) and again.new == rep.new


def test_existing_and_add_tuples_over_many_ids(tmp_path: Path) -> None:
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2500)]
    rows = [(c, "s", str(i), None, None, None, None, None, None, 1, 1, "a", i,
             None, {"k": i} if i % 2 else None) for i, c in enumerate(ids)]  # fmt: skip
    with open_store(tmp_path / "x.db") as store:
        assert store.candidates.add_tuples(rows[::2]) == 1250
        probe = [*ids, "nope", ids[0]]
        assert store.candidates.existing(probe) == set(ids[::2])
        assert store.candidates.existing([]) == set()
        assert store.candidates.add_tuples(rows) == 1250
        assert store.candidates.get(ids[3]) == CandidateRow(*rows[3])
        assert store.candidates.get(ids[4]).extra == {}


def test_add_columns_equals_add(tmp_path: Path) -> None:
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3000)]
    refs = [str(i) for i in range(3000)]
    classes = [None if i % 7 == 0 else i % 3 for i in range(3000)]
    kws = [None if i % 5 == 0 else f"kw\u00e9{i % 11}\"'" for i in range(3000)]
    rows = list(range(100, 3100))
    want = [
        CandidateRow(c, "ti", r, k, w, width=32, height=32, array_name="a",
                     array_row=n)
        for c, r, k, w, n in zip(ids, refs, classes, kws, rows, strict=True)
    ]  # fmt: skip
    with open_store(tmp_path / "x.db") as store:
        cand = store.candidates
        half = slice(0, 3000, 2)
        n = cand.add_columns(ids[half], refs[half], classes[half], kws[half],
                             rows[half], source="ti", width=32, height=32,
                             array_name="a")  # fmt: skip
        assert n == 1500
        # already stored ids are ignored; new ones keep column order
        n = cand.add_columns(ids[::-1], refs[::-1], classes[::-1], kws[::-1],
                             rows[::-1], source="ti", width=32, height=32,
                             array_name="a")  # fmt: skip
        assert n == 1500 and cand.add_columns([], [], [], [], [], source="ti",
            width=32, height=32, array_name="a") == 0  # fmt: skip
        got = list(cand.iter())
        assert got == want[half] + want[1::2][::-1]
        assert cand.get(ids[5]) == want[5] and cand.get(ids[0]).class_id is None


def test_recycled_batches_equal_fresh_ones_when_consumed_promptly(ti) -> None:
    folder, _ = ti
    src = _source(folder)
    for start, bs in [(0, 16), (5, 64), (190, 7)]:
        fresh = [(b.start, b.stop, list(b.items), b.pixels.copy())
                 for b in src.iter_batches(start=start, batch_size=bs)]  # fmt: skip
        recycled = src.iter_batches_recycled(start=start, batch_size=bs, depth=2)
        bufs = set()
        for (a, z, items, px), b in zip(fresh, recycled, strict=True):
            assert (b.start, b.stop, list(b.items)) == (a, z, items)
            np.testing.assert_array_equal(b.pixels, px)
            bufs.add(b.pixels.__array_interface__["data"][0])
        assert len(bufs) <= 2  # decoded into two arrays, alternately


_HELPER = """
import sys
from retest.stages.ingest import ingest_source
from retest.project._project import Project
from retest.stages.ingest._ingest import ingest_source
from retest.project import Project
from retest.sources.arrays import TinyImagesSource
from retest.store import open_store
proj, folder = sys.argv[1], sys.argv[2]
with open_store(proj + "/retest.db") as store:
    src = TinyImagesSource(folder, keywords={"ant": "a", "cow": "c", "bee": "b"})
    ingest_source(Project.from_store(proj, store), src, batch_size=16)
"""


def test_sigkill_mid_ingest_then_resume_stores_everything_once(
    tmp_path: Path, ti
) -> None:
    folder, imgs = ti
    proj = tmp_path / "p"
    proj.mkdir()
    proc = subprocess.run(
        [*python(INSERTED, 6), "-c", _HELPER, str(proj), str(folder)], check=False
    )
    assert proc.returncode == -signal.SIGKILL
    with open_store(proj / "retest.db") as store:
        assert 0 < store.candidates.count() < 197
        rep = ingest_source(
            Project.from_store(proj, store),
            _source(folder),
            batch_size=16,
            add_classes=True,
        )
        rows = list(store.candidates.iter())
    assert rep.complete and rep.new == 197 and rep.duplicates == 3
    assert len({r.id for r in rows}) == len(rows) == 197
    px = PixelArray(proj / "arrays", rows[0].array_name)
    for r in rows:
        np.testing.assert_array_equal(
            px.read([r.array_row])[0], imgs[int(r.source_ref)]
        )


def test_copies_in_batches_still_in_flight_are_duplicates(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    imgs = rng.integers(0, 256, size=(80, 32, 32, 3), dtype=np.uint8)
    # batch_size 8: copies 1, 2 and 3 batches later (the first still in flight)
    imgs[12], imgs[21], imgs[30], imgs[79] = imgs[3], imgs[4], imgs[5], imgs[3]
    write_tinyimages(tmp_path / "ti", imgs, ["ant"] * 80)
    proj = tmp_path / "p"
    proj.mkdir()
    with open_store(proj / "retest.db") as store:
        src = TinyImagesSource(tmp_path / "ti", keywords={"ant": "a"})
        rep = ingest_source(Project.from_store(proj, store), src, batch_size=8)
        rows = list(store.candidates.iter())
    assert sorted(rep.duplicate_refs) == ["12", "21", "30", "79"]
    assert [r.source_ref for r in rows] == [
        str(i) for i in range(80) if i not in (12, 21, 30, 79)
    ]
    assert len({r.id for r in rows}) == len(rows) == 76
