"""``retest status``: per-class counts of a project."""

from __future__ import annotations

from retest.stages.status._status import (
    ClassStatus,
    ProjectStatus,
    candidate_status,
    project_status,
    status,
)

__all__ = [
    "ClassStatus",
    "ProjectStatus",
    "candidate_status",
    "project_status",
    "status",
]
