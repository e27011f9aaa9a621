"""Idempotent writes, roles, sign-in, origin checks and input limits (HTTP level)."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from retest.errors import InputValidationError
from retest.labeling.tasks import image_token
from retest.project import add_person, selection_frequencies
from retest.stages.crowd import project_secret
from retest.store.rows import AnnotationEvent
from retest.web.app import create_app

TOKEN, REVIEWER = "test-token-123", "test-reviewer-456"  # the web conftest's
LABELER = {"X-Retest-Token": TOKEN, "X-Retest-Annotator": "alice"}
REVIEW = {"X-Retest-Token": REVIEWER}  # the owner


def _label_body(wp, key: str = "page-load-1", **kw):  # type: ignore[no-untyped-def]
    cats = wp.candidates[0::2]
    body = {"submission": key, "stage": "select", "class_id": 0, "keyword": "tabby",
            "shown": cats[:3], "checked": cats[:1]}  # fmt: skip
    return {**body, **kw}


def test_a_replayed_submission_writes_once(app, web_project) -> None:
    c = TestClient(app)
    store = web_project.project.store
    first = c.post("/api/label", json=_label_body(web_project), headers=LABELER)
    again = c.post("/api/label", json=_label_body(web_project), headers=LABELER)
    assert first.json() == {"events": 3}
    assert again.status_code == 200 and again.json() == {"events": 3, "replayed": True}
    assert store.annotations.count(kind="select") == 3
    # ten copies of one request at the same instant (a double click, Enter held)
    body = _label_body(web_project, key="page-load-2")
    codes: list[int] = []
    start = threading.Barrier(10)

    def send() -> None:
        start.wait()
        codes.append(c.post("/api/label", json=body, headers=LABELER).status_code)

    threads = [threading.Thread(target=send) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [200] * 10
    assert store.annotations.count(kind="select") == 6
    # after a restart the key is found in the store: still a no-op
    app2 = create_app(web_project.project, token=TOKEN, reviewer_token=REVIEWER,
                      secret=project_secret(web_project.project))  # fmt: skip
    r = TestClient(app2).post("/api/label", json=body, headers=LABELER)
    assert r.json() == {"events": 3, "replayed": True}
    assert store.annotations.count(kind="select") == 6


def test_a_resubmitted_task_replaces_the_earlier_answer(app, web_project) -> None:
    c = TestClient(app)
    store = web_project.project.store
    task = store.tasks.list()[0]
    tok = [image_token(f"{task.id}|{i}", project_secret(web_project.project))
           for i in task.items]  # fmt: skip
    for key, picked in (("load-aaaa", tok[:2]), ("load-bbbb", tok[2:3])):
        body = {"submission": key, "task_id": task.id, "selected_tokens": picked}
        assert c.post("/api/task", json=body, headers=LABELER).status_code == 200
    stats = selection_frequencies(web_project.project)
    # two stored assignments of alice, one counted: the later one
    assert len({e.assignment_id for e in store.annotations.list(kind="task")}) == 2
    assert stats[(task.items[0], task.class_id)].n_assignments == 1
    assert stats[(task.items[0], task.class_id)].frequency == 0.0
    assert stats[(task.items[2], task.class_id)].frequency == 1.0
    html = c.get("/tasks", headers=REVIEW).text  # answer counts: reviewers only
    assert f"<td>{len(task.items)}</td><td>1</td>" in html  # one answer, not two
    # the page's aggregates agree with the store-wide rule
    from retest.project import EventAggregates

    agg = EventAggregates()
    agg.feed(store.annotations.list())
    assert dict(agg.stats) == stats


def test_labelers_cannot_read_results_controls_or_reviews(app, web_project) -> None:
    c = TestClient(app)
    task = web_project.project.store.tasks.list()[0]
    labeler_ok = ["/", "/label/0/tabby", "/tasks", f"/task/{task.id}", "/keywords/0",
                  f"/img/i/{web_project.candidates[0]}"]  # fmt: skip
    reviewer_only = [f"/task/{task.id}/results", "/stats", "/stats/0", "/neardup",
                     "/review/webtest-a-0/0", "/label-errors"]  # fmt: skip
    for url in labeler_ok + reviewer_only:
        assert c.get(url).status_code == 401, url  # no token: nothing to read
        assert c.get(url, headers=REVIEW).status_code == 200, url
    for url in labeler_ok:
        assert c.get(url, headers=LABELER).status_code == 200, url
    for url in reviewer_only:
        r = c.get(url, headers=LABELER)
        assert r.status_code == 403, url
        assert "pos" not in r.text and "neg" not in r.text
    tasks_page = c.get("/tasks", headers=LABELER).text
    assert "/results" not in tasks_page  # no link a labeler cannot follow
    review = {"revision": "webtest-a-0", "class_id": 0, "reviewed": True}
    assert c.post("/api/review", json=review, headers=LABELER).status_code == 403
    assert c.post("/api/review", json=review, headers=REVIEW).status_code == 200
    assert c.get("/openapi.json", headers=REVIEW).status_code == 404


def test_openapi_only_when_asked(web_project) -> None:
    app = create_app(web_project.project, token=TOKEN, openapi=True,
                     secret=project_secret(web_project.project))  # fmt: skip
    assert TestClient(app).get("/openapi.json").status_code == 200


def test_a_personal_link_opens_a_session_in_an_httponly_cookie(
    app, web_project
) -> None:
    c = TestClient(app, follow_redirects=False)
    r = c.get(f"/label/0/tabby?stage=verify&token={TOKEN}")
    assert r.status_code == 303
    assert r.headers["location"] == "/label/0/tabby?stage=verify"  # token gone
    cookie = r.headers["set-cookie"]
    assert "retest_session=" in cookie and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Max-Age=2592000" in cookie  # 30 days: kept across browser restarts
    assert "Secure" not in cookie  # plain http here
    assert c.get("/label/0/tabby").status_code == 200  # the cookie reads
    assert "alice" in c.get("/").text
    assert c.get("/?token=wrong").status_code == 401
    # the sign-in form takes a token, never a name
    s = TestClient(app, follow_redirects=False)
    r = s.post("/signin", data={"token": TOKEN, "name": "Dana Smith", "next": "/tasks"},
               headers={"Origin": "http://testserver"})  # fmt: skip
    assert r.status_code == 303 and r.headers["location"] == "/tasks"
    assert "HttpOnly" in r.headers["set-cookie"]
    assert ">alice<" in s.get("/").text and "Dana" not in s.get("/").text
    # signing out ends the session at once
    s.post("/signout", headers={"Origin": "http://testserver"})
    s.cookies.clear()
    assert c.get("/tasks").status_code == 200  # the other browser stays signed in


def test_cookie_writes_need_the_apps_own_origin(app, web_project) -> None:
    c = TestClient(app)
    c.get(f"/?token={TOKEN}")  # signs in: the session cookie
    body = _label_body(web_project, key="origin-1")
    evil = {"Origin": "http://testserver:8001"}  # another port, same site
    assert c.post("/api/label", json=body, headers=evil).status_code == 403
    assert c.post("/api/label", json=body).status_code == 403  # no Origin at all
    own = {"Origin": "http://testserver"}
    assert c.post("/api/label", json=body, headers=own).status_code == 200
    assert web_project.project.store.annotations.count() == 3
    assert {e.who for e in web_project.project.store.annotations.list()} == {"alice"}


def test_the_person_of_the_token_writes_never_a_typed_name(app, web_project) -> None:
    c = TestClient(app)
    store = web_project.project.store
    inv = add_person(web_project.project, "Jose\u0301", "labeler", by="test")
    assert inv.person.name == "José"  # NFC
    with pytest.raises(InputValidationError, match="exists already"):
        add_person(web_project.project, "JOSÉ", "labeler", by="test")
    mine = {"X-Retest-Token": inv.token}
    for k, sent in enumerate(["Jos%C3%A9", "Jose\u0301".encode(), "JOS%C3%89", None]):
        headers = mine if sent is None else {**mine, "X-Retest-Annotator": sent}
        r = c.post("/api/label", json=_label_body(web_project, key=f"name-{k:04d}"),
                   headers=headers)  # fmt: skip
        assert r.status_code == 200, r.text
    assert {e.who for e in store.annotations.list()} == {"José"}
    n = store.annotations.count()
    for other in ["alice", "Alice", "Dana Smith"]:
        r = c.post("/api/label", json=_label_body(web_project, key="name-other"),
                   headers={**mine, "X-Retest-Annotator": other})  # fmt: skip
        assert r.status_code == 403 and "cannot write as" in r.text
    assert store.annotations.count() == n


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"keyword": "x" * 20_000}, 422),
        ({"keyword": "puppy"}, 422),  # a keyword of the other class
        ({"class_id": 999}, 422),
        ({"shown": ["no-such-candidate"], "checked": []}, 422),
        ({"shown": [f"id{i}" for i in range(50_000)], "checked": []}, 413),
        ({"submission": "x"}, 422),
        ({"checked": ["test:0"]}, 422),
    ],
)
def test_label_writes_are_checked_against_the_project(
    app, web_project, change, code
) -> None:
    r = TestClient(app).post(
        "/api/label", json=_label_body(web_project, **change), headers=LABELER
    )
    assert r.status_code == code, r.text
    assert web_project.project.store.annotations.count() == 0


def test_review_writes_are_checked_against_the_project(app, web_project) -> None:
    c = TestClient(app)
    store = web_project.project.store
    bad = [
        {"revision": "webtest-a-0", "class_id": 0, "blacklist": ["unknown"]},
        {"revision": "webtest-a-0", "class_id": 0, "near_duplicate_sets": [["a", "b"]]},
        {"revision": "webtest-a-0", "class_id": 9},
        {"revision": "webtest-a-0", "class_id": 0, "reason": "r" * 5000},
    ]
    for b in bad:
        assert c.post("/api/review", json=b, headers=REVIEW).status_code == 422, b
    cats = web_project.candidates[0::2]
    nd = {
        "candidate_id": cats[0],
        "metric": "l2",
        "shown": ["test:7"],
        "duplicates": [],
    }
    assert c.post("/api/neardup", json=nd, headers=REVIEW).status_code == 422
    nd["candidate_id"] = "nope"
    assert c.post("/api/neardup", json=nd, headers=REVIEW).status_code == 404
    assert store.blacklist.events() == [] and store.neardup.verdicts() == []
    r = c.post("/api/label", content=b"{" + b" " * 400_000 + b"}",
               headers={**LABELER, "Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 413


def test_huge_reference_index_is_a_404(app) -> None:
    c = TestClient(app, headers={"X-Retest-Token": TOKEN})
    for url in ["/img/i/test:999999999999999999999999", "/img/i/test:-1",
                "/img/i/" + "a" * 5000, "/img/t/x/y"]:  # fmt: skip
        assert c.get(url).status_code == 404, url


def test_class_review_mean_leaves_out_other_classes_controls(app, web_project) -> None:
    store = web_project.project.store
    events = []
    for item, cid, values in [("test:0", 0, [1, 1]), ("test:2", 0, [1, 0]),
                              ("test:1", 0, [1, 1, 1, 1])]:  # fmt: skip
        for k, v in enumerate(values):
            events.append(AnnotationEvent("w", "task", cid, item, v, task_id=f"t{item}",
                                          assignment_id=f"a{item}{k}",
                                          assignment_status="Approved",
                                          worker=f"w{k}"))  # fmt: skip
    store.annotations.add(events)
    html = TestClient(app, headers=REVIEW).get("/review/webtest-a-0/0").text
    # test:1 is a dog shown as a negative control in a cat task: not a cat original
    assert "2 annotated originals (mean selection frequency 0.75)" in html
