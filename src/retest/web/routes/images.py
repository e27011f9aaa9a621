"""Image endpoints: by item id (review pages) or by task token (grid tasks).

Both need a token (any role). Ids are looked up, never used as paths; a bad id
of any shape (too long, a number too large for the store) is a 404.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from retest.errors import RetestError
from retest.pipeline.project import Project
from retest.web.deps import AppState, ImagesDep, RoleDep, StateDep
from retest.web.views import task_tokens

router = APIRouter(prefix="/img", tags=["images"])
_HEADERS = {"Cache-Control": "private, max-age=86400"}
_MAX_ID = 200


def _project(state: AppState) -> Project:
    """The project on this thread's read-only store (reads never wait behind writes)."""
    return state.live.read_project() if state.live is not None else state.project


@router.get("/i/{item_id}")
def item_image(
    item_id: str, images: ImagesDep, state: StateDep, role: RoleDep
) -> Response:
    if len(item_id) > _MAX_ID:
        raise HTTPException(404, "No such image.")
    try:
        png = images.png(item_id, _project(state))
        return Response(png, media_type="image/png", headers=_HEADERS)
    except (RetestError, LookupError, OSError, ValueError, OverflowError):
        raise HTTPException(404, "No such image.") from None


@router.get("/t/{task_id}/{token}")
def task_image(task_id: str, token: str, state: StateDep, role: RoleDep) -> Response:
    """Grid images are addressed by opaque tokens so originals look like candidates."""
    if len(task_id) > _MAX_ID:
        raise HTTPException(404, "No such task.")
    try:
        task = (
            state.live.task(task_id)
            if state.live is not None
            else state.store.tasks.get(task_id)
        )
    except LookupError:
        raise HTTPException(404, "No such task.") from None
    items = tuple(dict.fromkeys(task.items))
    item = task_tokens(task.id, items, state.secret).get(token)
    if item is not None:
        png = state.images.png(item, _project(state))
        return Response(png, media_type="image/png", headers=_HEADERS)
    raise HTTPException(404, "No such image.")
