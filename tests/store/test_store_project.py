"""retest.toml, Project.init/open, pixels, and the init/status CLI."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from retest.cli.main import app
from retest.config import ProjectConfig, dumps_toml, load_config, save_config
from retest.errors import ConfigError
from retest.project import CLASS_PRESETS, Project
from retest.store.rows import (
    AnnotationEvent,
    BlacklistEvent,
    CandidateRow,
    DuplicateVerdict,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    content_id,
    file_content_id,
)

runner = CliRunner()


def test_config_round_trip(tmp_path: Path) -> None:
    cfg = ProjectConfig(
        name='my "repl"',
        classes=("cat", "dog"),
        keywords={"cat": ("tabby", "kitty cat")},
        sources={
            "tiny": {"kind": "tinyimages", "path": "/x/tiny.bin", "batch_size": 3}
        },
        thresholds={"dssim": 0.75},
        seeds={"split": 200},
    )
    save_config(tmp_path / "retest.toml", cfg)
    assert load_config(tmp_path / "retest.toml") == cfg


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(
            st.text(max_size=10),
            st.integers(-(2**62), 2**62),
            st.floats(allow_nan=False, allow_infinity=False),
            st.booleans(),
            st.lists(st.integers(0, 9), max_size=4),
        ),
        max_size=6,
    )
)
def test_toml_writer_round_trips_through_tomllib(doc: dict[str, object]) -> None:
    assert tomllib.loads(dumps_toml({"t": doc})) == {"t": doc}


def test_config_errors_name_the_file(tmp_path: Path) -> None:
    p = tmp_path / "retest.toml"
    p.write_text("classes = [\n")
    with pytest.raises(ConfigError, match=r"retest\.toml is not valid TOML"):
        load_config(p)
    p.write_text('classes = ["a", "a"]\n[project]\nname = "x"\n')
    with pytest.raises(ConfigError, match="duplicates"):
        load_config(p)
    p.write_text('classes = ["a"]\n[project]\nname = "x"\n[seeds]\nsample = 1.5\n')
    with pytest.raises(ConfigError, match="integer"):
        load_config(p)
    with pytest.raises(ConfigError, match="not in `classes`"):
        ProjectConfig(name="x", classes=("a",), keywords={"b": ("k",)})


def test_project_init_and_open(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    with Project.init(root, classes_from="cifar10") as p:
        assert p.config.name == "proj"
        assert [c.name for c in p.store.classes.list()] == list(
            CLASS_PRESETS["cifar10"]
        )
        for d in ("arrays", "images", "revisions", "reports"):
            assert (root / d).is_dir()
    with pytest.raises(ConfigError, match="already a retest project"):
        Project.init(root, classes=["a"])
    (root / "reports" / "sub").mkdir()
    with Project.open(root / "reports" / "sub") as p:  # found from a subdirectory
        assert p.root == root.resolve() and p.store.schema_version() >= 1
    with pytest.raises(ConfigError, match=r"Run `retest init DIR`"):
        Project.open(tmp_path)
    cfg = load_config(root / "retest.toml")
    save_config(
        root / "retest.toml",
        ProjectConfig(name=cfg.name, classes=tuple(reversed(cfg.classes))),
    )
    with pytest.raises(ConfigError, match="class ids must not change"):
        Project.open(root)


def test_pixels_from_arrays_files_and_references(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    imgs = rng.integers(0, 256, (3, 8, 6, 3), dtype=np.uint8)
    with Project.init(tmp_path, classes=["a", "b"]) as p:
        px = p.pixel_array
        from retest.store.artifacts import PixelArray, write_image_file

        rows = PixelArray.create(p.arrays_dir, "c", shape=(8, 6, 3)).append(imgs)
        assert px("c").shape == (8, 6, 3)
        ids = [content_id(x) for x in imgs]
        p.store.candidates.add(
            CandidateRow(i, "arrays", str(r), 0, array_name="c", array_row=r)
            for i, r in zip(ids, rows, strict=True)
        )
        import io

        buf = io.BytesIO()
        Image.fromarray(imgs[2]).save(buf, format="PNG")
        sha, _ = write_image_file(p.images_dir, buf.getvalue())
        assert sha == file_content_id(buf.getvalue())
        p.store.candidates.add(
            [CandidateRow(sha, "folder", "x.png", 1, file_path=f"images/{sha}")]
        )
        p.store.references.add(
            [ReferenceRow("test", 0, 1, ids[0], array_name="c", array_row=0)]
        )
        got = p.pixels([ids[1], sha, "test:0", ids[1]])
        for g, want in zip(got, [imgs[1], imgs[2], imgs[0], imgs[1]], strict=True):
            assert np.array_equal(g, want)
        assert p.file_bytes(sha) == buf.getvalue() and p.file_bytes(ids[0]) is None


def test_cli_init_and_status(tmp_path: Path) -> None:
    root = tmp_path / "p"
    res = runner.invoke(app, ["init", str(root), "--classes", "cat,dog,bird"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["init", str(root), "--classes", "cat"])
    assert res.exit_code == 2 and "already a retest project" in res.output
    res = runner.invoke(app, ["init", str(tmp_path / "q"), "--classes-from", "cifar"])
    assert res.exit_code == 2 and "cifar10" in res.output
    res = runner.invoke(app, ["init", str(tmp_path / "r")])
    assert res.exit_code == 2 and "--classes" in res.output

    with Project.open(root) as p:
        c = [content_id(np.full((2, 2), i, np.uint8)) for i in range(6)]
        p.store.candidates.add(
            CandidateRow(cid, "arrays", str(i), i % 2) for i, cid in enumerate(c)
        )
        p.store.annotations.add(
            [
                AnnotationEvent("me", "select", 0, c[0], 1),
                AnnotationEvent("me", "select", 0, c[0], 0),
                AnnotationEvent("me", "select", 1, c[1], 1),
            ]
        )
        p.store.blacklist.add(
            [BlacklistEvent(c[2], "drawing", "me"), BlacklistEvent(c[3], "x", "me")]
        )
        p.store.blacklist.add([BlacklistEvent(c[3], "", "me", undo=True)])
        p.store.neardup.add_verdicts(
            [DuplicateVerdict(c[4], "test:1", "l2", True, "me")]
        )
        p.store.revisions.create(
            Revision("r-0", "manual"),
            [RevisionMember(c[0], 0), RevisionMember(c[1], 1), RevisionMember(c[2], 0)],
        )
        p.store.revisions.set_review(ReviewState("r-0", 0, reviewed=True))

    res = runner.invoke(app, ["status", "--project", str(root), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["revision"] == "r-0"
    rows = {r["class"]: r for r in data["classes"]}
    expected = {
        "class": "cat",
        "class_id": 0,
        "candidates": 3,
        "annotated": 1,
        "blacklisted": 1,
        "near_duplicates": 1,
        "sampled": 2,
        "reviewed": "yes",
    }
    # status may add columns (eligibility reasons); these must hold
    assert {k: rows["cat"][k] for k in expected} == expected
    assert rows["dog"]["candidates"] == 3 and rows["dog"]["blacklisted"] == 0
    assert rows["dog"]["reviewed"] == "no" and rows["bird"]["candidates"] == 0
    res = runner.invoke(app, ["status", "--project", str(root)])
    assert res.exit_code == 0 and "cat" in res.output and "near" in res.output
    res = runner.invoke(app, ["status", "--project", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "retest init DIR" in res.output
