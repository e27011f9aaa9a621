"""The web app factory. Nothing is created at import time."""

from __future__ import annotations

import secrets
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retest._progress import ProgressCallback
from retest.errors import InputValidationError, NotFoundError, RetestError
from retest.pipeline.project import Project
from retest.web.deps import (
    COOKIE_NAME,
    COOKIE_TOKEN,
    AppState,
    SignInRequired,
    clean_name,
    same_origin,
)
from retest.web.images import ItemImages
from retest.web.live import Live
from retest.web.pages import include_pages
from retest.web.routes.pages import warm_up_steps

__all__ = ["MAX_BODY", "create_app", "new_token"]

_HERE = Path(__file__).parent
MAX_BODY = 256 * 1024
"""Largest request body read (bytes); larger ones get 413 before being read."""


def new_token() -> str:
    """A fresh random token (invitation or reviewer)."""
    return secrets.token_urlsafe(18)


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
        resp: Response
        if self.state.role_of(tok) is None:
            resp = _signin_page(request, 401, "That token is not valid.", url)
        else:
            resp = RedirectResponse(url, status_code=303)
            _set_cookie(resp, COOKIE_TOKEN, tok)
        await resp(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse({"detail": f"Request body over {MAX_BODY // 1024} KiB."}, 413)(
        scope, receive, send
    )


def create_app(
    project: Project,
    *,
    token: str,
    secret: bytes,
    reviewer_token: str | None = None,
    openapi: bool = False,
    hosts: Collection[str] | None = None,
    max_body: int = MAX_BODY,
    refresh_seconds: float = 5.0,
    progress: ProgressCallback | None = None,
    processes: bool = False,
) -> FastAPI:
    """Build the app for an open project.

    Parameters
    ----------
    project : Project
        The open project; images are read below its root, never outside. The app
        does not close it.
    token : str
        The labelers' invitation token.
    secret : bytes
        Project secret for the opaque image tokens of grid tasks.
    reviewer_token : str, optional
        The reviewers' token (results, controls, statistics, review pages).
        None makes one up (``app.state.retest.reviewer_token``).
    openapi : bool
        Serve ``/openapi.json`` (off: it lists every endpoint to anyone).
    hosts : collection of str, optional
        Accepted ``Host`` headers (``host:port``); others get 421, which stops
        DNS-rebinding pages. None accepts any.
    max_body : int
        Largest request body in bytes.
    refresh_seconds : float
        See :class:`retest.web.live.Live`.
    progress : callable, optional
        Told when the background computations started with the server (the
        eligibility decision, the near-duplicate queue) begin and end.
    processes : bool
        Compute those in a worker process (see :class:`retest.web.live.Live`).
    """
    if reviewer_token is not None and reviewer_token == token:
        raise InputValidationError(
            "the reviewer token must differ from the invitation token."
        )
    name = project.config.name
    app = FastAPI(
        title=f"retest · {name}",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if openapi else None,
    )
    state = AppState(
        project=project,
        store=project.store,
        token=token,
        secret=secret,
        images=ItemImages(project),
        name=name,
        reviewer_token=reviewer_token or new_token(),
        live=Live(project, refresh_seconds=refresh_seconds, processes=processes),
    )
    app.state.retest = state
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    app.state.templates = templates
    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")
    include_pages(app)  # the built-in pages and every registered one
    app.add_middleware(_Limits, max_body=max_body, hosts=hosts)
    app.add_middleware(_TokenInUrl, state=state)

    @app.post("/signin", include_in_schema=False)
    async def _signin(request: Request) -> Response:
        """The sign-in form: token and name into HttpOnly cookies."""
        if not same_origin(request):
            raise HTTPException(403, "Cross-origin sign-in refused.")
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        nxt = form.get("next", "/")
        nxt = nxt if nxt.startswith("/") and not nxt.startswith("//") else "/"
        tok = form.get("token", "").strip() or request.cookies.get(COOKIE_TOKEN, "")
        if state.role_of(tok) is None:
            return _signin_page(request, 401, "That token is not valid.", nxt)
        try:
            who = clean_name(form.get("name", ""))
        except HTTPException as err:
            return _signin_page(request, 422, str(err.detail), nxt)
        resp = RedirectResponse(nxt, status_code=303)
        _set_cookie(resp, COOKIE_TOKEN, tok)
        if who:
            _set_cookie(resp, COOKIE_NAME, quote(who))
        return resp

    @app.exception_handler(SignInRequired)
    def _sign_in(request: Request, err: SignInRequired) -> Response:
        if request.url.path.startswith(("/api/", "/img/")):
            return JSONResponse({"detail": err.detail}, status_code=401)
        return _signin_page(request, 401, "", str(request.url.path))

    @app.exception_handler(RetestError)
    def _retest_error(request: Request, err: RetestError) -> JSONResponse:
        status = (
            404
            if isinstance(err, NotFoundError)
            else (422 if isinstance(err, InputValidationError) else 400)
        )
        return JSONResponse({"detail": str(err)}, status_code=status)

    @app.exception_handler(LookupError)
    def _lookup_error(request: Request, err: LookupError) -> JSONResponse:
        return JSONResponse({"detail": "Not found."}, status_code=404)

    @app.on_event("startup")
    def _warm_up() -> None:
        if state.live is not None:
            state.live.warm_up(warm_up_steps(state), progress)

    @app.on_event("shutdown")
    def _close() -> None:
        if state.live is not None:
            state.live.close()

    return app


def _set_cookie(resp: Response, key: str, value: str) -> None:
    resp.set_cookie(key, value, httponly=True, samesite="strict", path="/")


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
