"""``--predictions-dir PROJECT/arrays/predictions``: a clear refusal, the way out.

The project's prediction cache (``retest evaluate``) holds hash-named ``.npz``
files with ``.json`` descriptions, not a testbed folder; reading it failed on
the first description with "expected a non-empty JSON list of predicted
classes. Got dict.". ``label-errors --predictions-dir`` and ``compare
--predictions-orig/--predictions-new`` now say what the folder is and what to
run instead, and a user's testbed folder inside the project still works.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from retest.cli.main import app


def invoke(*args: str | os.PathLike[str]) -> Result:
    return CliRunner().invoke(app, [os.fspath(a) for a in args])


def assert_one_line(res: Result, code: int, *culprits: str) -> str:
    assert res.exit_code == code, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for c in culprits:
        assert c in lines[0], (c, lines[0])
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    assert invoke("init", root, "--classes", "a,b,c").exit_code == 0
    cache = root / "arrays" / "predictions"
    cache.mkdir(parents=True)
    key = "0fe3b86acd8265e231d8f6e052720dca35bc51bb"
    np.savez(cache / f"{key}.npz", top=np.zeros((30, 1), np.int64))
    (cache / f"{key}.json").write_text(json.dumps({"model": "knn-5", "n_classes": 3,
                                                   "file": f"{key}.npz"}))  # fmt: skip
    labels = np.arange(30) % 3
    np.save(tmp_path / "labels.npy", labels)
    mine = root / "my-testbed"  # a user's own testbed folder in the project
    mine.mkdir()
    (mine / "m1.json").write_text(json.dumps(labels.tolist()))
    (mine / "m2.json").write_text(json.dumps(((labels + 1) % 3).tolist()))
    return root


def test_label_errors_names_the_cache_and_the_revision_option(
    project: Path, tmp_path: Path
) -> None:
    cache = project / "arrays" / "predictions"
    res = invoke("label-errors", "--labels", tmp_path / "labels.npy",
                 "--predictions-dir", cache, "--out", tmp_path / "le")  # fmt: skip
    line = assert_one_line(res, 1, str(cache), "prediction cache", "--revision REV")
    assert "JSON list" not in line
    assert not (tmp_path / "le").exists()


def test_compare_names_the_cache(project: Path, tmp_path: Path) -> None:
    cache = project / "arrays" / "predictions"
    lab = tmp_path / "labels.npy"
    res = invoke("compare", "--out", tmp_path / "cmp", "--labels-orig", lab,
                 "--labels-new", lab, "--predictions-orig", project / "my-testbed",
                 "--predictions-new", cache, "--bootstrap", "10")  # fmt: skip
    assert_one_line(res, 1, str(cache), "prediction cache")


def test_a_users_testbed_inside_the_project_is_read(
    project: Path, tmp_path: Path
) -> None:
    res = invoke("label-errors", "--labels", tmp_path / "labels.npy",
                 "--predictions-dir", project / "my-testbed",
                 "--out", tmp_path / "le", "--json")  # fmt: skip
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert json.loads(res.stdout)["report"]["n_examples"] == 30
