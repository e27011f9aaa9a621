"""One name rule (retest.names) for revisions, exports and projects, and automatic
revision names that two concurrent `retest sample` runs cannot both take."""

from __future__ import annotations

import doctest
import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import retest.names
from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.cli.main import app
from retest.errors import InputValidationError, StoreError
from retest.names import MAX_NAME_LENGTH, suggest_name, validate_name
from retest.project import Project
from retest.stages.revisions import create_revision
from retest.store.base import Store
from retest.store.sqlite import SQLiteStore

runner = CliRunner()


@pytest.mark.parametrize(
    "name", ["demo-b-0", "r.1", "A_b-c.d", "0", "x" * MAX_NAME_LENGTH, "v1.2"]
)
def test_valid_names_pass_unchanged(name: str) -> None:
    assert validate_name(name, "revision") == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("../x", "separator"),
        ("..", "'..'"),
        ("a..b", "'..'"),
        ("a/b", "separator"),
        ("a\\b", "separator"),
        (".hidden", "starts with '.'"),
        ("-rf", "starts with '-'"),
        ("a\nb", "control"),
        ("a\x00b", "control"),
        ("a b", "' '"),
        ("é", "'é'"),
        ("x" * (MAX_NAME_LENGTH + 1), "characters long"),
    ],
)
def test_invalid_names_are_refused_with_the_reason(name: str, why: str) -> None:
    with pytest.raises(InputValidationError) as err:
        validate_name(name, "revision")
    msg = str(err.value)
    assert (
        why in msg
        and "revision name" in msg
        and "\n" not in msg.replace(repr(name), "")
    )
    # the suggestion in the message is itself valid
    assert validate_name(suggest_name(name), "revision")


def test_names_doctest() -> None:
    res = doctest.testmod(retest.names, optionflags=doctest.ELLIPSIS)
    assert res.failed == 0 and res.attempted >= 3


# ---------------------------------------------------------------- through the CLI


