"""Keyword reads of a project: the verified candidates, their count per keyword,
and what the newest keyword plan needs.

The plan stage writes the plan's state (:data:`PLAN_STATE`) and the sample stage
draws from the verified candidates; the web app's keyword pages read both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from retest.errors import UnknownNameError
from retest.labeling.keyword_plan import SharedImage, assign_verified
from retest.project._checkpoint import load_state
from retest.project._project import Project

__all__ = [
    "PLAN_STATE",
    "planned_needs",
    "verified_candidates",
    "verified_per_keyword",
]

PLAN_STATE = "plan/current"
"""Checkpoint state name of the newest keyword plan (written by ``retest plan``)."""


def verified_candidates(
    project: Project, *, shared_class: Mapping[str, str] | None = None
) -> tuple[dict[str, int], list[SharedImage[int]]]:
    """Candidates whose latest ``kind="verify"`` judgment is yes (CIFAR stage 2),
    each with the one class it counts for.

    An image verified for several classes (CIFAR-10.1's ``cruiser`` images in
    both the automobile and the ship list) goes where
    :func:`retest.labeling.keyword_plan.assign_verified` puts it: the class
    named in ``shared_class[keyword]``, else the class with the fewest verified
    images of the keyword (docs/algorithms.md#shared-images).

    Parameters
    ----------
    project : Project
    shared_class : mapping of keyword to class name, optional

    Returns
    -------
    classes : dict of str to int
        Candidate id → class id.
    shared : list of SharedImage
        The images verified for several classes and where they went.
    """
    store = project.store
    latest: dict[tuple[str, int], int] = {}
    for e in store.annotations.list(kind="verify"):
        latest[(e.item_id, e.class_id)] = e.value
    ids = {c.name: c.id for c in store.classes.list()}
    choice = {}
    for kw, name in (shared_class or {}).items():
        if name not in ids:
            raise UnknownNameError("class", name, (), sorted(ids))
        choice[kw] = ids[name]
    yes = Counter(item for (item, _), v in latest.items() if v > 0)
    keyword_of: dict[str, str] = {}
    if any(n > 1 for n in yes.values()):  # the rule weighs each class's list
        known = sorted(store.candidates.existing(yes))
        keyword_of = {
            r.id: r.keyword for r in store.candidates.get_many(known) if r.keyword
        }
    return assign_verified(latest, keyword_of, choice)


def verified_per_keyword(
    project: Project, *, shared_class: Mapping[str, str] | None = None
) -> dict[tuple[str, str], int]:
    """Verified candidates per class and keyword.

    Parameters
    ----------
    project : Project
    shared_class : mapping of keyword to class name, optional
        Where images verified for several classes count
        (:func:`verified_candidates`).

    Returns
    -------
    dict of (class name, keyword) to int
        Candidates whose latest ``verify`` annotation says yes, each counted
        once, for the class it belongs to.
    """
    store = project.store
    classes, _ = verified_candidates(project, shared_class=shared_class)
    if not classes:
        return {}
    names = {c.id: c.name for c in store.classes.list()}
    known = store.candidates.existing(classes)
    out: dict[tuple[str, str], int] = {}
    for row in store.candidates.get_many(sorted(known)):
        if row.keyword is not None:
            key = (names.get(classes[row.id], str(classes[row.id])), row.keyword)
            out[key] = out.get(key, 0) + 1
    return out


def planned_needs(project: Project) -> tuple[dict[tuple[str, str], int], str]:
    """Images needed per (class name, keyword) by the newest plan, and its report.

    Parameters
    ----------
    project : Project

    Returns
    -------
    needs : dict of (class name, keyword) to int
        Empty when no plan was made.
    report : str
        The plan's report, relative to the project; ``""`` when no plan was made.
    """
    state = load_state(project, PLAN_STATE)
    if state is None:
        return {}, ""
    return {(c, k): int(n) for c, k, n in state["needed"]}, str(state["report"])
