"""``retest people exclude`` / ``include`` through the CLI on a real project:
the argument must name a worker of the project (a web person by name, a crowd
worker by the id ``retest crowd workers`` prints or their MTurk WorkerId) or be
refused in one line, and the exclusion changes the one vote rule's counts.

The project gets two MTurk workers from a results CSV (``retest crowd import``)
and two web people who answer the same grid task through the web app with
their personal links (``retest people add``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient
from test_crowd_reimport import (  # noqa: F401  (crowd: a fixture)
    Crowd,
    crowd,
    import_json,
    result_row,
    write_results,
)

from retest.labeling.tasks import hash_worker_id, image_token
from retest.project._people import excluded_workers
from retest.project._project import Project
from retest.stages.crowd import project_secret
from retest.web.app import create_app

RAW = "A3RAWMTURKW0RK1"  # an MTurk WorkerId as the results CSV has it


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retest", *args, "--project", str(root)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        timeout=120,
    )


def add_person(root: Path, name: str) -> str:
    res = run(root, "people", "add", name, "--json")
    assert res.returncode == 0, res.stderr
    return parse_qs(urlsplit(json.loads(res.stdout)["link"]).query)["token"][0]


def test_exclude_resolves_real_workers_and_refuses_anything_else(
    crowd: Crowd,  # noqa: F811
    tmp_path: Path,
) -> None:
    root = crowd.root
    cat = crowd.task(0)
    tid = cat["task_id"]
    cand = crowd.candidates(cat)[0]
    rows = [
        result_row(crowd, cat, assignment="A1", worker=RAW, selected=[cand]),
        result_row(crowd, cat, assignment="A2", worker="A9OTHERWORKER", selected=[]),
    ]
    import_json(crowd, write_results(tmp_path / "r.csv", rows))
    tokens = {n: add_person(root, n) for n in ("Ana", "Zoë")}
    with Project.open(root) as proj:
        secret = project_secret(proj)
        client = TestClient(create_app(proj, secret=secret))
        for i, (name, token) in enumerate(tokens.items()):
            picked = [image_token(f"{tid}|{cand}", secret)] if name == "Ana" else []
            body = {"submission": f"s-00000{i}", "task_id": tid,
                    "selected_tokens": picked}  # fmt: skip
            r = client.post("/api/task", json=body, headers={"X-Retest-Token": token})
            assert r.status_code == 200, r.text
    hashed = hash_worker_id(RAW, secret)

    def counts() -> tuple[float, int]:
        return crowd.frequencies()[(cand, 0)]

    def excluded() -> frozenset[str]:
        with Project.open(root) as proj:
            return excluded_workers(proj.store)

    assert counts() == (0.5, 4)  # RAW and Ana picked it; the other two did not

    # refused in one line naming the value, exit 1, nobody excluded
    for bad, named in [
        ("", "no worker given"),
        ("x" * 5000, "'" + "x" * 40 + "…'"),
        ("nobody", "'nobody'"),
        ("local:nobody", "'local:nobody'"),
        ("A3RAWMTURKW0RK2", "'A3RAWMTURKW0RK2'"),  # a WorkerId never imported
        ("deadbeef", "'deadbeef'"),  # a hex start of no worker's id
    ]:
        for cmd in ("exclude", "include") if bad in ("", "nobody") else ("exclude",):
            res = run(root, "people", cmd, bad)
            assert res.returncode == 1, (bad[:20], res.stdout)
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
            assert named in lines[0] and len(lines[0]) < 400
            if bad:
                assert "retest people list" in lines[0]
    assert excluded() == frozenset()

    # a web person by name: any case, NFC, with or without local:
    res = run(root, "people", "exclude", "ANA", "--reason", "controls")
    assert res.returncode == 0 and "local:Ana" in res.stdout, res.stderr
    assert excluded() == {"local:Ana"} and counts() == (1 / 3, 3)
    res = run(root, "people", "exclude", "local:ana")
    assert res.returncode == 0 and "already" in res.stdout, res.stderr
    res = run(root, "people", "exclude", "Zoe\u0308")  # decomposed ë
    assert res.returncode == 0 and "local:Zoë" in res.stdout, res.stderr
    assert counts() == (0.5, 2)

    # a crowd worker by the id `crowd workers` prints (its start) and by WorkerId
    res = run(root, "crowd", "workers", "--json")
    assert hashed in {w["worker"] for w in json.loads(res.stdout)["workers"]}
    res = run(root, "people", "exclude", hashed[:8])
    assert res.returncode == 0 and hashed in res.stdout, res.stderr
    assert counts() == (0.0, 1)  # only A9OTHERWORKER, who did not pick it
    res = run(root, "people", "exclude", RAW)
    assert res.returncode == 0 and "already" in res.stdout, res.stderr

    # include restores the counts, by the same names
    for name in (RAW, "ana", "local:ZOË"):
        res = run(root, "people", "include", name)
        assert res.returncode == 0 and "now counted" in res.stdout, res.stderr
    assert excluded() == frozenset() and counts() == (0.5, 4)
    res = run(root, "people", "include", "Ana")
    assert res.returncode == 0 and "already counted" in res.stdout, res.stderr
    with Project.open(root) as proj:
        log = [
            (e.subject, e.action)
            for e in proj.store.people.events()
            if e.action in ("exclude", "include")
        ]
    assert log == [
        ("local:Ana", "exclude"), ("local:Zoë", "exclude"), (hashed, "exclude"),
        (hashed, "include"), ("local:Ana", "include"), ("local:Zoë", "include"),
    ]  # fmt: skip


def test_revoke_and_link_refuse_names_nobody_can_have(tmp_path: Path) -> None:
    root = tmp_path / "p"
    res = subprocess.run(
        [sys.executable, "-m", "retest", "init", str(root), "--classes", "cat,dog"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    for cmd in ("revoke", "link"):
        # a 5,000-character name, and bytes that are not UTF-8 (crashed in SQLite)
        for bad in ("y" * 5000, "\udcff"):
            res = run(root, "people", cmd, bad)
            assert res.returncode == 1, res.stderr
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: no person named")
            assert len(lines[0]) < 200
