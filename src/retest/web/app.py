"""The web app factory. Nothing is created at import time."""

from __future__ import annotations

import secrets
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from retest.errors import InputValidationError, NotFoundError, RetestError
from retest.pipeline.project import Project
from retest.web.deps import AppState
from retest.web.images import ItemImages
from retest.web.routes import api, images, pages, review

__all__ = ["create_app", "new_token"]

_HERE = Path(__file__).parent


def new_token() -> str:
    """A fresh invitation token for write access."""
    return secrets.token_urlsafe(18)


def create_app(project: Project, *, token: str, secret: bytes) -> FastAPI:
    """Build the app for an open project.

    Parameters
    ----------
    project : Project
        The open project; images are read below its root, never outside. The app
        does not close it.
    token : str
        Invitation token every write endpoint requires (401 without it).
    secret : bytes
        Project secret for the opaque image tokens of grid tasks.
    """
    name = project.config.name
    app = FastAPI(title=f"retest · {name}", docs_url=None, redoc_url=None)
    app.state.retest = AppState(
        project=project,
        store=project.store,
        token=token,
        secret=secret,
        images=ItemImages(project),
        name=name,
    )
    app.state.templates = Jinja2Templates(directory=str(_HERE / "templates"))
    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")
    app.include_router(pages.router)
    app.include_router(review.router)
    app.include_router(api.router)
    app.include_router(images.router)

    @app.exception_handler(RetestError)
    def _retest_error(request: Request, err: RetestError) -> JSONResponse:
        status = (
            404
            if isinstance(err, NotFoundError)
            else (422 if isinstance(err, InputValidationError) else 400)
        )
        return JSONResponse({"detail": str(err)}, status_code=status)

    return app
