"""Two files under one source name are never linked as pool duplicates.

Candidates with the same source name and reference are linked as one source
image. Array rows and folder paths name different images in different files, so
``retest source add arrays pool2.npz`` after ``pool.npz`` (both under the default
name ``arrays``) used to link row i of one to row i of the other: a user's valid
revision lost 55 of its 100 members and could not be exported. Through the real
CLI on real files and a real SQLite project.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from checkout_cli import retest_cli  # type: ignore[import-not-found]
from retest.datasets.tinyimages import write_tinyimages
from retest.store.sqlite import SQLiteStore

N = 100


def _cli(*args: str | Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return retest_cli(*args, ok=ok)


def _error_line(cp: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in cp.stderr.strip().splitlines() if "━" not in x]
    assert len(lines) == 1 and lines[0].startswith("error: "), cp.stderr
    return lines[0]


def _pool(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (N, 8, 8, 3), dtype=np.uint8)
    np.savez(path, images=imgs, labels=rng.integers(0, 3, N))
    return path


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    _cli("init", proj, "--classes", "x,y,z")
    return proj


def _state(proj: Path) -> tuple[int, list[list[str]], int]:
    """Candidates, groups linked by a shared source id, ingest jobs."""
    with SQLiteStore(proj / "retest.db") as s:
        n, groups = s.candidates.count(), s.candidates.source_groups()
    jobs = json.loads(_cli("source", "list", "--json", "-p", proj).stdout)
    return n, groups, len(jobs)


def _files(proj: Path) -> dict[str, bytes]:
    return {
        p.relative_to(proj).as_posix(): p.read_bytes()
        for d in ("arrays", "images", "reports")
        if (proj / d).is_dir()
        for p in sorted((proj / d).rglob("*"))
        if p.is_file()
    }


def test_a_second_file_under_the_default_name_is_refused(tmp_path: Path) -> None:
    """The user's reproduction: on the old code the second add succeeded and
    linked all 100 rows of the two files in pairs."""
    proj = _project(tmp_path)
    pool, pool2 = _pool(tmp_path / "pool.npz", 1), _pool(tmp_path / "pool2.npz", 2)
    _cli("source", "add", "arrays", pool, "-p", proj)
    before, files = _state(proj), _files(proj)
    assert before == (N, [], 1)

    refused = _cli("source", "add", "arrays", pool2, "-p", proj, ok=False)
    assert refused.returncode == 1, refused.stderr
    line = _error_line(refused)
    assert str(pool.resolve()) in line and str(pool2.resolve()) in line
    assert "'arrays'" in line and "--name pool2" in line
    assert "nothing was ingested" in line
    assert _state(proj) == before  # no row, no link, no job
    assert _files(proj) == files  # no pixel appended, no report written

    # the suggested name works, and the two files' rows stay apart
    rep = json.loads(
        _cli(
            "source", "add", "arrays", pool2, "--name", "pool2", "--json", "-p", proj
        ).stdout
    )
    assert (rep["name"], rep["new"], rep["duplicates"]) == ("pool2", N, 0)
    assert _state(proj) == (2 * N, [], 2)


def test_the_same_file_again_is_idempotent(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    pool = _pool(tmp_path / "pool.npz", 1)
    _cli("source", "add", "arrays", pool, "-p", proj)
    files = _files(proj)
    again = _cli("source", "add", "arrays", pool, "-p", proj)
    assert "already ingested" in again.stdout
    # the same file through another spelling of its path is the same file
    (tmp_path / "link").symlink_to(tmp_path)
    _cli("source", "add", "arrays", tmp_path / "link" / "pool.npz", "-p", proj)
    assert _state(proj) == (N, [], 1)
    assert _files(proj) == files


def test_a_moved_copy_is_accepted_and_adds_nothing(tmp_path: Path) -> None:
    """A renamed file whose every image the project holds links nothing: it is
    ingested under the old name, every item an exact duplicate."""
    proj = _project(tmp_path)
    pool = _pool(tmp_path / "pool.npz", 1)
    _cli("source", "add", "arrays", pool, "-p", proj)
    (tmp_path / "moved").mkdir()
    moved = tmp_path / "moved" / "renamed.npz"
    shutil.move(pool, moved)
    rep = json.loads(
        _cli("source", "add", "arrays", moved, "--json", "-p", proj).stdout
    )
    assert (rep["name"], rep["new"], rep["duplicates"]) == ("arrays", 0, N)
    assert _state(proj) == (N, [], 2)

    # the same file with one image changed is another file
    with np.load(moved) as z:
        imgs, labels = z["images"].copy(), z["labels"]
    imgs[N - 1] ^= 1
    np.savez(tmp_path / "edited.npz", images=imgs, labels=labels)
    refused = _cli("source", "add", "arrays", tmp_path / "edited.npz", "-p", proj,
                   ok=False)  # fmt: skip
    assert refused.returncode == 1 and "--name edited" in _error_line(refused)
    assert _state(proj) == (N, [], 2)


def _folder(root: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    for cls in ("x", "y"):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            px = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(px, "RGB").save(root / cls / f"{i}.png")
    return root


def test_a_second_folder_is_refused_too(tmp_path: Path) -> None:
    """Relative paths (x/0.png) collide across folders like row numbers."""
    proj = _project(tmp_path)
    a, b = _folder(tmp_path / "a", 1), _folder(tmp_path / "b", 2)
    _cli("source", "add", "folder", a, "-p", proj)
    refused = _cli("source", "add", "folder", b, "-p", proj, ok=False)
    assert refused.returncode == 1
    assert str(a.resolve()) in _error_line(refused)
    _cli("source", "add", "folder", b, "--name", "b", "-p", proj)
    assert _state(proj) == (12, [], 2)


@pytest.mark.parametrize("first", ["arrays", "tinyimages"])
def test_tinyimages_indexes_share_a_name_row_numbers_do_not(
    tmp_path: Path, first: str
) -> None:
    """Two TinyImages copies under one name: the same index is the same image,
    linked on purpose. A name that TinyImages and an array file would share is
    refused either way round."""
    rng = np.random.default_rng(4)
    kws = ["cat"] * 5 + ["dog"] * 5
    images = rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    write_tinyimages(tmp_path / "ti1", images, kws)
    images[7] ^= 1  # index 7 retouched in the second copy
    write_tinyimages(tmp_path / "ti2", images, kws)
    arr = tmp_path / "arr.npz"
    np.savez(arr, images=rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    proj = tmp_path / "p"
    _cli("init", proj, "--classes", "cat,dog")
    ti = ("source", "add", "tinyimages", "--class", "cat")
    if first == "arrays":
        _cli("source", "add", "arrays", arr, "--class", "cat", "--name", "ti", "-p",
             proj)  # fmt: skip
        refused = _cli(*ti, tmp_path / "ti1", "--keywords", "cat", "--name", "ti",
                       "-p", proj, ok=False)  # fmt: skip
        assert refused.returncode == 1 and str(arr.resolve()) in _error_line(refused)
        return
    _cli(*ti, tmp_path / "ti1", "--keywords", "cat,dog", "-p", proj)
    rep = json.loads(
        _cli(*ti, tmp_path / "ti2", "--keywords", "dog", "--json", "-p", proj).stdout
    )
    assert (rep["name"], rep["new"], rep["duplicates"]) == ("tinyimages", 1, 4)
    n, groups, jobs = _state(proj)
    assert (n, len(groups), jobs) == (11, 1, 2)  # index 7 of both copies, linked
    refused = _cli("source", "add", "arrays", arr, "--class", "cat", "--name",
                   "tinyimages", "-p", proj, ok=False)  # fmt: skip
    line = _error_line(refused)
    assert refused.returncode == 1 and str((tmp_path / "ti").resolve()) in line
