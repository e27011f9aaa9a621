"""Real browser (Debian's Chromium driven by Playwright) against a live server."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from web_helpers import person_token

from retest.project import RECEIPT_KIND

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
    """A fresh browser context signed in through a personal (or the owner's) link
    as ``name``, the person the token belongs to."""
    pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    pg.goto(f"{live_server}/?token={token}")
    assert "token=" not in pg.url  # the link's token leaves the address bar
    pg.wait_for_selector(f"#who:has-text('{name} ·')")
    return pg


@pytest.fixture
def page(browser, live_server: str):  # type: ignore[no-untyped-def]
    """Labeler alice (her personal link)."""
    return sign_in(browser, live_server, TOKEN, "alice")


@pytest.fixture
def reviewer(browser, live_server: str, web_project):  # type: ignore[no-untyped-def]
    """Reviewer rita (her personal link)."""
    token = person_token(web_project.project, "rita", "reviewer")
    return sign_in(browser, live_server, token, "rita")


def _submit_and_wait(pg) -> None:  # type: ignore[no-untyped-def]
    """Submit the page's form; when a successful save moves on to the form's
    ``data-next`` page, wait for that page too (a ``goto`` issued before the
    app's own navigation lands would be aborted by it)."""
    moves_on = pg.evaluate(
        "() => !!document.querySelector('#submit').form?.dataset.next"
    )
    if moves_on:
        with pg.expect_navigation(wait_until="load"):
            with pg.expect_response(lambda r: "/api/" in r.url) as resp:
                pg.click("#submit")
    else:
        with pg.expect_response(lambda r: "/api/" in r.url) as resp:
            pg.click("#submit")
    assert resp.value.status == 200, resp.value.text()


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
    assert [r.reviewer for r in store.neardup.reviews(candidate_id=cats[0])] == ["rita"]

    page.goto(f"{live_server}/review/webtest-a-0/0")
    assert page.locator(".hist").is_visible()
    page.check(f"input[name=blacklist][value='{cats[1]}']")
    page.check("input[name=reviewed]")
    _submit_and_wait(page)
    assert store.blacklist.current() == {
        cats[1]: "invalid image (selected in the class review)"
    }
    state = store.revisions.reviews("webtest-a-0")[0]
    assert state.reviewed and not state.problematic and state.who == "rita"
    # review writes no label events, only its replay receipt
    assert store.annotations.count() == store.annotations.count(kind=RECEIPT_KIND)


def test_reviewer_decides_label_error_suspects(
    reviewer, live_server, web_project
) -> None:
    page = reviewer
    from retest.project import VERDICT_KIND, Suspect, queue_label_errors

    store = web_project.project.store
    queue_label_errors(
        web_project.project,
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
    assert got == [("rita", "test:1", 0, "wrong"), ("rita", "test:4", 0, "correct")]


def _task_page(pg, live_server: str, task_id: str) -> None:  # type: ignore[no-untyped-def]
    pg.goto(f"{live_server}/task/{task_id}")
    pg.wait_for_selector(".cell:focus")  # the first image has the focus already


class _ApiCalls:
    """The page's API requests, sent and answered (or failed)."""

    def __init__(self, pg) -> None:  # type: ignore[no-untyped-def]
        self.sent: list[object] = []
        self.answered: list[object] = []
        api = lambda r: "/api/" in r.url  # noqa: E731
        pg.on("request", lambda r: api(r) and self.sent.append(r))
        pg.on("requestfinished", lambda r: api(r) and self.answered.append(r))
        pg.on("requestfailed", lambda r: api(r) and self.answered.append(r))

    def settled(self) -> bool:
        return len(self.answered) == len(self.sent) > 0


def _wait_saved(pg, store, kind: str, n: int, calls: _ApiCalls, leaving: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``n`` events of ``kind`` are stored and every API request the
    page sent is answered (an answer comes after its commit), the save has moved
    the page on from ``leaving`` (the form's page, whose submit handlers can then
    send nothing more), and a round trip to the page found no request after them:
    then no second write can still arrive. Conditions, not a fixed delay."""

    def until(ok) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 30
        while not ok():
            assert time.monotonic() < deadline, (kind, n, len(calls.sent))
            pg.wait_for_timeout(20)

    until(lambda: store.annotations.count(kind=kind) >= n and calls.settled())
    until(lambda: pg.url != leaving)  # the save moves on to the form's next page
    pg.wait_for_load_state("load")
    pg.evaluate("() => document.readyState")  # every queued key handler has run
    until(calls.settled)


def test_enter_double_click_and_resubmit_store_one_vote(
    page, live_server, web_project
) -> None:
    from retest.project import selection_frequencies

    store = web_project.project.store
    tasks = store.tasks.list()
    t0, t1 = tasks[0], tasks[1]
    calls = _ApiCalls(page)
    # click an image (the old page's checkbox then had the focus), Enter twice
    _task_page(page, live_server, t0.id)
    here = page.url
    page.locator(".cell").nth(1).click()
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    _wait_saved(page, store, "task", len(t0.items), calls, here)
    assert store.annotations.count(kind="task") == len(t0.items)
    # a double click on Submit
    _task_page(page, live_server, t1.id)
    here = page.url
    page.locator(".cell").nth(0).click()
    page.dblclick("#submit")
    _wait_saved(page, store, "task", len(t0.items) + len(t1.items), calls, here)
    assert store.annotations.count(kind="task") == len(t0.items) + len(t1.items)
    # reload and answer again: the page shows the first answer, unticked it
    # is a new answer that replaces the first
    _task_page(page, live_server, t1.id)
    page.reload()
    page.wait_for_selector(".cell:focus")
    assert page.locator("input[name=selected]:checked").count() == 1
    page.locator(".cell").nth(0).click()
    here = page.url
    page.keyboard.press("Enter")
    _wait_saved(page, store, "task", len(t0.items) + 2 * len(t1.items), calls, here)
    stats = selection_frequencies(web_project.project)
    for t in (t0, t1):
        for item in t.items:
            assert stats[(item, t.class_id)].n_assignments == 1  # one vote each
    assert stats[(t1.items[0], t1.class_id)].frequency == 0.0  # the later answer
    # labeling: click an image, Enter twice: one event per shown image
    page.goto(f"{live_server}/label/0/tabby?stage=select")
    here = page.url
    shown = page.locator("input[name=item]").count()
    page.locator(".cell").nth(0).click()
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    _wait_saved(page, store, "select", shown, calls, here)
    assert store.annotations.count(kind="select") == shown


def test_keyboard_completes_a_keyword_and_a_task(
    page, live_server, web_project
) -> None:
    store = web_project.project.store
    cats = [c for i, c in enumerate(web_project.candidates) if i % 2 == 0]
    page.goto(f"{live_server}/label/0/tabby?stage=select")
    page.wait_for_selector(".cell:focus")
    order = page.locator("input[name=item]").evaluate_all(
        "els => els.map(e => e.value)"
    )
    assert sorted(order) == sorted(cats)
    bar = page.locator(".bar")
    assert bar.is_visible() and bar.bounding_box()["y"] < 900  # sticky, on screen
    page.keyboard.press("Space")  # first image
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Space")  # third image
    assert "2 of 6 checked" in bar.inner_text()
    page.keyboard.press("z")
    zoomed = page.locator("#zoom img")
    zoomed.wait_for(state="visible")
    size = zoomed.bounding_box()
    natural = zoomed.evaluate("i => i.naturalWidth")
    assert size["width"] > natural and size["width"] % natural == 0  # whole factor
    assert zoomed.evaluate("i => getComputedStyle(i).imageRendering") == "pixelated"
    page.keyboard.press("z")
    assert not page.locator("#zoom").is_visible()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    # every tabby candidate answered: the class's next keyword with work opens
    assert "/label/1/" not in page.url
    assert page.url.endswith("/keywords/0") or "/label/0/" in page.url
    sel = {(e.item_id, e.value) for e in store.annotations.list(kind="select")}
    assert sel == {(c, int(c in (order[0], order[2]))) for c in cats}
    # a grid task, keyboard only; then the next task opens
    tasks = store.tasks.list()
    _task_page(page, live_server, tasks[0].id)
    page.keyboard.press("ArrowDown")  # a row down (the grid wraps at 1400 px)
    page.keyboard.press("Space")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(f"/task/{tasks[1].id}")
    events = store.annotations.list(kind="task", task_id=tasks[0].id)
    assert len(events) == len(tasks[0].items)
    assert sum(e.value for e in events) == 1


def test_labeler_cannot_read_results_or_controls(
    page, live_server, web_project
) -> None:
    task = web_project.project.store.tasks.list()[0]
    r = page.goto(f"{live_server}/task/{task.id}/results")
    assert r is not None and r.status == 403
    assert "role-pos" not in page.content() and "role-neg" not in page.content()
    for url in ("/stats", "/review/webtest-a-0/0", "/neardup", "/label-errors"):
        r = page.goto(live_server + url)
        assert r is not None and r.status == 403, url
    page.goto(f"{live_server}/tasks")
    assert page.locator("a[href$='/results']").count() == 0
    # the token cookie is out of reach of scripts
    assert "retest_token" not in page.evaluate("document.cookie")


def test_names_with_spaces_and_accents_are_stored_as_added(
    browser, live_server, web_project
) -> None:
    name = "José Dana Smith"
    pg = sign_in(browser, live_server, person_token(web_project.project, name), name)
    pg.goto(f"{live_server}/label/0/tabby?stage=select")
    pg.wait_for_selector(".cell:focus")
    with pg.expect_navigation():
        pg.keyboard.press("Enter")
    whos = {e.who for e in web_project.project.store.annotations.list(kind="select")}
    assert whos == {name}
    assert name in pg.locator("#who").inner_text()


def test_near_duplicates_decided_with_y_and_n(
    reviewer, live_server, web_project
) -> None:
    store = web_project.project.store
    cats = [c for i, c in enumerate(web_project.candidates) if i % 2 == 0]
    reviewer.goto(f"{live_server}/neardup?metric=l2")
    reviewer.wait_for_selector(".pair:focus")
    with reviewer.expect_response(lambda r: "/api/neardup" in r.url) as resp:
        reviewer.keyboard.press("y")  # test:0, the closest
        reviewer.keyboard.press("n")
    assert resp.value.status == 200
    reviewer.wait_for_selector("form.neardup-form.saved")  # no reload
    verdicts = {
        (v.candidate_id, v.ref_id, v.is_duplicate) for v in store.neardup.verdicts()
    }
    assert verdicts == {(cats[0], "test:0", True), (cats[0], cats[1], False)}
