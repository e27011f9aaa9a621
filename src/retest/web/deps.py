"""Dependencies: who is asking (role and name), the store and the image renderer.

Two roles, each with its own token (``retest serve`` prints both):

``labeler``
    The invitation token: labeling pages, grid tasks, their images, and writing
    labels and task answers.
``reviewer``
    Everything a labeler may do, plus results, controls, statistics, the review
    pages and their writes.

Every page and image needs a token: header ``X-Retest-Token`` (scripts) or the
``retest_token`` cookie that signing in sets (HttpOnly, SameSite=Strict). Writes
also need a name (header ``X-Retest-Annotator`` or the ``retest_annotator``
cookie; percent-encoded UTF-8 is decoded, the result NFC-normalised). A write
from a browser must come from the app's own origin: its ``Origin`` (or
``Referer``) must name the ``Host`` it was sent to, so a page on another port
cannot write with the cookie.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

from fastapi import Depends, HTTPException, Request

from retest.pipeline.project import Project
from retest.store.base import Store
from retest.web.images import ItemImages
from retest.web.live import Live

__all__ = [
    "Annotator",
    "AnnotatorDep",
    "AppState",
    "ImagesDep",
    "ReviewerDep",
    "ReviewerWriteDep",
    "RoleDep",
    "StateDep",
    "StoreDep",
    "Submissions",
    "annotator",
    "clean_name",
    "signed_in_role",
]

UI_VERSION = "web-2"
LABELER, REVIEWER = "labeler", "reviewer"
COOKIE_TOKEN, COOKIE_NAME = "retest_token", "retest_annotator"
MAX_NAME = 80


class Submissions:
    """Replay protection for writes keyed by a per-page-load submission key.

    The first request with a key runs; any later one with the same key (a double
    click, Enter pressed twice, a resent request) waits for it and gets its
    result instead of writing again. Results are remembered in memory (the
    latest ``keep``); endpoints whose writes carry the key in the store also
    look it up there, so a replay after a restart is a no-op too.
    """

    def __init__(self, keep: int = 100_000) -> None:
        self.keep = keep
        self._done: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._locks = [threading.Lock() for _ in range(64)]
        self._lock = threading.Lock()
        self._running: dict[str, Future[dict[str, Any]]] = {}

    def run(
        self,
        key: str,
        write: Callable[[], dict[str, Any]],
        stored: Callable[[], dict[str, Any] | None] | None = None,
    ) -> dict[str, Any]:
        with self._locks[hash(key) % len(self._locks)]:
            with self._lock:
                prev = self._done.get(key)
            if prev is None and stored is not None:
                prev = stored()
            if prev is not None:
                return {**prev, "replayed": True}
            result = write()
            self._remember(key, result)
            return result

    async def run_async(
        self,
        key: str,
        write: Callable[[], Awaitable[dict[str, Any]]],
        stored: Callable[[], dict[str, Any] | None] | None = None,
    ) -> dict[str, Any]:
        """:meth:`run` for ``async`` endpoints: a replay that arrives while the
        first request is being written awaits its result (no thread waits)."""
        mine: Future[dict[str, Any]] = Future()
        with self._lock:
            prev = self._done.get(key)
            first = self._running.setdefault(key, mine) if prev is None else None
        if prev is not None:
            return {**prev, "replayed": True}
        if first is not mine:
            assert first is not None
            earlier: dict[str, Any] = await asyncio.wrap_future(first)
            return {**earlier, "replayed": True}
        try:
            prev = stored() if stored is not None else None
            result = {**prev, "replayed": True} if prev else await write()
        except BaseException as err:
            with self._lock:
                del self._running[key]
            mine.set_exception(err)
            raise
        self._remember(key, result)
        with self._lock:
            del self._running[key]
        mine.set_result(result)
        return result

    def _remember(self, key: str, result: dict[str, Any]) -> None:
        with self._lock:
            self._done[key] = result
            while len(self._done) > self.keep:
                self._done.popitem(last=False)


@dataclass
class AppState:
    project: Project
    store: Store
    token: str
    secret: bytes
    images: ItemImages
    name: str
    reviewer_token: str = ""
    live: Live | None = None
    submissions: Submissions = field(default_factory=Submissions)

    def role_of(self, token: str) -> str | None:
        """The role a token grants, or None (constant-time comparisons)."""
        t = token.encode()
        if self.reviewer_token and hmac.compare_digest(t, self.reviewer_token.encode()):
            return REVIEWER
        if hmac.compare_digest(t, self.token.encode()):
            return LABELER
        return None


async def _state(request: Request) -> AppState:
    state: AppState = request.app.state.retest
    return state


StateDep = Annotated[AppState, Depends(_state)]


async def _images(state: StateDep) -> ItemImages:
    return state.images


ImagesDep = Annotated[ItemImages, Depends(_images)]


class SignInRequired(HTTPException):
    """401 for pages: the app answers with the sign-in page instead of JSON."""


def request_token(request: Request) -> tuple[str, bool]:
    """(token, whether it came in a header) of a request; "" when absent."""
    header = request.headers.get("x-retest-token")
    if header:
        return header, True
    return request.cookies.get(COOKIE_TOKEN, ""), False


def signed_in_role(request: Request) -> str:
    """The role of the request's token; 401 without a valid one.

    A plain function that the role and annotator dependencies both call: as a
    dependency of a dependency it cost every answer a second resolution."""
    state: AppState = request.app.state.retest
    token, _ = request_token(request)
    role = state.role_of(token) if token else None
    if role is None:
        raise SignInRequired(401, "Sign in with your invitation token.")
    request.state.role = role
    return role


async def _role(request: Request) -> str:
    return signed_in_role(request)


RoleDep = Annotated[str, Depends(_role)]


async def _reviewer(role: RoleDep) -> str:
    if role != REVIEWER:
        raise HTTPException(403, "Reviewers only: sign in with the reviewer token.")
    return role


ReviewerDep = Annotated[str, Depends(_reviewer)]


def _store(state: StateDep, role: RoleDep) -> Store:
    """A worker thread's read-only store (reads never wait behind writes).

    The checks above are ``async``: they do no I/O, and each synchronous
    dependency would cost a trip through the thread pool."""
    return state.live.store() if state.live is not None else state.store


StoreDep = Annotated[Store, Depends(_store)]


@lru_cache(maxsize=1024)  # every answer carries its labeler's name
def clean_name(raw: str) -> str:
    """A typed name as stored: percent-decoded, NFC, trimmed, no control characters."""
    try:
        # a header is read as Latin-1: UTF-8 bytes sent raw are recovered here
        raw = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    try:
        name = unicodedata.normalize("NFC", unquote(raw, errors="strict")).strip()
    except UnicodeDecodeError:
        raise HTTPException(422, "A name must be UTF-8 text.") from None
    if len(name) > MAX_NAME or any(unicodedata.category(ch)[0] == "C" for ch in name):
        raise HTTPException(
            422, f"A name is up to {MAX_NAME} printable characters. Got {name[:20]!r}…"
        )
    return name


def same_origin(request: Request) -> bool:
    """True when the request's Origin (or Referer) names the Host it was sent to."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        ref = request.headers.get("referer")
        if ref is None:
            return origin is None
        parts = urlsplit(ref)
        origin = f"{parts.scheme}://{parts.netloc}"
    return origin in (f"http://{host}", f"https://{host}")


@dataclass(frozen=True)
class Annotator:
    name: str
    role: str


async def annotator(request: Request) -> Annotator:
    """Who writes: a signed-in role, the app's own origin and a name."""
    role = signed_in_role(request)
    _, from_header = request_token(request)
    if not same_origin(request) or (
        not from_header and "origin" not in request.headers
    ):
        # browsers send Origin on every POST; a cookie-only write without it
        # (or from another origin, another port included) is refused
        raise HTTPException(403, "Cross-origin write refused.")
    raw = request.headers.get("x-retest-annotator") or request.cookies.get(
        COOKIE_NAME, ""
    )
    name = clean_name(raw)
    if not name:
        raise HTTPException(
            401, "Tell us who you are: set your name on the start page."
        )
    return Annotator(name, role)


AnnotatorDep = Annotated[Annotator, Depends(annotator)]


async def _reviewer_writer(who: AnnotatorDep) -> Annotator:
    if who.role != REVIEWER:
        raise HTTPException(403, "Reviewers only: sign in with the reviewer token.")
    return who


ReviewerWriteDep = Annotated[Annotator, Depends(_reviewer_writer)]
