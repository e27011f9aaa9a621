"""An invalid sample leaves no revision behind unless --keep-invalid, and says
per class what is missing; `retest status` says it before any sampling."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project
from retest.stages.sample import ClassFeasibility
from retest.store.base import Store

runner = CliRunner()


def _run(*args: str):  # type: ignore[no-untyped-def]
    # these pools have no pixels, so no dedup can run: sample them as drafts
    extra = ["--no-dedup"] if args[0] == "sample" else []
    return runner.invoke(app, [*args, *extra], env={"COLUMNS": "200", "NO_COLOR": "1"})


def _project(tmp_path: Path, populate: Callable[[Store], None]) -> str:
    root = tmp_path / "proj"
    with Project.init(root, name="demo", classes=["cat", "dog", "fox"]) as p:
        populate(p.store)
    return str(root)


def test_invalid_sample_writes_nothing_and_names_what_is_missing(
    tmp_path: Path, populate
) -> None:
    root = _project(tmp_path, populate)
    args = ["sample", "--strategy", "threshold", "--per-class", "12", "--seed", "1",
            "--class-threshold", "fox=0.5", "--project", root]  # fmt: skip
    r = _run(*args)
    assert r.exit_code == 1, r.output
    assert "not written (--keep-invalid writes it)" in r.stdout
    # one line per short class, with what it has against what it needs
    assert "cat: 10 of 12 images (too few eligible" in r.output
    with Project.open(root) as p:
        assert p.store.revisions.list() == []
    r = _run(*args, "--keep-invalid", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["written"] is True
    with Project.open(root) as p:
        (rev,) = p.store.revisions.list()
        assert not rev.valid


def test_status_shows_what_each_strategy_needs(tmp_path: Path, populate) -> None:
    root = _project(tmp_path, populate)
    r = _run("status", "--per-class", "12", "--json", "--project", root)
    assert r.exit_code == 0, r.output
    feas = {f["class_name"]: f for f in json.loads(r.stdout)["feasibility"]}
    cat = feas["cat"]
    # 25 originals and 25 candidates per class, each with 10 valid assignments
    assert cat["originals_annotated"] == 25 and cat["originals_needed"] == 20
    assert cat["eligible"] == cat["annotated_eligible"] == 25
    assert cat["missing"]["matched-frequency"] == []
    r = _run("status", "--per-class", "30", "--project", root)
    assert "what each strategy needs, 30 per class" in r.stdout
    assert "matched-frequency: cat needs 5 more eligible candidates" in r.stdout


def test_matched_frequency_names_the_originals_it_lacks() -> None:
    # the project: 4 tasks × 3 controls showed 12 originals per class
    f = ClassFeasibility("Coat", eligible=150, annotated_eligible=150,
                         originals_annotated=12, per_class=10)  # fmt: skip
    assert f.missing("class-balanced") == [] and f.missing("threshold") == []
    (why,) = f.missing("matched-frequency")
    assert why.startswith("8 more originals with ≥ 10 valid assignments")
