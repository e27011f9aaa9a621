"""``retest split``: the overlap-minimising train/test split through the CLI.

A small real project: original train/test images, a candidate pool with fresh
images, near-copies and an exact copy of training images and a near-copy of a
test image; ingest, dedup and eligibility are the real pipeline stages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project, candidate_eligibility
from retest.stages.dedup import run_dedup
from retest.stages.export import export_revision
from retest.stages.ingest import add_source
from retest.stages.reference import register_reference_arrays
from retest.stages.revisions import create_revision
from retest.store.rows import content_id

runner = CliRunner()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Class a: 2 near-copies of training images first, then 6 fresh images, then a
    near-copy of a test image; class b: 6 fresh images, then an exact copy of a
    training image."""
    root = tmp_path_factory.mktemp("split")
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)
    test = rng.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)
    y = np.arange(20) % 2

    def noisy(x: np.ndarray) -> np.ndarray:
        return np.clip(x.astype(int) + rng.integers(-5, 6, x.shape), 0, 255).astype(
            np.uint8
        )

    fresh = rng.integers(0, 256, (12, 8, 8, 3), dtype=np.uint8)
    parts = {
        "a_train_copies": noisy(train[[0, 2]]),
        "a_fresh": fresh[:6],
        "a_test_copy": noisy(test[[4]]),
        "b_fresh": fresh[6:],
        "b_train_copy": train[[1]],
    }
    images = np.concatenate(list(parts.values()))
    labels = np.array([0] * 9 + [1] * 7)
    np.savez(root / "pool.npz", images=images, labels=labels,
             class_names=np.array(["a", "b"]))  # fmt: skip
    proj = root / "p"
    with Project.init(proj, classes=["a", "b"]) as p:
        for split, x in (("train", train), ("test", test)):
            register_reference_arrays(p, x, y, split=split,
                                      class_names=["a", "b"])  # fmt: skip
        add_source(p, "arrays", root / "pool.npz", name="pool")
        run_dedup(p, metrics=("l2",), k=5, backend="numpy")
    ids = {k: [content_id(im) for im in v] for k, v in parts.items()}
    return {"root": proj, "ids": ids}


def _split(root: Path, *args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["split", "-p", str(root), *args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_non_overlapping_images_first_test_copies_never(project: dict) -> None:
    root, ids = project["root"], project["ids"]
    got = _split(root, "--per-class", "7", "--seed", "1")
    chosen = set(got["train"]) | set(got["test"])
    # class a: all 6 fresh images + 1 training copy; the test copy is never usable
    assert set(ids["a_fresh"]) < chosen and not set(ids["a_test_copy"]) & chosen
    assert len(set(ids["a_train_copies"]) & chosen) == 1
    assert set(ids["b_fresh"]) | set(ids["b_train_copy"]) <= chosen
    overlap = {m["id"] for m in got["members"] if m["overlap"]}
    assert overlap == chosen & (set(ids["a_train_copies"]) | set(ids["b_train_copy"]))
    assert got["per_class"]["a"] == {"overlap": 1, "n_train": 6, "n_test": 1}
    assert got["valid"] and got["n_pool"] == 15
    written = Path(got["path"])
    assert written == root / "reports" / "split_candidates_seed1.json"
    assert json.loads(written.read_text()) == got
    assert [p.name for p in written.parent.iterdir() if "tmp" in p.name] == []
    # fewer per class: no overlapping image is needed, none is used
    five = _split(root, "--per-class", "5", "--seed", "1")
    assert not any(m["overlap"] for m in five["members"])


def test_policy_first_takes_pool_order(project: dict) -> None:
    root, ids = project["root"], project["ids"]
    first = _split(root, "--per-class", "6", "--policy", "first", "--seed", "1",
                   "--out", str(root / "first.json"))  # fmt: skip
    chosen = set(first["train"]) | set(first["test"])
    assert set(ids["a_train_copies"]) <= chosen  # the first two of class a
    assert first["per_class"]["a"]["overlap"] == 2
    low = _split(root, "--per-class", "6", "--seed", "1", "--out", str(root / "m.json"))
    assert low["per_class"]["a"]["overlap"] == 0
    assert set(low["train"]) | set(low["test"]) >= set(ids["a_fresh"])


def test_seeded_and_reproducible(project: dict, tmp_path: Path) -> None:
    root = project["root"]
    a = _split(
        root, "--per-class", "6", "--seed", "5", "--out", str(tmp_path / "a.json")
    )
    b = _split(
        root, "--per-class", "6", "--seed", "5", "--out", str(tmp_path / "b.json")
    )
    assert (tmp_path / "a.json").read_text().replace("a.json", "b.json") == (
        tmp_path / "b.json"
    ).read_text()
    assert a["test"] == b["test"]
    others = {
        tuple(_split(root, "--per-class", "6", "--seed", str(s),
                     "--out", str(tmp_path / f"{s}.json"))["test"])
        for s in range(6, 12)
    }  # fmt: skip
    assert len(others | {tuple(a["test"])}) > 1
    assert a["n_train"] == 2 * round(0.8 * 6)


def test_revision_and_its_export_give_the_same_split(project: dict) -> None:
    root, ids = project["root"], project["ids"]
    with Project.open(root) as p:
        rev = create_revision(
            p, strategy="class-balanced", seed=0, per_class=5,
            eligibility=candidate_eligibility(p),
        ).revision.name  # fmt: skip
        exported = export_revision(p, rev, format="npy", overwrite=True).out
        members = {m.item_id for m in p.store.revisions.members(rev)}
    by_rev = _split(root, "-r", rev, "--per-class", "4", "--seed", "3")
    by_export = _split(
        root, "--export", str(exported), "--per-class", "4", "--seed", "3"
    )
    assert by_rev["source"] == f"revision:{rev}"
    assert by_export["source"].startswith("export:")
    assert (by_rev["train"], by_rev["test"]) == (by_export["train"], by_export["test"])
    assert set(by_rev["train"]) | set(by_rev["test"]) <= members
    assert by_rev["n_pool"] == 10 and not set(ids["a_test_copy"]) & members


def _expect_error(args: list[str], *needles: str, code: int = 1) -> None:
    res = runner.invoke(app, ["split", *args])
    assert res.exit_code == code, res.output
    err = res.stderr.strip()
    assert err.startswith("error:") and "\n" not in err, err
    assert "Traceback" not in res.output
    for n in needles:
        assert n in err, err


def test_bad_inputs(project: dict, tmp_path: Path) -> None:
    p = ["-p", str(project["root"])]
    _expect_error([*p, "-r", "nope"], "'nope'")
    _expect_error([*p, "-r", "x", "--export", str(tmp_path)], "--export", code=2)
    _expect_error([*p, "--policy", "random"], "'random'", code=2)
    _expect_error([*p, "--train-fraction", "1.5"], "--train-fraction", code=2)
    _expect_error([*p, "--per-class", "0"], "--per-class", code=2)
    _expect_error([*p, "--export", str(tmp_path)], "manifest.json")
    out = tmp_path / "short.json"
    _expect_error([*p, "--per-class", "9", "--out", str(out)], "a 8/9", "b 7/9")
    assert json.loads(out.read_text())["valid"] is False  # written before exiting
