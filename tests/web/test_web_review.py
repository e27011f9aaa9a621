"""Review/progress pages and the label-error queue, through HTTP and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from retest.cli.main import app as cli
from retest.errors import InputValidationError, NotFoundError
from retest.project import (
    SUSPECT_KIND,
    VERDICT_KIND,
    Suspect,
    dedup_review_queue,
    label_error_queue,
    load_suspects,
    queue_label_errors,
    save_state,
)
from retest.sampling.histogram import bin_index
from retest.store.rows import AnnotationEvent, DuplicateVerdict, NeighbourList

REVIEWER = "test-reviewer-456"  # the web conftest's reviewer token
AUTH = {"X-Retest-Token": REVIEWER, "X-Retest-Annotator": "owner"}
READ = {"X-Retest-Token": REVIEWER}


def _write_list(path: Path, rows: list[dict[str, int]]) -> Path:
    path.write_text(json.dumps({"method": "both", "errors": rows}))
    return path


def _suspects(tmp_path: Path) -> Path:
    # test:1 is a dog (class 1) said to be a cat; test:4 a cat said to be a dog.
    return _write_list(
        tmp_path / "label_errors.json",
        [
            {"rank": 2, "index": 4, "given": 0, "suggested": 1, "score": 0.2},
            {"rank": 1, "index": 1, "given": 1, "suggested": 0, "score": 0.1},
        ],
    )


def test_queue_label_errors_cli_and_verdicts(app, web_project, tmp_path) -> None:
    root = str(web_project.project.root)
    f = _suspects(tmp_path)
    args = ["review", "queue-label-errors", str(f), "-p", root, "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"queued": 2, "in_queue": 2, "pending": 2}
    r = CliRunner().invoke(cli, args)  # idempotent
    assert json.loads(r.output)["queued"] == 0
    store = web_project.project.store
    ev = store.annotations.list(kind=SUSPECT_KIND)
    assert [(e.item_id, e.class_id, e.value, e.extra["method"]) for e in ev] == [
        ("test:1", 1, 0, "both"),
        ("test:4", 0, 1, "both"),
    ]

    _task_events(store, {("test:1", 1): [1, 1, 0], ("test:1", 0): [1, 1, 1]})
    c = TestClient(app, headers=READ)
    page = c.get("/label-errors", headers=READ).text
    assert page.index("test:1") < page.index("test:4")  # by rank
    assert "selection frequency for dog: 0.50 (n=2)" in page  # given class only
    assert "0 of 2 queued items reviewed" in page
    body = {"item_id": "test:1", "verdict": "wrong", "new_class": 0}
    labeler = {"X-Retest-Token": "test-token-123"}  # alice, a labeler
    assert c.post("/api/label-error", json=body, headers=labeler).status_code == 403
    assert c.post("/api/label-error", json=body, headers=AUTH).status_code == 200
    bad = [
        ({"item_id": "test:4", "verdict": "wrong"}, 422),  # no class
        ({"item_id": "test:4", "verdict": "wrong", "new_class": 0}, 422),  # = given
        ({"item_id": "test:4", "verdict": "maybe"}, 422),
        ({"item_id": "test:7", "verdict": "correct"}, 404),  # not queued
    ]
    for b, code in bad:
        assert c.post("/api/label-error", json=b, headers=AUTH).status_code == code, b
    ok = {"item_id": "test:4", "verdict": "unclear"}
    assert c.post("/api/label-error", json=ok, headers=AUTH).status_code == 200
    verdicts = store.annotations.list(kind=VERDICT_KIND)
    assert [
        (e.who, e.item_id, e.class_id, e.value, e.extra["verdict"]) for e in verdicts
    ] == [
        ("owner", "test:1", 1, 0, "wrong"),
        ("owner", "test:4", 0, -1, "unclear"),
    ]
    assert "Nothing pending" in c.get("/label-errors").text
    q = label_error_queue(web_project.project)
    assert [(i.item_id, i.verdict, i.verdict_class) for i in q] == [
        ("test:1", "wrong", 0),
        ("test:4", "unclear", None),
    ]
    r = CliRunner().invoke(cli, ["review", "label-errors", "-p", root, "--json"])
    assert [d["verdict"] for d in json.loads(r.output)] == ["wrong", "unclear"]


def test_bad_label_error_lists_write_nothing(web_project, tmp_path) -> None:
    store = web_project.project.store
    with pytest.raises(InputValidationError, match="project labels it 1"):
        queue_label_errors(
            web_project.project, [Suspect("test:2", 0, 1), Suspect("test:1", 0, 1)]
        )
    with pytest.raises(NotFoundError, match="not an image of the project"):
        queue_label_errors(web_project.project, [Suspect("test:99", 0, 1)])
    with pytest.raises(InputValidationError, match="not a project class"):
        queue_label_errors(web_project.project, [Suspect("test:2", 0, 7)])
    assert store.annotations.count(kind=SUSPECT_KIND) == 0
    f = _write_list(tmp_path / "bad.json", [{"index": 1, "given": "x"}])  # type: ignore[dict-item]
    with pytest.raises(InputValidationError, match="row 1"):
        load_suspects(f)
    r = CliRunner().invoke(
        cli,
        [
            "review",
            "queue-label-errors",
            str(tmp_path / "none.json"),
            "-p",
            str(web_project.project.root),
        ],
    )
    assert r.exit_code == 1 and r.output.startswith("error: ")


def _task_events(store, answers: dict[tuple[str, int], list[int]]) -> None:
    events = []
    for (item, cid), values in answers.items():
        for k, v in enumerate(values):
            status = "Rejected" if k == 0 else "Approved"  # first is never counted
            events.append(
                AnnotationEvent(
                    "w",
                    "task",
                    cid,
                    item,
                    v,
                    assignment_id=f"a{k}",
                    assignment_status=status,
                    task_id="t",
                )
            )
    store.annotations.add(events)


def _table(html: str, cid: int) -> dict[str, list[int]]:
    block = html.split(f'data-class="{cid}"')[1].split("</table>")[0]
    out = {}
    for row in re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", block, re.S):
        out[row[0]] = [int(v) for v in re.findall(r">(\d+)</td>", row[1])][:-1]
    return out


def test_stats_page_bins_from_events(app, web_project) -> None:
    store = web_project.project.store
    cats = web_project.candidates[0::2]
    # rejected first answers are ignored: frequencies 1.0, 0.5, 0.0, 1/3 …
    plan = {
        ("test:0", 0): [0, 1, 1],  # original cat, f=1.0, n=2
        ("test:2", 0): [1, 1, 0],  # original cat, f=0.5
        ("test:4", 0): [1, 0, 0],  # original cat, f=0.0
        ("test:1", 0): [0, 1, 1],  # a dog shown as negative control: not a cat original
        (cats[0], 0): [0, 1, 1],  # candidate f=1.0
        (cats[1], 0): [0, 1, 0, 0],  # f=1/3, n=3
        (cats[2], 0): [0, 1],  # f=1.0, n=1 (< min_annotations=2)
    }
    _task_events(store, plan)
    html = (
        TestClient(app, headers=READ).get("/stats?min_annotations=2&per_class=10").text
    )
    expect_orig = [0] * 5
    for f in (1.0, 0.5, 0.0):
        expect_orig[bin_index(f)] += 1
    t = _table(html, 0)
    assert t["original"] == expect_orig == [1, 0, 1, 0, 1]
    assert sum(t["target"]) == 10 and t["target"][1] == 0
    assert t["valid"] == [0, 1, 0, 0, 1]
    assert t["annotated"] == [0, 1, 0, 0, 2]
    per_image = TestClient(app, headers=READ).get("/stats/0").text
    assert per_image.index(cats[0][:10]) < per_image.index(cats[1][:10])
    assert "0.33</span> (n=3)" in per_image


def test_keyword_progress_against_the_plan(app, web_project) -> None:
    proj = web_project.project
    store = proj.store
    cats = web_project.candidates[0::2]  # keyword tabby, class 0
    c = TestClient(app, headers=READ)
    html = c.get("/keywords/0").text
    assert "No keyword plan yet" in html
    row = re.search(r'data-keyword="tabby">(.*?)</tr>', html, re.S)
    assert row and re.findall(r">(\d+)<", row.group(1))[:3] == ["5", "0", "5"]
    # what `retest plan` stores for later stages (its report is only for people)
    save_state(
        proj,
        "plan/current",
        {
            "rule": "v4",
            "report": "reports/plan_v4.json",
            "needed": [["cat", "tabby", 4]],
        },
        stage="plan",
    )
    sel = [AnnotationEvent("a", "select", 0, i, int(k < 4)) for k, i in enumerate(cats)]
    ver = [
        AnnotationEvent("b", "verify", 0, i, int(k < 3)) for k, i in enumerate(cats[:4])
    ]
    store.annotations.add(sel + ver)
    html = c.get("/keywords/0").text
    assert "reports/plan_v4.json" in html
    row = re.search(r'data-keyword="tabby">(.*?)</tr>', html, re.S)
    assert row is not None
    # needed, verified, missing, selected, to select, to verify
    assert re.findall(r">(\d+)<", row.group(1)) == ["4", "3", "1", "4", "0", "0"]
    assert "verified 3 of 4 needed" in c.get("/label/0/tabby").text


def test_neardup_progress_per_metric(app, web_project) -> None:
    c = TestClient(app, headers=READ)
    cats = web_project.candidates[0::2]
    html = c.get("/neardup?metric=l2").text
    assert "<td>l2</td><td>1.2e+08</td><td>1 of 2</td>" in html  # cats[2] lies beyond
    assert "<b>1 of 12</b>" in html  # only l2 ran: cats[2] has nothing close
    body = {
        "candidate_id": cats[0],
        "metric": "l2",
        "shown": ["test:0", cats[1]],
        "duplicates": [],
    }
    assert c.post("/api/neardup", json=body, headers=AUTH).status_code == 200
    html = c.get("/neardup?metric=l2").text
    assert "<td>l2</td><td>1.2e+08</td><td>2 of 2</td>" in html
    assert "Nothing to review" in html
    assert dedup_review_queue(web_project.project) == []  # the CLI's queue agrees


def test_verify_stage_drops_near_copies_of_originals(app, web_project) -> None:
    store = web_project.project.store
    cats = web_project.candidates[0::2]
    store.annotations.add(AnnotationEvent("a", "select", 0, c, 1) for c in cats[:4])
    # the CIFAR rule (plain L2 ≤ 1000 on 32×32×3) scaled to 8×8×3 images is a
    # squared distance of 62,500: 6e4 is dropped, 2e6 (cats[0]) is kept
    store.neardup.put_neighbours(
        [NeighbourList(cats[3], "l2", (cats[1], "test:4"), (1.5e6, 6.0e4))]
    )
    html = TestClient(app, headers=READ).get("/label/0/tabby?stage=verify").text
    shown = set(re.findall(r'name="item" value="(\w+)"', html))
    assert shown == set(cats[:3])
    assert "1 dropped automatically" in html


def test_class_review_filters_and_near_duplicates(app, web_project) -> None:
    store = web_project.project.store
    cats = web_project.candidates[0::2]  # members of class 0: cands 0, 2, 4
    _task_events(
        store,
        {
            (cats[0], 0): [0, 1, 1],
            (cats[1], 0): [0, 1, 0],
            (cats[2], 0): [0, 1, 1],
            ("test:0", 0): [0, 1, 1],
        },
    )
    c = TestClient(app, headers=READ)
    url = "/review/webtest-a-0/0?min_annotations=2"
    t = _review_table(c.get(url).text)
    assert t["valid"] == [0, 0, 1, 0, 2]
    # cats[2] duplicates an original: the resolution excludes it from "valid"
    store.neardup.add_verdicts([DuplicateVerdict(cats[2], "test:2", "l2", True, "r")])
    html = c.get(url).text
    assert _review_table(html)["valid"] == [0, 0, 1, 0, 1]
    assert "1 near-duplicates" in html and "1 annotated originals" in html
    grid = lambda q: re.findall(r'name="blacklist" value="(\w+)"', c.get(url + q).text)  # noqa: E731
    assert grid("&show=neardup") == [cats[2]]
    assert grid("&bin=4&sort=date&order=desc") == [cats[2], cats[0]]
    ties = sorted([cats[0], cats[2]])  # equal frequency: by id
    assert grid("&sort=frequency&order=asc") == [cats[1], *ties]
    assert "test:0 · 1.00 (n=2)" in c.get(url + "&originals=50").text


def _review_table(html: str) -> dict[str, list[int]]:
    block = html.split('<table class="hist">')[1].split("</table>")[0]
    return {
        row[0]: [int(v) for v in re.findall(r">(\d+)</td>", row[1])]
        for row in re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", block, re.S)
    }


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_queue_reads_real_label_errors_output(web_project, tmp_path, fmt) -> None:
    import numpy as np

    from retest.stages.label_errors import LabelErrorInputs, run_label_errors

    labels = np.arange(20) % 2  # the fixture's test split: class i % 2
    probs = np.full((20, 2), 0.05)
    probs[np.arange(20), labels] = 0.95
    planted = [3, 6, 11]  # the models disagree with the given label here
    probs[planted] = probs[planted][:, ::-1]
    probs[6] = [0.3, 0.7]  # less sure: ranked after 3 and 11
    inputs = LabelErrorInputs(labels, probs, {"test": True})
    run = run_label_errors(inputs, tmp_path / "le", method="argmax")
    suspects, method = load_suspects(run.paths[fmt], split="test")
    assert method == ("argmax" if fmt == "json" else "")
    # equal scores are ranked by index (retest.label_errors.rank_label_errors)
    assert [s.item_id for s in suspects] == ["test:3", "test:11", "test:6"]
    project = web_project.project
    assert queue_label_errors(project, suspects, method=method) == 3
    q = label_error_queue(project)
    assert {(i.item_id, i.given, i.suggested) for i in q} == {
        (f"test:{k}", k % 2, 1 - k % 2) for k in planted
    }
    assert q[-1].item_id == "test:6"


def test_index_shows_class_review_states(app, web_project) -> None:
    from retest.stages.revisions import set_class_review

    project = web_project.project
    c = TestClient(app, headers=READ)
    assert "0 of 2 classes reviewed" in c.get("/").text
    set_class_review(project, "webtest-a-0", 1, reviewed=True, who="bob")
    html = c.get("/").text
    assert "1 of 2 classes reviewed" in html and "dog ✓" in html
