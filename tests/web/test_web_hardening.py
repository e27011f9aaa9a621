"""Hardened pages: security headers on every answer, persistent and Secure
cookies, no 500 on any input (a fuzz over every route), no aggregates for
labelers, statistics of candidates only."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Mount
from web_helpers import all_routes, build_project, person

from retest.stages.crowd import project_secret
from retest.store.rows import AnnotationEvent
from retest.web.app import CSP, create_app

REVIEWER = "test-reviewer-456"  # the web conftest's owner token
OWNER = {"X-Retest-Token": REVIEWER}


def test_every_answer_carries_the_security_headers(app, web_project) -> None:
    c = TestClient(app)
    task = web_project.project.store.tasks.list()[0]
    answers = [
        c.get("/", headers=OWNER),
        c.get(f"/task/{task.id}", headers=OWNER),
        c.get("/static/app.js"),
        c.get(f"/img/i/{web_project.candidates[0]}", headers=OWNER),
        c.get("/tasks"),  # 401: the sign-in page
        c.post("/api/task", json={}, headers=OWNER),  # 422
        c.get("/?token=nope"),
    ]
    for r in answers:
        h = r.headers
        assert h["content-security-policy"] == CSP, r.url
        assert "frame-ancestors 'none'" in CSP and "default-src 'self'" in CSP
        assert h["x-frame-options"] == "DENY"
        assert h["x-content-type-options"] == "nosniff"
        assert h["referrer-policy"] == "no-referrer"
    # no inline script or style the policy would block
    for path in ("/", f"/task/{task.id}", "/label/0/tabby", "/review/webtest-a-0/0"):
        html = c.get(path, headers=OWNER).text
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), path
        assert " style=" not in html and "<style" not in html, path
        assert " on" not in re.sub(r"<[^>]*>", "", html) or True  # text may say "on"
        assert not re.search(r"<[^>]+\son[a-z]+=", html), path


def test_cookies_are_secure_behind_https_and_last_the_admins_period(
    web_project,
) -> None:
    app = create_app(web_project.project, reviewer_token=REVIEWER, session_days=2,
                     secret=project_secret(web_project.project))  # fmt: skip
    c = TestClient(app, base_url="https://label.example.org", follow_redirects=False)
    r = c.get("/?token=test-token-123")
    cookie = r.headers["set-cookie"]
    assert "Secure" in cookie and "Max-Age=172800" in cookie and "HttpOnly" in cookie


def test_labelers_see_no_aggregates(app, web_project) -> None:
    c = TestClient(app)
    alice = person(web_project.project, "alice")
    tasks = c.get("/tasks", headers=alice).text
    assert "<th>answers</th>" not in tasks
    assert "<th>answers</th>" in c.get("/tasks", headers=OWNER).text
    kw = c.get("/keywords/0", headers=alice).text
    assert "verified" not in kw.lower() and "<th>selected</th>" not in kw
    assert "<th>verified</th>" in c.get("/keywords/0", headers=OWNER).text
    assert "verified" not in c.get("/label/0/tabby", headers=alice).text.lower()


def test_stats_count_candidates_not_controls(app, web_project) -> None:
    store = web_project.project.store
    cats = web_project.candidates[0::2]
    events = [
        AnnotationEvent(
            "w",
            "task",
            0,
            item,
            1,
            task_id="t",
            assignment_id="a1",
            assignment_status="Approved",
            worker="w1",
        )
        for item in [cats[0], cats[1], "test:0", "test:2", "test:1"]
    ]
    store.annotations.add(events)
    html = TestClient(app, headers=OWNER).get("/stats").text
    assert "2 candidates annotated" in html  # not 5: three are controls


def test_pages_that_had_no_data_answer_without_an_error(tmp_path) -> None:
    wp = build_project(tmp_path / "p")
    wp.project.store.neardup.put_neighbours([])  # nothing: no dedup has run?
    bare = create_app(wp.project, reviewer_token=REVIEWER,
                      secret=project_secret(wp.project))  # fmt: skip
    c = TestClient(bare, headers=OWNER)
    assert c.get("/label/0/no-such-keyword").status_code == 404
    assert c.get("/label/0/puppy").status_code == 404  # the other class's
    wp.project.close()


def test_neardup_before_any_dedup_run(tmp_path) -> None:
    from retest.project import Project

    proj = Project.init(tmp_path / "p", name="bare", classes=["a", "b"])
    try:
        app = create_app(proj, reviewer_token=REVIEWER, secret=project_secret(proj))
        r = TestClient(app, headers=OWNER).get("/neardup")
        assert r.status_code == 200 and "No near-duplicate search has run yet" in r.text
    finally:
        proj.close()


# -- a fuzz over every route -------------------------------------------------
_VALUES = ["0", "-1", "99999999999999999999999", "%FF%FE", "x" * 3000, "test:0",
           "..%2F..%2Fetc%2Fpasswd", "caf%C3%A9", "%00", "1.5"]  # fmt: skip
_BODIES: list[bytes] = [
    b"", b"{}", b"[]", b"null", b"1", b'"x"', b"{", b'{"submission": "\xff\xfe"}',
    json.dumps({"submission": "k" * 10, "task_id": "nope", "selected_tokens": ["a"]}).encode(),
    json.dumps({"submission": "k" * 10, "stage": "select", "class_id": 10**30,
                "keyword": "x", "shown": ["a"], "checked": []}).encode(),
    json.dumps({"submission": "k" * 10, "candidate_id": "\u0000", "metric": "l2",
                "shown": [], "duplicates": []}).encode(),
    json.dumps({"submission": "k" * 10, "revision": "none", "class_id": -1}).encode(),
    json.dumps({"submission": "k" * 10, "item_id": "test:0", "verdict": "wrong",
                "new_class": 10**12}).encode(),
    json.dumps({"a": [[[[[[[[[[[]]]]]]]]]]] * 1000}).encode(),
    b'{"submission": "' + b"\xc3\x28" * 100 + b'"}',
    b"\x00" * 1000,
    b'{"submission": "abcdefgh", "revision": "\xff"}',
]  # fmt: skip
_QUERIES = ["", "?page=-5&stage=verify", "?page=99999999999999999999",
            "?metric=nope&threshold=nan", "?threshold=1e400&per_class=-3",
            "?sort=%FF&order=x&show=y&bin=9&originals=-1&min_annotations=-2",
            "?after=%FF&show=all", "?bin=-1&originals=99999"]  # fmt: skip


def _paths(app) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    out = []
    for route in all_routes(app.routes):
        if isinstance(route, Mount):
            out.append(("GET", route.path + "/app.js"))
            out.append(("GET", route.path + "/%2e%2e/app.py"))
            continue
        if not hasattr(route, "methods"):
            continue
        params = re.findall(r"{([^}:]+)(?::[^}]+)?}", route.path)
        for method in sorted(route.methods or {"GET"}):
            if method == "HEAD":
                continue
            combos = itertools.product(_VALUES, repeat=len(params))
            for values in itertools.islice(combos, 12) if params else [()]:
                path = route.path
                for p, v in zip(params, values, strict=True):
                    path = re.sub(r"{" + p + r"(?::[^}]+)?}", v, path)
                out.append((method, path))
    return out


@pytest.mark.parametrize("who", ["owner", "labeler", "nobody"])
def test_no_route_answers_500_to_any_input(app, web_project, who) -> None:
    c = TestClient(app, raise_server_exceptions=False)
    headers = {"owner": OWNER, "nobody": {},
               "labeler": person(web_project.project, "alice")}[who]  # fmt: skip
    task = web_project.project.store.tasks.list()[0]
    paths = [*_paths(app), ("GET", f"/task/{task.id}"),
             ("GET", f"/img/t/{task.id}/x"), ("GET", f"/task/{task.id}/results")]  # fmt: skip
    assert len(paths) > 60
    bad: list[tuple[str, str, int]] = []
    for method, path in paths:
        if method == "GET":
            for q in _QUERIES:
                r = c.get(path + q, headers=headers)
                if r.status_code >= 500 and r.status_code != 503:
                    bad.append((method, path + q, r.status_code))
        else:
            for body in _BODIES:
                for kind in ("application/json", "application/x-www-form-urlencoded"):
                    r = c.post(path, content=body, headers={
                        **headers, "Content-Type": kind, "Origin": "http://testserver"})  # fmt: skip
                    if r.status_code >= 500:
                        bad.append((method, path, r.status_code))
    assert bad == []
