"""A labeling campaign in Chromium on real Fashion-MNIST images: three labelers
and a reviewer, each signed in with a personal link (issue #24's acceptance).

Checked: a labeler cannot write as another; a revoked link gets 401 on its next
request; Back and correct stores the correction; undo; per person the stored
selection equals what was clicked, and the selection frequencies equal the
latest answer per person and task; progress counts; a page framed by another
origin cannot be clicked through; keyword labeling stages 1 and 2; axe-core
finds no serious or critical violation on any page visited.
"""

from __future__ import annotations

import http.server
import shutil
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import uvicorn
from web_helpers import _free_port

from retest.datasets.fashion_mnist import DEBIAN_DIR, FASHION_MNIST_CLASSES
from retest.project import Project, add_person, revoke_person, selection_frequencies
from retest.stages.crowd import create_tasks, project_secret
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, KeywordRow, ReferenceRow, content_id
from retest.web.app import create_app
from retest.web.views import task_tokens

pytestmark = [pytest.mark.web, pytest.mark.slow]
CLASSES = (0, 5, 7)  # T-shirt/top, Sandal, Sneaker
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def _fashion_project(root: Path) -> Project:
    """3 classes of the real Fashion-MNIST test split: 12 originals and 20
    candidates each, one keyword a class, grid tasks of 12 images."""
    from retest.datasets.idx import read_idx

    if not (DEBIAN_DIR / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(
            f"Fashion-MNIST is absent ({DEBIAN_DIR}): apt-get install dataset-fashion-mnist"
        )
    x = np.asarray(read_idx(DEBIAN_DIR / "t10k-images-idx3-ubyte.gz"), dtype=np.uint8)
    y = np.asarray(read_idx(DEBIAN_DIR / "t10k-labels-idx1-ubyte.gz"), dtype=np.int64)
    names = [FASHION_MNIST_CLASSES[c] for c in CLASSES]
    proj = Project.init(root, name="fashion-campaign", classes=names)
    refs = np.concatenate([np.flatnonzero(y == c)[:12] for c in CLASSES])
    cands = np.concatenate([np.flatnonzero(y == c)[100:120] for c in CLASSES])
    cls = {c: k for k, c in enumerate(CLASSES)}
    PixelArray.create(proj.arrays_dir, "ref_test", shape=(28, 28)).append(x[refs])
    PixelArray.create(proj.arrays_dir, "pool", shape=(28, 28)).append(x[cands])
    kw = {k: n.split("/")[0].lower() for k, n in enumerate(names)}
    proj.store.classes.put_keywords(KeywordRow(k, kw[k], 12) for k in kw)
    proj.store.references.add(
        ReferenceRow("test", int(i), cls[int(y[i])], content_id(x[i]),
                     kw[cls[int(y[i])]], "ref_test", r)
        for r, i in enumerate(refs)
    )  # fmt: skip
    proj.store.candidates.add(
        CandidateRow(content_id(x[i]), "arrays", str(int(i)), cls[int(y[i])],
                     kw[cls[int(y[i])]], array_name="pool", array_row=r)
        for r, i in enumerate(cands)
    )  # fmt: skip
    create_tasks(proj, images_per_task=12, pos_controls=2, neg_controls=2, seed=5)
    return proj


@pytest.fixture
def campaign(tmp_path: Path) -> Iterator[dict[str, Any]]:
    pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        pytest.skip("Chromium is absent: apt-get install chromium")
    proj = _fashion_project(tmp_path / "proj")
    app = create_app(
        proj, reviewer_token="owner-token-0001", secret=project_secret(proj)
    )
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.05)
    base = f"http://127.0.0.1:{port}"
    links = {
        n: add_person(proj, n, "labeler", by="owner").link(base)
        for n in ("Ana", "Bo", "Cy")
    }
    links["Rui"] = add_person(proj, "Rui", "reviewer", by="owner").link(base)
    yield {"project": proj, "base": base, "links": links}
    server.should_exit = True
    thread.join(10)
    proj.close()


class _Audit:
    """axe-core in the page: serious and critical violations of every page."""

    def __init__(self) -> None:
        from axe_playwright_python.sync_playwright import Axe

        self.axe, self.found, self.pages = Axe(), [], 0

    def __call__(self, pg: Any) -> None:
        result = self.axe.run(pg)
        self.pages += 1
        for v in result.response["violations"]:
            if v["impact"] in ("serious", "critical"):
                self.found.append(
                    (pg.url, v["id"], v["impact"], v["nodes"][0]["target"])
                )


