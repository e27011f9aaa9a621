"""Quality of people's work: accuracy on the controls shown to reviewers, and an
audited, reversible exclusion from the counts that every count obeys."""

from __future__ import annotations

import dataclasses

from fastapi.testclient import TestClient
from web_helpers import person

from retest.labeling.tasks import image_token
from retest.project import (
    EventAggregates,
    control_scores,
    excluded_workers,
    selection_frequencies,
)
from retest.stages.crowd import project_secret
from retest.store.rows import AnnotationEvent
from retest.web.app import create_app

OWNER = {"X-Retest-Token": "test-reviewer-456"}


def test_control_accuracy_and_exclusion(web_project) -> None:
    proj = web_project.project
    cfg = dataclasses.replace(proj.config, quality={"min_control_accuracy": 0.75,
                                                    "min_controls": 2})  # fmt: skip
    proj = dataclasses.replace(proj, config=cfg)
    app = create_app(
        proj, reviewer_token="test-reviewer-456", secret=project_secret(proj)
    )
    c = TestClient(app)
    store = proj.store
    task = store.tasks.list()[0]
    pos, neg = set(task.controls["pos"]), set(task.controls["neg"])
    secret = project_secret(proj)
    cand = next(i for i in task.items if i not in pos | neg)

    def answer(who: str, picked: set[str], key: str) -> None:
        body = {"submission": key, "task_id": task.id,
                "selected_tokens": [image_token(f"{task.id}|{i}", secret) for i in picked]}  # fmt: skip
        assert (
            c.post("/api/task", json=body, headers=person(proj, who)).status_code == 200
        )

    answer("good", pos | {cand}, "q-000001")  # every control right
    answer("sloppy", neg, "q-000002")  # every control wrong
    # an imported crowd worker's assignment, every control right
    store.annotations.add(
        AnnotationEvent("mturk", "task", task.class_id, i, int(i in pos), task_id=task.id,
                        assignment_id="A9", assignment_status="Approved", worker="W9")
        for i in dict.fromkeys(task.items)
    )  # fmt: skip
    scores = control_scores(store.annotations.list(), store.tasks.list())
    assert (
        scores["local:good"].accuracy == 1.0 and scores["local:sloppy"].accuracy == 0.0
    )
    assert (scores["W9"].pos_n, scores["W9"].neg_n) == (len(pos), len(neg))
    html = c.get("/quality", headers=OWNER).text
    assert "local:sloppy" in html and "below the bar" in html
    assert c.get("/quality", headers=person(proj, "good")).status_code == 403
    assert selection_frequencies(proj)[(cand, task.class_id)].n_assignments == 3

    def excl(worker: str, exclude: bool, key: str) -> None:
        body = {
            "submission": key,
            "worker": worker,
            "exclude": exclude,
            "reason": "controls",
        }
        r = c.post("/api/exclusion", json=body, headers=OWNER)
        assert r.status_code == 200 and r.json()["changed"], r.text

    excl("local:sloppy", True, "x-000001")
    excl("W9", True, "x-000002")  # an imported worker alike
    assert excluded_workers(store) == {"local:sloppy", "W9"}
    stats = selection_frequencies(proj)
    assert stats[(cand, task.class_id)].n_assignments == 1  # only "good" counts
    fresh = EventAggregates(excluded=excluded_workers(store))
    fresh.feed(store.annotations.list())
    live = app.state.retest.live
    with live.lock:
        assert dict(live.sync().stats) == dict(fresh.stats) == stats
    assert "excluded" in c.get("/quality", headers=OWNER).text
    # reversible, and audited
    excl("local:sloppy", False, "x-000003")
    assert selection_frequencies(proj)[(cand, task.class_id)].n_assignments == 2
    with live.lock:
        assert dict(live.sync().stats) == selection_frequencies(proj)
    log = [
        (e.subject, e.action, e.who)
        for e in store.people.events()
        if e.action in ("exclude", "include")
    ]
    assert log == [("local:sloppy", "exclude", "owner"), ("W9", "exclude", "owner"),
                   ("local:sloppy", "include", "owner")]  # fmt: skip
