"""Request bodies of the web app's write endpoints (pydantic, wire format only).

Lengths are bounded here, before any lookup: a body cannot carry a 20 MB
keyword or 50,000 item ids. Whether the ids exist in the project is checked by
the endpoint.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

__all__ = [
    "SUBMISSION",
    "ClassReviewBody",
    "ExclusionBody",
    "LabelBody",
    "LabelErrorBody",
    "NearDupBody",
    "TaskAnswerBody",
    "UndoBody",
]

SUBMISSION = "^[A-Za-z0-9_-]{8,64}$"
"""A per-page-load submission key (random, sent with the write)."""
MAX_SHOWN = 500
Id = Annotated[str, Field(min_length=1, max_length=200)]
ClassId = Annotated[int, Field(ge=0, lt=1_000_000)]
Key = Annotated[str, Field(pattern=SUBMISSION)]


class LabelBody(BaseModel):
    """CIFAR-style labeling: every shown candidate with checked yes/no."""

    submission: Key
    stage: str = Field(pattern="^(select|verify)$")
    class_id: ClassId
    keyword: str = Field(min_length=1, max_length=200)
    shown: list[Id] = Field(min_length=1, max_length=MAX_SHOWN)
    checked: list[Id] = Field(max_length=MAX_SHOWN)


class TaskAnswerBody(BaseModel):
    """A grid task answer: the tokens of the checked images."""

    submission: Key
    task_id: Id
    selected_tokens: list[Annotated[str, Field(max_length=100)]] = Field(
        max_length=MAX_SHOWN
    )


class NearDupBody(BaseModel):
    """Near-duplicate review of one candidate under one metric."""

    submission: Key | None = None
    candidate_id: Id
    metric: str = Field(min_length=1, max_length=64)
    shown: list[Id] = Field(max_length=MAX_SHOWN)
    duplicates: list[Id] = Field(max_length=MAX_SHOWN)
    reviewed: bool = True


class ClassReviewBody(BaseModel):
    """Final class review of a revision."""

    submission: Key | None = None
    revision: Id
    class_id: ClassId
    blacklist: list[Id] = Field(default=[], max_length=5000)
    unblacklist: list[Id] = Field(default=[], max_length=5000)
    reason: str = Field(
        default="invalid image (selected in the class review)", max_length=500
    )
    near_duplicate_sets: list[list[Id]] = Field(default=[], max_length=2000)
    reviewed: bool = False
    problematic: bool = False


class LabelErrorBody(BaseModel):
    """A verdict on a queued "possible label error" item."""

    submission: Key | None = None
    item_id: Id
    verdict: str = Field(pattern="^(correct|wrong|unclear)$")
    new_class: ClassId | None = None


class UndoBody(BaseModel):
    """Undo of the person's latest grid answer."""

    submission: Key


class ExclusionBody(BaseModel):
    """Exclude a worker's answers from the counts (or include them again)."""

    submission: Key | None = None
    worker: str = Field(min_length=1, max_length=300)
    exclude: bool
    reason: str = Field(default="", max_length=500)
