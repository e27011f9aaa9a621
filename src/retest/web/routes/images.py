"""Image endpoints: by item id (review pages) or by task token (grid tasks).

Both need a token (any role). Ids are looked up, never used as paths; a bad id
of any shape (too long, a number too large for the store) is a 404.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from retest.errors import RetestError
from retest.labeling.tasks import image_token
from retest.web.deps import ImagesDep, RoleDep, StateDep

router = APIRouter(prefix="/img", tags=["images"])
_HEADERS = {"Cache-Control": "private, max-age=86400"}
_MAX_ID = 200


@router.get("/i/{item_id}")
def item_image(item_id: str, images: ImagesDep, role: RoleDep) -> Response:
    if len(item_id) > _MAX_ID:
        raise HTTPException(404, "No such image.")
    try:
        return Response(images.png(item_id), media_type="image/png", headers=_HEADERS)
    except (RetestError, LookupError, OSError, ValueError, OverflowError):
        raise HTTPException(404, "No such image.") from None


@router.get("/t/{task_id}/{token}")
def task_image(task_id: str, token: str, state: StateDep, role: RoleDep) -> Response:
    """Grid images are addressed by opaque tokens so originals look like candidates."""
    if len(task_id) > _MAX_ID:
        raise HTTPException(404, "No such task.")
    try:
        task = state.store.tasks.get(task_id)
    except LookupError:
        raise HTTPException(404, "No such task.") from None
    for item in task.items:
        if image_token(f"{task.id}|{item}", state.secret) == token:
            return Response(
                state.images.png(item), media_type="image/png", headers=_HEADERS
            )
    raise HTTPException(404, "No such image.")
