"""Image endpoints: by item id (review pages) or by task token (grid tasks)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from retest.build.tasks import image_token
from retest.errors import RetestError
from retest.web.deps import ImagesDep, StateDep

router = APIRouter(prefix="/img", tags=["images"])
_HEADERS = {"Cache-Control": "private, max-age=86400"}


@router.get("/i/{item_id}")
def item_image(item_id: str, images: ImagesDep) -> Response:
    try:
        return Response(images.png(item_id), media_type="image/png", headers=_HEADERS)
    except (RetestError, LookupError, OSError):
        raise HTTPException(404, "No such image.") from None


@router.get("/t/{task_id}/{token}")
def task_image(task_id: str, token: str, state: StateDep) -> Response:
    """Grid images are addressed by opaque tokens so originals look like candidates."""
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