def _answer(pg: Any, picks: list[int], *, fresh: bool = True) -> None:
    """Click the images ``picks`` (positions) of the open task, then Enter; wait
    for the next page. ``fresh``: the page has just loaded (its script gives
    the first image the focus)."""
    if fresh:
        pg.wait_for_selector(".cell:focus")
    for k in picks:
        pg.locator(".cell").nth(k).click()
    with pg.expect_navigation(wait_until="load"):
        with pg.expect_response(lambda r: "/api/task" in r.url) as resp:
            pg.keyboard.press("Enter")
    assert resp.value.status == 200, resp.value.text()


def _task_id(pg: Any) -> str:
    return str(pg.url.rsplit("/task/", 1)[1])


def test_a_campaign_with_personal_links(
    browser_pw: Any, campaign: dict[str, Any]
) -> None:
    proj, base, links = campaign["project"], campaign["base"], campaign["links"]
    store = proj.store
    secret = project_secret(proj)
    tasks = {t.id: t for t in store.tasks.list()}
    n_tasks = len(tasks)
    audit = _Audit()
    ctx = {n: browser_pw.new_context(viewport={"width": 1200, "height": 900})
           for n in links}  # fmt: skip
    pg = {n: c.new_page() for n, c in ctx.items()}
    for n, p in pg.items():
        p.goto(links[n])
        assert "token=" not in p.url
        p.wait_for_selector(f"#who:has-text('{n} ·')")
    audit(pg["Ana"])

    clicked: dict[tuple[str, str], set[int]] = {}  # (person, task) -> positions

    # -- Ana: two tasks, then Back and correct the second, then undo
    p = pg["Ana"]
    p.goto(f"{base}/next/task")
    p.wait_for_selector(".cell:focus")
    assert f"Task 1 of {n_tasks}" in p.locator("#progress").inner_text()
    audit(p)
    first = _task_id(p)
    _answer(p, [0, 2])
    clicked[("Ana", first)] = {0, 2}
    second = _task_id(p)
    assert "Task 2 of" in p.locator("#progress").inner_text()
    _answer(p, [1])
    clicked[("Ana", second)] = {1}
    p.go_back()  # the second task again, as it is now: her answer shown
    p.wait_for_selector("#answered")
    assert _task_id(p) == second
    boxes = p.locator("input[name=selected]")
    assert [boxes.nth(k).is_checked() for k in range(3)] == [False, True, False]
    p.locator(".cell").nth(3).click()  # correct: add image 4
    _answer(p, [], fresh=False)
    clicked[("Ana", second)] = {1, 3}
    p.wait_for_selector("#flash:has-text('updated')")
    third = _task_id(p)
    _answer(p, [5])  # a third answer ...
    p.wait_for_selector("#undo")
    with p.expect_navigation(wait_until="load"):
        p.click("#undo")  # ... undone: the third task reopens, unanswered
    assert _task_id(p) == third
    assert p.locator("input[name=selected]:checked").count() == 0
    assert "you have answered 2" in p.locator("#progress").inner_text()

    # -- Bo and Cy answer the first two tasks of their own
    for name, picks in (("Bo", ([0], [0, 1, 2])), ("Cy", ([], [4]))):
        q = pg[name]
        q.goto(f"{base}/next/task")
        for k in picks:
            q.wait_for_selector(".cell:focus")
            tid = _task_id(q)
            _answer(q, list(k))
            clicked[(name, tid)] = set(k)

    # -- no one writes as another
    tid = first
    tok = next(iter(task_tokens(tid, tuple(dict.fromkeys(tasks[tid].items)), secret)))
    status = pg["Bo"].evaluate(
        """async ([tid, tok]) => (await fetch('/api/task', {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-Retest-Annotator': 'Ana'},
            body: JSON.stringify({submission: 'forged-0001', task_id: tid,
                                  selected_tokens: [tok]})})).status""",
        [tid, tok],
    )
    assert status == 403
    assert {
        e.who
        for e in store.annotations.list(kind="task")
        if "forged" in (e.assignment_id or "")
    } == set()

    # -- keyword labeling: Ana selects (stage 1), Bo verifies (stage 2)
    p.goto(f"{base}/label/0/t-shirt?stage=select")
    p.wait_for_selector(".cell:focus")
    audit(p)
    shown = p.locator("input[name=item]").count()
    for k in (0, 1, 2):
        p.locator(".cell").nth(k).click()
    with p.expect_navigation(wait_until="load"):
        p.keyboard.press("Enter")
    selected = [e for e in store.annotations.list(kind="select") if e.value]
    assert len(selected) == 3 and {e.who for e in selected} == {"Ana"}
    assert len(store.annotations.list(kind="select")) == shown
    q = pg["Bo"]
    q.goto(f"{base}/label/0/t-shirt?stage=verify")
    q.wait_for_selector(".cell:focus")
    audit(q)
    assert q.locator("input[name=item]:checked").count() == 3  # the picks, pre-checked
    q.locator(".cell").nth(0).click()  # one is not a T-shirt after all
    with q.expect_navigation(wait_until="load"):
        q.keyboard.press("Enter")
    verify = store.annotations.list(kind="verify")
    assert sorted(e.value for e in verify) == [0, 1, 1] and {e.who for e in verify} == {
        "Bo"
    }

    # -- the reviewer's pages
    r = pg["Rui"]
    for url in ("/", "/tasks", f"/task/{first}/results", "/stats", "/stats/0",
                "/keywords/0", "/label-errors", "/neardup", "/quality"):  # fmt: skip
        r.goto(base + url)
        r.wait_for_load_state("load")
        audit(r)
    for url in ("/tasks", "/keywords/0", "/done"):
        p.goto(base + url)
        audit(p)

    # -- per person the stored selection is what was clicked; the frequencies
    #    are the latest answer per person and task
    counted = selection_frequencies(proj)
    latest: dict[tuple[str, str], set[str]] = {}
    for (name, tid), picks in clicked.items():
        items = list(
            task_tokens(tid, tuple(dict.fromkeys(tasks[tid].items)), secret).values()
        )
        latest[(name, tid)] = {items[k] for k in picks}
    by_assignment: dict[str, list[Any]] = defaultdict(list)
    for e in store.annotations.list(kind="task"):
        if (e.assignment_status or "").lower() in ("submitted", "approved"):
            by_assignment[e.assignment_id or ""].append(e)
    stored: dict[tuple[str, str], tuple[str, set[str]]] = {}
    for events in by_assignment.values():
        e = events[0]
        key = (e.who, e.task_id or "")
        when = max(x.when or "" for x in events)
        if key not in stored or when > stored[key][0]:
            stored[key] = (when, {x.item_id for x in events if x.value})
    assert {k: v for k, (_, v) in stored.items()} == latest
    expected: dict[tuple[str, int], list[int]] = defaultdict(list)
    for (_, tid), picks in latest.items():
        t = tasks[tid]
        for item in dict.fromkeys(t.items):
            expected[(item, t.class_id)].append(int(item in picks))
    for key, votes in expected.items():
        assert counted[key].n_assignments == len(votes), key
        assert counted[key].frequency == pytest.approx(sum(votes) / len(votes)), key
    assert sum(st.n_assignments for st in counted.values()) == sum(
        map(len, expected.values())
    )

    # -- a revoked link: 401 on the next request
    other = Project.open(proj.root)
    try:
        revoke_person(other, "cy", by="owner")
    finally:
        other.close()
    resp = pg["Cy"].goto(f"{base}/tasks")
    assert resp is not None and resp.status == 401

    # -- a page on another origin frames a task: nothing loads, a click stores nothing
    evil = _framing_page(f"{base}/task/{third}")
    try:
        n_before = store.annotations.count()
        f = ctx["Ana"].new_page()
        f.goto(evil)
        f.wait_for_load_state("load")
        frame = f.frame_locator("iframe")
        assert frame.locator(".cell").count() == 0  # refused by the browser
        f.mouse.click(60, 60)
        f.keyboard.press("Enter")
        f.wait_for_timeout(500)  # a click that got through would be stored by now
        assert store.annotations.count() == n_before
    finally:
        evil_stop()

    assert audit.pages >= 12
    assert audit.found == []
    for c in ctx.values():
        c.close()


_EVIL: list[http.server.ThreadingHTTPServer] = []


def _framing_page(target: str) -> str:
    """A page on another port that frames ``target`` full-size."""
    body = f'<iframe src="{target}" width="1000" height="800"></iframe>'.encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _EVIL.append(srv)
    return f"http://127.0.0.1:{srv.server_address[1]}/"


def evil_stop() -> None:
    while _EVIL:
        srv = _EVIL.pop()
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def browser_pw() -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS
        )
        yield b
        b.close()
