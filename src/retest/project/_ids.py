"""Ids as users give them: a candidate's id or a unique prefix of it (retest's own
messages print ids shortened), or an original's ``SPLIT:INDEX``.

Used by every command and page that takes an id (``retest status``, the dedup
review on the command line and in the web app).
"""

from __future__ import annotations

from retest.errors import InputValidationError, NotFoundError
from retest.project._project import Project
from retest.store.rows import split_reference_id

__all__ = ["MIN_PREFIX", "resolve_candidate", "resolve_item"]

MIN_PREFIX = 6
"""Shortest id prefix :func:`resolve_candidate` searches for (retest's messages
shorten ids to 12 or 16 characters)."""


def resolve_candidate(project: Project, given: str) -> str:
    """The candidate id ``given`` names: the id itself or a unique prefix of it,
    as retest's own messages print ids shortened.

    Raises
    ------
    NotFoundError
        No candidate has that id or prefix; an original image's id (``test:17``)
        is said to be one.
    InputValidationError
        The prefix is shared by several candidates.
    """
    store = project.store
    if store.candidates.existing([given]):
        return given
    ref = split_reference_id(given)
    if ref is not None:
        raise NotFoundError(
            f"{given!r} is an original image (split {ref[0]!r}), not a candidate; "
            "give a candidate id, e.g. one listed by `retest dedup-queue`."
        )
    key = given.lower()
    if len(key) >= MIN_PREFIX and all(ch in "0123456789abcdef" for ch in key):
        ids = [i for i in store.candidates.columns(("id",))["id"] if i.startswith(key)]
        if len(ids) == 1:
            return str(ids[0])
        if ids:
            raise InputValidationError(
                f"candidate id prefix {given!r} matches {len(ids)} candidates (e.g. "
                f"{ids[0]}, {ids[1]}); give more of the id."
            )
    raise NotFoundError(f"candidate {given!r} is not in the project.")


def resolve_item(project: Project, given: str) -> str:
    """An original's id (``SPLIT:INDEX``) as given, else :func:`resolve_candidate`."""
    return (
        given
        if split_reference_id(given) is not None
        else resolve_candidate(project, given)
    )
