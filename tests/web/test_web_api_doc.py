"""``docs/web-api.md`` against the app: every JSON route documented, every
documented route served, and the document's example script run against a real
``retest serve`` with a personal link from ``retest people``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
from starlette.routing import Mount
from web_helpers import all_routes  # type: ignore[import-not-found]

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.project._project import Project

DOC = Path(__file__).resolve().parents[2] / "docs" / "web-api.md"


def _served(app) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return {
        (method, route.path)
        for route in all_routes(app.routes)
        if not isinstance(route, Mount)
        for method in (route.methods or ())
        if method != "HEAD"
    }


def _documented() -> set[tuple[str, str]]:
    return set(
        re.findall(r"^### `(GET|POST|PUT|PATCH|DELETE) (/\S*)`$", DOC.read_text(), re.M)
    )


def test_every_json_route_is_documented_and_every_documented_route_exists(app) -> None:
    served, documented = _served(app), _documented()
    json_routes = {(m, p) for m, p in served if p.startswith("/api/")}
    assert (
        len(json_routes) >= 7
    )  # label, task, undo, neardup, label-error, review, exclusion
    assert json_routes - documented == set(), "undocumented JSON routes"
    assert documented - served == set(), "documented routes the app does not serve"


def _example() -> str:
    """The Python block of the document's example section."""
    text = DOC.read_text().split("## Example", 1)[1]
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RETEST, *args], capture_output=True, text=True, check=True)


def test_the_documented_example_reviews_the_queue_on_a_real_server(
    web_project, free_port, tmp_path
) -> None:
    proj = web_project.project
    root = str(proj.root)
    queued = proj.store.neardup.neighbours(web_project.candidates[0], metric="l2")
    proj.close()
    base = f"http://127.0.0.1:{free_port}"
    added = _cli("people", "add", "Review bot", "--role", "reviewer", "-p", root,
                 "--base-url", base)  # fmt: skip
    link = re.search(r"Review bot \(reviewer\): (\S+)", added.stdout)
    assert link, added.stdout
    queue = tmp_path / "queue.json"
    queue.write_text(_cli("dedup-queue", "--json", "-p", root).stdout)
    assert [r["candidate"] for r in json.loads(queue.read_text())] == [
        web_project.candidates[0]
    ]
    script = tmp_path / "review_neardups.py"
    script.write_text(_example())
    server = subprocess.Popen(
        [*RETEST, "serve", "-p", root, "--port", str(free_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(600):  # until it answers (it starts in a few seconds)
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None, "retest serve exited"
                time.sleep(0.1)
        run = subprocess.run(
            [sys.executable, str(script), link.group(1), str(queue), "2.5e6"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [
            f"{web_project.candidates[0][:12]} l2: 2 verdicts, 1 duplicates",
            "reviewed 1 candidates",
        ]
        # a revoked link is refused in one line, nothing written
        _cli("people", "revoke", "Review bot", "-p", root)
        again = subprocess.run(
            [sys.executable, str(script), link.group(1), str(queue), "2.5e6"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert again.returncode == 1
        assert (
            again.stderr.startswith("error: signing in with") and "401" in again.stderr
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    # stored as the person's verdicts: the closer neighbour (2e6) a duplicate,
    # the farther (3e6) not, and the candidate has left the queue
    assert json.loads(_cli("dedup-queue", "--json", "-p", root).stdout) == []
    with Project.open(root) as reopened:
        got = {
            (v.ref_id, v.is_duplicate, v.who)
            for v in reopened.store.neardup.verdicts(
                candidate_id=web_project.candidates[0]
            )
        }
    near, far = queued[0].ref_ids
    assert got == {(near, True, "Review bot"), (far, False, "Review bot")}
