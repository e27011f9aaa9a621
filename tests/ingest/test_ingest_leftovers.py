"""What failed, killed and concurrent ingests leave behind, and how it is reclaimed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from checkout_cli import RETEST  # type: ignore[import-not-found]
from ingest_kill import APPENDED, INSERTED, python  # type: ignore[import-not-found]
from retest.datasets.download import HashCache
from retest.errors import StageError
from retest.project import Project
from retest.project._ingest_runs import interrupted_ingests
from retest.sources.base import make_source
from retest.stages.ingest import BatchWriter, add_source
from retest.store.artifacts import PixelArray

ARRAY = "candidates_8x8x3"


def _npz(path: Path, images: np.ndarray) -> Path:
    np.savez(path, images=images, labels=np.zeros(len(images), np.int64))
    return path


def _images(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)


def _rows(proj: Path) -> int:
    return len(PixelArray(proj / "arrays", ARRAY))


def _add_in_subprocess(
    proj: Path, src: Path, batch: int, kill: tuple[str, int] | None, *extra: str
) -> subprocess.Popen[str]:
    """``retest source add`` in a child process, SIGKILLed at ``kill`` (moment,
    batch) when given."""
    exe = RETEST if kill is None else (*python(*kill), "-m", "retest")
    return subprocess.Popen(
        [*exe, "source", "add", "arrays", str(src),
         "--batch-size", str(batch), "--project", str(proj), "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_failed_validation_writes_no_pixels_and_leaves_no_job(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    folder = tmp_path / "folder" / "zebra"  # not a class of the project
    folder.mkdir(parents=True)
    for i in range(20):
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
            folder / f"{i}.png"
        )
    with Project.init(tmp_path / "p", classes=["cat", "dog"]) as p:
        add_source(p, "arrays", _npz(tmp_path / "a.npz", _images(1, 30)))
        with pytest.raises(StageError, match="zebra"):
            add_source(p, "folder", tmp_path / "folder")
        assert _rows(p.root) == 30 == p.store.candidates.count()
        assert interrupted_ingests(p) == []
        assert not list((p.root / "images").iterdir())


def test_killed_ingest_is_listed_then_resume_reclaims_its_orphans(
    tmp_path: Path,
) -> None:
    with Project.init(tmp_path / "p", classes=["cat", "dog"]):
        pass
    proj = tmp_path / "p"
    src = _npz(tmp_path / "a.npz", _images(2, 300))
    proc = _add_in_subprocess(proj, src, 100, (APPENDED, 2))
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert _rows(proj) >= 200  # batch 2's pixels are there, its rows are not
    with Project.open(proj) as p:
        assert p.store.candidates.count() == 100
        (cmd,) = interrupted_ingests(p)
    assert cmd.startswith("retest source add arrays ")
    assert f"--project {proj}" in cmd and "--batch-size 100" in cmd
    # the listed command resumes the job
    args = cmd.split()[1:]
    r = subprocess.run([*RETEST, *args, "--json"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (rep["new"], rep["duplicates"], rep["complete"]) == (300, 0, True)
    assert _rows(proj) == 300  # the killed run's rows were given back and reused
    with Project.open(proj) as p:
        assert p.store.candidates.count() == 300
        assert interrupted_ingests(p) == []


def test_redone_batch_does_not_append_its_pixels_twice(tmp_path: Path) -> None:
    with Project.init(tmp_path / "p", classes=["cat", "dog"]):
        pass
    proj = tmp_path / "p"
    src = _npz(tmp_path / "a.npz", _images(3, 250))
    # killed after batch 2's rows were inserted, before its checkpoint
    proc = _add_in_subprocess(proj, src, 100, (INSERTED, 2))
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    with Project.open(proj) as p:
        rep = add_source(p, "arrays", src, batch_size=100)
        assert (rep.new, rep.duplicates) == (250, 0)
        assert p.store.candidates.count() == 250
    assert _rows(proj) == 250


def test_rows_another_process_stored_first_count_as_duplicates(
    tmp_path: Path,
) -> None:
    """Two ingests of the same images race: the loser's insert adds nothing."""
    imgs = _images(4, 50)
    a = _npz(tmp_path / "a.npz", imgs)
    b = _npz(tmp_path / "b.npz", imgs[::-1].copy())
    with Project.init(tmp_path / "p", classes=["cat", "dog"]) as p:
        writer = BatchWriter(p, "late", add_classes=False)
        batch = next(make_source("arrays", b).iter_batches(batch_size=50))
        prep = writer.prepare(batch)  # nothing stored yet: all 50 kept
        assert prep.kept == 50
        first = add_source(p, "arrays", a, name="first")
        assert first.new == 50
        rows = prep.append()
        assert prep.insert(rows) == 0  # the other ingest stored them meanwhile
        assert sorted(prep.unreferenced(p.store, rows)) == list(rows)


