"""People of a campaign: personal links, revocation, the public link, the CLI."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from retest.labeling.people import token_hash
from retest.project import Project, add_person, new_link, revoke_person
from retest.stages.crowd import project_secret
from retest.web.app import create_app

REVIEWER = "test-reviewer-456"  # the web conftest's owner token
ORIGIN = {"Origin": "http://testserver"}
CLI = [sys.executable, "-c", "from retest.cli.main import main; main()"]


def _label(wp, key: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
    cats = wp.candidates[0::2]
    return {"submission": key, "stage": "select", "class_id": 0, "keyword": "tabby",
            "shown": cats[:2], "checked": cats[:1]}  # fmt: skip


def test_revoking_ends_a_signed_in_browser_at_once(app, web_project) -> None:
    inv = add_person(web_project.project, "Ana", "labeler", by="test")
    browser = TestClient(app)
    browser.get(inv.link("http://testserver"))
    assert browser.get("/tasks").status_code == 200
    r = browser.post(
        "/api/label", json=_label(web_project, "ana-00001"), headers=ORIGIN
    )
    assert r.status_code == 200
    # another process (the CLI) revokes her: the next request is refused
    other = Project.open(web_project.project.root)
    try:
        revoke_person(other, "ana", by="test")
    finally:
        other.close()
    assert browser.get("/tasks").status_code == 401
    r = browser.post(
        "/api/label", json=_label(web_project, "ana-00002"), headers=ORIGIN
    )
    assert r.status_code == 401
    assert browser.get(inv.link("http://testserver")).status_code == 401
    # a new link reinstates her; the old link stays dead
    other = Project.open(web_project.project.root)
    try:
        again = new_link(other, "ANA", by="test")
    finally:
        other.close()
    fresh = TestClient(app)
    assert fresh.get(inv.link("http://testserver")).status_code == 401
    fresh.get(again.link("http://testserver"))
    assert ">Ana<" in fresh.get("/").text
    assert [e.action for e in web_project.project.store.people.events()] == [
        "add", "revoke", "link",
    ]  # fmt: skip
    stored = web_project.project.store.people.get("ana")
    assert stored.revoked is None
    # only hashes are stored
    db = sqlite3.connect(web_project.project.db_path)
    dump = "\n".join(db.iterdump())
    db.close()
    assert again.token not in dump and token_hash(again.token) in dump


def test_the_public_link_gives_each_browser_its_own_anonymous_worker(
    web_project,
) -> None:
    app = create_app(web_project.project, token="public-token-1",
                     reviewer_token=REVIEWER, secret=project_secret(web_project.project))  # fmt: skip
    one, two = TestClient(app), TestClient(app)
    for k, c in enumerate((one, two)):
        c.get("/?token=public-token-1")
        r = c.post(
            "/api/label", json=_label(web_project, f"pub-{k:05d}"), headers=ORIGIN
        )
        assert r.status_code == 200, r.text
    one.get("/?token=public-token-1")  # opened again: still the same worker
    r = one.post("/api/label", json=_label(web_project, "pub-00009"), headers=ORIGIN)
    assert r.status_code == 200
    whos = [e.who for e in web_project.project.store.annotations.list()]
    assert len(set(whos)) == 2 and all(w.startswith("anon-") for w in whos)
    assert whos.count(whos[0]) == 4  # browser one's two answers
    # an anonymous worker cannot write as a named person
    r = one.post("/api/label", json=_label(web_project, "pub-00010"),
                 headers={**ORIGIN, "X-Retest-Annotator": "alice"})  # fmt: skip
    assert r.status_code == 403
    assert one.get("/stats").status_code == 403  # a labeler
    # the public token is no personal token, and without the option no link at all
    assert (
        TestClient(app)
        .get("/tasks", headers={"X-Retest-Token": "public-token-1"})
        .status_code
        == 401
    )
    closed = create_app(web_project.project, reviewer_token=REVIEWER,
                        secret=project_secret(web_project.project))  # fmt: skip
    assert TestClient(closed).get("/?token=public-token-1").status_code == 401


def _cli(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "-p", str(root)], capture_output=True, text=True
    )


def test_people_cli(web_project) -> None:
    root = web_project.project.root
    web_project.project.close()
    r = _cli("people", "add", "Ana", "--role", "reviewer", "--base-url",
             "https://label.example.org", root=root)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Ana (reviewer): https://label.example.org/?token=" in r.stdout
    # one person whatever the case; limits told, not applied
    for args, code, says in [
        (("add", "ana"), 1, "exists already"),
        (("add", "x" * 300), 1, "1 to 80 printable characters; got 300"),
        (("add", "Bo", "--role", "boss"), 2, "--role must be one of labeler, reviewer"),
        (("add", "Owner"), 1, "project owner's name"),
        (("revoke", "nobody"), 1, "no person named 'nobody'"),
    ]:
        r = _cli("people", *args, root=root)
        assert r.returncode == code, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]
    assert _cli("people", "revoke", "ANA", root=root).returncode == 0
    r = _cli("people", "list", "--json", root=root)
    assert '"name": "Ana"' in r.stdout and '"revoked": "20' in r.stdout
    assert '"name": "alice"' in r.stdout  # the conftest's labeler


def test_a_project_of_schema_5_gets_the_people_tables(tmp_path: Path) -> None:
    proj = Project.init(tmp_path / "p", name="old", classes=["a", "b"])
    proj.close()
    db = sqlite3.connect(tmp_path / "p" / "retest.db")
    db.executescript("DROP TABLE sessions; DROP TABLE people; DROP TABLE people_events;"
                     "DROP TABLE candidate_shared_sources; DROP INDEX candidates_src_old;"
                     "DROP INDEX candidates_src_new;"  # schema 7's
                     "DROP TRIGGER neighbours_cover_insert;"  # schema 8's
                     "DROP TRIGGER neighbours_cover_delete;"
                     "DROP TRIGGER neighbours_cover_update;"
                     "DROP TABLE neighbour_cover; DROP TABLE neighbour_gaps;"
                     "UPDATE schema_version SET version = 5;")  # fmt: skip
    db.close()
    with Project.open(tmp_path / "p") as proj:
        assert proj.store.schema_version() == 8
        assert add_person(proj, "Ana", "labeler", by="t").person.name == "Ana"
