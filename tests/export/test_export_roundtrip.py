"""Export round trips: pixels come back exactly, files are byte-identical, checksums hold."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from retest.cli.main import app
from retest.errors import ConfigError, InputValidationError, NotFoundError
from retest.project import Project
from retest.stages.export import export_revision
from retest.store.artifacts import PixelArray, write_image_file
from retest.store.rows import (
    AnnotationEvent,
    BlacklistEvent,
    CandidateRow,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    content_id,
)

CLASSES = [f"c{i}" for i in range(12)]  # folders "10", "11" sort before "2"
N = 30
PARQUET = pytest.param(
    "parquet",
    marks=pytest.mark.skipif(
        importlib.util.find_spec("pyarrow") is None,
        reason="Parquet export needs the [parquet] extra",
    ),
)


def _build(
    root: Path, *, odd_shape: bool = False
) -> tuple[Project, np.ndarray, list[int]]:
    """A project whose revision r-0 has array candidates, a PNG file candidate and an
    original test image, in a shuffled order. Returns the expected pixels/labels."""
    rng = np.random.default_rng(7)
    imgs = rng.integers(0, 256, (N + 2, 32, 32, 3), dtype=np.uint8)
    p = Project.init(root, name="demo", classes=CLASSES)
    rows = PixelArray.create(p.arrays_dir, "cand32", shape=(32, 32, 3)).append(imgs)
    ids = [content_id(x) for x in imgs]
    labels = [i % 12 for i in range(N + 2)]
    p.store.candidates.add(
        CandidateRow(
            ids[i],
            "tinyimages",
            str(1000 + i),
            labels[i],
            keyword=f"kw{i % 3}",
            url=f"http://example/{i}",
            license="cc",
            array_name="cand32",
            array_row=rows[i],
        )
        for i in range(N)
    )
    # the original image N (an original test image) and a file-backed PNG (N + 1)
    p.store.references.add(
        [ReferenceRow("test", 5, labels[N], ids[N], "kwref", "cand32", rows[N])]
    )
    buf = io.BytesIO()
    Image.fromarray(imgs[N + 1]).save(buf, format="PNG")
    sha, _ = write_image_file(p.images_dir, buf.getvalue())
    p.store.candidates.add(
        [
            CandidateRow(
                sha, "folder", "x/y.png", labels[N + 1], file_path=f"images/{sha}"
            )
        ]
    )
    item_ids = [*ids[:N], "test:5", sha]
    if odd_shape:
        small = np.zeros((1, 8, 8, 3), np.uint8)
        r = PixelArray.create(p.arrays_dir, "cand8", shape=(8, 8, 3)).append(small)
        cid = content_id(small[0])
        p.store.candidates.add(
            [CandidateRow(cid, "x", "0", 0, array_name="cand8", array_row=r[0])]
        )
        item_ids.append(cid)
    order = rng.permutation(len(item_ids)).tolist()
    members = [
        RevisionMember(item_ids[k], labels[k] if k < N + 2 else 0, bin=k % 5)
        for k in order
    ]
    p.store.annotations.add(
        [
            AnnotationEvent(
                "w1", "task", labels[0], ids[0], 1, task_id="t", assignment_id="a1"
            ),
            AnnotationEvent(
                "w2", "task", labels[0], ids[0], 0, task_id="t", assignment_id="a2"
            ),
            AnnotationEvent(
                "w3", "task", labels[0], ids[0], 1, task_id="t", assignment_id="a3"
            ),
            AnnotationEvent("w3", "verify", labels[1], ids[1], 1),
        ]
    )
    p.store.blacklist.add([BlacklistEvent(ids[2], "drawing", "me")])
    p.store.revisions.create(
        Revision(
            "r-0",
            "matched-frequency",
            {"bins": 5},
            seed=3,
            created="2020-01-02T03:04:05Z",
        ),
        members,
    )
    p.store.revisions.set_review(ReviewState("r-0", labels[0], reviewed=True))
    if odd_shape:
        return p, imgs, []
    return p, imgs[order], [labels[k] for k in order]


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, np.ndarray, list[int]]:
    p, imgs, labels = _build(tmp_path / "proj")
    yield p, imgs, labels
    p.close()


def _check_manifest(out: Path) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {
        "manifest.json"
    }
    assert set(manifest["files"]) == on_disk
    for rel, sha in manifest["files"].items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == sha
    assert manifest["revision"]["seed"] == 3
    assert manifest["revision"]["params"] == {"bins": 5}
    assert manifest["revision"]["created"] == "2020-01-02T03:04:05Z"
    assert manifest["retest_version"]
    return manifest


def test_npy_equals_source_pixels(project, tmp_path: Path) -> None:
    p, imgs, labels = project
    res = export_revision(p, "r-0", format="npy", out=tmp_path / "o")
    data = np.load(tmp_path / "o" / "r-0_data.npy")
    lab = np.load(tmp_path / "o" / "r-0_labels.npy")
    assert data.dtype == np.uint8 and data.shape == (N + 2, 32, 32, 3)
    assert np.array_equal(data, imgs)  # no rotation, no transposition
    assert lab.dtype == np.int32 and lab.tolist() == labels
    m = _check_manifest(res.out)
    assert (
        res.files["manifest.json"]
        == hashlib.sha256((res.out / "manifest.json").read_bytes()).hexdigest()
    )
    assert [e["row"] for e in m["images"]] == list(range(N + 2))
    by_ref = {e["source_ref"]: e for e in m["images"]}
    first = by_ref["1000"]
    assert first["annotation_count"] == 3
    assert first["selection_frequency"] == pytest.approx(2 / 3)
    assert first["review_status"] == "reviewed" and first["keyword"] == "kw0"
    assert by_ref["1001"]["selection_frequency"] is None
    assert by_ref["1001"]["annotation_count"] == 1
    assert by_ref["1002"]["blacklisted"] and not first["blacklisted"]
    assert (
        by_ref["5"]["source"] == "original:test" and by_ref["5"]["keyword"] == "kwref"
    )
    assert by_ref["x/y.png"]["source"] == "folder"
    assert p.store.artifacts.get("export/r-0/npy").sha256 == res.files["manifest.json"]


def test_cifar_pickles_decode_to_source_pixels(project, tmp_path: Path) -> None:
    p, imgs, labels = project
    export_revision(p, "r-0", format="cifar", out=tmp_path / "o", batch_size=7)
    out = tmp_path / "o"
    batches = sorted(out.glob("data_batch_*"), key=lambda f: int(f.name.split("_")[-1]))
    assert len(batches) == 5  # ceil(32 / 7)
    data, lab = [], []
    for f in batches:
        with open(f, "rb") as fh:
            d = pickle.load(fh, encoding="latin1")
        assert d["data"].dtype == np.uint8 and d["data"].shape[1] == 3072
        assert f.read_bytes()[:2] == b"\x80\x02"  # pickle protocol 2
        data.append(d["data"])
        lab += d["labels"]
    rows = np.concatenate(data)
    # independent oracle of the channel-planar layout: row[c*1024 + y*32 + x]
    assert rows[3, 2 * 1024 + 5 * 32 + 7] == imgs[3, 5, 7, 2]
    decoded = rows.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    assert np.array_equal(decoded, imgs) and lab == labels
    with open(out / "batches.meta", "rb") as fh:
        meta = pickle.load(fh)
    assert meta["label_names"] == CLASSES and meta["num_cases_per_batch"] == 7
    _check_manifest(out)


def test_imagefolder_has_explicit_class_index(project, tmp_path: Path) -> None:
    p, imgs, labels = project
    export_revision(p, "r-0", format="imagefolder", out=tmp_path / "o")
    out = tmp_path / "o"
    index = json.loads((out / "class_index.json").read_text())
    assert index == {str(i): c for i, c in enumerate(CLASSES)}
    m = _check_manifest(out)
    folders = sorted(d.name for d in out.iterdir() if d.is_dir())
    assert folders[:3] == ["0", "1", "10"]  # why lexicographic order must not be used
    for k, e in enumerate(m["images"]):
        folder, fname = e["file"].split("/")
        assert index[folder] == CLASSES[labels[k]] and int(folder) == labels[k]
        assert fname.endswith(".png")
        with Image.open(out / e["file"]) as im:
            assert np.array_equal(np.asarray(im), imgs[k])
    e = next(x for x in m["images"] if x["source"] == "folder")
    assert (out / e["file"]).read_bytes() == p.file_bytes(e["item_id"])  # original


def test_parquet_holds_images_and_metadata(project, tmp_path: Path) -> None:
    pq = pytest.importorskip(
        "pyarrow.parquet", reason="Parquet export needs the [parquet] extra"
    )
    p, imgs, labels = project
    export_revision(p, "r-0", format="parquet", out=tmp_path / "o")
    t = pq.read_table(tmp_path / "o" / "r-0.parquet").to_pylist()
    assert [r["label"] for r in t] == labels
    for r, img in zip(t, imgs, strict=True):
        with Image.open(io.BytesIO(r["image"])) as im:
            assert np.array_equal(np.asarray(im), img)
        assert r["height"] == 32 and r["image_format"] == "png"
    assert {"source", "source_ref", "keyword", "selection_frequency", "url"} <= set(
        t[0]
    )
    _check_manifest(tmp_path / "o")


@pytest.mark.parametrize("fmt", ["npy", "cifar", "imagefolder", PARQUET])
def test_same_revision_byte_identical(project, tmp_path: Path, fmt: str) -> None:
    p, _, _ = project
    a = export_revision(p, "r-0", format=fmt, out=tmp_path / "a")
    b = export_revision(p, "r-0", format=fmt, out=tmp_path / "b")
    assert a.files == b.files
    for rel in a.files:
        assert (tmp_path / "a" / rel).read_bytes() == (
            tmp_path / "b" / rel
        ).read_bytes()


def test_export_errors_and_overwrite(tmp_path: Path) -> None:
    p, _, _ = _build(tmp_path / "proj", odd_shape=True)
    with p:
        with pytest.raises(InputValidationError, match="one shape"):
            export_revision(p, "r-0", format="npy", out=tmp_path / "o")
        assert not (tmp_path / "o").exists()
        assert not list(tmp_path.glob(".o.tmp-*"))  # staging cleaned up
        res = export_revision(p, "r-0", format="imagefolder")
        assert res.out == (p.revisions_dir / "r-0" / "imagefolder").resolve()
        with pytest.raises(ConfigError, match="--overwrite"):
            export_revision(p, "r-0", format="imagefolder")
        (res.out / "notes.txt").write_text("x")  # the user's: never deleted
        with pytest.raises(ConfigError, match=r"notes\.txt"):
            export_revision(p, "r-0", format="imagefolder", overwrite=True)
        (res.out / "notes.txt").unlink()
        export_revision(p, "r-0", format="imagefolder", overwrite=True)
        with pytest.raises(NotFoundError, match="revisions: r-0"):
            export_revision(p, "r-9", format="npy")


def test_cli_export(tmp_path: Path) -> None:
    p, imgs, _ = _build(tmp_path / "proj")
    p.close()
    runner = CliRunner()
    args = ["export", "r-0", "--format", "npy", "--out", str(tmp_path / "o")]
    # r-0 holds a blacklisted member on purpose: the CLI exports it only with --force
    res = runner.invoke(
        app, [*args, "--force", "--project", str(tmp_path / "proj"), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["n_images"] == N + 2
    assert np.array_equal(np.load(tmp_path / "o" / "r-0_data.npy"), imgs)
    res = runner.invoke(
        app, [*args[:2], "--format", "tiff", "--project", str(tmp_path / "proj")]
    )
    assert res.exit_code == 2 and "npy" in res.output
    res = runner.invoke(app, ["export", "nope", "--project", str(tmp_path / "proj")])
    assert res.exit_code == 1 and "revision 'nope' does not exist" in res.output


@settings(max_examples=12, deadline=None)
@given(
    shape=st.sampled_from([(28, 28), (5, 7, 3), (6, 4, 1), (32, 32, 3)]),
    n=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_any_uniform_shape_round_trips(
    shape: tuple[int, ...], n: int, seed: int
) -> None:
    """npy keeps H×W(×C) exactly; CIFAR rows are channel-planar; PNGs decode back."""
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    with (
        tempfile.TemporaryDirectory() as d,
        Project.init(Path(d) / "p", classes=["a", "b"]) as p,
    ):
        rows = PixelArray.create(p.arrays_dir, "px", shape=shape).append(imgs)
        ids = [f"{content_id(x)}" for x in imgs]
        p.store.candidates.add(
            CandidateRow(
                ids[i], "arrays", str(i), i % 2, array_name="px", array_row=rows[i]
            )
            for i in range(n)
            if ids[i] not in ids[:i]
        )
        uniq = list(dict.fromkeys(ids))
        p.store.revisions.create(
            Revision("r", "x", created="t"),
            [RevisionMember(i, ids.index(i) % 2) for i in uniq],
        )
        want = np.stack([imgs[ids.index(i)] for i in uniq])
        out = Path(d) / "o"
        export_revision(p, "r", format="npy", out=out / "npy")
        assert np.array_equal(np.load(out / "npy" / "r_data.npy"), want)
        export_revision(p, "r", format="cifar", out=out / "cifar")
        with open(out / "cifar" / "data_batch_1", "rb") as fh:
            rows_ = pickle.load(fh)["data"]
        if want.ndim == 4:  # channel-planar: C, then H, then W
            back = rows_.reshape(len(uniq), shape[2], shape[0], shape[1]).transpose(
                0, 2, 3, 1
            )
        else:
            back = rows_.reshape(len(uniq), *shape)
        assert np.array_equal(back, want)
        export_revision(p, "r", format="imagefolder", out=out / "if")
        m = json.loads((out / "if" / "manifest.json").read_text())
        for e, img in zip(m["images"], want, strict=True):
            with Image.open(out / "if" / e["file"]) as im:
                got = np.asarray(im)
            assert np.array_equal(got, img.reshape(got.shape)) and got.size == img.size
