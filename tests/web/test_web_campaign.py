"""The campaign as people live it: progress, a finish page, the project's own
instructions (safe Markdown), a page that fits a phone."""

from __future__ import annotations

import dataclasses
import re

from fastapi.testclient import TestClient
from web_helpers import person

from retest.config import load_config
from retest.labeling.tasks import image_token
from retest.stages.crowd import project_secret
from retest.web.app import create_app


def _answer(c, wp, task, key, headers) -> None:  # type: ignore[no-untyped-def]
    tok = image_token(f"{task.id}|{task.items[0]}", project_secret(wp.project))
    body = {"submission": key, "task_id": task.id, "selected_tokens": [tok]}
    assert c.post("/api/task", json=body, headers=headers).status_code == 200


def test_progress_and_a_finish_page(app, web_project) -> None:
    c = TestClient(app, follow_redirects=False)
    ana = person(web_project.project, "ana")
    tasks = web_project.project.store.tasks.list()
    n = len(tasks)
    first = c.get("/next/task", headers=ana).headers["location"]
    html = c.get(first, headers=ana).text
    assert f"Task 1 of {n} · you have answered 0 (0 today)" in html
    for k, t in enumerate(tasks[:-1]):
        _answer(c, web_project, t, f"prog-{k:04d}", ana)
    _answer(c, web_project, tasks[0], "prog-corr", ana)  # a correction: no new task
    nxt = c.get(f"/next/task?after={tasks[0].id}", headers=ana).headers["location"]
    assert nxt == f"/task/{tasks[-1].id}"
    html = c.get(nxt, headers=ana).text
    assert f"Task {n} of {n} · you have answered {n - 1} ({n - 1} today)" in html
    _answer(c, web_project, tasks[-1], "prog-last", ana)
    # after the last task: the finish page, not the list again
    assert c.get("/next/task", headers=ana).headers["location"] == "/done"
    done = c.get("/done", headers=ana).text
    assert f"you have answered all {n} tasks" in done and f"{n} answered" in done
    # another person's progress is their own
    bo = person(web_project.project, "bo")
    assert "/task/" in c.get("/next/task", headers=bo).headers["location"]


def test_instructions_from_the_project_config(web_project) -> None:
    proj = web_project.project
    cfg = dataclasses.replace(
        proj.config,
        instructions={
            "default": "Check every **product photo**.",
            "dog": "Toy dogs count. <script>alert(1)</script>",
            "tabby": "- striped coat\n- [guide](https://example.org/g)",
        },
    )
    proj = dataclasses.replace(proj, config=cfg)
    app = create_app(proj, reviewer_token="R", secret=project_secret(proj))
    c = TestClient(app, headers=person(proj, "alice"))
    tasks = proj.store.tasks.list()
    cat = next(t for t in tasks if t.class_id == 0)
    dog = next(t for t in tasks if t.class_id == 1)
    assert (
        "Check every <strong>product photo</strong>." in c.get(f"/task/{cat.id}").text
    )
    html = c.get(f"/task/{dog.id}").text
    assert "Toy dogs count. &lt;script&gt;" in html and "<script>alert" not in html
    assert "Only photographs" not in html  # the fixed text gives way
    label = c.get("/label/0/tabby").text
    assert "<li>striped coat</li>" in label
    assert '<a href="https://example.org/g" rel="noopener noreferrer"' in label


def test_instruction_keys_are_checked(tmp_path) -> None:
    toml = tmp_path / "retest.toml"
    toml.write_text('classes = ["Cat", "dog"]\n[project]\nname = "x"\n'
                    '[instructions]\ncat = "x"\n')  # fmt: skip
    try:
        load_config(toml)
    except Exception as err:
        assert "did you mean `Cat`" in str(err)
    else:
        raise AssertionError("a class name in another case was accepted")


def test_pages_fit_a_phone(app, web_project) -> None:
    c = TestClient(app, headers=person(web_project.project, "alice"))
    task = web_project.project.store.tasks.list()[0]
    html = c.get(f"/task/{task.id}").text
    assert (
        '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    )
    boxes = re.findall(r'<input type="checkbox"[^>]*aria-label="([^"]+)"', html)
    n = len(set(task.items))
    assert boxes == [f"image {k} of {n}, cat" for k in range(1, n + 1)]
    assert 'alt=""' not in html and 'role="listbox"' not in html