def _snapshot(root: Path) -> dict[str, str]:
    return {
        f.relative_to(root).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


def _project(tmp_path: Path, populate: Callable[[Store], None]) -> Path:
    root = tmp_path / "deep" / "proj"
    with Project.init(root, name="demo", classes=["cat", "dog", "fox"]) as p:
        populate(p.store)
        from retest.project import candidate_eligibility

        candidate_eligibility(p)  # its derived caches exist before the snapshot
    return root


def _one_line_error(res: Any, code: int = 1) -> str:
    lines = res.output.strip().splitlines()
    assert res.exit_code == code, res.output
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


@pytest.mark.parametrize("bad", ["../../x", "a/b", "..", ".x", "x\ty"])
def test_sample_name_cannot_escape(tmp_path: Path, populate, bad: str) -> None:
    root = _project(tmp_path, populate)
    before = _snapshot(root)
    outside = sorted(p.name for p in tmp_path.iterdir())
    args = ["sample", "--strategy", "matched-frequency", "--seed", "1"]
    res = runner.invoke(
        app, [*args, "--name", bad, "--no-dedup", "--project", str(root)]
    )
    line = _one_line_error(res, code=2)  # a bad --name value
    assert "revision name" in line
    assert _snapshot(root) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == outside
    with Project.open(root) as p:
        assert p.store.revisions.list() == []


def test_sample_explicit_valid_name_kept(tmp_path: Path, populate) -> None:
    root = _project(tmp_path, populate)
    args = ["sample", "--strategy", "matched-frequency", "--seed", "1"]
    res = runner.invoke(
        app, [*args, "--name", "v1.0", "--no-dedup", "--project", str(root), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["name"] == "v1.0"


def test_init_on_a_file_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "data.csv"
    f.write_text("a,b\n")
    for target in (f, f / "sub"):
        res = runner.invoke(app, ["init", str(target), "--classes", "a,b"])
        assert "is a file" in _one_line_error(res, code=2)  # a bad DIR value
    assert f.read_text() == "a,b\n"


@pytest.mark.parametrize("bad", ["../../x", "a/b", "-p", "..", ""])
def test_init_refuses_bad_project_name(tmp_path: Path, bad: str) -> None:
    res = runner.invoke(
        app, ["init", str(tmp_path / "p"), "--name", bad, "--classes", "a,b"]
    )
    assert "project name" in _one_line_error(res, code=2)  # a bad --name value
    assert not (tmp_path / "p").exists()


def test_init_default_name_made_valid(tmp_path: Path) -> None:
    res = runner.invoke(app, ["init", str(tmp_path / "My Data (v2)"), "--classes", "a"])
    assert res.exit_code == 0, res.output
    with Project.open(tmp_path / "My Data (v2)") as p:
        assert p.config.name == "My-Data-v2"


def test_review_queue_refuses_bad_split(tmp_path: Path) -> None:
    with Project.init(tmp_path / "p", classes=["a", "b"]):
        pass
    before = _snapshot(tmp_path / "p")
    lst = tmp_path / "suspects.json"
    lst.write_text(json.dumps([{"index": 0, "given": 0, "suggested": 1}]))
    args = ["review", "queue-label-errors", str(lst), "--split", "../test"]
    res = runner.invoke(app, [*args, "--project", str(tmp_path / "p")])
    assert "split name" in _one_line_error(res, code=2)  # a bad --split value
    assert _snapshot(tmp_path / "p") == before


# ---------------------------------------------------------------- naming race


class _LateRevisions:
    """The real revision repository, except that just before this process's first
    ``create`` another connection to the same database creates a revision under
    the same name: the interleaving of two `retest sample` runs that both read
    the highest number before either wrote."""

    def __init__(self, repo: Any, other: SQLiteStore) -> None:
        self._repo, self._other = repo, other
        self.stolen: list[str] = []

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._repo, attr)

    def create(self, revision: Any, members: Any) -> Any:
        if not self.stolen:
            self.stolen.append(revision.name)
            self._other.revisions.create(revision, members)
        return self._repo.create(revision, members)


def test_concurrent_unnamed_samples_get_distinct_names(
    tmp_path: Path, populate
) -> None:
    root = _project(tmp_path, populate)
    with Project.open(root) as p, SQLiteStore(p.db_path) as other:
        late = _LateRevisions(p.store.revisions, other)
        p.store.revisions = late  # type: ignore[misc]
        out = create_revision(p, strategy="matched-frequency", seed=3, per_class=5)
        assert late.stolen == ["demo-matched-frequency-0"]
        assert out.revision.name == "demo-matched-frequency-1"
        names = [r.name for r in other.revisions.list()]
        assert names == ["demo-matched-frequency-0", "demo-matched-frequency-1"]
        assert len(other.revisions.members("demo-matched-frequency-1")) == 15


def test_explicit_name_conflict_is_not_renamed(tmp_path: Path, populate) -> None:
    root = _project(tmp_path, populate)
    with Project.open(root) as p:
        create_revision(p, strategy="threshold", seed=1, name="mine")
        with pytest.raises(StoreError, match="'mine' already exists"):
            create_revision(p, strategy="threshold", seed=2, name="mine")
        assert [r.name for r in p.store.revisions.list()] == ["mine"]


def test_parallel_sample_processes(tmp_path: Path, populate) -> None:
    """Four real `retest sample` processes at once: all succeed, four names."""
    root = _project(tmp_path, populate)
    cmd = list(RETEST)
    cmd += ["sample", "--strategy"]
    cmd += ["matched-frequency", "--seed", "1", "--per-class", "5", "--no-dedup"]
    cmd += ["--project", str(root), "--json"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()
    names = sorted(json.loads(o)["name"] for o, _ in outs)
    assert names == [
        "demo-matched-frequency-0",
        "demo-matched-frequency-1",
        "demo-matched-frequency-2",
        "demo-matched-frequency-3",
    ]


def test_one_spelling_of_revision_names_that_continues_the_earlier_one(
    tmp_path: Path, populate
) -> None:
    """New revisions are named by the strategy as `--strategy` spells it; a
    project's revisions named with ImageNetV2's letters keep their names, and the
    next revision of that strategy continues their numbers."""
    root = _project(tmp_path, populate)
    with Project.open(root) as p:
        first = create_revision(p, strategy="matched-frequency", seed=3, per_class=5)
        assert first.revision.name == "demo-matched-frequency-0"
        assert create_revision(p, strategy="class-balanced", seed=3,
                               per_class=5).revision.name == "demo-class-balanced-0"  # fmt: skip
        # a project sampled before: its names have the letter
        create_revision(p, strategy="matched-frequency", seed=4, per_class=5,
                        name="demo-b-3")  # fmt: skip
        create_revision(p, strategy="threshold", seed=4, per_class=5, name="demo-a-1")
        nxt = create_revision(p, strategy="matched-frequency", seed=5, per_class=5,
                              parent="demo-b-3")  # fmt: skip
        assert nxt.revision.name == "demo-matched-frequency-4"
        thr = create_revision(p, strategy="threshold", seed=5, per_class=5)
        assert thr.revision.name == "demo-threshold-2"
        names = [r.name for r in p.store.revisions.list()]
    assert "demo-b-3" in names and "demo-a-1" in names  # kept as they were
    r = runner.invoke(app, ["status", "demo-b-3", "--project", root, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["revision"] == "demo-b-3"
