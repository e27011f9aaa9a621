"""A real HTTP server on 127.0.0.1 serving scripted routes, for the dataset tests."""

from __future__ import annotations

import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

Handler = Callable[[dict[str, str]], tuple[int, bytes]]


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    fail_first: int = 0  # answer 500 this many times first
    handler: Handler | None = None
    content_type: str = "application/octet-stream"


@dataclass
class LocalServer:
    url: str
    routes: dict[str, Route] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    queries: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, path: str, body: bytes = b"", **kw: object) -> str:
        self.routes[path] = Route(body, **kw)  # type: ignore[arg-type]
        return self.url + path

    @property
    def total(self) -> int:
        return sum(self.hits.values())


def _make_handler(server: LocalServer) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            parsed = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parsed.query))
            with server.lock:
                server.hits[parsed.path] += 1
                server.queries.append({"path": parsed.path, **query})
                route = server.routes.get(parsed.path)
                if route is not None and route.fail_first > 0:
                    route.fail_first -= 1
                    status, body = 500, b"transient"
                elif route is None:
                    status, body = 404, b"not found"
                elif route.handler is not None:
                    status, body = route.handler(query)
                else:
                    status, body = route.status, route.body
            self.send_response(status)
            self.send_header(
                "Content-Type", route.content_type if route else "text/plain"
            )
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return H


@pytest.fixture
def http_server() -> Iterator[LocalServer]:
    srv = LocalServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(srv))
    srv.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join()


@pytest.fixture
def no_sleep() -> list[float]:
    """A list that records requested sleeps; pass ``no_sleep.append`` as sleep."""
    return []
