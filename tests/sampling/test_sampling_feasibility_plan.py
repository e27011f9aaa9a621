"""``retest plan`` (and ``status``) show, per class, what each sampling strategy
needs against what the project has, from the one feasibility rule
(:mod:`retest.stages.sample._feasibility`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from retest.cli.main import app
from retest.project._project import Project
from retest.stages.sample._feasibility import STRATEGIES, ClassFeasibility
from retest.store.base import Store
from retest.store.rows import TaskRow

runner = CliRunner()


def _run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env={"COLUMNS": "250", "NO_COLOR": "1"})


def _project(tmp_path: Path, populate: Callable[[Store], None]) -> str:
    """3 classes × (25 originals, 25 candidates, each with 10 valid assignments),
    a keyword per class, and one task per class showing 4 originals."""
    root = tmp_path / "proj"
    with Project.init(root, name="demo", classes=["cat", "dog", "fox"]) as p:
        populate(p.store)
        shown = {c: tuple(f"test:{c * 100 + j}" for j in range(4)) for c in range(3)}
        p.store.tasks.add(
            [
                TaskRow(f"t{c}", c, ids, controls={"pos": ids})
                for c, ids in shown.items()
            ]
        )
    toml = root / "retest.toml"  # the classes' keywords
    toml.write_text(toml.read_text().replace(
        "[keywords]\n", '[keywords]\ncat = ["tabby"]\ndog = ["pug"]\nfox = ["kit"]\n'
    ))  # fmt: skip
    return str(root)


def _table(text: str, title: str) -> str:
    """The "what each strategy needs" table (its rows may wrap: the console's
    width is whatever the first command of the run gave it)."""
    return text.split(title)[1]


def test_plan_shows_what_each_strategy_needs_against_what_the_project_has(
    tmp_path: Path, populate
) -> None:
    root = _project(tmp_path, populate)
    r = _run("plan", "--rule", "v6", "--size", "90", "--project", root)
    assert r.exit_code == 0, r.output
    # 90 images over 3 classes: 30 per class, of which each has 25
    table = _table(r.stdout, "what each strategy needs, 30 per class")
    assert "+5" in table and " ok " not in table
    assert (
        "matched-frequency: cat needs 5 more eligible candidates with ≥ 10" in r.stdout
    )
    r = _run("plan", "--rule", "v6", "--size", "90", "--project", root, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)["feasibility"]
    cat = ClassFeasibility(**{k: v for k, v in got[0].items() if k != "missing"})
    assert (cat.class_name, cat.eligible, cat.annotated_eligible) == ("cat", 25, 25)
    assert (cat.originals_annotated, cat.originals_in_tasks) == (25, 4)
    assert [cat.cell(s) for s in STRATEGIES] == [
        "+5 eligible", "+5 annotated", "+5 annotated"
    ]  # fmt: skip
    r = _run("plan", "--rule", "v6", "--size", "90", "--per-class", "20",
             "--project", root, "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    feas = {f["class_name"]: f for f in json.loads(r.stdout)["feasibility"]}
    assert feas["fox"]["per_class"] == 20 and feas["fox"]["originals_in_tasks"] == 4
    assert all(m == [] for f in feas.values() for m in f["missing"].values())
    # status prints the same table: with 20 per class every strategy is ok
    r = _run("status", "--per-class", "20", "--project", root)
    assert r.exit_code == 0, r.output
    table = _table(r.stdout, "what each strategy needs, 20 per class")
    assert "+" not in table and table.count(" ok ") == 9


def test_matched_frequency_says_when_the_tasks_show_too_few_originals() -> None:
    f = ClassFeasibility("Coat", eligible=150, annotated_eligible=150,
                         originals_annotated=12, per_class=10,
                         originals_in_tasks=12)  # fmt: skip
    assert f.cell("matched-frequency") == "+8 originals"
    assert f.cell("threshold") == "ok"
    (why,) = f.missing("matched-frequency")
    assert why.endswith(
        "its crowd tasks show only 12 originals: make tasks with more controls "
        "(`retest crowd tasks --controls N`)"
    )
    enough = ClassFeasibility("Coat", 150, 150, 12, 10, originals_in_tasks=30)
    assert "crowd tasks" not in enough.missing("matched-frequency")[0]
