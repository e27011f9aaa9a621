"""Corrections are kept: a changed answer sent again supersedes, an unchanged one
is a no-op, a reopened task shows your answer, undo withdraws your last one."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from web_helpers import person

from retest.labeling.tasks import image_token
from retest.project import EventAggregates, selection_frequencies
from retest.stages.crowd import project_secret


def _body(wp, task, key: str, picked: list[str]) -> dict[str, object]:  # type: ignore[no-untyped-def]
    secret = project_secret(wp.project)
    return {"submission": key, "task_id": task.id,
            "selected_tokens": [image_token(f"{task.id}|{i}", secret) for i in picked]}  # fmt: skip


def _counts_agree(app, wp) -> dict:  # type: ignore[no-untyped-def]
    """The page aggregates, a rebuild from the store and the pipeline's rule agree."""
    stats = selection_frequencies(wp.project)
    fresh = EventAggregates()
    fresh.feed(wp.project.store.annotations.list())
    live = app.state.retest.live
    with live.lock:
        assert dict(live.sync().stats) == dict(fresh.stats) == stats
    return stats


def test_a_correction_with_the_same_page_key_is_kept(app, web_project) -> None:
    c = TestClient(app)
    store = web_project.project.store
    ana = person(web_project.project, "ana")
    task = store.tasks.list()[0]
    a, b = task.items[0], task.items[1]
    r = c.post(
        "/api/task", json=_body(web_project, task, "page-0001", [a]), headers=ana
    )
    assert r.json() == {"events": len(set(task.items))}
    # Back, change a tick, Enter: the same page key with another answer
    r = c.post(
        "/api/task", json=_body(web_project, task, "page-0001", [b]), headers=ana
    )
    assert r.json()["updated"] is True and "replayed" not in r.json()
    # the same answer again is a no-op
    r = c.post(
        "/api/task", json=_body(web_project, task, "page-0001", [b]), headers=ana
    )
    assert r.json().get("replayed") is True
    assert len({e.assignment_id for e in store.annotations.list(kind="task")}) == 2
    stats = _counts_agree(app, web_project)
    assert stats[(a, task.class_id)].frequency == 0.0  # the correction counts
    assert stats[(b, task.class_id)].frequency == 1.0
    assert stats[(b, task.class_id)].n_assignments == 1  # one vote, not two
    # reopened, the task shows her answer (and only to her)
    page = c.get(f"/task/{task.id}", headers=ana).text
    tok_b = image_token(f"{task.id}|{b}", project_secret(web_project.project))
    assert re.findall(
        r'value="([^"]+)" tabindex="-1" aria-label="[^"]*" checked', page
    ) == [tok_b]
    assert 'id="answered"' in page
    other = c.get(f"/task/{task.id}", headers=person(web_project.project, "bo")).text
    assert re.findall(r'aria-label="[^"]*" checked', other) == []
    assert 'id="answered"' not in other


def test_undo_withdraws_the_last_answer(app, web_project) -> None:
    c = TestClient(app)
    store = web_project.project.store
    ana = person(web_project.project, "ana")
    bo = person(web_project.project, "bo")
    t1, t2 = store.tasks.list()[:2]
    x = t1.items[0]
    c.post("/api/task", json=_body(web_project, t1, "k-000001", [x]), headers=ana)
    c.post("/api/task", json=_body(web_project, t1, "k-000002", []), headers=ana)
    c.post("/api/task", json=_body(web_project, t1, "k-000003", [x]), headers=bo)
    assert _counts_agree(app, web_project)[(x, t1.class_id)].frequency == 0.5
    # ana undoes her correction: her first answer counts again
    r = c.post("/api/undo", json={"submission": "undo-0001"}, headers=ana)
    assert r.status_code == 200 and r.json()["task_id"] == t1.id
    again = c.post("/api/undo", json={"submission": "undo-0001"}, headers=ana)
    assert again.json()["replayed"] is True  # a double click undoes one answer
    stats = _counts_agree(app, web_project)
    assert stats[(x, t1.class_id)] == stats[(x, t1.class_id)].__class__(1.0, 2)
    statuses = {
        e.assignment_id: e.assignment_status
        for e in store.annotations.list(kind="task")
    }
    assert sorted(statuses.values()) == ["Submitted", "Submitted", "Withdrawn"]
    # undo again: she has no answer to t1 any more; bo's stays
    assert (
        c.post("/api/undo", json={"submission": "undo-0002"}, headers=ana).status_code
        == 200
    )
    stats = _counts_agree(app, web_project)
    assert stats[(x, t1.class_id)].n_assignments == 1
    r = c.post("/api/undo", json={"submission": "undo-0003"}, headers=ana)
    assert r.status_code == 409 and "Nothing to undo" in r.text
    # progress forgets the undone task: it is hers to answer again
    nxt = c.get("/next/task", headers=ana, follow_redirects=False)
    assert nxt.headers["location"] == f"/task/{t1.id}"
    # a restart reads the same counts from the store
    from retest.web.app import create_app

    app2 = create_app(web_project.project, secret=project_secret(web_project.project))
    with app2.state.retest.live.lock:
        assert dict(app2.state.retest.live.sync().stats) == stats
    _ = t2


def test_review_forms_keep_a_changed_save_with_the_same_key(app, web_project) -> None:
    c = TestClient(app, headers={"X-Retest-Token": "test-reviewer-456"})
    store = web_project.project.store
    cats = web_project.candidates[0::2]
    body = {"submission": "nd-page-0001-0", "candidate_id": cats[0], "metric": "l2",
            "shown": ["test:0", cats[1]], "duplicates": ["test:0"]}  # fmt: skip
    assert c.post("/api/neardup", json=body).status_code == 200
    assert c.post("/api/neardup", json=body).json()["replayed"] is True
    assert len(store.neardup.verdicts()) == 2
    body["duplicates"] = []  # changed its mind, same row of the same page
    assert "replayed" not in c.post("/api/neardup", json=body).json()
    latest = {
        (v.candidate_id, v.ref_id): v.is_duplicate for v in store.neardup.verdicts()
    }
    assert latest[(cats[0], "test:0")] is False
