"""Test-set revisions: sample -> review -> blacklist -> resample."""

from __future__ import annotations

from retest.stages.revisions._revisions import (
    ClassDiff,
    ClassStatistics,
    CreatedRevision,
    RevisionStatistics,
    carry_over_reviews,
    create_revision,
    diff_revisions,
    next_revision_name,
    revision_statistics,
    revision_summaries,
    set_class_review,
)

__all__ = [
    "ClassDiff",
    "ClassStatistics",
    "CreatedRevision",
    "RevisionStatistics",
    "carry_over_reviews",
    "create_revision",
    "diff_revisions",
    "next_revision_name",
    "revision_statistics",
    "revision_summaries",
    "set_class_review",
]
