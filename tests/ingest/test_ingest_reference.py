"""Reference dataset, keyword recovery by exact match, plan stage, CLI, round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.datasets.cifar10 import CIFAR10_CLASSES, write_cifar_batch, write_cifar_meta
from retest.datasets.tinyimages import write_tinyimages
from retest.project import Project, planned_needs
from retest.stages.ingest import add_source
from retest.stages.plan import make_plan
from retest.stages.reference import (
    recover_keywords,
    reference_keyword_histogram,
    register_reference,
)
from retest.store.rows import AnnotationEvent, Revision, RevisionMember, content_id

runner = CliRunner()


@pytest.fixture
def world(tmp_path: Path, rng: np.random.Generator):
    """TinyImages with 2 keywords per class; CIFAR images are copies of records."""
    kw_of_class = {c: [f"{c}_a", f"{c}_b"] for c in CIFAR10_CLASSES}
    keywords = sorted(k for ks in kw_of_class.values() for k in ks for _ in range(15))
    ti = rng.integers(0, 256, size=(len(keywords), 32, 32, 3), dtype=np.uint8)
    # record 1 (airplane_a) also appears under airplane_b: a double match
    b0 = keywords.index("airplane_b")
    ti[b0] = ti[1]
    write_tinyimages(tmp_path / "ti", ti, keywords)
    # CIFAR: per class 4 train + 2 test images taken from that class's records;
    # per class, keyword _a occurs 4 times and _b twice
    train, test, ytr, yte, planted = [], [], [], [], []
    for c, name in enumerate(CIFAR10_CLASSES):
        a = [i for i, k in enumerate(keywords) if k == f"{name}_a"]
        b = [i for i, k in enumerate(keywords) if k == f"{name}_b"]
        picks = [a[1], a[2], a[3], b[4], a[5], b[6]]
        for j, rec in enumerate(picks):
            (train if j < 4 else test).append(ti[rec])
            (ytr if j < 4 else yte).append(c)
            planted.append((j < 4, keywords[rec]))
    unmatched = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    test.append(unmatched)
    yte.append(9)
    cifar = tmp_path / "cifar"
    cifar.mkdir()
    write_cifar_batch(cifar / "data_batch_1", np.stack(train), ytr)
    write_cifar_batch(cifar / "test_batch", np.stack(test), yte)
    write_cifar_meta(cifar / "batches.meta")
    project = Project.init(tmp_path / "proj", classes_from="cifar10")
    yield project, tmp_path, ti, keywords, np.stack(train), np.stack(test), planted
    project.close()


def test_reference_keywords_recovered_by_exact_match(world) -> None:
    project, tmp, _ti, keywords, _train, test, planted = world
    rep = register_reference(project, "cifar", tmp / "cifar", split="train")
    assert rep.n == 40 and rep.new == 40 and rep.class_counts["cat"] == 4
    register_reference(project, "cifar", tmp / "cifar", split="test")
    again = register_reference(project, "cifar", tmp / "cifar", split="test")
    assert again.new == 0 and project.store.references.count() == 61
    row = project.store.references.get("test:3")
    assert row.content_id == content_id(test[3]) and row.class_id == 1
    np.testing.assert_array_equal(project.pixels(["test:3"])[0], test[3])

    rec = recover_keywords(project, tmp / "ti")
    assert rec.matched == 60 and rec.n_reference == 61 and rec.scanned == len(keywords)
    got = [r.keyword for r in project.store.references.list(split="train")]
    assert got == [kw for is_train, kw in planted if is_train]
    # the double-matched image: airplane_a count (4+1) beats airplane_b (2+1)
    assert project.store.references.get("train:0").keyword == "airplane_a"
    assert project.store.references.get("test:20").keyword is None  # no match
    hist = reference_keyword_histogram(project)
    assert hist["cat"] == {"cat_a": 4, "cat_b": 2}
    kw_rows = project.store.classes.keywords(class_id=3)
    assert {(k.keyword, k.original_count) for k in kw_rows} == {
        ("cat_a", 4),
        ("cat_b", 2),
    }


def test_keyword_recovery_restricted_to_keywords(world) -> None:
    project, tmp, *_ = world
    register_reference(project, "cifar", tmp / "cifar", split="train")
    rec = recover_keywords(project, tmp / "ti", keywords=["CAT_A", "dog_b"])
    assert rec.scanned == 30 and rec.matched == 4  # 3 cat_a + 1 dog_b in train
    assert reference_keyword_histogram(project)["cat"] == {"cat_a": 3}


def test_plan_stage_with_verified_counts(world) -> None:
    project, tmp, *_ = world
    store = project.store
    for split in ("train", "test"):
        register_reference(project, "cifar", tmp / "cifar", split=split)
    recover_keywords(project, tmp / "ti")
    add_source(project, "tinyimages", tmp / "ti", keywords_file=_kw_file(tmp))
    cat_a = [r.id for r in store.candidates.iter(keyword="cat_a")]
    store.annotations.add(
        [AnnotationEvent("ann", "verify", 3, i, 1) for i in cat_a[:3]]
        + [AnnotationEvent("ann", "verify", 3, cat_a[0], 0)]  # latest says no
    )
    res = make_plan(project, rule="v6", size=60)
    assert res.plan.totals() == dict.fromkeys(CIFAR10_CLASSES, 6)
    assert res.plan.allocation["cat"] == {"cat_a": 4, "cat_b": 2}
    row = next(r for r in res.table if r["keyword"] == "cat_a")
    assert (row["needed"], row["available"], row["missing"]) == (4, 2, 2)
    saved = json.loads((project.root / res.path).read_text())
    assert saved["totals"]["cat"] == 6
    v4 = make_plan(project, rule="v4", size=61)  # r = 1
    assert v4.plan.allocation["cat"] == {"cat_a": 4, "cat_b": 2}
    # later stages read the newest plan from the store, never from its report
    (project.root / v4.path).unlink()
    needs, report = planned_needs(project)
    assert report == v4.path
    assert needs == {(r["class"], r["keyword"]): r["needed"] for r in v4.table}
    assert needs[("cat", "cat_a")] == 4


def _kw_file(tmp: Path) -> Path:
    p = tmp / "kws.json"
    p.write_text(json.dumps({c: [f"{c}_a", f"{c}_b"] for c in CIFAR10_CLASSES}))
    return p


def test_cli_source_reference_plan(world) -> None:
    project, tmp, *_ = world
    root = str(project.root)
    r = runner.invoke(
        app,
        [
            "reference",
            "add",
            "cifar",
            str(tmp / "cifar"),
            "--split",
            "train",
            "-p",
            root,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n"] == 40
    r = runner.invoke(
        app, ["reference", "keywords", str(tmp / "ti"), "-p", root, "--json"]
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["matched"] == 40
    r = runner.invoke(app, ["reference", "show", "-p", root])
    assert r.exit_code == 0 and "cat_a 3, cat_b 1" in r.stdout
    r = runner.invoke(
        app,
        [
            "source",
            "add",
            "tinyimages",
            str(tmp / "ti"),
            "--keywords",
            "cat_a,cat_b",
            "--class",
            "cat",
            "-p",
            root,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["new"] == 30
    r = runner.invoke(app, ["source", "list", "-p", root, "--json"])
    assert json.loads(r.stdout)[0]["new"] == 30
    r = runner.invoke(
        app, ["plan", "--rule", "v6", "--size", "40", "-p", root, "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["totals"]["cat"] == 4
    r = runner.invoke(app, ["plan", "--rule", "v5", "-p", root])
    assert r.exit_code == 2 and "--rule must be v4 or v6" in r.output
    r = runner.invoke(
        app,
        [
            "source",
            "add",
            "cifar",
            str(tmp / "cifar"),
            "--class",
            "unicorn",
            "-p",
            root,
        ],
    )
    assert (
        r.exit_code == 2 and "class 'unicorn' is not a class of the project" in r.output
    )
    r = runner.invoke(
        app, ["source", "add", "arrays", str(tmp / "nope.npy"), "-p", root]
    )
    assert r.exit_code == 1 and "nope.npy does not exist" in r.output


def test_round_trip_cifar_pickles_to_npy_export(tmp_path: Path, rng) -> None:
    from retest.stages.export import export_revision

    images = rng.integers(0, 256, size=(120, 32, 32, 3), dtype=np.uint8)
    # an asymmetric marker so a rotation or transpose would show
    images[:, 0, :5, 0] = 255
    images[:, 1:, 0, 0] = 0
    labels = rng.integers(0, 10, size=120)
    src = tmp_path / "cifar"
    src.mkdir()
    write_cifar_batch(src / "data_batch_1", images[:80], labels[:80])
    write_cifar_batch(src / "test_batch", images[80:], labels[80:])
    write_cifar_meta(src / "batches.meta")
    with Project.init(tmp_path / "proj", classes_from="cifar10") as project:
        add_source(project, "cifar", src, batch_size=32)
        rows = list(project.store.candidates.iter())
        assert [int(r.source_ref) for r in rows] == list(range(120))
        # "sample nothing": a revision holding every ingested candidate, in order
        members = [RevisionMember(r.id, r.class_id) for r in rows]
        project.store.revisions.create(Revision("all", "all", seed=0), members)
        res = export_revision(project, "all", format="npy", out=tmp_path / "out")
    data = np.load(res.out / "all_data.npy")
    assert data.dtype == np.uint8 and data.shape == (120, 32, 32, 3)
    np.testing.assert_array_equal(data, images)
    np.testing.assert_array_equal(np.load(res.out / "all_labels.npy"), labels)


@pytest.mark.slow
def test_fashion_mnist_reference_and_candidates(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    from retest.datasets.idx import read_idx

    with Project.init(tmp_path / "fm", classes_from="fashion-mnist") as project:
        rep = register_reference(
            project,
            "fashion_mnist",
            fashion_mnist_dir,
            split="test",
        )
        assert rep.n == 10000 and sum(rep.class_counts.values()) == 10000
        x = read_idx(fashion_mnist_dir / "t10k-images-idx3-ubyte.gz")
        np.testing.assert_array_equal(project.pixels(["test:1234"])[0], x[1234])
        # the same images as a candidate pool: every one is a duplicate-free candidate
        ing = add_source(
            project,
            "idx",
            fashion_mnist_dir / "t10k-images-idx3-ubyte.gz",
        )
        assert ing.new + ing.duplicates == 10000
        ids = {r.content_id for r in project.store.references.list()}
        assert {r.id for r in project.store.candidates.iter()} <= ids
