"""The web app's caches and its write path.

A write changes what the next page shows (votes, labels, blacklist edits);
slow state is computed in the background while its pages say how far it is;
answers are batched into one transaction, acknowledged only once committed,
and a resent answer is stored once.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from web_helpers import person

from retest.labeling.tasks import image_token
from retest.project import EventWriter, Live, NotReady
from retest.stages.crowd import project_secret
from retest.store.base import Store
from retest.store.rows import AnnotationEvent
from retest.web.routes import pages

REVIEWER = "test-reviewer-456"  # the web conftest's owner token


def _answer(c: TestClient, wp: Any, task: Any, key: str, picked: list[str],
            who: str) -> dict[str, Any]:  # fmt: skip
    secret = project_secret(wp.project)
    body = {"submission": key, "task_id": task.id,
            "selected_tokens": [image_token(f"{task.id}|{i}", secret) for i in picked]}  # fmt: skip
    r = c.post("/api/task", json=body, headers=person(wp.project, who))
    assert r.status_code == 200, r.text
    return cast(dict[str, Any], r.json())


def _shown(html: str, item: str) -> tuple[str, int]:
    """(frequency, answers) the review or statistics page shows for ``item``."""
    m = re.search(re.escape(item[:10]) + r'…?(?: · |<br>)<span class="freq">([\d.]+)'
                  r"</span> \(n=(\d+)\)", html)  # fmt: skip
    assert m, item
    return m.group(1), int(m.group(2))


def test_votes_change_the_next_class_pages(app, web_project) -> None:
    c = TestClient(app)
    read = {"X-Retest-Token": REVIEWER}
    cat = web_project.candidates[0]  # a class-0 member of revision webtest-a-0
    task = next(t for t in web_project.project.store.tasks.list() if cat in t.items)
    review = "/review/webtest-a-0/0"
    assert _shown(c.get(review, headers=read).text, cat) == ("0.00", 0)
    assert "No task answers" in c.get("/stats/0", headers=read).text
    _answer(c, web_project, task, "load-0001", [cat], "alice")
    assert _shown(c.get(review, headers=read).text, cat) == ("1.00", 1)
    assert _shown(c.get("/stats/0", headers=read).text, cat) == ("1.00", 1)
    _answer(c, web_project, task, "load-0002", [], "bob")
    assert _shown(c.get(review, headers=read).text, cat) == ("0.50", 2)
    # alice changes her mind: her later answer replaces the first one
    _answer(c, web_project, task, "load-0003", [], "alice")
    assert _shown(c.get(review, headers=read).text, cat) == ("0.00", 2)
    assert _shown(c.get("/stats/0", headers=read).text, cat) == ("0.00", 2)
    # a vote for the other class leaves the class-0 figures as they are
    dog_task = next(
        t for t in web_project.project.store.tasks.list() if t.class_id == 1
    )
    _answer(c, web_project, dog_task, "load-0004", list(dog_task.items), "carol")
    assert _shown(c.get(review, headers=read).text, cat) == ("0.00", 2)


def test_labels_and_review_edits_change_the_next_page(app, web_project) -> None:
    c = TestClient(app)
    reviewer = {"X-Retest-Token": REVIEWER}
    cats = web_project.candidates[0::2]

    def selected() -> int:
        html = c.get("/keywords/0", headers=reviewer).text
        row = re.search(r'data-keyword="tabby">(.*?)</tr>', html, re.S)
        assert row
        return int(re.findall(r"<td>(\d+)</td>", row.group(1))[-1])

    assert selected() == 0
    body = {"submission": "page-load-1", "stage": "select", "class_id": 0,
            "keyword": "tabby", "shown": cats[:3], "checked": cats[:2]}  # fmt: skip
    assert (
        c.post(
            "/api/label", json=body, headers=person(web_project.project, "alice")
        ).status_code
        == 200
    )
    assert selected() == 2
    review = "/review/webtest-a-0/0"
    assert 'data-was="1"' not in c.get(review, headers=reviewer).text
    edit = {"revision": "webtest-a-0", "class_id": 0, "blacklist": [cats[0]],
            "reason": "watermark"}  # fmt: skip
    assert c.post("/api/review", json=edit, headers=reviewer).status_code == 200
    html = c.get(review, headers=reviewer).text
    assert f'value="{cats[0]}" data-was="1"' in html
    assert "blacklisted" in c.get(review + "?show=blacklisted", headers=reviewer).text


def _wait(pred: Any, seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_slow_state_is_computed_in_the_background(web_project) -> None:
    live = Live(web_project.project, first_wait=0.05)
    gate = threading.Event()
    lines: list[tuple[str, int, int | None]] = []

    def slow(project: Any) -> int:
        assert gate.wait(20)
        return 42

    live.warm_up([("a", slow, "the answer"), ("b", lambda p: 7, "the rest")],
                 lambda task, done, total: lines.append((task, done, total)))  # fmt: skip
    with pytest.raises(NotReady) as err:
        live.derived("b", lambda p: 7)
    # the page needing step 2 says what runs now and that it comes next
    assert re.fullmatch(r"Computing the answer \(step 1 of 2\): \d+ s so far; "
                        r"this page then needs the rest\.", str(err.value))  # fmt: skip
    gate.set()
    _wait(lambda: len(lines) == 4)
    assert live.derived("a", slow) == 42 and live.derived("b", lambda p: 7) == 7
    assert [(t.split(" in ")[0], d, n) for t, d, n in lines] == [
        ("computing the answer", 0, 2), ("the answer ready", 1, 2),
        ("computing the rest", 1, 2), ("the rest ready", 2, 2),
    ]  # fmt: skip
    # a failure reaches the page that waits for it, and is tried again later
    calls = []

    def broken(project: Any) -> int:
        calls.append(1)
        raise ValueError("no dedup run")

    for _ in range(2):
        with pytest.raises(ValueError, match="no dedup run"):
            live.derived("c", broken)
    assert len(calls) == 2
    live.close()


def test_a_page_says_the_eligibility_decision_is_being_computed(
    app, web_project, monkeypatch
) -> None:
    gate = threading.Event()
    real = pages.near_duplicate_ids

    def slow(project: Any) -> frozenset[str]:
        assert gate.wait(20)
        return real(project)

    monkeypatch.setattr(pages, "near_duplicate_ids", slow)
    app.state.retest.live.first_wait = 0.05
    c = TestClient(app, headers={"X-Retest-Token": REVIEWER})
    r = c.get("/label/0/tabby?stage=verify")
    assert r.status_code == 503 and r.headers["Refresh"] == "5"
    assert "Computing the eligibility decision" in r.text
    assert c.get("/review/webtest-a-0/0").status_code == 503
    assert c.get("/label/0/tabby").status_code == 200  # stage 1 does not need it
    gate.set()
    _wait(lambda: c.get("/label/0/tabby?stage=verify").status_code == 200)
    assert c.get("/review/webtest-a-0/0").status_code == 200


class _GatedStore:
    """The project's store; the first append waits for ``gate``, and an append
    with an item "bad" fails (as a constraint violation would)."""

    def __init__(self, store: Store) -> None:
        self.inner, self.gate, self.calls = store.annotations, threading.Event(), []
        self.annotations = self

    def add(self, events: list[AnnotationEvent]) -> list[int]:
        self.calls.append(len(events))
        assert self.gate.wait(20)
        if any(e.item_id == "bad" for e in events):
            raise ValueError("bad event")
        return self.inner.add(events)

    def list(self, **kw: Any) -> list[AnnotationEvent]:
        return self.inner.list(**kw)


def test_answers_are_committed_together_and_fail_alone(web_project) -> None:
    store = web_project.project.store
    gated = _GatedStore(store)
    writer = EventWriter(cast(Store, gated))

    def events(a: str, item: str = "i1", n: int = 3) -> list[AnnotationEvent]:
        return [AnnotationEvent("w", "select", 0, item if k == 0 else f"{item}-{k}", 1,
                                assignment_id=a) for k in range(n)]  # fmt: skip

    first = writer.submit(events("a0"), "a0")
    _wait(lambda: gated.calls == [3])  # the writer waits inside the first append
    good = writer.submit(events("a1"), "a1")
    bad = writer.submit(events("a2", item="bad"), "a2")
    again = writer.submit(events("a1"), "a1")  # the same answer sent twice
    gated.gate.set()
    assert first.result(20) == (3, False)
    assert good.result(20) == (3, False)
    with pytest.raises(ValueError, match="bad event"):
        bad.result(20)
    assert again.result(20) == (3, True)
    # one transaction for both new answers, then each alone after the failure
    assert gated.calls == [3, 6, 3, 3]
    assert sorted({e.assignment_id for e in store.annotations.list()}) == ["a0", "a1"]
    # resent after a restart: found in the store, nothing written
    assert EventWriter(store).submit(events("a1"), "a1").result(20) == (3, True)
    assert store.annotations.count() == 6
    writer.close()


def test_a_tasks_images_are_rendered_together(web_project, tmp_path) -> None:
    from retest.errors import NotFoundError
    from retest.store.rows import CandidateRow
    from retest.web.images import ItemImages

    proj = web_project.project
    (tmp_path / "outside.png").write_bytes(b"not for the web")
    evil = CandidateRow("evil", "folder", "x", file_path="../outside.png")
    proj.store.candidates.add([evil])
    task = proj.store.tasks.list()[0]
    items = [*task.items, "evil", "no-such-id"]
    images = ItemImages(proj)
    images.prefetch(items)
    assert set(images._memory) == set(task.items)  # originals and candidates
    fresh = ItemImages(proj)
    for i in task.items:
        assert images.png(i) == fresh._render(i, proj)  # what one request renders
        assert images.png(i)[:4] == b"\x89PNG"
    with pytest.raises(NotFoundError):
        images.png("evil")


def test_only_images_read_from_files_are_kept_on_disk(web_project) -> None:
    """Pixel-array images are rendered again after a restart (cheaper than a
    cache file); a decoded JPEG is kept in ``.cache/thumbs``, and a new server
    serves it from there."""
    import numpy as np
    from PIL import Image

    from retest.store.rows import CandidateRow
    from retest.web.images import ItemImages

    proj = web_project.project
    task = proj.store.tasks.list()[0]
    images = ItemImages(proj)
    images.prefetch(task.items)
    assert set(images._memory) == set(task.items)
    assert not images.cache.exists() or not any(images.cache.iterdir())
    (proj.root / "images").mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(
        proj.root / "images" / "photo.jpg", quality=90
    )
    proj.store.candidates.add(
        [CandidateRow("photo", "folder", "photo.jpg", file_path="images/photo.jpg")]
    )
    images.prefetch(["photo"])
    on_disk = list(images.cache.iterdir())
    assert [p.name for p in on_disk] == ["photo.png"]
    (proj.root / "images" / "photo.jpg").unlink()  # only the cache can answer now
    assert ItemImages(proj).png("photo") == images.png("photo")


def _pid(project: Any) -> tuple[int, int]:
    return os.getpid(), project.store.candidates.count()


def test_slow_state_can_be_computed_in_a_worker_process(web_project) -> None:
    from retest.web.views import near_duplicate_ids

    proj = web_project.project
    live = Live(proj, processes=True, first_wait=120)
    pid, n = live.derived("pid", _pid, offload=True)
    assert pid != os.getpid() and n == proj.store.candidates.count()
    assert live.derived("copies", near_duplicate_ids, offload=True) == (
        near_duplicate_ids(proj)
    )
    live.close()
    # without a worker process (or after close) the same runs in this process
    assert Live(proj).derived("pid2", _pid, offload=True)[0] == os.getpid()