def test_concurrent_overlapping_ingests_count_each_image_once(tmp_path: Path) -> None:
    imgs = _images(5, 2000)
    a = _npz(tmp_path / "a.npz", imgs)
    b = _npz(tmp_path / "b.npz", imgs[::-1].copy())  # same images, other order
    with Project.init(tmp_path / "p", classes=["cat", "dog"]):
        pass
    proj = tmp_path / "p"
    procs = [
        _add_in_subprocess(proj, a, 100, None, "--name", "one"),
        _add_in_subprocess(proj, b, 100, None, "--name", "two"),
    ]
    reps = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reps.append(json.loads(out))
    assert sum(r["new"] for r in reps) == 2000
    assert all(r["new"] + r["duplicates"] == 2000 for r in reps)
    with Project.open(proj) as p:
        assert p.store.candidates.count() == 2000
    px = PixelArray(proj / "arrays", ARRAY)
    free = sum(b - a for a, b in px.free_ranges())
    assert len(px) - free == 2000  # pixels of lost races were given back


def test_verified_hashes_are_cached_under_retest_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "x.gz").write_bytes(b"abc")
    os.chmod(data, 0o555)  # like a package's /usr/share/datasets folder
    cache = tmp_path / "cache"
    monkeypatch.setenv("RETEST_CACHE_DIR", str(cache))
    try:
        hc = HashCache(data)
        digest = hc.sha256(data / "x.gz")
        hc.save()
        assert sorted(p.name for p in data.iterdir()) == ["x.gz"]
        (saved,) = (cache / "sha256").iterdir()
        assert json.loads(saved.read_text())["x.gz"][2] == digest
        assert HashCache(data).sha256(data / "x.gz") == digest
    finally:
        os.chmod(data, 0o755)


