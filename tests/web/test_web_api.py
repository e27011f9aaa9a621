"""Web app through its HTTP interface: auth, path safety, events, concurrency."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from fastapi.testclient import TestClient
from web_helpers import person

from retest.labeling.tasks import image_token
from retest.stages.crowd import project_secret
from retest.store.rows import CandidateRow

TOKEN = "test-token-123"  # the web conftest's tokens
REVIEWER = "test-reviewer-456"
AUTH = {"X-Retest-Token": TOKEN, "X-Retest-Annotator": "alice"}
READ = {"X-Retest-Token": REVIEWER}


def test_pages_render(app, web_project) -> None:
    c = TestClient(app, headers=READ)
    store = web_project.project.store
    task = store.tasks.list()[0]
    for url in [
        "/",
        "/label/0/tabby",
        "/label/0/tabby?stage=verify",
        "/tasks",
        f"/task/{task.id}",
        "/neardup",
        "/review/webtest-a-0/0",
    ]:
        r = c.get(url)
        assert r.status_code == 200, url
    assert "tabby" in c.get("/").text
    r = c.get(f"/img/i/{web_project.candidates[0]}")
    assert r.status_code == 200 and r.content[:4] == b"\x89PNG"


def test_writes_need_the_token(app, web_project) -> None:
    c = TestClient(app)
    body = {
        "submission": "page-load-1",
        "stage": "select",
        "class_id": 0,
        "keyword": "tabby",
        "shown": web_project.candidates[:1],
        "checked": [],
    }
    assert c.post("/api/label", json=body).status_code == 401
    bad = {"X-Retest-Token": "wrong", "X-Retest-Annotator": "eve"}
    assert c.post("/api/label", json=body, headers=bad).status_code == 401
    # alice's token writes as alice: naming anyone else is refused
    as_bob = {"X-Retest-Token": TOKEN, "X-Retest-Annotator": "bob"}
    assert c.post("/api/label", json=body, headers=as_bob).status_code == 403
    assert web_project.project.store.annotations.list(kind="select") == []
    no_name = {"X-Retest-Token": TOKEN}
    assert c.post("/api/label", json=body, headers=no_name).status_code == 200
    body["submission"] = "page-load-2"
    same = {"X-Retest-Token": TOKEN, "X-Retest-Annotator": "ALICE"}
    assert c.post("/api/label", json=body, headers=same).status_code == 200
    events = web_project.project.store.annotations.list(kind="select")
    assert [(e.who, e.item_id, e.value, e.ui_version) for e in events] == [
        ("alice", web_project.candidates[0], 0, "web-3")
    ] * 2


def test_image_paths_cannot_escape_the_project(app, web_project, tmp_path) -> None:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("top secret")
    store = web_project.project.store
    store.candidates.add(
        [
            CandidateRow(
                id="evil", source="folder", source_ref="x", file_path="../secret.txt"
            )
        ]
    )
    c = TestClient(app, headers=READ)
    assert c.get("/img/i/evil").status_code == 404
    for url in [
        "/img/i/..%2F..%2Fsecret.txt",
        "/img/i/../../secret.txt",
        "/static/..%2F..%2F..%2Fsecret.txt",
        "/static/../app.py",
    ]:
        r = c.get(url)
        assert r.status_code == 404, url
        assert b"top secret" not in r.content
    task = store.tasks.list()[0]
    assert c.get(f"/img/t/{task.id}/not-a-token").status_code == 404


def test_task_answer_uses_tokens(app, web_project) -> None:
    store = web_project.project.store
    task = store.tasks.list()[0]
    secret = project_secret(web_project.project)
    tokens = [image_token(f"{task.id}|{i}", secret) for i in task.items]
    c = TestClient(app)
    page = c.get(f"/task/{task.id}", headers=AUTH).text
    assert all(i not in page for i in task.items)  # ids never reach the labeler
    r = c.post(
        "/api/task",
        json={
            "submission": "load-0001",
            "task_id": task.id,
            "selected_tokens": tokens[:2],
        },
        headers=AUTH,
    )
    assert r.status_code == 200
    r = c.post(
        "/api/task",
        json={
            "submission": "load-0002",
            "task_id": task.id,
            "selected_tokens": ["forged"],
        },
        headers=AUTH,
    )
    assert r.status_code == 422
    counts = store.annotations.item_counts(kinds=["task"])
    assert [counts[i] for i in task.items[:3]] == [(1, 1), (1, 1), (1, 0)]


def test_two_annotators_at_once_lose_no_events(live_server, web_project) -> None:
    cands = web_project.candidates[0::2]  # the 6 tabby candidates

    def label(args: tuple[str, int]) -> int:
        who, k = args
        body = {
            "submission": f"{who}-load-{k}",
            "stage": "select",
            "class_id": 0,
            "keyword": "tabby",
            "shown": cands[:6],
            "checked": cands[: k % 6],
        }
        headers = tokens[who]
        return httpx.post(
            f"{live_server}/api/label", json=body, headers=headers, timeout=30
        ).status_code

    tokens = {w: person(web_project.project, w) for w in ("alice", "bob")}
    jobs = [(who, k) for k in range(25) for who in ("alice", "bob")]
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(label, jobs))
    assert codes == [200] * 50
    events = web_project.project.store.annotations.list(kind="select")
    assert len(events) == 50 * 6
    assert (
        sum(e.who == "alice" for e in events)
        == sum(e.who == "bob" for e in events)
        == 150
    )
