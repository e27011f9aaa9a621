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
    TARGET_MIN_ANNOTATIONS,
    TARGET_MIN_ORIGINALS,
    candidate_pool,
    class_names,
    draw_sample,
    target_histograms,
    verified_candidates,
)

__all__ = [
    "MIN_ANNOTATIONS",
    "STRATEGIES",
    "TARGET_MIN_ANNOTATIONS",
    "TARGET_MIN_ORIGINALS",
    "ClassFeasibility",
    "candidate_pool",
    "class_feasibility",
    "class_names",
    "draw_sample",
    "originals_needed",
    "originals_shown",
    "target_histograms",
    "verified_candidates",
]