def test_resume_command_of_a_configured_source_is_its_name(tmp_path: Path) -> None:
    with Project.init(tmp_path / "p", classes=["cat", "dog"]):
        pass
    proj = tmp_path / "p"
    _npz(proj / "a.npz", _images(6, 200))
    with open(proj / "retest.toml", "a") as fh:
        fh.write('\n[sources.mine]\nkind = "arrays"\npath = "a.npz"\n')
    r = subprocess.run(
        [*python(INSERTED, 1), "-m", "retest", "source", "add", "mine",
         "--batch-size", "100", "--project", str(proj)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0
    with Project.open(proj) as p:
        assert interrupted_ingests(p) == [f"retest source add mine --project {proj}"]


# ------------------------------------------------- through the CLI, as a user meets it
# These run `retest source add` in a child process and inspect only the files and
# the stored rows, so they hold for any version of the ingest code.


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *map(str, args)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _files(proj: Path) -> dict[str, bytes]:
    """retest.db and every file under arrays/ and images/ (lock files aside)."""
    out = {"retest.db": (proj / "retest.db").read_bytes()}
    for sub in ("arrays", "images"):
        for f in sorted((proj / sub).rglob("*")):
            if f.is_file() and not f.name.endswith(".lock"):
                out[f.relative_to(proj).as_posix()] = f.read_bytes()
    return out


def _cli_project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert _cli("init", proj, "--classes", "cat,dog").returncode == 0
    r = _cli("source", "add", "arrays", _npz(tmp_path / "a.npz", _images(1, 30)),
             "--project", proj)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return proj


def test_bad_class_folder_after_good_ones_stores_nothing(tmp_path: Path) -> None:
    """A folder source whose last class folder is not a project class: refused
    before the good folders' images are written (not after 300 of them, with the
    ingest left half done and a resume command that fails again)."""
    proj = _cli_project(tmp_path)
    rng = np.random.default_rng(1)
    src = tmp_path / "photos"
    for cls, n in (("cat", 150), ("dog", 150), ("zebra", 1)):
        (src / cls).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
                src / cls / f"{i:03d}.png"
            )
    before = _files(proj)
    r = _cli("source", "add", "folder", src, "--batch-size", "100", "--project", proj)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "zebra" in errors[0], r.stderr
    assert _files(proj) == before
    with Project.open(proj) as p:
        assert p.store.candidates.count() == 30


def test_label_out_of_range_in_a_late_batch_stores_nothing(tmp_path: Path) -> None:
    """One bad label in the last batch: no batch before it is written."""
    proj = _cli_project(tmp_path)
    labels = np.zeros(600, np.int64)
    labels[550] = 5
    src = tmp_path / "late.npz"
    np.savez(src, images=_images(7, 600), labels=labels)
    before = _files(proj)
    r = _cli("source", "add", "arrays", src, "--batch-size", "200", "--project", proj)
    assert r.returncode == 1, r.stdout + r.stderr
    assert _files(proj) == before
    assert "late.npz" in r.stderr and "5" in r.stderr


_KILL_AFTER_APPEND = """
import os, signal, sys
from retest.store.artifacts import PixelArray
original, calls = PixelArray.append, []
def append(self, *args, **kwargs):
    rows = original(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == 2:  # batch 2's pixels are durable, its rows are not stored
        os.kill(os.getpid(), signal.SIGKILL)
    return rows
PixelArray.append = append
from retest.cli.main import main
sys.argv[0] = "retest"
main()
"""


def test_sigkill_after_a_pixel_append_then_rerun_keeps_one_row_per_image(
    tmp_path: Path,
) -> None:
    """kill -9 between a batch's pixel append and its rows, then the same command
    again: the array ends with one row per stored image (the killed batch's rows
    were given back and reused, not left as orphans with a second copy after)."""
    proj = tmp_path / "p"
    assert _cli("init", proj, "--classes", "cat,dog").returncode == 0
    src = _npz(tmp_path / "a.npz", _images(2, 300))
    args = ["source", "add", "arrays", str(src), "--batch-size", "100",
            "--project", str(proj)]  # fmt: skip
    killed = subprocess.run([sys.executable, "-c", _KILL_AFTER_APPEND, *args],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert _rows(proj) == 200  # batch 2's pixels without rows
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    with Project.open(proj) as p:
        assert p.store.candidates.count() == 300
    assert _rows(proj) == 300


_WAIT_BEFORE_APPEND = """
import os, sys, time
from pathlib import Path
from retest.store.artifacts import PixelArray
original, flags = PixelArray.append, Path(sys.argv.pop(1))
def append(self, *args, **kwargs):
    (flags / "ready").touch()  # looked up: every image is new so far
    deadline = time.monotonic() + 120
    while not (flags / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return original(self, *args, **kwargs)
PixelArray.append = append
from retest.cli.main import main
sys.argv[0] = "retest"
main()
"""


def test_an_ingest_that_loses_the_race_counts_its_images_as_duplicates(
    tmp_path: Path,
) -> None:
    """Two `source add` of the same images: the first looks them up (all new),
    the second stores them all before the first writes. Each image is counted
    new once in all and stored once."""
    proj = tmp_path / "p"
    assert _cli("init", proj, "--classes", "cat,dog").returncode == 0
    imgs = _images(4, 50)
    a = _npz(tmp_path / "a.npz", imgs)
    b = _npz(tmp_path / "b.npz", imgs[::-1].copy())
    flags = tmp_path / "flags"
    flags.mkdir()
    first = subprocess.Popen(
        [sys.executable, "-c", _WAIT_BEFORE_APPEND, str(flags), "source", "add",
         "arrays", str(a), "--name", "first", "--project", str(proj), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (flags / "ready").exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        second = _cli("source", "add", "arrays", b, "--name", "second",
                      "--project", proj, "--json")  # fmt: skip
        assert second.returncode == 0, second.stderr
    finally:
        (flags / "go").touch()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    reps = [json.loads(out), json.loads(second.stdout)]
    assert reps[1]["new"] == 50
    assert reps[0]["new"] + reps[1]["new"] == 50
    with Project.open(proj) as p:
        assert p.store.candidates.count() == 50
