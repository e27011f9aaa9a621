"""The ``evaluate`` stage: run a testbed on the original and new test sets (cached)."""

from __future__ import annotations

from retest.stages.evaluate._evaluate import (
    ORIGINAL,
    ProjectEvaluation,
    TestbedReport,
    compare_testbed,
    evaluate_project,
    evaluate_sets,
    evaluate_testbed,
    project_models,
    project_revisions,
    reference_set,
    releasable_revisions,
    revision_set,
)
from retest.stages.evaluate._prediction_cache import (
    PredictionCache,
    dataset_fingerprint,
)

__all__ = [
    "ORIGINAL",
    "PredictionCache",
    "ProjectEvaluation",
    "TestbedReport",
    "compare_testbed",
    "dataset_fingerprint",
    "evaluate_project",
    "evaluate_sets",
    "evaluate_testbed",
    "project_models",
    "project_revisions",
    "reference_set",
    "releasable_revisions",
    "revision_set",
]
