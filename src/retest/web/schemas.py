"""Request bodies of the web app's write endpoints (pydantic, wire format only)."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = [
    "ClassReviewBody",
    "LabelBody",
    "LabelErrorBody",
    "NearDupBody",
    "TaskAnswerBody",
]


class LabelBody(BaseModel):
    """CIFAR-style labeling: every shown candidate with checked yes/no."""

    stage: str = Field(pattern="^(select|verify)$")
    class_id: int
    keyword: str
    shown: list[str]
    checked: list[str]


class TaskAnswerBody(BaseModel):
    """A grid task answer: the tokens of the checked images."""

    task_id: str
    selected_tokens: list[str]


class NearDupBody(BaseModel):
    """Near-duplicate review of one candidate under one metric."""

    candidate_id: str
    metric: str
    shown: list[str]
    duplicates: list[str]
    reviewed: bool = True


class ClassReviewBody(BaseModel):
    """Final class review of a revision."""

    revision: str
    class_id: int
    blacklist: list[str] = []
    unblacklist: list[str] = []
    reason: str = "invalid image (selected in the class review)"
    near_duplicate_sets: list[list[str]] = []
    reviewed: bool = False
    problematic: bool = False


class LabelErrorBody(BaseModel):
    """A verdict on a queued "possible label error" item."""

    item_id: str
    verdict: str = Field(pattern="^(correct|wrong|unclear)$")
    new_class: int | None = None
