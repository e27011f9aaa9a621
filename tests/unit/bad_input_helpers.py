"""Shared pieces of the bad-input suites (tests/unit/test_bad_input_*.py).

A small real project is built once per session through the CLI (three classes,
8×8 RGB originals and candidates, an l2 dedup run, a sampled revision ``r1``,
crowd tasks and an export of ``r1``) and copied per test. :func:`refused` runs
one command and asserts what every refusal must look like: the exit code, one
``error: …`` line on stderr naming the culprit, no traceback, and a project
whose database, pixel arrays and image files are byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result
from typer.testing import CliRunner

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.cli.main import app

CLASSES = ("a", "b", "c")
SHAPE = (8, 8, 3)
#: Rows per split of the session project.
N_TRAIN, N_TEST, N_CAND = 30, 15, 30
#: Capabilities root uses to ignore file modes; without them 0o444/0o555 bind.
NO_DAC = (
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
)


def invoke(*args: str | os.PathLike[str], cwd: Path | None = None) -> Result:
    """Run ``retest ARGS`` in-process (stderr kept apart from stdout)."""
    argv = [os.fsdecode(a) for a in args]
    if cwd is None:
        return CliRunner().invoke(app, argv)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, argv)
    finally:
        os.chdir(old)


def ok(*args: str | os.PathLike[str]) -> Result:
    res = invoke(*args)
    assert res.exit_code == 0, (args, res.stdout, res.stderr, res.exception)
    return res


def write_arrays(
    path: Path, n: int, seed: int, labels: np.ndarray | None = None
) -> np.ndarray:
    """An ``.npz`` with ``images`` (n, 8, 8, 3) uint8 and ``labels`` 0..2."""
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (n, *SHAPE), dtype=np.uint8)
    np.savez(path, images=imgs, labels=np.arange(n) % 3 if labels is None else labels)
    return imgs


def build_project(root: Path, inputs: Path) -> Path:
    """The session project, built only through the CLI; returns its folder."""
    inputs.mkdir(parents=True, exist_ok=True)
    write_arrays(inputs / "train.npz", N_TRAIN, 1)
    write_arrays(inputs / "test.npz", N_TEST, 2)
    write_arrays(inputs / "cand.npz", N_CAND, 3)
    ok("init", root, "--classes", ",".join(CLASSES))
    p = ("--project", str(root))
    ok("reference", "add", "arrays", inputs / "train.npz", "--split", "train", *p)
    ok("reference", "add", "arrays", inputs / "test.npz", "--split", "test", *p)
    ok("source", "add", "arrays", inputs / "cand.npz", *p)
    ok("dedup", "--metrics", "l2", *p)
    ok("sample", "--strategy", "class-balanced", "--per-class", "2", "--seed", "0",
       "--name", "r1", *p)  # fmt: skip
    ok("crowd", "tasks", "--seed", "0", "--images-per-task", "8", "--controls", "1",
       *p)  # fmt: skip
    ok("export", "r1", "--out", inputs / "export-r1", *p)
    ok("status", *p)  # derived caches a first read writes are not project data
    return root


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of retest.db, retest.toml and every file under arrays/ and images/."""
    files = [root / "retest.db", root / "retest.toml"]
    for sub in ("arrays", "images"):
        if (root / sub).is_dir():
            files += [f for f in (root / sub).rglob("*") if f.is_file()]
    return {
        f.relative_to(root).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(files)
        if f.is_file()
    }


#: A progress bar's last frame (rich renders it on stderr when not a terminal).
_PROGRESS = re.compile(r"\s\d+/\d+\s+\d+%\s")


def assert_one_line(res: Result, code: int, *culprits: str) -> str:
    """Exit ``code``, stderr exactly one ``error: …`` line that names ``culprits``."""
    out = f"exit {res.exit_code}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"uncaught {res.exception!r}\n{out}") from res.exception
    assert res.exit_code == code, out
    lines = [
        ln for ln in res.stderr.splitlines() if ln.strip() and not _PROGRESS.search(ln)
    ]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, out
    assert not [ln for ln in lines if not ln.startswith("warning: ")][1:], out
    assert "Traceback" not in res.stderr + res.stdout, out
    for c in culprits:
        assert c in errors[0], f"{c!r} not named\n{out}"
    return errors[0]


def refused(
    project: Path | None,
    args: Sequence[str | os.PathLike[str]],
    code: int,
    *culprits: str,
    cwd: Path | None = None,
) -> str:
    """Run a command that must be refused; assert the line and an unchanged project.

    ``project`` (when given) is passed as ``--project`` and snapshotted.
    """
    argv = [*args]
    before = snapshot(project) if project is not None else None
    if project is not None:
        argv += ["--project", str(project)]
    res = invoke(*argv, cwd=cwd)
    line = assert_one_line(res, code, *culprits)
    if project is not None:
        assert snapshot(project) == before, f"project changed by {argv}"
    return line


def run_without_dac(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``retest ARGS`` as root without the capabilities that bypass file modes."""
    cmd = [*NO_DAC, *RETEST]
    return subprocess.run(
        [*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def dac_enforceable(tmp: Path) -> str | None:
    """None when file modes bind without DAC capabilities here, else why not."""
    if shutil.which("setpriv") is None:
        return "setpriv is not installed; cannot drop root's DAC capabilities"
    if os.geteuid() != 0:
        return None
    d = tmp / "ro-probe"
    d.mkdir()
    d.chmod(0o555)
    try:
        proc = subprocess.run(
            [*NO_DAC, "touch", str(d / "x")], capture_output=True, text=True
        )
    finally:
        d.chmod(0o755)
    if proc.returncode == 0:
        return "file modes do not bind even without DAC capabilities here"
    if "Permission denied" not in proc.stderr:
        return f"setpriv cannot drop capabilities here: {proc.stderr.strip()}"
    return None


def make_read_only(path: Path) -> None:
    """Remove write bits from ``path`` and everything under it."""
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode & ~0o222)


def make_writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o200)


def non_utf8_name(folder: Path, suffix: str) -> Path:
    """A path in ``folder`` whose name is not valid UTF-8 (bytes 0xff 0xfe)."""
    return Path(os.fsdecode(os.fsencode(folder) + b"/bad-\xff\xfe" + suffix.encode()))


def case_param(
    id_: str, t: str, code: int, words: list[str], xfail: str = ""
) -> object:
    """A ``(template, code, culprits)`` case; ``xfail`` names a known bug's owner."""
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(t, code, words, id=id_, marks=marks)
