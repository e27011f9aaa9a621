"""A careless team (issue #24's sweep): what a labeler clicks that is not meant
for them, an undo after the last task, an exclusion of nobody."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from web_helpers import REVIEWER, person

from retest.project._people import excluded_workers

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
OWNER = {"X-Retest-Token": REVIEWER}


def test_a_page_a_labeler_may_not_open_is_a_page_not_json(app, web_project) -> None:
    c = TestClient(app)
    ana = person(web_project.project, "ana")
    for url, status, said in [
        ("/quality", 403, "Reviewers only"),  # a reviewer's page
        ("/stats", 403, "Reviewers only"),
        ("/task/no-such-task", 404, "no-such-task"),  # an old or mistyped link
        ("/label/0/no-such-keyword", 404, "no-such-keyword"),
        ("/no/such/page", 404, "Not Found"),
    ]:
        r = c.get(url, headers=ana)
        assert r.status_code == status, url
        assert r.headers["content-type"].startswith("text/html"), url
        assert said in r.text and 'id="who"' in r.text, url  # the app's own page
        assert r.headers["x-frame-options"] == "DENY"  # hardened like every page
    # scripts keep their JSON
    r = c.get("/api/no-such-thing", headers=ana)
    assert r.status_code == 404 and r.json()["detail"]
    r = c.post("/api/exclusion", headers=ana,
               json={"worker": "local:ana", "exclude": True})  # fmt: skip
    assert r.status_code == 403 and "Reviewers only" in r.json()["detail"]


def test_excluding_nobody_on_the_web_is_refused(app, web_project) -> None:
    c = TestClient(app)
    for worker in ("local:nobody", "nobody", " "):
        body = {"worker": worker, "exclude": True, "submission": "x-00000001"}
        r = c.post("/api/exclusion", json=body, headers=OWNER)
        assert r.status_code in (404, 422), r.text
    assert excluded_workers(web_project.project.store) == frozenset()
    person(web_project.project, "Bo")
    body = {"worker": "bo", "exclude": True, "submission": "x-00000002"}
    r = c.post("/api/exclusion", json=body, headers=OWNER)
    assert r.status_code == 200 and r.json()["changed"], r.text
    assert excluded_workers(web_project.project.store) == {"local:Bo"}


@pytest.fixture
def chromium() -> Iterator[object]:
    playwright = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        pytest.skip("Chromium is absent: apt-get install chromium")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.mark.web
def test_the_last_answer_can_be_undone_from_the_finish_page(
    chromium, live_server: str, web_project
) -> None:
    """Enter pressed once too often on the last task lands on "All done": the
    answer is still undoable from there, and its task reopens unanswered."""
    proj = web_project.project
    tasks = proj.store.tasks.list()
    token = person(proj, "cy")["X-Retest-Token"]
    pg = chromium.new_context().new_page()  # type: ignore[attr-defined]
    pg.goto(f"{live_server}/?token={token}")
    pg.goto(f"{live_server}/next/task")
    for k in range(len(tasks)):
        pg.wait_for_selector(".cell:focus")
        pg.locator(".cell").nth(k).click()
        with pg.expect_navigation(wait_until="load"):
            pg.keyboard.press("Enter")
    assert pg.url.endswith("/done")
    last = pg.url
    with pg.expect_navigation(wait_until="load"):
        pg.click("#undo")
    assert pg.url != last and "/task/" in pg.url
    assert pg.locator("input[name=selected]:checked").count() == 0
    assert f"you have answered {len(tasks) - 1}" in pg.locator("#progress").inner_text()
    counted = {
        e.task_id
        for e in proj.store.annotations.list(kind="task")
        if e.worker == "local:cy" and e.assignment_status != "Withdrawn"
    }
    assert len(counted) == len(tasks) - 1
    assert pg.url.rsplit("/", 1)[1] not in counted


@pytest.mark.web
def test_every_resource_a_page_asks_for_exists(
    chromium, live_server: str, web_project
) -> None:
    """The browser's own requests (stylesheet, script, the tab's icon) all
    succeed: a 404 in the console is what a newcomer reports first."""
    token = person(web_project.project, "dee")["X-Retest-Token"]
    pg = chromium.new_context().new_page()  # type: ignore[attr-defined]
    failed: list[str] = []
    pg.on(
        "response",
        lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    pg.goto(f"{live_server}/?token={token}")
    pg.goto(f"{live_server}/next/task")
    pg.wait_for_load_state("networkidle")
    assert failed == []
    icon = pg.eval_on_selector("link[rel=icon]", "e => e.href")
    assert pg.request.get(icon).status == 200
