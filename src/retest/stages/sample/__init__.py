"""The ``sample`` stage: sampling inputs from the store, and what each strategy needs."""

from __future__ import annotations

from retest.stages.sample._feasibility import (
    MIN_ANNOTATIONS,
    STRATEGIES,
    ClassFeasibility,
    class_feasibility,
    originals_needed,
    originals_shown,
)
from retest.stages.sample._sample import (
    candidate_pool,
    draw_sample,
)

__all__ = [
    "MIN_ANNOTATIONS",
    "STRATEGIES",
    "ClassFeasibility",
    "candidate_pool",
    "class_feasibility",
    "draw_sample",
    "originals_needed",
    "originals_shown",
]
