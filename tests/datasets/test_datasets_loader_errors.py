"""Loader inputs that used to truncate silently or end in a traceback, through the CLI.

Each bad input must give one ``error: …`` line naming the culprit and exit 1 (2 for
a bad option value), never a traceback; float labels are refused, never rounded;
a folder source skips a file whose name is not UTF-8 and ingests the rest.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from retest.cli.main import app
from retest.datasets.cifar10 import write_cifar_batch, write_cifar_meta
from retest.datasets.idx import write_idx
from retest.errors import InputValidationError
from retest.project import Project
from retest.sources.arrays import ArraySource, CifarSource, IdxSource

runner = CliRunner()
CLASSES = "a,b,c"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    Project.init(root, classes=("a", "b", "c")).close()
    return root


def _images(n: int = 12, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8)


def _one_line_error(res, code: int, *needles: str) -> str:  # type: ignore[no-untyped-def]
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, res.stderr
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


# ------------------------------------------------------------------ float / 1-based labels


@pytest.mark.parametrize("command", ["source", "reference"])
def test_float_labels_are_refused_not_truncated(
    project: Path, tmp_path: Path, command: str
) -> None:
    npz = tmp_path / "float_labels.npz"
    labels = np.array([0, 1, 2, 9.5 / 5, 0, 1, 2, 0, 1, 2, 0, 1])  # 1.9 -> class 1?
    np.savez(npz, images=_images(), labels=labels)
    args = [command, "add", "arrays", str(npz), "-p", str(project)]
    if command == "reference":
        args += ["--split", "test"]
    res = runner.invoke(app, args)
    _one_line_error(res, 1, str(npz), "integer class ids", "1.9")
    with Project.open(project) as p:  # nothing was stored
        assert p.store.references.count() == 0
        assert p.store.candidates.count() == 0


def test_whole_float_labels_are_accepted(project: Path, tmp_path: Path) -> None:
    npz = tmp_path / "whole.npz"
    labels = np.array([0.0, 1.0, 2.0] * 4)
    np.savez(npz, images=_images(), labels=labels)
    res = runner.invoke(
        app,
        ["reference", "add", "arrays", str(npz), "--split", "test", "-p", str(project)],
    )
    assert res.exit_code == 0, res.output
    with Project.open(project) as p:
        assert [p.store.references.get(f"test:{i}").class_id for i in range(3)] == [
            0,
            1,
            2,
        ]


def test_one_based_labels_with_class_names_are_refused(tmp_path: Path) -> None:
    npz = tmp_path / "one_based.npz"
    np.savez(
        npz,
        images=_images(),
        labels=np.array([1, 2, 3] * 4),
        class_names=np.array(["a", "b", "c"]),
    )
    with pytest.raises(InputValidationError, match=r"look 1-based .*subtract 1") as err:
        ArraySource(npz)
    assert "\n" not in str(err.value)


def test_idx_and_cifar_labels_go_through_the_same_check(tmp_path: Path) -> None:
    imgs = tmp_path / "x-images-idx3-ubyte"
    write_idx(imgs, _images()[..., 0])
    lab = tmp_path / "x-labels-idx1-ubyte"
    write_idx(lab, np.array([0, 1, 2.5] * 4, dtype=np.float32))
    with pytest.raises(ValueError, match=r"non-integer values such as \[2\.5"):
        IdxSource(imgs, labels_path=lab)
    # CIFAR: a pickled float label is refused, not cast to int
    batch = tmp_path / "test_batch"
    x = np.random.default_rng(1).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    write_cifar_batch(batch, x, [0, 1, 2])
    d = pickle.loads(batch.read_bytes())
    d[b"labels"] = [0, 1.5, 2]
    batch.write_bytes(pickle.dumps(d, protocol=4))
    with pytest.raises(ValueError, match="integer class ids"):
        CifarSource(batch)
    # with batches.meta the class count is known: 1-based labels get the diagnosis
    write_cifar_batch(batch, x, [1, 2, 3])
    write_cifar_meta(tmp_path / "batches.meta", ["a", "b", "c"])
    with pytest.raises(ValueError, match="look 1-based"):
        CifarSource(batch)


# ------------------------------------------------------------------ unreadable files


@pytest.mark.parametrize("command", ["source", "reference"])
@pytest.mark.parametrize("kind", ["arrays", "idx", "cifar"])
def test_directory_instead_of_file(
    project: Path, tmp_path: Path, command: str, kind: str
) -> None:
    d = tmp_path / "a_folder"
    d.mkdir()
    if (
        kind == "cifar"
    ):  # a folder IS accepted for cifar; a batch that is a folder is not
        (d / "test_batch").mkdir()
    args = [command, "add", kind, str(d), "-p", str(project)]
    if command == "reference":
        args += ["--split", "test"]
    res = runner.invoke(app, args)
    _one_line_error(res, 1, "a_folder", "directory")


@pytest.mark.parametrize("command", ["source", "reference"])
@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_truncated_array_file(
    project: Path, tmp_path: Path, command: str, suffix: str
) -> None:
    good = tmp_path / f"good{suffix}"
    if suffix == ".npy":
        np.save(good, _images())
    else:
        np.savez_compressed(good, images=_images(), labels=np.arange(12) % 3)
    data = good.read_bytes()
    bad = tmp_path / f"truncated{suffix}"
    bad.write_bytes(data[: len(data) * 2 // 3])
    args = [command, "add", "arrays", str(bad), "-p", str(project)]
    if command == "reference":
        args += ["--split", "test"]
    res = runner.invoke(app, args)
    _one_line_error(res, 1, str(bad), "truncated or corrupt")


def test_truncated_cifar_batch(project: Path, tmp_path: Path) -> None:
    batch = tmp_path / "test_batch"
    x = np.random.default_rng(1).integers(0, 256, (20, 32, 32, 3), dtype=np.uint8)
    write_cifar_batch(batch, x, np.arange(20) % 3)
    batch.write_bytes(batch.read_bytes()[:-500])
    res = runner.invoke(
        app,
        [
            "reference",
            "add",
            "cifar",
            str(batch),
            "--split",
            "test",
            "-p",
            str(project),
        ],
    )
    _one_line_error(res, 1, str(batch), "not a readable CIFAR pickle")


# ------------------------------------------------------------------ non-UTF-8 names


@pytest.mark.skipif(
    sys.platform == "darwin", reason="macOS file systems refuse non-UTF-8 names"
)
def test_folder_source_skips_a_non_utf8_file_name(
    project: Path, tmp_path: Path
) -> None:
    root = tmp_path / "folder"
    (root / "a").mkdir(parents=True)
    imgs = _images(3)
    Image.fromarray(imgs[0]).save(root / "a" / "ok0.png")
    Image.fromarray(imgs[1]).save(root / "a" / "ok1.png")
    bad = os.fsencode(root / "a") + b"/caf\xe9.png"  # latin-1 e-acute
    Image.fromarray(imgs[2]).save(bad, format="PNG")
    res = runner.invoke(
        app, ["source", "add", "folder", str(root), "--json", "-p", str(project)]
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["new"] == 2 and rep["total"] == 3
    assert len(rep["skipped"]) == 1
    skipped = rep["skipped"][0]
    assert skipped["ref"] == "a/caf\\xe9.png"
    assert "not valid UTF-8" in skipped["reason"]
    with Project.open(project) as p:
        assert p.store.candidates.count() == 2


# ------------------------------------------------------------------ datasets options


def test_fetch_with_a_mirror_that_is_not_a_url(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "datasets",
            "fetch",
            "cifar10_1",
            "--mirror",
            "notaurl",
            "--root",
            str(tmp_path),
        ],
    )
    _one_line_error(res, 2, "mirror 'notaurl' is not a URL")
    assert not any(tmp_path.iterdir())  # nothing attempted


@pytest.mark.parametrize("command", ["fetch", "info"])
@pytest.mark.parametrize("below", [False, True])
def test_root_pointing_at_a_file(tmp_path: Path, command: str, below: bool) -> None:
    f = tmp_path / "a_file"
    f.write_text("x")
    root = f / "sub" if below else f
    res = runner.invoke(app, ["datasets", command, "cifar10", "--root", str(root)])
    _one_line_error(res, 2, "a_file", "is a file")
    assert f.read_text() == "x"
