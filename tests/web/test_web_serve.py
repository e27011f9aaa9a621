"""``retest serve`` as a real process: the owner's link, personal links, revocation
from another process, host check, no public schema."""

from __future__ import annotations

import re
import subprocess
import time

import httpx

from checkout_cli import RETEST  # type: ignore[import-not-found]


def test_serve_prints_the_owners_link_and_checks_the_host(
    web_project, free_port
) -> None:
    root = str(web_project.project.root)
    web_project.project.close()
    port = free_port
    added = subprocess.run(
        [*RETEST, "people", "add", "Bea", "--role", "labeler", "-p", root,
         "--base-url", f"http://127.0.0.1:{port}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    link = re.search(r"Bea \(labeler\): (\S+)", added.stdout)
    assert link, added.stdout
    proc = subprocess.Popen(
        [*RETEST, "serve", "-p", root,
         "--port", str(port), "--reviewer-token", "rev-token-1234"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        lines = [proc.stdout.readline() for _ in range(3)] if proc.stdout else []
        shown = "".join(lines)
        assert (
            f"owner (everything): http://127.0.0.1:{port}/?token=rev-token-1234"
            in shown
        )
        assert "public" not in shown  # no public link unless asked for
        assert "2 people have personal links" in shown  # alice and Bea
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        r = httpx.get(link.group(1))
        assert r.status_code == 303 and "token" not in r.headers["location"]
        assert "retest_session=" in r.headers["set-cookie"]
        tok = link.group(1).split("token=")[1]
        h = {"X-Retest-Token": tok}
        assert httpx.get(base + "/tasks", headers=h).status_code == 200
        assert httpx.get(base + "/stats", headers=h).status_code == 403
        # revoked from another process: the next request is refused
        subprocess.run([*RETEST, "people", "revoke", "bea", "-p", root], check=True,
                       capture_output=True)  # fmt: skip
        assert httpx.get(base + "/tasks", headers=h).status_code == 401
        rev = {"X-Retest-Token": "rev-token-1234"}
        assert httpx.get(base + "/stats", headers=rev).status_code == 200
        assert httpx.get(base + "/openapi.json", headers=rev).status_code == 404
        evil = {**rev, "Host": f"attacker.example:{port}"}
        assert httpx.get(base + "/stats", headers=evil).status_code == 421
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_an_answered_write_survives_a_killed_server(web_project, free_port) -> None:
    """Answers are acknowledged only after their transaction committed: killing
    the server (no shutdown, no checkpoint) loses none of them."""
    from retest.labeling.tasks import image_token
    from retest.stages.crowd import project_secret
    from retest.store.sqlite import SQLiteStore

    proj = web_project.project
    tasks, secret = proj.store.tasks.list(), project_secret(proj)
    root, db = str(proj.root), proj.db_path
    proj.close()
    port = free_port
    proc = subprocess.Popen(
        [*RETEST, "serve", "-p", root, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    answered = 0
    try:
        for _ in range(200):
            try:
                httpx.get(base + "/static/app.css", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        h = {"X-Retest-Token": "test-token-123"}  # alice's (the web conftest's)
        with httpx.Client(base_url=base, headers=h, timeout=30) as c:
            for k in range(30):
                t = tasks[k % len(tasks)]
                body = {"submission": f"kill-test-{k:04d}", "task_id": t.id,
                        "selected_tokens": [image_token(f"{t.id}|{t.items[0]}", secret)]}  # fmt: skip
                r = c.post("/api/task", json=body)
                assert r.status_code == 200, r.text
                answered += r.json()["events"]
    finally:
        proc.kill()  # SIGKILL: no shutdown handler runs
        proc.wait(timeout=20)
    store = SQLiteStore(db)
    try:
        assert store.annotations.count(kind="task") == answered > 0
    finally:
        store.close()
