"""Bad ``--project`` values for every command that opens a project.

Each command is run against a project folder that is missing, a file, an empty
folder, a folder with a non-UTF-8 name, or a project whose ``retest.db`` is
empty, truncated or a directory, and against a read-only project. Every run must
end with exit 1 or 2 and one ``error: …`` line naming the folder or the database,
without touching the files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from bad_input_helpers import (
    assert_one_line,
    build_project,
    dac_enforceable,
    invoke,
    make_read_only,
    make_writable,
    non_utf8_name,
    refused,
    run_without_dac,
    snapshot,
)

#: A harmless invocation of every command that opens a project (``--project`` is
#: appended). ``{inputs}`` is replaced by the session's input folder.
PROJECT_COMMANDS: dict[str, str] = {
    "check": "check",
    "status": "status",
    "revisions": "revisions",
    "diff": "diff r1 r1",
    "plan": "plan --rule v6",
    "sample": "sample --strategy class-balanced --per-class 1 --seed 1 --name r2",
    "split": "split --per-class 2 --seed 1",
    "export": "export r1 --out {tmp}/out",
    "evaluate": "evaluate --model nearest-centroid",
    "dedup": "dedup --metrics l2",
    "dedup-queue": "dedup-queue",
    "dedup-verdict": "dedup-verdict x l2 --shown train:0 --who me",
    "crowd tasks": "crowd tasks --seed 1",
    "crowd export": "crowd export --out {tmp}/mturk --base-url https://example.org/i",
    "crowd import": "crowd import {inputs}/results.csv",
    "reference add": "reference add arrays {inputs}/train.npz --split train",
    "reference keywords": "reference keywords {tmp}",
    "reference show": "reference show",
    "review queue-label-errors": "review queue-label-errors {inputs}/le.json",
    "review label-errors": "review label-errors",
    "source add": "source add arrays {inputs}/cand.npz --name more",
    "source list": "source list",
    "serve": "serve --port 1",
    "people add": "people add Zed",
    "people list": "people list",
    "people link": "people link zed",
    "people revoke": "people revoke zed",
    "people exclude": "people exclude W1",
    "people include": "people include W1",
}


@pytest.fixture(scope="session")
def session_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bad-input-project")
    root = build_project(base / "proj", base / "inputs")
    (base / "inputs" / "results.csv").write_text("HITId,AssignmentId\n")
    (base / "inputs" / "le.json").write_text("[]")
    return root, base / "inputs"


def _argv(name: str, inputs: Path, tmp: Path) -> list[str]:
    return [
        a.replace("{inputs}", str(inputs)).replace("{tmp}", str(tmp))
        for a in PROJECT_COMMANDS[name].split()
    ]


def _copy(session_project: tuple[Path, Path], tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(session_project[0], root)
    return root


#: Commands run with every variant; the others with the first variant only.
REPRESENTATIVE = ("status", "sample", "source add", "crowd import", "export")


def _matrix(variants: list[str]) -> list[tuple[str, str]]:
    return [(n, v) for v in variants for n in PROJECT_COMMANDS
            if v == variants[0] or n in REPRESENTATIVE]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "kind"), _matrix(["missing", "file", "empty-dir", "non-utf8"])
)
def test_project_folder_is_not_a_project(
    name: str, kind: str, session_project: tuple[Path, Path], tmp_path: Path
) -> None:
    """``--project`` that is no project: exit 2, the line names the folder."""
    if kind == "missing":
        target = tmp_path / "nowhere"
    elif kind == "file":
        target = tmp_path / "a-file"
        target.write_text("not a project")
    elif kind == "empty-dir":
        target = tmp_path / "empty"
        target.mkdir()
    else:
        target = non_utf8_name(tmp_path, "dir")
        target.mkdir()
    argv = [*_argv(name, session_project[1], tmp_path), "--project", str(target)]
    line = assert_one_line(invoke(*argv, cwd=tmp_path), 2, "not a retest project")
    assert str(tmp_path) in line  # the folder
    assert "retest init" in line or "--project" in line  # what to do


@pytest.mark.parametrize(
    ("name", "damage"), _matrix(["empty", "truncated", "directory", "garbage"])
)
def test_damaged_database(
    name: str, damage: str, session_project: tuple[Path, Path], tmp_path: Path
) -> None:
    """A project whose retest.db is damaged is refused before any work."""
    root = _copy(session_project, tmp_path)
    db = root / "retest.db"
    if damage == "empty":
        db.write_bytes(b"")
    elif damage == "truncated":
        db.write_bytes(db.read_bytes()[:5000])
    elif damage == "garbage":
        db.write_bytes(b"\xff\xfe not a database \x00" * 300)
    else:
        db.unlink()
        db.mkdir()
    before = snapshot(root) if damage != "directory" else None
    argv = [*_argv(name, session_project[1], tmp_path), "--project", str(root)]
    res = invoke(*argv, cwd=tmp_path)
    if name == "check":  # check reports the damage as its finding, exit 1
        assert res.exit_code == 1, res.stderr + res.stdout
        assert "retest.db" in res.stdout + res.stderr
        assert "Traceback" not in res.stdout + res.stderr
    else:
        assert_one_line(res, 1, "retest.db")
    if before is not None:
        assert snapshot(root) == before


@pytest.mark.parametrize(
    "name",
    [
        "status",
        "sample",
        "source add",
        "check",
    ],
)
def test_read_only_project(
    name: str, session_project: tuple[Path, Path], tmp_path: Path
) -> None:
    """A project without write permission: one line that says so, nothing changed.

    Root ignores file modes, so the command runs as root without the DAC
    capabilities (``setpriv``); skipped with the reason where that is impossible.
    """
    why = dac_enforceable(tmp_path)
    if why is not None:
        pytest.skip(why)
    root = _copy(session_project, tmp_path)
    before = snapshot(root)
    make_read_only(root)
    try:
        argv = [*_argv(name, session_project[1], tmp_path), "--project", str(root)]
        proc = run_without_dac(argv, cwd=tmp_path)
    finally:
        make_writable(root)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "read-only" in lines[0] and "retest.db" in lines[0], lines[0]
    assert snapshot(root) == before


def test_refused_helper_checks_unchanged_project(
    session_project: tuple[Path, Path], tmp_path: Path
) -> None:
    """The shared assertion itself: a refusal passes, an unknown revision is one line."""
    root = _copy(session_project, tmp_path)
    refused(root, ["export", "nope", "--out", str(tmp_path / "o")], 1, "nope")


#: Commands writing outside the project, ``{ro}`` a folder without write permission.
READ_ONLY_OUTPUTS = {
    "export": "export r1 --out {ro}/out",
    "split": "split --per-class 2 --seed 1 --out {ro}/s.json",
    "crowd export": "crowd export --out {ro}/m --base-url https://example.org/i",
    "label-errors": "label-errors --labels {inputs}/lo.npy --pred-probs "
    "{inputs}/pp.npy --out {ro}/le",
    "compare": "compare --example --bootstrap 10 --out {ro}/c",
    "init": "init {ro}/p --classes a,b",
}


@pytest.mark.parametrize("name", list(READ_ONLY_OUTPUTS))
def test_read_only_output_folder(
    name: str, session_project: tuple[Path, Path], tmp_path: Path
) -> None:
    """An output inside a folder that cannot be written: one line naming the
    output, before any work (the project is untouched and nothing is created)."""
    why = dac_enforceable(tmp_path)
    if why is not None:
        pytest.skip(why)
    import numpy as np

    root, inputs = session_project
    if not (inputs / "pp.npy").exists():
        y = np.arange(30) % 3
        np.save(inputs / "lo.npy", y)
        p = np.full((30, 3), 0.1) + 0.7 * np.eye(3)[y]
        np.save(inputs / "pp.npy", p / p.sum(axis=1, keepdims=True))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    tmp_path.chmod(0o755)
    before = snapshot(root)
    argv = READ_ONLY_OUTPUTS[name].replace("{ro}", str(ro))
    argv = argv.replace("{inputs}", str(inputs)).split()
    if name not in ("label-errors", "compare", "init"):
        argv += ["--project", str(root)]
    try:
        proc = run_without_dac(argv, cwd=tmp_path)
    finally:
        ro.chmod(0o755)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert str(ro) in lines[0], lines[0]
    assert "not writable" in lines[0] or "Permission denied" in lines[0], lines[0]
    assert list(ro.iterdir()) == []
    assert snapshot(root) == before


@pytest.mark.parametrize("name", ["status", "sample", "source add", "export"])
def test_misspelt_config_section_is_named(
    name: str, session_project: tuple[Path, Path], tmp_path: Path
) -> None:
    """``[projetc]`` in retest.toml: the line names the section and the likely
    one, not a consequence ("project name must be a non-empty string")."""
    root = _copy(session_project, tmp_path)
    toml = root / "retest.toml"
    toml.write_text(toml.read_text().replace("[project]", "[projetc]"))
    argv = _argv(name, session_project[1], tmp_path)
    refused(root, argv, 2, str(toml), "[projetc]", "Did you mean [project]?")
