"""The web app factory. Nothing is created at import time."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import HTTPException, RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retest._progress import ProgressCallback
from retest.errors import InputValidationError, NotFoundError, RetestError
from retest.labeling.people import new_token
from retest.project import Live, Project
from retest.web.deps import (
    COOKIE_SESSION,
    COOKIE_TOKEN,
    AppState,
    SignInRequired,
    same_origin,
)
from retest.web.identity import Identities
from retest.web.images import ItemImages
from retest.web.pages import include_pages
from retest.web.routes.review import warm_up_steps
from retest.web.views import error_page, is_page

__all__ = ["MAX_BODY", "create_app", "new_token"]

_HERE = Path(__file__).parent
MAX_BODY = 256 * 1024
"""Largest request body read (bytes); larger ones get 413 before being read."""


class _Limits:
    """ASGI middleware: refuse bodies over ``max_body`` and unknown ``Host``\\ s."""

    def __init__(
        self, app: ASGIApp, max_body: int, hosts: Collection[str] | None
    ) -> None:
        self.app, self.max_body, self.hosts = app, max_body, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.hosts is not None:
            host = headers.get(b"host", b"").decode("latin-1")
            if host not in self.hosts:
                await JSONResponse({"detail": "Unknown host."}, 421)(
                    scope, receive, send
                )
                return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _too_large(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_body:
                    raise _BodyTooLarge
            return msg

        try:
            await self.app(scope, limited, send)
        except _BodyTooLarge:
            await _too_large(scope, receive, send)


class _TokenInUrl:
    """ASGI middleware: ``?token=…`` signs in and is dropped from the address (303
    to the same page without it), so it stays out of history and Referer headers.

    Plain ASGI, not an ``http`` middleware: that one costs every request a task
    and two streams (a quarter of a label write's CPU time)."""

    def __init__(self, app: ASGIApp, state: AppState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "GET"
            or b"token=" not in scope.get("query_string", b"")
        ):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        tok = request.query_params.get("token")
        if tok is None:
            await self.app(scope, receive, send)
            return
        rest = [(k, v) for k, v in parse_qsl(request.url.query) if k != "token"]
        url = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        resp = await run_in_threadpool(sign_in_response, request, tok, url)
        await resp(scope, receive, send)


def sign_in_response(request: Request, token: str, url: str) -> Response:
    """What a sign-in with ``token`` answers: a 303 to ``url`` that sets the
    cookies of the person (a new session), of the owner (the admin token), or of
    a browser's own anonymous worker (the public token; a browser that has one
    keeps it); the sign-in page with 401 for any other token."""
    state: AppState = request.app.state.retest
    ids = state.identities
    assert ids is not None
    if ids.is_owner(token):
        resp = RedirectResponse(url, status_code=303)
        _set_cookie(request, resp, COOKIE_TOKEN, token, state.session_days)
        resp.delete_cookie(COOKIE_SESSION, path="/")
        return resp
    if ids.is_public(token):
        who = ids.by_session(request.cookies.get(COOKIE_SESSION, ""))
        if who is None or not who.anonymous:
            who = ids.new_anonymous()
        else:
            return RedirectResponse(url, status_code=303)
    else:
        who = ids.by_token(token)
    if who is None:
        return _signin_page(
            request,
            401,
            "That link is not valid (revoked, or replaced by a "
            "newer one): ask the project owner for your link.",
            url,
        )
    resp = RedirectResponse(url, status_code=303)
    _set_cookie(
        request, resp, COOKIE_SESSION, ids.start_session(who), state.session_days
    )
    resp.delete_cookie(COOKIE_TOKEN, path="/")
    return resp


CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
"""The pages' Content-Security-Policy: nothing but the app's own files (no inline
script or style), and no page may frame them (clickjacking)."""
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class _SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every response (plain ASGI,
    like :class:`_TokenInUrl`: a few list appends per request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                msg["headers"] = [*msg.get("headers", []), *SECURITY_HEADERS]
            await send(msg)

        await self.app(scope, receive, send_with)


class _BodyTooLarge(Exception):
    pass


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse({"detail": f"Request body over {MAX_BODY // 1024} KiB."}, 413)(
        scope, receive, send
    )


def create_app(
    project: Project,
    *,
    token: str | None = None,
    secret: bytes,
    reviewer_token: str | None = None,
    openapi: bool = False,
    hosts: Collection[str] | None = None,
    max_body: int = MAX_BODY,
    refresh_seconds: float = 5.0,
    progress: ProgressCallback | None = None,
    processes: bool = False,
    session_days: float = 30.0,
) -> FastAPI:
    """Build the app for an open project.

    Parameters
    ----------
    project : Project
        The open project; images are read below its root, never outside. The app
        does not close it.
    token : str, optional
        The public link's token: anyone with it labels as an anonymous worker
        of their own (one per browser). None (the default): no public link;
        people sign in with their personal links (``retest people``).
    secret : bytes
        Project secret for the opaque image tokens of grid tasks.
    reviewer_token : str, optional
        The project owner's (admin) token: a reviewer writing as ``owner``.
        None makes one up (``app.state.retest.reviewer_token``).
    openapi : bool
        Serve ``/openapi.json`` (off: it lists every endpoint to anyone).
    hosts : collection of str, optional
        Accepted ``Host`` headers (``host:port``); others get 421, which stops
        DNS-rebinding pages. None accepts any.
    max_body : int
        Largest request body in bytes.
    refresh_seconds : float
        See :class:`retest.project._live.Live`.
    progress : callable, optional
        Told when the background computations started with the server (the
        eligibility decision, the near-duplicate queue) begin and end.
    processes : bool
        Compute those in a worker process (see :class:`retest.project._live.Live`).
    session_days : float
        How long a sign-in lasts (a persistent cookie).
    """
    if reviewer_token is not None and reviewer_token == token:
        raise InputValidationError(
            "the owner's token must differ from the public link's token."
        )
    name = project.config.name
    app = FastAPI(
        title=f"retest · {name}",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if openapi else None,
    )
    live = Live(project, refresh_seconds=refresh_seconds, processes=processes)
    owner = reviewer_token or new_token()
    state = AppState(
        project=project,
        store=project.store,
        token=token,
        secret=secret,
        images=ItemImages(project),
        name=name,
        reviewer_token=owner,
        live=live,
        identities=Identities(
            project.store,
            live.store,
            live.external_version,
            owner,
            token,
            session_days,
        ),
        session_days=session_days,
    )
    app.state.retest = state
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    app.state.templates = templates
    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")
    include_pages(app)  # the built-in pages and every registered one
    app.add_middleware(_Limits, max_body=max_body, hosts=hosts)
    app.add_middleware(_TokenInUrl, state=state)
    app.add_middleware(_SecurityHeaders)  # outermost: on every answer, 4xx included

    @app.post("/signin", include_in_schema=False)
    async def _signin(request: Request) -> Response:
        """The sign-in form: a personal, the owner's or the public token."""
        if not same_origin(request):
            raise HTTPException(403, "Cross-origin sign-in refused.")
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        nxt = form.get("next", "/")
        nxt = nxt if nxt.startswith("/") and not nxt.startswith("//") else "/"
        tok = form.get("token", "").strip()
        return await run_in_threadpool(sign_in_response, request, tok, nxt)

    @app.post("/signout", include_in_schema=False)
    async def _signout(request: Request) -> Response:
        """Sign out: this browser's session ends at once."""
        if not same_origin(request):
            raise HTTPException(403, "Cross-origin sign-out refused.")
        sid = request.cookies.get(COOKIE_SESSION)
        if sid and state.identities is not None:
            await run_in_threadpool(state.identities.end_session, sid)
        resp = RedirectResponse("/", status_code=303)
        resp.delete_cookie(COOKIE_SESSION, path="/")
        resp.delete_cookie(COOKIE_TOKEN, path="/")
        return resp

    @app.exception_handler(SignInRequired)
    def _sign_in(request: Request, err: SignInRequired) -> Response:
        if request.url.path.startswith(("/api/", "/img/")):
            return JSONResponse({"detail": err.detail}, status_code=401)
        return _signin_page(request, 401, "", str(request.url.path))

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        """FastAPI's 422, also for bytes that are not UTF-8 (its own handler
        fails to encode them: a 500)."""
        detail = jsonable_encoder(
            err.errors(), custom_encoder={bytes: lambda b: b.decode("utf-8", "replace")}
        )
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> Response:
        if is_page(request) and 400 <= err.status_code < 500:
            resp = error_page(request, err.status_code, str(err.detail))
            resp.headers.update(err.headers or {})
            return resp
        return await http_exception_handler(request, err)

    @app.exception_handler(RetestError)
    def _retest_error(request: Request, err: RetestError) -> Response:
        status = (
            404
            if isinstance(err, NotFoundError)
            else (422 if isinstance(err, InputValidationError) else 400)
        )
        if is_page(request):
            return error_page(request, status, str(err))
        return JSONResponse({"detail": str(err)}, status_code=status)

    @app.exception_handler(LookupError)
    def _lookup_error(request: Request, err: LookupError) -> Response:
        if is_page(request):
            return error_page(request, 404, "Not found.")
        return JSONResponse({"detail": "Not found."}, status_code=404)

    @app.on_event("startup")
    def _warm_up() -> None:
        state.live.warm_up(warm_up_steps(state), progress)

    @app.on_event("shutdown")
    def _close() -> None:
        state.live.close()

    return app


def _set_cookie(
    request: Request, resp: Response, key: str, value: str, days: float
) -> None:
    """A sign-in cookie: kept across browser restarts for ``days``, never read by
    scripts, never sent by other sites; ``Secure`` when served over https (behind
    a TLS proxy: see ``retest serve --trusted-proxy``)."""
    resp.set_cookie(
        key,
        value,
        max_age=int(days * 86400),
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )


def _signin_page(request: Request, status: int, message: str, nxt: str) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.templates
    ctx: dict[str, Any] = {
        "project": request.app.state.retest.name,
        "message": message,
        "next": nxt,
        "who": "",
        "role": None,
    }
    return templates.TemplateResponse(request, "signin.html", ctx, status_code=status)
