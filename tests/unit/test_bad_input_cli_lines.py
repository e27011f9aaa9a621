"""What a user reads on stderr when a command is refused or interrupted.

An ``error:`` line must be the first thing on stderr (no empty line left by a
progress bar that never drew), a bad ``--seed`` is named as ``--seed`` (not the
library's ``random_state``), and Ctrl-C names the command that resumes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_input_helpers import build_project, invoke, snapshot


@pytest.fixture(scope="session")
def session_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bad-input-cli-lines")
    return build_project(base / "proj", base / "inputs"), base / "inputs"


def _first_line_is_error(args: list[str], code: int, *named: str) -> str:
    res = invoke(*args)
    assert res.exit_code == code, (res.stdout, res.stderr)
    first = res.stderr.splitlines()[0] if res.stderr else ""
    assert first.startswith("error: "), repr(res.stderr)
    for n in named:
        assert n in first, first
    return first


@pytest.mark.parametrize(
    "args, code, named",
    [
        (["export", "nope", "--out", "{tmp}/x"], 1, ["'nope'"]),
        (["dedup", "--against", "original-train,orignal-test"], 2, ["orignal-test"]),
        (["sample", "--strategy", "class-balanced", "--seed", "-1"], 2, ["--seed"]),
        (["split", "--seed", "-3"], 2, ["--seed"]),
    ],
    ids=["export-unknown-revision", "dedup-misspelt-against", "sample-seed", "split"],
)
def test_error_is_the_first_stderr_line(
    session_project: tuple[Path, Path],
    tmp_path: Path,
    args: list[str],
    code: int,
    named: list[str],
) -> None:
    root, _ = session_project
    before = snapshot(root)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    line = _first_line_is_error([*argv, "--project", str(root)], code, *named)
    assert "random_state" not in line
    assert snapshot(root) == before


def test_seed_help_names_the_config_key() -> None:
    # rich drew "[seeds]" as markup (gone) until it was escaped
    out = " ".join(invoke("sample", "--help").stdout.replace("│", " ").split())
    assert "(default: `sample` under [seeds] in retest.toml)" in out, out


def test_ctrl_c_names_the_command_to_rerun(
    session_project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, inputs = session_project

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("retest.stages.ingest.add_source", interrupted)
    args = ["source", "add", "arrays", str(inputs / "cand.npz"), "--name", "pool2",
            "--project", str(root)]  # fmt: skip
    res = invoke(*args)
    assert res.exit_code == 130, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == [
        f"interrupted: rerun `retest source add arrays {inputs / 'cand.npz'} "
        f"--name pool2 --project {root}` to resume"
    ], res.stderr
