"""A project's own data is never a source of new candidates.

``retest source add folder PROJECT/revisions/...`` (an exported release),
``.../arrays`` or the project folder itself would re-ingest what the project
already holds; each is refused with one line before anything is stored, while a
folder of the user's own inside the project folder is still accepted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project

runner = CliRunner()


def _write_folder(root: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            px = rng.integers(0, 256, (8, 8), dtype=np.uint8)
            Image.fromarray(px, mode="L").save(root / cls / f"{i}.png")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    r = runner.invoke(app, ["init", str(root), "--classes", "a,b"])
    assert r.exit_code == 0, r.stderr
    return root


@pytest.mark.parametrize(
    "rel", [".", "arrays", "images", "revisions", "revisions/rel-1", ".cache"]
)
def test_own_folders_are_refused(project: Path, rel: str) -> None:
    target = project / rel
    if rel in ("revisions/rel-1", ".cache"):
        _write_folder(target, seed=1)  # images a real folder source would read
    r = runner.invoke(app, ["source", "add", "folder", str(target),
                            "--project", str(project)])  # fmt: skip
    assert r.exit_code == 1, (r.stdout, r.stderr)
    err = " ".join(r.stderr.split())
    assert err.startswith("error: folder source"), err
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "never a source of new candidates" in err, err
    with Project.open(project) as proj:
        assert list(proj.store.candidates.iter()) == []


def test_a_users_folder_inside_the_project_is_accepted(project: Path) -> None:
    _write_folder(project / "my-images", seed=2)
    r = runner.invoke(app, ["source", "add", "folder", str(project / "my-images"),
                            "--project", str(project)])  # fmt: skip
    assert r.exit_code == 0, (r.stdout, r.stderr)
    with Project.open(project) as proj:
        assert len(list(proj.store.candidates.iter())) == 6
