"""Bad inputs to the commands that read images into a project.

``retest source add`` and ``retest reference add`` (array, IDX, CIFAR, folder and
TinyImages readers) and ``retest reference keywords|show``: every file they read
comes missing, empty, truncated, of the wrong dtype, with out-of-range or
misaligned labels, as a directory, with a non-UTF-8 name or content; every
option with a value outside its range. Each must be one ``error:`` line with the
right exit code, and leave the project's database and pixels byte-identical.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from bad_input_helpers import (
    SHAPE,
    build_project,
    invoke,
    non_utf8_name,
    refused,
    snapshot,
    write_arrays,
)

from retest.datasets.cifar10 import write_cifar_batch
from retest.datasets.idx import write_idx
from retest.datasets.tinyimages import write_tinyimages

#: Owners of bugs this suite found in files its author could not change.
INGEST = "ingest (stages/ingest/)"


def _bad_files(d: Path) -> None:
    """Every damaged input of this module, written once per session."""
    rng = np.random.default_rng(5)
    imgs = rng.integers(0, 256, (10, *SHAPE), dtype=np.uint8)
    labels = np.arange(10) % 3
    (d / "empty.npz").write_bytes(b"")
    (d / "empty.npy").write_bytes(b"")
    np.savez(d / "good.npz", images=imgs, labels=labels)
    good = (d / "good.npz").read_bytes()
    (d / "trunc.npz").write_bytes(good[: len(good) // 2])
    np.save(d / "good.npy", imgs)
    raw = (d / "good.npy").read_bytes()
    (d / "trunc.npy").write_bytes(raw[: len(raw) - 17])
    np.savez(d / "float_images.npz", images=imgs.astype(np.float32), labels=labels)
    np.save(d / "float_images.npy", imgs.astype(np.float64))
    np.savez(d / "float_labels.npz", images=imgs, labels=labels + 0.5)
    np.savez(d / "str_labels.npz", images=imgs, labels=np.array(["a"] * 10))
    np.savez(d / "oor_labels.npz", images=imgs, labels=np.full(10, 7))
    np.savez(d / "neg_labels.npz", images=imgs, labels=-labels - 1)
    np.savez(d / "one_based.npz", images=imgs, labels=labels + 1)
    np.savez(d / "short_labels.npz", images=imgs, labels=labels[:9])
    np.savez(d / "no_pixels.npz", images=np.zeros((10, 0, 8, 3), np.uint8))
    np.savez(d / "flat.npz", images=imgs.reshape(10, -1), labels=labels)
    np.savez(d / "other_keys.npz", pictures=imgs)
    (d / "dir.npz").mkdir()
    (d / "dir.npz" / "images.npy").write_bytes(raw)
    (d / "latin1.npz").write_bytes(b"PK\x03\x04caf\xe9 not a zip")
    # IDX: images with labels out of range / misaligned / truncated
    write_idx(d / "img-idx3-ubyte", imgs[..., 0])
    write_idx(d / "lab-idx1-ubyte", labels.astype(np.uint8))
    write_idx(d / "lab9-idx1-ubyte", labels[:9].astype(np.uint8))
    write_idx(d / "lab-oor-idx1-ubyte", np.full(10, 200, np.uint8))
    idx = (d / "img-idx3-ubyte").read_bytes()
    (d / "trunc-idx3-ubyte").write_bytes(idx[:-10])
    (d / "empty-idx3-ubyte").write_bytes(b"")
    # CIFAR batch pickles
    big = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    write_cifar_batch(d / "data_batch_1", big, labels[:4])
    cif = (d / "data_batch_1").read_bytes()
    (d / "trunc_batch").write_bytes(cif[: len(cif) // 2])
    (d / "not_pickle").write_bytes(b"\x80\x04not really a pickle \xff\xfe")
    (d / "no_batches").mkdir()
    # folder sources
    (d / "folder-empty").mkdir()
    # a TinyImages folder with two keywords, and text inputs naming keywords
    ti = d / "ti"
    ti.mkdir()
    tiny = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    write_tinyimages(ti, tiny, ["bird", "bird", "cat", "cat"])
    (d / "kw-latin1.txt").write_bytes(b"caf\xe9\nbird\n")
    (d / "kw-empty.txt").write_bytes(b"")
    (d / "kw-trunc.json").write_text('{"a": ["x", "y"')
    (d / "kw-wrong.json").write_text('{"a": 5}')


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bad-input-ingest")
    root = build_project(base / "proj", base / "inputs")
    bad = base / "bad"
    bad.mkdir()
    _bad_files(bad)
    return root, bad


@pytest.fixture
def proj(env: tuple[Path, Path], tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(env[0], root)
    return root


# (id, argv with {bad} for the bad-files folder, exit code, words the line names)
SOURCE_CASES = [
    ("missing", "source add arrays {bad}/nope.npz", 1, ["nope.npz"]),
    ("missing-npy", "source add arrays {bad}/nope.npy", 1, ["nope.npy"]),
    ("empty-npz", "source add arrays {bad}/empty.npz", 1, ["empty.npz"]),
    ("empty-npy", "source add arrays {bad}/empty.npy", 1, ["empty.npy"]),
    ("truncated-npz", "source add arrays {bad}/trunc.npz", 1, ["trunc.npz"]),
    ("truncated-npy", "source add arrays {bad}/trunc.npy", 1, ["trunc.npy"]),
    (
        "float-images",
        "source add arrays {bad}/float_images.npz",
        1,
        ["float_images.npz", "uint8"],
    ),
    (
        "float-images-npy",
        "source add arrays {bad}/float_images.npy",
        1,
        ["float_images.npy", "uint8"],
    ),
    (
        "float-labels",
        "source add arrays {bad}/float_labels.npz",
        1,
        ["float_labels.npz", "labels"],
    ),
    (
        "string-labels",
        "source add arrays {bad}/str_labels.npz",
        1,
        ["str_labels.npz", "labels"],
    ),
    (
        "labels-out-of-range",
        "source add arrays {bad}/oor_labels.npz",
        1,
        ["oor_labels.npz", "7"],
    ),
    (
        "labels-one-based",
        "source add arrays {bad}/one_based.npz",
        1,
        ["one_based.npz", "look 1-based", "subtract 1"],
    ),
    (
        "labels-negative",
        "source add arrays {bad}/neg_labels.npz",
        1,
        ["neg_labels.npz", "labels"],
    ),
    (
        "labels-misaligned",
        "source add arrays {bad}/short_labels.npz",
        1,
        ["short_labels.npz", "9"],
    ),
    ("no-pixels", "source add arrays {bad}/no_pixels.npz", 1, ["no_pixels.npz"]),
    ("flat-images", "source add arrays {bad}/flat.npz", 1, ["flat.npz"]),
    (
        "no-images-key",
        "source add arrays {bad}/other_keys.npz",
        1,
        ["other_keys.npz", "images"],
    ),
    ("directory", "source add arrays {bad}/dir.npz", 1, ["dir.npz", "directory"]),
    ("not-a-zip", "source add arrays {bad}/latin1.npz", 1, ["latin1.npz"]),
    (
        "idx-missing-labels",
        "source add idx {bad}/img-idx3-ubyte --labels {bad}/nope-idx1",
        1,
        ["nope-idx1"],
    ),
    (
        "idx-labels-misaligned",
        "source add idx {bad}/img-idx3-ubyte --labels {bad}/lab9-idx1-ubyte",
        1,
        ["9"],
    ),
    (
        "idx-labels-out-of-range",
        "source add idx {bad}/img-idx3-ubyte --labels {bad}/lab-oor-idx1-ubyte",
        1,
        ["lab-oor-idx1-ubyte", "200"],
    ),
    ("idx-truncated", "source add idx {bad}/trunc-idx3-ubyte", 1, ["trunc-idx3"]),
    ("idx-empty", "source add idx {bad}/empty-idx3-ubyte", 1, ["empty-idx3"]),
    (
        "idx-labels-directory",
        "source add idx {bad}/img-idx3-ubyte --labels {bad}",
        1,
        ["directory"],
    ),
    ("cifar-truncated", "source add cifar {bad}/trunc_batch", 1, ["trunc_batch"]),
    ("cifar-not-pickle", "source add cifar {bad}/not_pickle", 1, ["not_pickle"]),
    ("cifar-no-batches", "source add cifar {bad}/no_batches", 1, ["no_batches"]),
    ("folder-missing", "source add folder {bad}/nope-folder", 1, ["nope-folder"]),
    (
        "folder-is-file",
        "source add folder {bad}/good.npz",
        1,
        ["good.npz"],
    ),
    (
        "tinyimages-missing",
        "source add tinyimages {bad}/nope-ti --keywords a",
        1,
        ["nope-ti"],
    ),
    (
        "tinyimages-keywords-file-missing",
        "source add tinyimages {bad}/ti --keywords-file {bad}/nope.txt",
        1,
        ["nope.txt"],
    ),
    (
        "tinyimages-keywords-file-dir",
        "source add tinyimages {bad}/ti --keywords-file {bad}/no_batches",
        1,
        ["no_batches"],
    ),
    (
        "tinyimages-keywords-non-utf8",
        "source add tinyimages {bad}/ti --keywords-file {bad}/kw-latin1.txt",
        1,
        ["kw-latin1.txt"],
    ),
    (
        "tinyimages-keywords-empty",
        "source add tinyimages {bad}/ti --keywords-file {bad}/kw-empty.txt",
        2,
        ["kw-empty.txt"],
    ),
    (
        "tinyimages-keywords-truncated",
        "source add tinyimages {bad}/ti --keywords-file {bad}/kw-trunc.json",
        1,
        ["kw-trunc.json"],
    ),
    (
        "tinyimages-keywords-wrong-type",
        "source add tinyimages {bad}/ti --keywords-file {bad}/kw-wrong.json",
        1,
        ["kw-wrong.json"],
    ),
    # option values: exit 2
    ("unknown-kind", "source add arrayz {bad}/good.npz", 2, ["arrayz", "arrays"]),
    (
        "batch-size-0",
        "source add arrays {bad}/good.npz --batch-size 0",
        2,
        ["--batch-size"],
    ),
    (
        "batch-size-text",
        "source add arrays {bad}/good.npz --batch-size many",
        2,
        ["--batch-size"],
    ),
    ("unknown-class", "source add arrays {bad}/good.npz --class zebra", 2, ["zebra"]),
    ("bad-name", "source add arrays {bad}/good.npz --name ../x", 2, ["../x"]),
    (
        "option-of-other-kind",
        "source add arrays {bad}/good.npz --labels {bad}/x",
        2,
        ["--labels"],
    ),
    ("no-path-unknown-name", "source add nosuchsource", 2, ["nosuchsource"]),
    ("empty-keywords", "source add tinyimages {bad} --keywords ,", 2, ["--keywords"]),
]

REFERENCE_CASES = [
    ("missing", "reference add arrays {bad}/nope.npz --split test", 1, ["nope.npz"]),
    ("empty", "reference add arrays {bad}/empty.npz --split test", 1, ["empty.npz"]),
    ("truncated", "reference add arrays {bad}/trunc.npz --split test", 1,
     ["trunc.npz"]),
    ("float-images", "reference add arrays {bad}/float_images.npz --split test", 1,
     ["float_images.npz"]),
    ("float-labels", "reference add arrays {bad}/float_labels.npz --split test", 1,
     ["float_labels.npz"]),
    ("labels-out-of-range", "reference add arrays {bad}/oor_labels.npz --split test",
     1, ["oor_labels.npz"]),
    ("labels-one-based", "reference add arrays {bad}/one_based.npz --split test",
     1, ["one_based.npz", "look 1-based", "subtract 1"]),
    ("labels-misaligned", "reference add arrays {bad}/short_labels.npz --split test",
     1, ["short_labels.npz"]),
    ("no-labels", "reference add arrays {bad}/good.npy --split test", 2,
     ["good.npy", "labels"]),
    ("directory", "reference add arrays {bad}/dir.npz --split test", 1,
     ["dir.npz"]),
    ("idx-truncated", "reference add idx {bad}/trunc-idx3-ubyte --split test "
     "--labels {bad}/lab-idx1-ubyte", 1, ["trunc-idx3"]),
    ("idx-labels-misaligned", "reference add idx {bad}/img-idx3-ubyte --split test "
     "--labels {bad}/lab9-idx1-ubyte", 1, ["9"]),
    ("cifar-truncated", "reference add cifar {bad}/trunc_batch --split test", 1,
     ["trunc_batch"]),
    ("unknown-split", "reference add arrays {bad}/good.npz --split validation", 2,
     ["--split", "validation"]),
    ("unknown-kind", "reference add arays {bad}/good.npz --split test", 2,
     ["arays"]),
    ("labels-for-arrays", "reference add arrays {bad}/good.npz --split test "
     "--labels {bad}/lab-idx1-ubyte", 2, ["--labels"]),
    ("keywords-missing-folder", "reference keywords {bad}/nope-ti", 1, ["nope-ti"]),
    ("keywords-file-not-folder", "reference keywords {bad}/good.npz", 1,
     ["good.npz"]),
    ("keywords-empty-only", "reference keywords {bad} --only ,", 2, ["--only"]),
    ("show-top-0", "reference show --top 0", 2, ["--top"]),
]  # fmt: skip


def _param(
    group: str,
    id_: str,
    template: str,
    code: int,
    culprits: list[str],
    xfail: str | None = None,
) -> object:
    """A case; ``xfail`` names the owner and the bug when it is a known one."""
    marks = [] if xfail is None else [pytest.mark.xfail(strict=True, reason=xfail)]
    return pytest.param(template, code, culprits, id=f"{group}-{id_}", marks=marks)


def _args(template: str, bad: Path) -> list[str]:
    return template.replace("{bad}", str(bad)).split()


@pytest.mark.parametrize(
    ("template", "code", "culprits"),
    [_param("source", *case) for case in SOURCE_CASES]
    + [_param("reference", *case) for case in REFERENCE_CASES],
)
def test_refused(
    template: str,
    code: int,
    culprits: list[str],
    env: tuple[Path, Path],
    proj: Path,
) -> None:
    refused(proj, _args(template, env[1]), code, *culprits)


def test_reference_mismatched_image_shape(env: tuple[Path, Path], proj: Path) -> None:
    """Originals of another size than the registered ones: refused, nothing written."""
    big = env[1] / "big.npz"
    if not big.exists():
        rng = np.random.default_rng(1)
        np.savez(big, images=rng.integers(0, 256, (6, 9, 9, 3), np.uint8),
                 labels=np.arange(6) % 3)  # fmt: skip
    # the train split exists with 8x8 images; re-registering it with 9x9 must fail
    refused(proj, ["reference", "add", "arrays", str(big), "--split", "train"], 1,
            "train")  # fmt: skip


def test_non_utf8_file_name_is_ingested(env: tuple[Path, Path], proj: Path) -> None:
    """A valid file whose name is not UTF-8 is read, and its report printed."""
    path = non_utf8_name(env[1], ".npz")
    write_arrays(path, 4, seed=77)
    before = snapshot(proj)
    # another file than the project's cand.npz: a source name of its own
    res = invoke("source", "add", "arrays", path, "--name", "odd", "--project", proj)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert "Traceback" not in res.stderr
    assert snapshot(proj) != before  # the four images arrived
    res = invoke("source", "list", "--project", proj)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    from retest.project import Project
    from retest.project._ingest_runs import interrupted_ingests

    with Project.open(proj) as p:  # the job finished: nothing blocks `sample`
        assert interrupted_ingests(p) == []


def test_non_utf8_missing_file_names_it(env: tuple[Path, Path], proj: Path) -> None:
    path = non_utf8_name(env[1], "-missing.npz")
    line = refused(proj, ["source", "add", "arrays", os.fsdecode(path)], 1)
    assert "missing.npz" in line


def test_folder_source_empty_folder(env: tuple[Path, Path], proj: Path) -> None:
    """An empty folder ingests nothing: either a one-line refusal or 0 new images."""
    before = snapshot(proj)
    res = invoke("source", "add", "folder", env[1] / "folder-empty", "--project", proj)
    assert "Traceback" not in res.stderr
    if res.exit_code == 0:
        assert "0" in res.stdout
    else:
        assert res.exit_code == 1 and res.stderr.startswith("error: "), res.stderr
        assert snapshot(proj) == before
