"""``source add arrays FILE --class C`` where FILE labels its images: refused.

``--class`` gives every item one class. Given with an ``.npz`` whose labels
name several classes (a slip: the user meant to add a labelled pool), it used to
relabel all of them silently; now it is one error line and nothing is stored.
An unlabelled file, or one whose labels are all one class, still takes --class.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project

runner = CliRunner()


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    assert runner.invoke(app, ["init", str(root), "--classes", "a,b,c"]).exit_code == 0
    return root


def _classes(root: Path) -> list[int | None]:
    with Project.open(root) as proj:
        return sorted(r.class_id for r in proj.store.candidates.iter())


def test_class_over_several_labels_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path)
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "pool.npz", images=rng.integers(0, 256, (9, 8, 8), np.uint8),
             labels=np.arange(9) % 3)  # fmt: skip
    r = runner.invoke(app, ["source", "add", "arrays", str(tmp_path / "pool.npz"),
                            "--class", "b", "--project", str(root)])  # fmt: skip
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --class b: "), lines
    assert "labels of 3 classes" in lines[0] and "pool.npz" in lines[0]
    assert _classes(root) == []
    ok = runner.invoke(app, ["source", "add", "arrays", str(tmp_path / "pool.npz"),
                             "--project", str(root)])  # fmt: skip
    assert ok.exit_code == 0, ok.stderr
    assert _classes(root) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_class_for_unlabelled_or_one_class_files(tmp_path: Path) -> None:
    root = _project(tmp_path)
    rng = np.random.default_rng(2)
    np.save(tmp_path / "bare.npy", rng.integers(0, 256, (4, 8, 8), np.uint8))
    np.savez(tmp_path / "one.npz", images=rng.integers(0, 256, (3, 8, 8), np.uint8),
             labels=np.zeros(3, np.int64))  # fmt: skip
    for f in ("bare.npy", "one.npz"):  # two files: a source name each
        r = runner.invoke(app, ["source", "add", "arrays", str(tmp_path / f),
                                "--class", "c", "--name", f.split(".")[0],
                                "--project", str(root)])  # fmt: skip
        assert r.exit_code == 0, (f, r.stderr)
    assert _classes(root) == [2] * 7
