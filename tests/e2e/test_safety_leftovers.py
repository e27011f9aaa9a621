"""Data-safety guarantees a user relies on, checked only through the CLI.

Class names that could act as paths are refused when the project is made, and
names stored before that check never place an exported file outside its folder;
``split --out`` never replaces a file without ``--overwrite``; ``dedup`` refused
for an unusable ``reports/`` leaves ``retest.db`` byte-identical; a resumed
``source add`` removes the temporary files its killed writer left in ``arrays/``
(and nothing else). The project: real Fashion-MNIST (``conftest.build_inputs``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_checks import one_error_line

from retest._atomic import temporary_of

pytestmark = pytest.mark.slow


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → contents)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class Cli:
    def __init__(self, root: Path, run_cli: Any) -> None:
        self.root, self.run_cli = root, run_cli

    def __call__(
        self, *args: str, project: Path | None = None, ok: bool = True,
        env: dict[str, str] | None = None, kill_ingest_after: int | None = None,
    ) -> Any:  # fmt: skip
        extra = () if project is None else ("--project", str(project))
        r = self.run_cli(*args, *extra, cwd=self.root, env=env,
                         kill_ingest_after=kill_ingest_after)  # fmt: skip
        if ok:
            assert r.returncode == 0, r.describe()
        return r


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, retest_cli: Any) -> Cli:
    return Cli(tmp_path_factory.mktemp("safety"), retest_cli)


@pytest.fixture(scope="module")
def ingested(cli: Cli, fm_inputs: Any) -> Path:
    """A Fashion-MNIST project with its originals and the pool, not deduplicated."""
    proj = cli.root / "ingested"
    cli("init", str(proj), "--classes-from", "fashion_mnist")
    d = fm_inputs.train_file.parent
    cli("reference", "add", "idx", str(fm_inputs.train_file), "--labels",
        str(d / "train-labels-idx1-ubyte.gz"), "--split", "train", project=proj)  # fmt: skip
    cli("reference", "add", "idx", str(fm_inputs.test_file), "--labels",
        str(d / "t10k-labels-idx1-ubyte.gz"), "--split", "test", project=proj)  # fmt: skip
    cli("source", "add", "arrays", str(fm_inputs.pool_file), project=proj)
    return proj


@pytest.fixture(scope="module")
def deduped(cli: Cli, ingested: Path) -> Path:
    proj = cli.root / "deduped"
    shutil.copytree(ingested, proj)
    cli("dedup", "--metrics", "l2", project=proj)
    return proj


def _copy(cli: Cli, proj: Path, name: str) -> Path:
    dst = cli.root / name
    shutil.copytree(proj, dst)
    return dst


# ------------------------------------------------------------------ 1. class names


@pytest.mark.parametrize(
    "classes, bad",
    [
        ("cat,../../escape,dog", "../../escape"),
        ("cat,a/../b,dog", "a/../b"),
        ("cat,/etc,dog", "/etc"),
        ("cat,dog/,bird", "dog/"),
        ("cat,a//b,dog", "a//b"),
        ("cat,..,dog", ".."),
        ("cat,.,dog", "."),
        ("cat,c\\d,dog", "c\\d"),
        ("cat,x\x01y,dog", "x\x01y"),
        ("cat,evil\u202etxt.png,dog", "evil\u202etxt.png"),
    ],
)
def test_init_refuses_a_class_name_that_could_act_as_a_path(
    cli: Cli, classes: str, bad: str
) -> None:
    proj = cli.root / "refused"
    r = cli("init", str(proj), "--classes", classes, ok=False)
    line = one_error_line(r)
    assert repr(bad) in line and "class name" in line, line
    assert not (proj / "retest.toml").exists(), "a project was made anyway"


def test_init_keeps_class_names_people_use(cli: Cli) -> None:
    names = ["T-shirt/top", "Levi's jeans", "crème brûlée", "C++ (book)", "AC / DC"]
    proj = cli.root / "real-names"
    cli("init", str(proj), "--classes", ",".join(names))
    toml = (proj / "retest.toml").read_text(encoding="utf-8")
    assert all(json.dumps(n, ensure_ascii=False) in toml for n in names), toml
    preset = cli.root / "preset"
    cli("init", str(preset), "--classes-from", "fashion_mnist")
    assert '"T-shirt/top"' in (preset / "retest.toml").read_text()


def test_names_stored_before_the_check_stay_inside_the_export(
    cli: Cli, deduped: Path
) -> None:
    """A project whose class names were stored before ``init`` checked them (the
    toml and the database edited to such names) exports every format without a
    file outside the export folder; the names travel as data."""
    proj = _copy(cli, deduped, "old-names")
    names = ["../../escape", "a/b", ".", "..", "c\\d", "x\x01y", "/abs",
             "Sneaker", "Bag", "Ankle boot"]  # fmt: skip
    toml = proj / "retest.toml"
    lines = toml.read_text().splitlines()
    lines[0] = "classes = " + json.dumps(names)
    toml.write_text("\n".join(lines) + "\n")
    with sqlite3.connect(proj / "retest.db") as db:
        db.execute("UPDATE classes SET name = 'tmp-' || id")
        db.executemany(
            "UPDATE classes SET name = ? WHERE id = ?",
            [(n, i) for i, n in enumerate(names)],
        )
    sample = cli("sample", "--strategy", "class-balanced", "--per-class", "3",
                 "--seed", "1", "--include-unreviewed", "--json", project=proj)  # fmt: skip
    revision = json.loads(sample.stdout)["name"]
    release = cli.root / "old-names-release"
    before = _files(cli.root / "old-names")
    for fmt in ("imagefolder", "cifar", "npy", "parquet"):
        out = release / fmt
        cli("export", revision, "--format", fmt, "--out", str(out), "--force",
            project=proj)  # fmt: skip
        assert all(p.resolve().is_relative_to(out) for p in out.rglob("*"))
    assert sorted(p.name for p in release.iterdir()) == sorted(
        ("imagefolder", "cifar", "npy", "parquet")
    ), "an export wrote next to its folder"
    folders = {p.name for p in (release / "imagefolder").iterdir() if p.is_dir()}
    assert folders <= {str(i) for i in range(10)}, folders
    index = json.loads((release / "imagefolder" / "class_index.json").read_text())
    assert index == {str(i): n for i, n in enumerate(names)}
    after = _files(cli.root / "old-names")
    new_outside = {
        k for k in set(after) - set(before)
        if not k.startswith(("revisions/", "reports/", "arrays/"))
    }  # fmt: skip
    assert not new_outside, new_outside
    assert not (cli.root.parent / "escape").exists()


# ------------------------------------------------------------------ 2. split --out


def test_split_out_never_replaces_a_file_without_overwrite(
    cli: Cli, deduped: Path
) -> None:
    notes = cli.root / "keep" / "notes.json"
    notes.parent.mkdir()
    notes.write_text('{"mine": "do not lose"}\n')
    args = ("split", "--per-class", "4", "--seed", "3", "--include-unreviewed",
            "--out", str(notes))  # fmt: skip
    line = one_error_line(cli(*args, project=deduped, ok=False))
    assert str(notes) in line and "--overwrite" in line, line
    assert notes.read_text() == '{"mine": "do not lose"}\n'
    # --overwrite replaces only a split file (issue 23): the notes stay
    line = one_error_line(cli(*args, "--overwrite", project=deduped, ok=False))
    assert str(notes) in line and "not a split" in line, line
    assert notes.read_text() == '{"mine": "do not lose"}\n'
    fresh = notes.parent / "new.json"
    cli(*args[:-1], str(fresh), project=deduped)  # a new file needs no flag
    first = json.loads(fresh.read_text())
    assert len(first["train"]) + len(first["test"]) == 40, first.keys()
    cli(*args[:-1], str(fresh), "--overwrite", project=deduped)  # its own output
    assert json.loads(fresh.read_text())["train"] == first["train"]
    assert sorted(p.name for p in notes.parent.iterdir()) == [
        "new.json",
        "notes.json",
    ], "temp left"


# ------------------------------------------------------------------ 3. dedup


def _db_state(proj: Path) -> dict[str, str]:
    """sha256 of the database and of its WAL and journal files, when present."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(proj.glob("retest.db*"))
    }


