"""Fixtures of the web tests; their helpers live in ``web_helpers``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from web_helpers import REVIEWER, WebProject, _free_port, build_project

from retest.stages.crowd import project_secret
from retest.web.app import create_app


@pytest.fixture
def web_project(tmp_path: Path) -> Iterator[WebProject]:
    wp = build_project(tmp_path / "proj")
    yield wp
    wp.project.close()


@pytest.fixture
def app(web_project: WebProject):
    return create_app(
        web_project.project,
        reviewer_token=REVIEWER,
        secret=project_secret(web_project.project),
    )


@pytest.fixture
def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a test starts)."""
    return _free_port()


@pytest.fixture
def live_server(app) -> Iterator[str]:
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
