"""The project's classes as stored, and the review state of each class of a revision.

Read by the sample and revisions stages and the web app's pages.
"""

from __future__ import annotations

from retest.project._project import Project
from retest.store.rows import ReviewState

__all__ = ["class_names", "review_states"]


def class_names(project: Project) -> dict[int, str]:
    """``class_id → name`` of the project's classes, as stored.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of int to str
    """
    return {c.id: c.name for c in project.store.classes.list()}


def review_states(project: Project, revision: str) -> dict[int, ReviewState]:
    """Latest review state of every class of a revision.

    Parameters
    ----------
    project : Project
    revision : str

    Returns
    -------
    dict of class id to ReviewState
        Unreviewed for a class without review events.
    """
    latest = project.store.revisions.reviews(revision)
    return {
        cid: latest.get(cid, ReviewState(revision, cid, False, False))
        for cid in sorted(class_names(project))
    }
