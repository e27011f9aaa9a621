"""Image endpoints: by item id (review pages) or by task token (grid tasks).

Both need a token (any role). Ids are looked up, never used as paths; a bad id
of any shape (too long, a number too large for the store) is a 404.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response
from fastapi.concurrency import run_in_threadpool

from retest.errors import RetestError
from retest.project import Project
from retest.web.deps import AppState, ImagesDep, RoleDep, StateDep
from retest.web.images import ItemImages
from retest.web.views import task_tokens

router = APIRouter(prefix="/img", tags=["images"])
_HEADERS = {"Cache-Control": "private, max-age=86400"}
_MAX_ID = 200


def _project(state: AppState) -> Project:
    """The project on this thread's read-only store (reads never wait behind writes)."""
    return state.live.read_project()


async def _png(images: ItemImages, item_id: str, state: AppState) -> Response:
    """An image from memory on the event loop; otherwise read and rendered in a
    worker thread. A page shows 48-80 images, and each hop through the thread
    pool cost the server time its answers were waiting for."""
    png = images.cached(item_id)
    if png is None:
        try:
            png = await run_in_threadpool(lambda: images.png(item_id, _project(state)))
        except (RetestError, LookupError, OSError, ValueError, OverflowError):
            raise HTTPException(404, "No such image.") from None
    return Response(png, media_type="image/png", headers=_HEADERS)


@router.get("/i/{item_id}")
async def item_image(
    item_id: str, images: ImagesDep, state: StateDep, role: RoleDep
) -> Response:
    if len(item_id) > _MAX_ID:
        raise HTTPException(404, "No such image.")
    return await _png(images, item_id, state)


@router.get("/t/{task_id}/{token}")
async def task_image(
    task_id: str, token: str, state: StateDep, role: RoleDep
) -> Response:
    """Grid images are addressed by opaque tokens so originals look like candidates."""
    if len(task_id) > _MAX_ID:
        raise HTTPException(404, "No such task.")
    try:
        task = state.live.task(task_id)
    except LookupError:
        raise HTTPException(404, "No such task.") from None
    items = tuple(dict.fromkeys(task.items))
    item = task_tokens(task.id, items, state.secret).get(token)
    if item is None:
        raise HTTPException(404, "No such image.")
    return await _png(state.images, item, state)
