"""A write replayed after a server restart is a no-op (undo, verdicts).

The submission key of a page load used to be remembered in the server's memory
only for these writes: a request resent after a restart (a browser retrying, a
proxy) withdrew a second answer, or put back a verdict the reviewer had since
changed. Each write now stores its key in the project's event log; the tests
run a real server (uvicorn on 127.0.0.1), stop it, start a new one on the same
project and send the first request again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from web_helpers import REVIEWER, WebProject, _free_port, person

from retest.labeling.tasks import image_token
from retest.project import (
    RECEIPT_KIND,
    VERDICT_KIND,
    WITHDRAWN,
    Suspect,
    queue_label_errors,
    selection_frequencies,
)
from retest.stages.crowd import project_secret
from retest.web.app import create_app

OWNER = {"X-Retest-Token": REVIEWER}


@contextmanager
def serve(wp: WebProject) -> Iterator[httpx.Client]:
    """A real server on the project until the block ends (then stopped)."""
    app = create_app(wp.project, reviewer_token=REVIEWER,
                     secret=project_secret(wp.project))  # fmt: skip
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()
    while not started.wait(0.02):  # a condition, not a fixed sleep
        if server.started:
            started.set()
        assert thread.is_alive(), "the server did not start"
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            yield c
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        app.state.retest.live.close()


def _answer(wp: WebProject, task, key: str, picked: list[str]) -> dict:  # type: ignore[no-untyped-def]
    secret = project_secret(wp.project)
    return {"submission": key, "task_id": task.id,
            "selected_tokens": [image_token(f"{task.id}|{i}", secret) for i in picked]}  # fmt: skip


def test_undo_replayed_after_a_restart_undoes_nothing_more(web_project) -> None:
    wp = web_project
    store = wp.project.store
    ana = person(wp.project, "ana")
    t1, t2 = store.tasks.list()[:2]
    undo = {"submission": "undo-page-0001"}
    with serve(wp) as c:
        for task, key in ((t1, "page-0001"), (t2, "page-0002")):
            r = c.post("/api/task", json=_answer(wp, task, key, [task.items[0]]),
                       headers=ana)  # fmt: skip
            assert r.status_code == 200, r.text
        first = c.post("/api/undo", json=undo, headers=ana)
        assert first.status_code == 200 and first.json()["task_id"] == t2.id
    with serve(wp) as c:  # restarted: nothing in memory
        again = c.post("/api/undo", json=undo, headers=ana)
    assert again.status_code == 200, again.text
    assert again.json() == {**first.json(), "replayed": True}
    status = {
        e.task_id: e.assignment_status for e in store.annotations.list(kind="task")
    }
    assert status == {t1.id: "Submitted", t2.id: WITHDRAWN}  # t1's answer still counts
    freq = selection_frequencies(wp.project)
    assert freq[(t1.items[0], t1.class_id)].n_assignments == 1


def test_verdicts_replayed_after_a_restart_do_not_overwrite_later_ones(
    web_project,
) -> None:
    wp = web_project
    store = wp.project.store
    queue_label_errors(wp.project, [Suspect("test:1", 1, 0)])
    cats = wp.candidates[0::2]
    nd = {"submission": "nd-page-0001", "candidate_id": cats[0], "metric": "l2",
          "shown": ["test:0", cats[1]], "duplicates": ["test:0"]}  # fmt: skip
    le = {"submission": "le-page-0001", "item_id": "test:1", "verdict": "wrong",
          "new_class": 0}  # fmt: skip
    with serve(wp) as c:
        assert c.post("/api/neardup", json=nd, headers=OWNER).status_code == 200
        assert c.post("/api/label-error", json=le, headers=OWNER).status_code == 200
        # the reviewer changes their mind on another page
        nd2 = {**nd, "submission": "nd-page-0002", "duplicates": []}
        le2 = {"submission": "le-page-0002", "item_id": "test:1", "verdict": "correct"}
        assert c.post("/api/neardup", json=nd2, headers=OWNER).status_code == 200
        assert c.post("/api/label-error", json=le2, headers=OWNER).status_code == 200
    n_verdicts = len(store.neardup.verdicts())
    n_le = len(store.annotations.list(kind=VERDICT_KIND))
    with serve(wp) as c:  # the first page's requests arrive again
        r_nd = c.post("/api/neardup", json=nd, headers=OWNER)
        r_le = c.post("/api/label-error", json=le, headers=OWNER)
    assert r_nd.status_code == 200 and r_nd.json()["replayed"] is True
    assert r_le.status_code == 200 and r_le.json()["replayed"] is True
    assert len(store.neardup.verdicts()) == n_verdicts
    latest = {
        (v.candidate_id, v.ref_id): v.is_duplicate for v in store.neardup.verdicts()
    }
    assert latest[(cats[0], "test:0")] is False
    verdicts = store.annotations.list(kind=VERDICT_KIND)
    assert len(verdicts) == n_le and verdicts[-1].extra["verdict"] == "correct"
    # the receipts are no label, vote or item of anyone
    assert {e.item_id for e in store.annotations.list(kind=RECEIPT_KIND)} == {""}
