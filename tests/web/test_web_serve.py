"""``retest serve`` as a real process: two links, host check, no public schema."""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import httpx

from conftest import _free_port  # type: ignore[import-not-found]

RETEST = shutil.which("retest") or "retest"


def test_serve_prints_both_links_and_checks_the_host(web_project) -> None:
    root = str(web_project.project.root)
    web_project.project.close()
    port = _free_port()
    proc = subprocess.Popen(
        [RETEST, "serve", "-p", root,
         "--port", str(port), "--reviewer-token", "rev-token-1234"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        lines = [proc.stdout.readline() for _ in range(3)] if proc.stdout else []
        labeler = re.search(r"labelers:\s+(\S+)", "".join(lines))
        assert labeler, lines
        assert f"reviewers: http://127.0.0.1:{port}/?token=rev-token-1234" in "".join(
            lines
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        r = httpx.get(labeler.group(1))
        assert r.status_code == 303 and "token" not in r.headers["location"]
        tok = labeler.group(1).split("token=")[1]
        h = {"X-Retest-Token": tok}
        assert httpx.get(base + "/tasks", headers=h).status_code == 200
        assert httpx.get(base + "/stats", headers=h).status_code == 403
        rev = {"X-Retest-Token": "rev-token-1234"}
        assert httpx.get(base + "/stats", headers=rev).status_code == 200
        assert httpx.get(base + "/openapi.json", headers=rev).status_code == 404
        evil = {**rev, "Host": f"attacker.example:{port}"}
        assert httpx.get(base + "/stats", headers=evil).status_code == 421
    finally:
        proc.terminate()
        proc.wait(timeout=20)
