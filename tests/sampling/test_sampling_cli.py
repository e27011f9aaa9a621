"""`retest sample`, `retest revisions`, `retest diff` through the real CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project
from retest.store.base import Store
from retest.store.rows import BlacklistEvent

runner = CliRunner()


def _project(tmp_path: Path, populate: Callable[[Store], None]) -> Path:
    root = tmp_path / "proj"
    with Project.init(root, name="demo", classes=["cat", "dog", "fox"]) as p:
        populate(p.store)
    return root


def _run(*args: str):
    # these pools have no pixels, so no dedup can run: sample them as drafts
    extra = ["--no-dedup"] if args and args[0] == "sample" else []
    return runner.invoke(app, [*args, *extra])


def test_sample_resample_diff_and_list(tmp_path: Path, populate) -> None:
    root = _project(tmp_path, populate)
    p = str(root)
    r = _run(
        "sample",
        "--strategy",
        "matched-frequency",
        "--per-class",
        "10",
        "--seed",
        "5",
        "--project",
        p,
        "--json",
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (
        out["name"] == "demo-matched-frequency-0"
        and out["valid"]
        and len(out["members"]) == 30
    )
    victim = next(m["id"] for m in out["members"] if m["class_name"] == "dog")
    with Project.open(root) as proj:
        proj.store.blacklist.add([BlacklistEvent(victim, "blurry", "me")])

    r = _run(
        "sample",
        "--strategy",
        "matched-frequency",
        "--from",
        "demo-matched-frequency-0",
        "--seed",
        "6",
        "--project",
        p,
    )
    assert r.exit_code == 0, r.output
    assert (
        "demo-matched-frequency-1: 30 images, valid, from demo-matched-frequency-0"
        in r.stdout
    )

    r = _run(
        "diff",
        "demo-matched-frequency-0",
        "demo-matched-frequency-1",
        "--project",
        p,
        "--json",
    )
    assert r.exit_code == 0, r.output
    d = {row["class"]: row for row in json.loads(r.stdout)}
    assert d["dog"]["removed"] == [victim] and len(d["dog"]["added"]) == 1
    assert d["cat"]["kept"] == 10 and d["cat"]["added"] == []
    r = _run(
        "diff",
        "demo-matched-frequency-0",
        "demo-matched-frequency-1",
        "--project",
        p,
        "--ids",
    )
    assert f"- dog {victim}" in r.stdout

    r = _run("revisions", "--project", p, "--json")
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == [
        "demo-matched-frequency-0",
        "demo-matched-frequency-1",
    ]
    assert rows[1]["parent"] == "demo-matched-frequency-0" and rows[1]["n_images"] == 30
    r = _run("revisions", "--project", p)
    assert r.exit_code == 0 and "demo-matched-frequency-1" in r.stdout

    r = _run("status", "demo-matched-frequency-0", "--project", p, "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)["revision_statistics"]
    assert (
        st["name"] == "demo-matched-frequency-0"
        and st["n_images"] == 30
        and st["blacklisted"] == 1
    )
    dog = next(c for c in st["classes"] if c["class_name"] == "dog")
    assert dog["by_bin"] == [0, 2, 2, 2, 4] and dog["blacklisted"] == 1
    assert dog["mean_frequency"] == pytest.approx(
        (2 * 0.3 + 2 * 0.5 + 2 * 0.7 + 4 * 0.9) / 10
    )
    r = _run("status", "demo-matched-frequency-1", "--project", p)
    assert r.exit_code == 0, r.output
    assert "30 images, valid; 0 upward-sampled" in r.stdout


def test_sample_threshold_short_class_warns(tmp_path: Path, populate) -> None:
    root = _project(tmp_path, populate)
    r = _run(
        "sample",
        "--strategy",
        "threshold",
        "--per-class",
        "12",
        "--seed",
        "1",
        "--class-threshold",
        "fox=0.5",
        "--keep-invalid",
        "--project",
        str(root),
    )
    assert r.exit_code == 1, r.output  # written, but not a usable test set
    assert "INVALID" in r.stdout and "short of eligible" in r.output
    assert "-2 (too_few_eligible)" in r.stdout  # cat/dog: 10 ≥ 0.7, need 12


def test_sample_errors_are_one_line(tmp_path: Path, populate) -> None:
    root = _project(tmp_path, populate)
    p = str(root)
    r = _run("sample", "--strategy", "matched-frequncy", "--seed", "1", "--project", p)
    assert r.exit_code == 2 and "Did you mean 'matched-frequency'" in r.output
    r = _run(
        "sample",
        "--strategy",
        "threshold",
        "--seed",
        "1",
        "--class-threshold",
        "fox",
        "--project",
        p,
    )
    assert r.exit_code == 2 and "CLASS=0.6" in r.output
    r = _run(
        "sample",
        "--strategy",
        "threshold",
        "--seed",
        "1",
        "--from",
        "nope",
        "--project",
        p,
    )
    assert r.exit_code == 1 and "nope" in r.output and "Traceback" not in r.output
    r = _run("sample", "--strategy", "keyword-count", "--seed", "1", "--project", p)
    assert r.exit_code == 2 and "keyword counts" in r.output
    r = _run("diff", "a", "b", "--project", p)
    assert r.exit_code == 1 and "does not exist" in r.output
