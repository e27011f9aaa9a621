"""Bad inputs to the commands that work without a project, and ``--debug``.

``retest init``, ``retest datasets list|fetch|info``, ``retest flickr
search|download`` and ``retest demo``: folders that are files, files that are
missing, empty, truncated, non-UTF-8 or directories, option values out of range
and usage errors. Each must be one ``error:`` line with the right exit code
(1 bad input, 2 usage / bad option value); with ``--debug`` the traceback shows.
No network is used: every refusal happens before a request.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from bad_input_helpers import (
    assert_one_line,
    case_param,
    invoke,
    non_utf8_name,
    refused,
)

from checkout_cli import RETEST  # type: ignore[import-not-found]


@pytest.fixture(scope="session")
def d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-input-setup")
    (d / "afile").write_text("x")
    (d / "adir").mkdir()
    (d / "empty.json").write_bytes(b"")
    (d / "trunc.json").write_text('[{"class": "a", "keyword": "cat", "n"')
    (d / "latin1.json").write_bytes(b'[{"class": "caf\xe9"}]')
    (d / "dict.json").write_text('{"a": 1}')
    (d / "results").mkdir()
    (d / "results" / "0001_a_cat.json").write_text('{"photos": [')
    (d / "results-latin1").mkdir()
    (d / "results-latin1" / "0001_a_cat.json").write_bytes(b'{"caf\xe9": 1}')
    (d / "fmnist").mkdir()
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (d / "fmnist" / name).write_bytes(b"\x1f\x8b\x08\x00 truncated gzip")
    return d


FLICKR = "flickr search --api-key k --endpoint http://127.0.0.1:9/ --retries 0 "
SEARCH = FLICKR + "--out {tmp}/s --plan"
DL = "flickr download --out {tmp}/dl --retries 0 --results"

# (id, argv, exit code, words the line names[, xfail reason])
CASES = [
    # usage errors: one line too, exit 2
    ("usage-unknown-command", "stauts", 2, ["stauts"]),
    ("usage-unknown-option", "init {tmp}/p --classes a --colour", 2, ["--colour"]),
    ("usage-missing-argument", "init", 2, ["directory", "init --help"]),
    ("usage-not-an-int", "plan --rule v6 --size many", 2, ["--size"]),
    # init
    ("init-dir-is-file", "init {d}/afile --classes a,b", 2, ["afile"]),
    ("init-dir-under-file", "init {d}/afile/p --classes a,b", 2, ["afile"]),
    ("init-no-classes", "init {tmp}/p", 2, ["--classes"]),
    ("init-empty-class", "init {tmp}/p --classes a,,b", 2, ["--classes"]),
    ("init-duplicate-class", "init {tmp}/p --classes a,b,a", 2, ["a"]),
    ("init-preset", "init {tmp}/p --classes-from imagenet", 2, ["imagenet"]),
    ("init-both", "init {tmp}/p --classes a --classes-from cifar10", 2, ["classes"]),
    ("init-name", "init {tmp}/p --classes a,b --name ../x", 2, ["../x"]),
    # datasets (no network: refused before any download)
    ("datasets-unknown", "datasets fetch cifar11", 2, ["cifar11"]),
    ("datasets-info-unknown", "datasets info mnist", 2, ["mnist"]),
    ("datasets-version", "datasets fetch cifar10_1 --version v9 --root {tmp}/r", 2,
     ["v9"]),
    ("datasets-root-is-file", "datasets fetch cifar10 --root {d}/afile", 2, ["afile"]),
    ("datasets-info-root-is-file", "datasets info cifar10 --root {d}/afile", 2,
     ["afile"]),
    ("datasets-mirror", "datasets fetch cifar10 --root {tmp}/r --mirror notaurl", 2,
     ["notaurl"]),
    # flickr search
    ("search-plan-missing", SEARCH + " {d}/nope.json", 1, ["nope.json"]),
    ("search-plan-empty", SEARCH + " {d}/empty.json", 1, ["empty.json"]),
    ("search-plan-truncated", SEARCH + " {d}/trunc.json", 1, ["trunc.json"]),
    ("search-plan-non-utf8", SEARCH + " {d}/latin1.json", 1, ["latin1.json"]),
    ("search-plan-directory", SEARCH + " {d}/adir", 1, ["adir"]),
    ("search-plan-wrong-shape", SEARCH + " {d}/dict.json", 1, ["dict.json"]),
    ("search-rate-0", SEARCH + " {d}/trunc.json --rate 0", 2, ["--rate"]),
    ("search-per-page", SEARCH + " {d}/trunc.json --per-page 501", 2, ["--per-page"]),
    ("search-factor", SEARCH + " {d}/trunc.json --factor 0", 2, ["--factor"]),
    ("search-date", SEARCH + " {d}/trunc.json --min-taken-date yesterday", 2,
     ["yesterday"]),
    ("search-out-is-file", FLICKR + "--out {d}/afile --plan {d}/trunc.json", 2,
     ["afile"]),
    # flickr download
    ("download-results-missing", DL + " {d}/nope.json", 1, ["nope.json"]),
    ("download-results-empty", DL + " {d}/empty.json", 1, ["empty.json"]),
    ("download-results-truncated", DL + " {d}/results", 1, ["0001_a_cat.json"]),
    ("download-results-non-utf8", DL + " {d}/results-latin1", 1, ["0001_a_cat.json"]),
    ("download-results-empty-folder", DL + " {d}/adir", 1, ["adir"]),
    ("download-blacklist-missing", DL + " {d}/results --blacklist {d}/nope.json", 1,
     ["nope.json"]),
    ("download-workers-0", DL + " {d}/results --workers 0", 2, ["--workers"]),
    ("download-timeout-0", DL + " {d}/results --timeout 0", 2, ["--timeout"]),
    ("download-out-is-file", "flickr download --out {d}/afile --results {d}/results",
     2, ["afile"]),
    # demo: refused before any work
    ("demo-dir-is-file", "demo --dir {d}/afile --quick", 2, ["afile"]),
    ("demo-data-missing", "demo --dir {tmp}/demo --quick --data {d}/nope", 1,
     ["nope"]),
    ("demo-data-is-file", "demo --dir {tmp}/demo --quick --data {d}/afile", 1,
     ["afile"]),
    ("demo-workers", "demo --dir {tmp}/demo --quick --workers -1", 2, ["--workers"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "code", "culprits"), [case_param(*c) for c in CASES]
)
def test_refused(
    template: str, code: int, culprits: list[str], d: Path, tmp_path: Path
) -> None:
    argv = template.replace("{d}", str(d)).replace("{tmp}", str(tmp_path)).split()
    # a culprit that is a path given on the command line is named in full
    paths = [a for c in culprits for a in argv if a.endswith(f"/{c}")]
    line = refused(None, argv, code, *culprits, cwd=tmp_path)
    for path in paths:
        assert path in line, (path, line)
    for made in ("p", "s", "dl", "demo", "r"):  # nothing was created
        assert not (tmp_path / made).exists(), made


def test_init_existing_project_is_refused(tmp_path: Path) -> None:
    res = invoke("init", tmp_path / "p", "--classes", "a,b")
    assert res.exit_code == 0, res.stderr
    before = (tmp_path / "p" / "retest.db").read_bytes()
    line = refused(None, ["init", str(tmp_path / "p"), "--classes", "x"], 2, "p")
    assert "already" in line
    assert (tmp_path / "p" / "retest.db").read_bytes() == before


def test_init_non_utf8_folder(tmp_path: Path) -> None:
    """A folder name that is not UTF-8: a project is made and its path printed."""
    target = non_utf8_name(tmp_path, "proj")
    res = invoke("init", target, "--classes", "a,b")
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert (target / "retest.toml").is_file()
    # the undecodable bytes are shown as escapes, the rest of the path as it is
    printed = str(target).encode("utf-8", "backslashreplace").decode()
    assert "\\udcff\\udcfe" in printed
    assert f"in {printed}" in " ".join(res.stdout.split()), res.stdout  # wrapped
    res = invoke("status", "--project", target)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)


def test_datasets_info_damaged_files(d: Path) -> None:
    """Damaged dataset files are a status per file, never a traceback: the two
    truncated files are corrupt, the two absent ones missing, and the advice
    names the folder."""
    res = invoke("datasets", "info", "fashion_mnist", "--root", d / "fmnist")
    assert "Traceback" not in res.stderr + res.stdout
    assert res.exit_code == 0 and res.exception is None, res.output
    rows = [ln.split("│") for ln in res.stdout.splitlines() if "-idx" in ln]
    status = sorted((r[1].strip()[:4], r[2].strip()) for r in rows)
    assert status == [("t10k", "corrupt")] * 2 + [("trai", "missing")] * 2, rows
    text = " ".join(res.stdout.split())  # the console wraps long lines
    assert f"root: {d / 'fmnist'}" in text
    assert f"retest datasets fetch fashion_mnist --root {d / 'fmnist'}" in text


def test_debug_shows_the_traceback(d: Path, tmp_path: Path) -> None:
    """``--debug`` keeps the traceback the one-line form hides (real process)."""
    cmd = list(RETEST)
    args = ["init", str(d / "afile"), "--classes", "a,b"]
    env = {**os.environ, "COLUMNS": "200"}
    plain = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=120)  # fmt: skip
    debug = subprocess.run([*cmd, "--debug", *args], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=120)  # fmt: skip
    assert plain.returncode == 2
    assert plain.stderr.startswith("error: ") and len(plain.stderr.splitlines()) == 1
    assert str(d / "afile") in plain.stderr, plain.stderr
    assert "Traceback" not in plain.stderr
    assert debug.returncode != 0
    assert "Traceback (most recent call last)" in debug.stderr
    assert "ConfigError" in debug.stderr


def test_debug_shows_os_error_traceback(d: Path, tmp_path: Path) -> None:
    """An OSError nobody translated is one line, and a traceback with --debug."""
    root = tmp_path / "p"
    assert invoke("init", root, "--classes", "a,b").exit_code == 0
    (root / "retest.db").unlink()
    (root / "retest.db").mkdir()
    res = invoke("status", "--project", root)
    assert_one_line(res, 1, "retest.db")
    res = invoke("--debug", "status", "--project", root)
    assert isinstance(res.exception, OSError)


def test_usage_error_names_the_help(tmp_path: Path) -> None:
    line = refused(None, ["export", "--format"], 2)
    assert "export --help" in line
    assert json.dumps(line)  # one printable line
