"""Dependencies: the project's store, image renderer and the annotator's identity.

Writes need the invitation token that ``retest serve`` prints (header
``X-Retest-Token`` or the ``retest_token`` cookie) and a name (header
``X-Retest-Annotator`` or the ``retest_annotator`` cookie).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from retest.pipeline.project import Project
from retest.store.base import Store
from retest.web.images import ItemImages

__all__ = ["Annotator", "AnnotatorDep", "AppState", "ImagesDep", "StateDep", "StoreDep"]

UI_VERSION = "web-1"


@dataclass
class AppState:
    project: Project
    store: Store
    token: str
    secret: bytes
    images: ItemImages
    name: str


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.retest
    return state


StateDep = Annotated[AppState, Depends(_state)]


def _store(state: StateDep) -> Store:
    return state.store


def _images(state: StateDep) -> ItemImages:
    return state.images


StoreDep = Annotated[Store, Depends(_store)]
ImagesDep = Annotated[ItemImages, Depends(_images)]


@dataclass(frozen=True)
class Annotator:
    name: str


def _annotator(request: Request, state: StateDep) -> Annotator:
    token = request.headers.get("x-retest-token") or request.cookies.get(
        "retest_token", ""
    )
    if not hmac.compare_digest(token.encode(), state.token.encode()):
        raise HTTPException(401, "A valid invitation token is required to write.")
    name = (
        request.headers.get("x-retest-annotator")
        or request.cookies.get("retest_annotator", "")
    ).strip()
    if not name:
        raise HTTPException(
            401, "Tell us who you are: set your name on the start page."
        )
    return Annotator(name[:80])


AnnotatorDep = Annotated[Annotator, Depends(_annotator)]
