"""The ``plan`` stage: images needed per class and keyword."""

from __future__ import annotations

from retest.stages.plan._plan import (
    KEYWORDS_FROM_CONFIG,
    KEYWORDS_FROM_REFERENCE,
    PlanResult,
    make_plan,
    shared_summary,
)

__all__ = [
    "KEYWORDS_FROM_CONFIG",
    "KEYWORDS_FROM_REFERENCE",
    "PlanResult",
    "make_plan",
    "shared_summary",
]
