"""Real browser (Debian's Chromium driven by Playwright) against a live server."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.web
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "test-token-123"  # the web conftest's tokens
REVIEWER = "test-reviewer-456"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser(live_server: str) -> Iterator[object]:
    playwright = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        pytest.skip("Chromium is absent: apt-get install chromium chromium-driver")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def sign_in(browser, live_server: str, token: str, name: str):  # type: ignore[no-untyped-def]
    """A fresh browser context signed in through the invitation link."""
    pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    pg.goto(f"{live_server}/?token={token}")
    assert "token=" not in pg.url  # the link's token leaves the address bar
    pg.fill("#annotator-name", name)
    pg.click("#identity-form button")
    pg.wait_for_selector(f"#who:has-text('{name} ·')")
    return pg


@pytest.fixture
def page(browser, live_server: str):  # type: ignore[no-untyped-def]
    """A labeler (the invitation token)."""
    return sign_in(browser, live_server, TOKEN, "alice")


@pytest.fixture
def reviewer(browser, live_server: str):  # type: ignore[no-untyped-def]
    return sign_in(browser, live_server, REVIEWER, "alice")


def _submit_and_wait(pg) -> None:  # type: ignore[no-untyped-def]
    with pg.expect_response(lambda r: "/api/" in r.url) as resp:
        pg.click("#submit")
    assert resp.value.status == 200, resp.value.text()
    pg.wait_for_load_state("load")


def test_labeler_select_then_verify(page, live_server, web_project) -> None:
    store = web_project.project.store
    cats = [c for i, c in enumerate(web_project.candidates) if i % 2 == 0]
    page.goto(f"{live_server}/label/0/tabby?stage=select")
    page.check(f"input[value='{cats[0]}']")
    page.check(f"input[value='{cats[1]}']")
    _submit_and_wait(page)
    page.goto(f"{live_server}/label/0/tabby?stage=verify")
    assert page.is_checked(f"input[value='{cats[0]}']")  # stage-2 starts pre-checked
    page.uncheck(f"input[value='{cats[1]}']")
    _submit_and_wait(page)
    sel = {(e.item_id, e.value) for e in store.annotations.list(kind="select")}
    assert sel == {(c, int(c in cats[:2])) for c in cats}
    ver = [(e.who, e.item_id, e.value) for e in store.annotations.list(kind="verify")]
    assert sorted(ver) == sorted([("alice", cats[0], 1), ("alice", cats[1], 0)])


def test_annotator_answers_a_task_grid(page, live_server, web_project) -> None:
    store = web_project.project.store
    task = store.tasks.list()[0]
    page.goto(f"{live_server}/task/{task.id}")
    boxes = page.locator("input[name=selected]")
    assert boxes.count() == len(task.items)
    boxes.nth(0).check()
    boxes.nth(3).check()
    _submit_and_wait(page)
    events = store.annotations.list(kind="task", task_id=task.id)
    assert len(events) == len(task.items)
    assert sorted(e.item_id for e in events if e.value) == sorted(
        [task.items[0], task.items[3]]
    )
    assert len({e.assignment_id for e in events}) == 1


def test_reviewer_marks_duplicate_and_blacklists(
    reviewer, live_server, web_project
) -> None:
    page = reviewer
    store = web_project.project.store
    cats = [c for i, c in enumerate(web_project.candidates) if i % 2 == 0]
    page.goto(f"{live_server}/neardup?metric=l2")
    form = page.locator(f"form[data-candidate='{cats[0]}']")
    form.locator("input[value='test:0']").check()
    with page.expect_response(lambda r: "/api/neardup" in r.url) as resp:
        form.locator("button").click()
    assert resp.value.status == 200
    verdicts = {
        (v.candidate_id, v.ref_id, v.is_duplicate) for v in store.neardup.verdicts()
    }
    assert verdicts == {(cats[0], "test:0", True), (cats[0], cats[1], False)}
    assert [r.reviewer for r in store.neardup.reviews(candidate_id=cats[0])] == [
        "alice"
    ]

    page.goto(f"{live_server}/review/webtest-a-0/0")
    assert page.locator(".hist").is_visible()
    page.check(f"input[name=blacklist][value='{cats[1]}']")
    page.check("input[name=reviewed]")
    _submit_and_wait(page)
    assert store.blacklist.current() == {
        cats[1]: "invalid image (selected in the class review)"
    }
    state = store.revisions.reviews("webtest-a-0")[0]
    assert state.reviewed and not state.problematic and state.who == "alice"
    assert store.annotations.count() == 0  # review writes no label events


def test_reviewer_decides_label_error_suspects(
    reviewer, live_server, web_project
) -> None:
    page = reviewer
    from retest.pipeline.review_queue import (
        VERDICT_KIND,
        Suspect,
        queue_label_errors,
    )

    store = web_project.project.store
    queue_label_errors(
        store,
        [Suspect("test:1", 1, 0, rank=1), Suspect("test:4", 0, 1, rank=2)],
        method="both",
    )
    page.goto(f"{live_server}/label-errors")
    first = page.locator("form[data-item='test:1']")
    assert "dog" in first.locator(".given").inner_text()
    with page.expect_response(lambda r: "/api/label-error" in r.url) as resp:
        first.locator("button[data-verdict=wrong]").click()
    assert resp.value.status == 200, resp.value.text()
    page.wait_for_selector("form[data-item='test:1']", state="detached")
    with page.expect_response(lambda r: "/api/label-error" in r.url) as resp:
        page.locator("form[data-item='test:4'] button[data-verdict=correct]").click()
    assert resp.value.status == 200
    page.wait_for_selector("text=Nothing pending")
    got = [
        (e.who, e.item_id, e.value, e.extra["verdict"])
        for e in store.annotations.list(kind=VERDICT_KIND)
    ]
    assert got == [("alice", "test:1", 0, "wrong"), ("alice", "test:4", 0, "correct")]