def test_dedup_refused_for_an_unusable_reports_folder_stores_nothing(
    cli: Cli, ingested: Path
) -> None:
    proj = _copy(cli, ingested, "reports-is-a-file")
    shutil.rmtree(proj / "reports")
    (proj / "reports").write_text("a file where the reports folder was\n")
    before = _db_state(proj)
    line = one_error_line(cli("dedup", "--metrics", "l2", project=proj, ok=False))
    assert str(proj / "reports") in line, line
    assert _db_state(proj) == before, "dedup stored work before it was refused"
    (proj / "reports").unlink()
    cli("dedup", "--metrics", "l2", project=proj)  # the same run then works
    assert (proj / "reports" / "dedup" / "run.json").is_file()


# ------------------------------------------------------------------ 4. arrays/ temporaries


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True, check=True)  # fmt: skip
    return int(p.stdout)


def test_resumed_source_add_removes_its_killed_writers_temporaries(
    cli: Cli, ingested: Path, fm_inputs: Any
) -> None:
    proj = _copy(cli, ingested, "killed-writer")
    add = ("source", "add", "arrays", str(fm_inputs.more_file), "--name", "more",
           "--batch-size", "1")  # fmt: skip
    killed = cli(*add, project=proj, ok=False,
                 kill_ingest_after=2)  # fmt: skip
    assert killed.returncode != 0, killed.describe()
    arrays = proj / "arrays"
    header = next(arrays.glob("candidates_*.json"))
    # the killed writer may itself have left a header's temporary (its header is
    # written beside the batches, so the kill can fall between write and rename)
    own = [p for p in arrays.iterdir() if temporary_of(p.name) is not None]
    dead = _dead_pid()
    # what a writer killed between writing a header's temporary and its rename leaves
    stale = arrays / f".{header.name}.{dead}.k3x_9q2a.tmp"
    stale.write_text('{"count": 1')
    # and between an image file's temporary and its rename (a file source)
    images = proj / "images"
    images.mkdir(exist_ok=True)
    stale_image = images / f".{'ab' * 32}.{dead}.q1w2e3r4.tmp"
    stale_image.write_bytes(b"\xff\xd8 half a JPEG")
    kept = [
        arrays / f".{header.name}.{os.getpid()}.abcdefgh.tmp",  # its writer runs
        arrays / f".no_such_array.json.{dead}.abcdefgh.tmp",  # not an array's
        arrays / "notes.tmp",  # the user's
        arrays / f".{header.name}.{dead}.tmp",  # not the writer's naming
        images / f".holiday.jpg.{dead}.abcdefgh.tmp",  # not an image file's
    ]
    for p in kept:
        p.write_text("keep\n")
    r = cli(*add, project=proj)
    said = [x for x in r.stdout.splitlines() if "temporary file" in x]
    first = min([stale, *own], key=lambda p: p.name)  # removed in name order
    assert said == [
        f"removed {2 + len(own)} temporary files a killed ingest left "
        f"(e.g. arrays/{first.name})"
    ], r.describe()
    assert not stale.exists() and not stale_image.exists()
    assert not any(p.exists() for p in own)
    assert all(p.read_text() == "keep\n" for p in kept)
    listed = json.loads(cli("source", "list", "--json", project=proj).stdout)
    assert any(j.get("name") == "more" and j.get("complete") for j in listed), listed
