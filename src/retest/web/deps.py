"""Dependencies: who is asking (:mod:`retest.web.identity`), the store and the
image renderer.

Two roles:

``labeler``
    Labeling pages, grid tasks, their images, and writing labels and task answers.
``reviewer``
    Everything a labeler may do, plus results, controls, statistics, the review
    pages and their writes.

Every page and image needs a sign-in: header ``X-Retest-Token`` (scripts: a
personal or the owner's token) or the cookies that a sign-in link sets (a
session of a person, or the owner's token; HttpOnly, SameSite=Strict). A write
is stored under the signed-in person's name, never a typed one: an
``X-Retest-Annotator`` header naming someone else is refused. A write from a
browser must come from the app's own origin: its ``Origin`` (or ``Referer``)
must name the ``Host`` it was sent to, so a page on another port cannot write
with the cookie.
"""

from __future__ import annotations

import asyncio
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

from retest.labeling.people import LABELER, REVIEWER, name_key
from retest.project import Live, Project
from retest.store.base import Store
from retest.web.identity import Annotator, Identities
from retest.web.images import ItemImages

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
    "signed_in",
    "signed_in_role",
    "who_is",
]

UI_VERSION = "web-3"
COOKIE_TOKEN, COOKIE_SESSION = "retest_token", "retest_session"


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
    token: str | None
    """The public link's token (anonymous labelers), or None: no public link."""
    secret: bytes
    images: ItemImages
    name: str
    live: Live
    """Every read and write of the app goes through it (retest.project)."""
    reviewer_token: str = ""
    """The project owner's (admin) token: a reviewer writing as ``owner``."""
    submissions: Submissions = field(default_factory=Submissions)
    identities: Identities | None = None
    session_days: float = 30.0

    def role_of(self, token: str) -> str | None:
        """The role a token grants, or None (constant-time comparisons)."""
        assert self.identities is not None
        if self.identities.is_public(token):
            return LABELER
        who = self.identities.by_token(token)
        return None if who is None else who.role


async def _state(request: Request) -> AppState:
    state: AppState = request.app.state.retest
    return state


StateDep = Annotated[AppState, Depends(_state)]


async def _images(state: StateDep) -> ItemImages:
    return state.images


ImagesDep = Annotated[ItemImages, Depends(_images)]


class SignInRequired(HTTPException):
    """401 for pages: the app answers with the sign-in page instead of JSON."""


def who_is(request: Request) -> Annotator | None:
    """The signed-in person of a request (header token first, then the session
    cookie, then the owner's token cookie), or None."""
    ids: Identities = request.app.state.retest.identities
    header = request.headers.get("x-retest-token")
    if header:
        return ids.by_token(header)
    sid = request.cookies.get(COOKIE_SESSION)
    if sid:
        who = ids.by_session(sid)
        if who is not None:
            return who
    tok = request.cookies.get(COOKIE_TOKEN)
    return ids.owner if tok and ids.is_owner(tok) else None


def signed_in(request: Request) -> Annotator:
    """The signed-in person; 401 without a valid sign-in.

    A plain function that the role and annotator dependencies both call: as a
    dependency of a dependency it cost every answer a second resolution."""
    who = who_is(request)
    if who is None:
        raise SignInRequired(401, "Sign in with your personal link.")
    request.state.role = who.role
    request.state.who = who
    return who


def signed_in_role(request: Request) -> str:
    """The role of the signed-in person; 401 without a valid sign-in."""
    return signed_in(request).role


async def _role(request: Request) -> str:
    return signed_in_role(request)


RoleDep = Annotated[str, Depends(_role)]


async def _reviewer(role: RoleDep) -> str:
    if role != REVIEWER:
        raise HTTPException(
            403, "Reviewers only: ask the project owner for a reviewer's link."
        )
    return role


ReviewerDep = Annotated[str, Depends(_reviewer)]


def _store(state: StateDep, role: RoleDep) -> Store:
    """A worker thread's read-only store (reads never wait behind writes).

    The checks above are ``async``: they do no I/O, and each synchronous
    dependency would cost a trip through the thread pool."""
    return state.live.store()


StoreDep = Annotated[Store, Depends(_store)]


@lru_cache(maxsize=1024)
def clean_name(raw: str) -> str:
    """A name sent in a header as compared: percent-decoded, NFC, trimmed."""
    try:
        # a header is read as Latin-1: UTF-8 bytes sent raw are recovered here
        raw = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    try:
        return unicodedata.normalize("NFC", unquote(raw, errors="strict")).strip()
    except UnicodeDecodeError:
        raise HTTPException(422, "A name must be UTF-8 text.") from None


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


async def annotator(request: Request) -> Annotator:
    """Who writes: the signed-in person, from the app's own origin."""
    who = signed_in(request)
    from_header = bool(request.headers.get("x-retest-token"))
    if not same_origin(request) or (
        not from_header and "origin" not in request.headers
    ):
        # browsers send Origin on every POST; a cookie-only write without it
        # (or from another origin, another port included) is refused
        raise HTTPException(403, "Cross-origin write refused.")
    named = request.headers.get("x-retest-annotator")
    if named is not None and name_key(clean_name(named)) != name_key(who.name):
        raise HTTPException(
            403,
            f"This sign-in belongs to {who.name!r}: it cannot write as "
            f"{clean_name(named)[:40]!r}. Use that person's own link or token.",
        )
    return who


AnnotatorDep = Annotated[Annotator, Depends(annotator)]


async def _reviewer_writer(who: AnnotatorDep) -> Annotator:
    if who.role != REVIEWER:
        raise HTTPException(
            403, "Reviewers only: ask the project owner for a reviewer's link."
        )
    return who


ReviewerWriteDep = Annotated[Annotator, Depends(_reviewer_writer)]
