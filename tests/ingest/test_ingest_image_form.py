"""A folder of grayscale PNGs keeps the originals' form, and folders map to classes.

Real Fashion-MNIST written as PNG folders, as a user would have them: the
candidates must be stored 28×28 like the references (not stacked to RGB), so
planted copies of test images are exact copies, the near-original threshold is
the one of 784 values, and a revision exports (N, 28, 28). Class folders may be
the class name, its id (as `export --format imagefolder` writes them) or the
slug of a name holding '/'; retest reads its own imagefolder export back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from retest.datasets.fashion_mnist import FASHION_MNIST_CLASSES
from retest.datasets.idx import read_idx

pytestmark = pytest.mark.slow

PER_CLASS = 12  # new pool images per class
COPIES = 2  # planted exact copies of test images per class
N_TRAIN_REF = 3000  # originals of the training split (the first ones)


def retest(
    *args: object, cwd: Path, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("RETEST_PROJECT", None)
    p = subprocess.run(
        [sys.executable, "-c", "from retest.cli.main import main; main()",
         *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if ok:
        assert p.returncode == 0, f"retest {args}: {p.stdout}\n{p.stderr}"
    return p


@dataclass
class Built:
    root: Path
    project: Path
    folder: Path
    test_images: np.ndarray
    planted: dict[str, int]  # file path relative to the folder -> test index


def _folder_name(c: int) -> str:
    """Three ways to name a class folder: its slug, its id, its name."""
    name = FASHION_MNIST_CLASSES[c]
    if "/" in name:
        return name.replace("/", "_")
    return str(c) if c % 2 else name


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, fashion_mnist_dir: Path) -> Built:
    root = tmp_path_factory.mktemp("form")
    xtr = read_idx(fashion_mnist_dir / "train-images-idx3-ubyte.gz")
    ytr = read_idx(fashion_mnist_dir / "train-labels-idx1-ubyte.gz")
    xte = read_idx(fashion_mnist_dir / "t10k-images-idx3-ubyte.gz")
    yte = read_idx(fashion_mnist_dir / "t10k-labels-idx1-ubyte.gz")
    np.savez(root / "train.npz", images=xtr[:N_TRAIN_REF], labels=ytr[:N_TRAIN_REF])
    folder = root / "photos"
    planted: dict[str, int] = {}
    for c in range(10):
        d = folder / _folder_name(c)
        d.mkdir(parents=True)
        pool = 50_000 + np.flatnonzero(ytr[50_000:] == c)[:PER_CLASS]
        for i in pool:
            Image.fromarray(xtr[i], "L").save(d / f"train{i}.png")
        for i in np.flatnonzero(yte == c)[:COPIES]:
            Image.fromarray(xte[i], "L").save(d / f"copy{i}.png")
            planted[f"{d.name}/copy{i}.png"] = int(i)
    (folder / "README.txt").write_text("not an image\n")
    (folder / "Bag" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    proj = root / "proj"
    retest("init", proj, "--classes-from", "fashion-mnist", cwd=root)
    retest("reference", "add", "fashion_mnist", fashion_mnist_dir, "--split", "test",
           cwd=proj)  # fmt: skip
    retest("reference", "add", "arrays", root / "train.npz", "--split", "train",
           cwd=proj)  # fmt: skip
    return Built(root, proj, folder, xte, planted)


@pytest.fixture(scope="module")
def ingested(built: Built) -> dict:
    p = retest("source", "add", "folder", built.folder, "--json", cwd=built.project)
    return json.loads(p.stdout)


def test_grey_pngs_are_stored_as_the_originals(built: Built, ingested: dict) -> None:
    n = 10 * (PER_CLASS + COPIES)
    assert ingested["new"] == n
    arrays = sorted(
        p.name for p in (built.project / "arrays").glob("candidates_*.json")
    )
    assert arrays == ["candidates_28x28.json"]  # not 28x28x3
    # the two files that are not images are counted, one reason each
    reasons = {s["ref"]: s["reason"] for s in ingested["skipped"]}
    assert set(reasons) == {"README.txt", "Bag/broken.png"}
    assert "not an image file" in reasons["README.txt"]


@pytest.fixture(scope="module")
def status(built: Built, ingested: dict) -> dict:
    retest("dedup", "--metrics", "l2", cwd=built.project)
    return json.loads(retest("status", "--json", cwd=built.project).stdout)


@pytest.fixture(scope="module")
def revision(built: Built, status: dict) -> str:
    retest("sample", "--strategy", "class-balanced", "--per-class", "5", "--seed", "1",
           "--include-unreviewed", "--name", "r1", cwd=built.project)  # fmt: skip
    return "r1"


def test_planted_copies_are_exact_copies_and_threshold_is_for_784_values(
    built: Built, status: dict
) -> None:
    elig = status["eligibility"]
    assert elig["counts"]["exact_copy"] == len(built.planted)
    # CIFAR-10.1's rule scaled to 28×28 grey values (2,352 RGB values: 765,625)
    assert 0 < elig["near_original_threshold"] <= 255_208.4
    for c in status["classes"]:
        assert c["reasons"]["exact_copy"] == COPIES, c


def test_a_revision_exports_28x28_and_evaluates(built: Built, revision: str) -> None:
    out = built.root / "export"
    retest("export", revision, "--format", "npy", "--out", out, cwd=built.project)
    data = np.load(next(out.glob("*_data.npy")))
    assert data.shape == (50, 28, 28)
    # none of the planted test images made it in
    test_ids = {built.test_images[i].tobytes() for i in built.planted.values()}
    assert not any(row.tobytes() in test_ids for row in data)
    # a model of the original's form runs on the revision (it crashed on 2,352 values)
    p = retest("evaluate", "--preset", "quick", "--revision", revision,
               "--bootstrap", "1000", cwd=built.project)  # fmt: skip
    assert revision in p.stdout


def test_mode_conflicting_with_the_originals_is_one_line(built: Built) -> None:
    p = retest("source", "add", "folder", built.folder, "--mode", "RGB",
               cwd=built.project, ok=False)  # fmt: skip
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "28×28 grayscale (L)" in lines[0]
    assert "--mode L" in lines[0]


def test_colour_images_need_mode_l(built: Built, tmp_path: Path) -> None:
    folder = tmp_path / "colour"
    (folder / "Bag").mkdir(parents=True)
    rng = np.random.default_rng(3)
    px = rng.integers(0, 256, (28, 28, 3), dtype=np.uint8)
    Image.fromarray(px, "RGB").save(folder / "Bag" / "red.png")
    grey = np.repeat(rng.integers(0, 256, (28, 28, 1), dtype=np.uint8), 3, axis=2)
    Image.fromarray(grey, "RGB").save(folder / "Bag" / "grey_as_rgb.png")
    # another folder than the project's photos/: a source name of its own
    add = ("source", "add", "folder", folder, "--name", "colour", "--json")
    rep = json.loads(retest(*add, cwd=built.project).stdout)
    assert rep["new"] == 1  # the RGB-stored grey image, losslessly to L
    (skip,) = rep["skipped"]
    assert skip["ref"] == "Bag/red.png" and "--mode L" in skip["reason"]
    rep = json.loads(retest(*add, "--mode", "L", cwd=built.project).stdout)
    assert rep["skipped"] == [] and rep["new"] + rep["duplicates"] == 2


def test_nested_class_name_folder_is_explained(built: Built, tmp_path: Path) -> None:
    folder = tmp_path / "nested"
    (folder / "T-shirt" / "top").mkdir(parents=True)
    Image.fromarray(built.test_images[0], "L").save(
        folder / "T-shirt" / "top" / "a.png"
    )
    p = retest("source", "add", "folder", folder, cwd=built.project, ok=False)
    assert p.returncode == 1
    (line,) = p.stderr.strip().splitlines()
    assert "'T-shirt_top'" in line and "class id" in line


def test_reads_its_own_imagefolder_export_back(built: Built, revision: str) -> None:
    out = built.root / "if"
    retest(
        "export", revision, "--format", "imagefolder", "--out", out, cwd=built.project
    )
    assert (out / "class_index.json").is_file() and (out / "0").is_dir()
    rep = json.loads(
        retest(
            "source",
            "add",
            "folder",
            out,
            "--name",
            "back",
            "--json",
            cwd=built.project,
        ).stdout
    )
    # every image is one the project holds, under its own class: all duplicates
    assert rep["new"] == 0 and rep["duplicates"] == 50
    assert {s["ref"] for s in rep["skipped"]} == {"manifest.json"}


def test_a_model_file_of_other_channels_is_one_line_then_adapted(
    built: Built, revision: str
) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(  # trained on RGB: expects 3 input channels
        torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(4, 10),
    )  # fmt: skip
    path = built.root / "rgb_model.pt"
    torch.jit.save(torch.jit.script(net.eval()), str(path))
    args = ["evaluate", "--revision", revision, "--model-file", path,
            "--bootstrap", "100", "--figure", "png"]  # fmt: skip
    p = retest(*args, cwd=built.project, ok=False)
    assert p.returncode == 1, p.stdout + p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert "(28, 28) uint8 images with 1 channel" in line
    assert "float32 in [0, 1], NCHW" in line and "--model-channels 3" in line
    p = retest(*args, "--model-channels", "3", "--json", cwd=built.project)
    assert json.loads(p.stdout)["models"] == ["rgb_model"]


def test_review_the_queue_as_a_csv_file(built: Built, status: dict) -> None:
    """Last in this module: its verdicts change who is eligible."""
    import csv

    q = built.root / "queue.csv"
    p = retest("dedup-queue", "--csv", q, cwd=built.project)
    rows = list(csv.DictReader(q.open()))
    assert rows, "the pool holds pairs within the l2 review target"
    assert f"wrote {len(rows)} pairs" in p.stdout
    first = (rows[0]["candidate"], rows[0]["metric"])
    group = [r for r in rows if (r["candidate"], r["metric"]) == first]
    for r in group:
        r["duplicate"] = "no"
    group[0]["duplicate"] = "yes"
    with q.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    groups = {(r["candidate"], r["metric"]) for r in rows}
    p = retest("dedup-verdict", "--from", q, "--who", "ann", cwd=built.project)
    assert (
        f"recorded 1 reviews by ann from {q}: {len(group)} pairs, 1 duplicates; "
        f"{len(groups) - 1} candidate reviews left undecided"
    ) in p.stdout
    queued = json.loads(retest("dedup-queue", "--json", cwd=built.project).stdout)
    assert first[0] not in {i["candidate"] for i in queued}
    # reference ids are whole in the queue file (train:13004, not train:1300)
    refs = {r["reference"] for r in rows if ":" in r["reference"]}
    assert all(r.split(":")[1].isdigit() for r in refs)
    # the rest of one class is confirmed not duplicate
    cls = next(r["class"] for r in rows if (r["candidate"], r["metric"]) != first)
    p = retest("dedup-verdict", "--from", q, "--who", "ann", "--rest-not-duplicate",
               "--class", cls, cwd=built.project)  # fmt: skip
    assert "recorded " in p.stdout
    queued = json.loads(retest("dedup-queue", "--json", cwd=built.project).stdout)
    in_class = {r["candidate"] for r in rows if r["class"] == cls}
    assert not in_class & {i["candidate"] for i in queued}
    bad = built.root / "bad.csv"
    bad.write_text("candidate,metric\nx,l2\n")
    p = retest("dedup-verdict", "--from", bad, "--who", "ann", cwd=built.project,
               ok=False)  # fmt: skip
    assert p.returncode == 1 and "expected the header" in p.stderr
