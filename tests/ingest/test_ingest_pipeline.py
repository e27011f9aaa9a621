"""Ingest stage: sources into a real SQLite project; dedup, resume, crash safety."""

from __future__ import annotations

import io
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ingest_kill import INSERTED, python  # type: ignore[import-not-found]
from retest.datasets.cifar10 import CIFAR10_CLASSES, write_cifar_batch, write_cifar_meta
from retest.datasets.tinyimages import write_tinyimages
from retest.project import Project
from retest.sources.base import make_source
from retest.stages.ingest import ingest_source, list_ingests
from retest.store import open_store
from retest.store.artifacts import PixelArray
from retest.store.base import Store
from retest.store.rows import content_id

HELPER = Path(__file__).with_name("ingest_crash_helper.py")


def _proj(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


def _cifar_dir(
    root: Path, images: np.ndarray, labels: np.ndarray, n_train: int
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_cifar_batch(root / "data_batch_1", images[:n_train], labels[:n_train])
    write_cifar_batch(root / "test_batch", images[n_train:], labels[n_train:])
    write_cifar_meta(root / "batches.meta")
    return root


def _pixels_of(store: Store, project: Path) -> dict[str, np.ndarray]:
    out = {}
    for row in store.candidates.iter():
        assert row.array_name is not None and row.array_row is not None
        px = PixelArray(project / "arrays", row.array_name).read([row.array_row])[0]
        out[row.id] = px
    return out


@pytest.fixture
def cifar_data(
    tmp_path: Path, rng: np.random.Generator
) -> tuple[Path, np.ndarray, np.ndarray]:
    images = rng.integers(0, 256, size=(500, 32, 32, 3), dtype=np.uint8)
    images[7] = images[3]  # an exact copy inside train
    images[450] = images[10]  # a test image equal to a train image
    labels = rng.integers(0, 10, size=500)
    return _cifar_dir(tmp_path / "cifar", images, labels, 400), images, labels


def test_cifar_ingest_dedups_and_keeps_provenance(tmp_path, cifar_data) -> None:
    src, images, labels = cifar_data
    project = _proj(tmp_path)
    with open_store(project / "retest.db") as store:
        rep = ingest_source(
            Project.from_store(project, store), make_source("cifar", src), batch_size=64
        )
        assert (rep.new, rep.duplicates, rep.processed, rep.total) == (498, 2, 500, 500)
        assert set(rep.duplicate_refs) == {"7", "450"}
        assert [c.name for c in store.classes.list()] == list(CIFAR10_CLASSES)
        row = store.candidates.get(content_id(images[420]))
        assert row.source == "cifar" and row.source_ref == "420"  # global index
        assert row.class_id == labels[420]
        assert row.extra["batch"] == "test_batch" and row.extra["row"] == 20
        pixels = _pixels_of(store, project)
        for i in (0, 3, 399, 400, 499):
            np.testing.assert_array_equal(pixels[content_id(images[i])], images[i])
        # idempotent: a second run stores nothing new
        again = ingest_source(
            Project.from_store(project, store), make_source("cifar", src), batch_size=64
        )
        assert again.new == 498 and store.candidates.count() == 498
        assert [
            r["name"] for r in list_ingests(Project.from_store(project, store))
        ] == ["cifar"]


def test_tinyimages_ingest_by_keyword(tmp_path: Path, rng) -> None:
    kws = ["Cat"] * 60 + ["dog"] * 100 + ["frog"] * 50 + ["horse"] * 90
    images = rng.integers(0, 256, size=(len(kws), 32, 32, 3), dtype=np.uint8)
    images[100] = images[20]  # a dog identical to a cat
    write_tinyimages(tmp_path / "ti", images, kws)
    project = _proj(tmp_path)
    with open_store(project / "retest.db") as store:
        from retest.stages.ingest import load_tinyimages_index

        index = load_tinyimages_index(
            Project.from_store(project, store), tmp_path / "ti" / "tiny_metadata.bin"
        )
        assert any(
            a.name.startswith("tinyimages-index:") for a in store.artifacts.list()
        )
        source = make_source(
            "tinyimages",
            tmp_path / "ti",
            keywords={"cat": "cat", "DOG": "dog", "yak": None},
            index=index,
        )
        assert source.missing == ["yak"]
        rep = ingest_source(Project.from_store(project, store), source, batch_size=32)
        assert rep.total == 160 and rep.new == 159 and rep.duplicate_refs == ("100",)
        refs = sorted(int(r.source_ref) for r in store.candidates.iter())
        assert refs == [i for i in range(160) if i != 100]
        pixels = _pixels_of(store, project)
        for row in store.candidates.iter():
            i = int(row.source_ref)
            np.testing.assert_array_equal(pixels[row.id], images[i])
            assert row.keyword == ("cat" if i < 60 else "dog")
            assert store.classes.get(row.class_id).name == row.keyword


def test_arrays_and_idx_sources(tmp_path: Path, rng) -> None:
    from retest.datasets.idx import write_idx

    x = rng.integers(0, 256, size=(40, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, size=40).astype(np.uint8)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", x)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", y)
    np.savez(
        tmp_path / "pool.npz",
        images=x[:10],
        labels=y[:10],
        keywords=np.array(["k"] * 10),
    )
    project = _proj(tmp_path)
    with open_store(project / "retest.db") as store:
        rep = ingest_source(
            Project.from_store(project, store),
            make_source("idx", tmp_path / "train-images-idx3-ubyte.gz"),
        )
        assert rep.new == len({content_id(a) for a in x})
        row = store.candidates.get(content_id(x[5]))
        assert row.class_id == y[5] and (row.width, row.height) == (28, 28)
        rep2 = ingest_source(
            Project.from_store(project, store),
            make_source("arrays", tmp_path / "pool.npz"),
            name="npz",
        )
        assert rep2.new == 0 and rep2.duplicates == 10  # same pixels as the IDX ones
        np.save(tmp_path / "bad.npy", np.zeros((3, 4, 4), np.float32))
        from retest.errors import InputValidationError

        with pytest.raises(
            InputValidationError, match=r"bad\.npy: images must be uint8"
        ):
            make_source("arrays", tmp_path / "bad.npy")


def _jpeg_with_orientation(arr: np.ndarray, orientation: int) -> bytes:
    img = Image.fromarray(arr)
    exif = Image.Exif()
    exif[274] = orientation
    buf = io.BytesIO()
    img.save(buf, format="PNG" if orientation == 1 else "JPEG", exif=exif, quality=100)
    return buf.getvalue()


def test_folder_source_exif_and_corrupt_file(tmp_path: Path, rng) -> None:
    root = tmp_path / "folder"
    (root / "cat" / "kitty").mkdir(parents=True)
    (root / "dog").mkdir(parents=True)
    # a tall 20x10 image stored with orientation 6 (rotate 90° CW to display)
    tall = np.zeros((20, 10, 3), np.uint8)
    tall[:5] = 255  # white top band
    (root / "cat" / "kitty" / "a.jpg").write_bytes(_jpeg_with_orientation(tall, 6))
    small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(small).save(root / "dog" / "b.png")
    gray = rng.integers(0, 256, (8, 8), dtype=np.uint8)
    Image.fromarray(gray, "L").save(root / "dog" / "c.png")
    (root / "dog" / "broken.jpg").write_bytes(b"\xff\xd8 this is not a jpeg")
    big = rng.integers(0, 256, (100, 70, 3), dtype=np.uint8)
    (root / "dog" / "d.png").write_bytes(_jpeg_with_orientation(big, 1))
    project = _proj(tmp_path)
    with open_store(project / "retest.db") as store:
        rep = ingest_source(
            Project.from_store(project, store), make_source("folder", root)
        )
        assert rep.new == 4 and [s["ref"] for s in rep.skipped] == ["dog/broken.jpg"]
        assert "not a decodable image" in rep.skipped[0]["reason"]
        rows = {r.source_ref: r for r in store.candidates.iter()}
        a = rows["cat/kitty/a.jpg"]
        assert (a.keyword, store.classes.get(a.class_id).name) == ("kitty", "cat")
        assert (a.width, a.height) == (20, 10)  # upright: rotated to landscape
        px = PixelArray(project / "arrays", a.array_name).read([a.array_row])[0]
        # orientation 6: the top band of the stored image ends up on the right
        assert px[:, -5:].mean() > 200 and px[:, :5].mean() < 60
        b = rows["dog/b.png"]
        np.testing.assert_array_equal(
            PixelArray(project / "arrays", b.array_name).read([b.array_row])[0], small
        )
        c = rows["dog/c.png"]
        c_px = PixelArray(project / "arrays", c.array_name).read([c.array_row])[0]
        np.testing.assert_array_equal(c_px, np.repeat(gray[:, :, None], 3, axis=2))
        d = rows["dog/d.png"]  # large: the file itself, content-addressed
        assert d.file_path == f"images/{d.id}" and (d.width, d.height) == (70, 100)
        assert (project / d.file_path).read_bytes() == (
            root / "dog" / "d.png"
        ).read_bytes()


def _run_helper(
    project: Path, kind: str, path: Path, batch: int, kill_after: int | None = None
):
    """The ingest in a child process; SIGKILLed after batch ``kill_after``'s insert."""
    exe = [sys.executable] if kill_after is None else python(INSERTED, kill_after)
    return subprocess.Popen(
        [*exe, str(HELPER), str(project), kind, str(path), str(batch)]
    )


def _check_complete(project: Path, images: np.ndarray, n_dups: int):
    with open_store(project / "retest.db") as store:
        rep = ingest_source(
            Project.from_store(project, store),
            make_source("cifar", project.parent / "cifar"),
            batch_size=37,
        )
        ids = [r.id for r in store.candidates.iter()]
        assert len(ids) == len(set(ids))  # no duplicates
        assert set(ids) == {content_id(a) for a in images}  # nothing lost
        pixels = _pixels_of(store, project)
        for a in images:
            np.testing.assert_array_equal(pixels[content_id(a)], a)
        assert rep.complete and rep.resumed_from > 0
        assert rep.new == len(set(ids)) and rep.duplicates == n_dups
        return rep


def test_sigkill_at_the_worst_moment_then_rerun(tmp_path, cifar_data) -> None:
    _, images, _ = cifar_data
    project = _proj(tmp_path)
    # killed right after the DB insert of batch 4, before its log line and checkpoint
    proc = _run_helper(project, "cifar", tmp_path / "cifar", 37, 4)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    with open_store(project / "retest.db") as store:
        assert 0 < store.candidates.count() < 498
    rep = _check_complete(project, images, n_dups=2)
    assert rep.resumed_from == 3 * 37
    assert set(rep.duplicate_refs) == {"7", "450"}


@pytest.mark.slow
def test_sigkill_sent_by_the_test_midway(tmp_path: Path, rng) -> None:
    images = rng.integers(0, 256, size=(1500, 32, 32, 3), dtype=np.uint8)
    _cifar_dir(tmp_path / "cifar", images, rng.integers(0, 10, 1500), 1200)
    project = _proj(tmp_path)
    proc = _run_helper(project, "cifar", tmp_path / "cifar", 5)
    log = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        logs = list((project / "reports" / "ingest").glob("*.log.jsonl"))
        if logs and len(logs[0].read_text().splitlines()) >= 20:
            log = logs[0]
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert log is not None, "the ingest finished before it could be killed"
    report = json.loads(
        log.with_name(log.name.replace(".log.jsonl", ".json")).read_text()
    )
    assert report["complete"] is False
    _check_complete(project, images, n_dups=0)


def test_crash_with_skipped_items_keeps_them_in_the_report(tmp_path: Path, rng) -> None:
    root = tmp_path / "folder" / "cls"
    root.mkdir(parents=True)
    arrays = rng.integers(0, 256, size=(30, 8, 8, 3), dtype=np.uint8)
    for i, a in enumerate(arrays):
        Image.fromarray(a).save(root / f"{i:03d}.png")
    for bad in ("005x.png", "021x.png"):
        (root / bad).write_bytes(b"garbage")
    project = _proj(tmp_path)
    proc = _run_helper(project, "folder", tmp_path / "folder", 4, 5)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    with open_store(project / "retest.db") as store:
        rep = ingest_source(
            Project.from_store(project, store),
            make_source("folder", tmp_path / "folder"),
            batch_size=4,
        )
        assert sorted(s["ref"] for s in rep.skipped) == ["cls/005x.png", "cls/021x.png"]
        assert rep.new == 30 == store.candidates.count() and rep.duplicates == 0
        assert {r.id for r in store.candidates.iter()} == {
            content_id(a) for a in arrays
        }


def test_resume_reads_its_state_from_the_store_not_the_reports(
    tmp_path: Path, rng
) -> None:
    """reports/ingest/ is output only: with it deleted after a crash, the resumed
    job still counts every batch once, keeps the skipped items, is listed as
    interrupted with its command, and is listed complete afterwards."""
    from retest.stages.ingest import interrupted_ingests

    root = tmp_path / "folder" / "cls"
    root.mkdir(parents=True)
    arrays = rng.integers(0, 256, size=(30, 8, 8, 3), dtype=np.uint8)
    arrays[17] = arrays[2]  # one exact copy, in a batch before the crash
    for i, a in enumerate(arrays):
        Image.fromarray(a).save(root / f"{i:03d}.png")
    (root / "005x.png").write_bytes(b"garbage")
    project = _proj(tmp_path)
    proc = _run_helper(project, "folder", tmp_path / "folder", 4, 6)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    shutil.rmtree(project / "reports")
    with open_store(project / "retest.db") as store:
        p = Project.from_store(project, store)
        (cmd,) = interrupted_ingests(p)
        assert cmd.startswith("retest source add folder ") and "--project" in cmd
        (row,) = list_ingests(p)
        assert row["complete"] is False and 0 < row["processed"] < 31
        rep = ingest_source(p, make_source("folder", tmp_path / "folder"), batch_size=4)
        assert rep.complete and rep.resumed_from == row["processed"]
        assert [s["ref"] for s in rep.skipped] == ["cls/005x.png"]
        assert (rep.new, rep.duplicates) == (29, 1) and store.candidates.count() == 29
        assert interrupted_ingests(p) == []
        (row,) = list_ingests(p)
        assert row["complete"] is True and (row["new"], row["duplicates"]) == (29, 1)
