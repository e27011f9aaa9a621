"""Per-class project status: candidates, annotated, blacklisted, near-duplicates,
sampled and reviewed (``retest status``).

``sampled``/``reviewed`` refer to one revision: the one asked for, else the latest.
``near_duplicates``, ``unreviewed`` and ``eligible`` come from the one eligibility
decision that ``retest sample`` uses
(:func:`retest.project._eligibility.candidate_eligibility`): ``near_duplicates``
counts candidates excluded as a copy of an original or of another candidate,
``reasons`` holds the count per reason. ``blacklisted`` counts candidates on the
current blacklist; ``annotated`` counts candidates with at least one valid (not
rejected) annotation event.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from retest.project import (
    REASONS,
    Project,
    candidate_eligibility,
    class_tallies,
    eligibility_summary,
    heavy_automatic_losses,
    open_project,
    resolve_candidate,
)
from retest.store.base import Store

__all__ = [
    "ClassStatus",
    "ProjectStatus",
    "candidate_status",
    "project_status",
    "status",
]


@dataclass(frozen=True, slots=True)
class ClassStatus:
    """Counts of one class; ``reviewed`` is "yes", "no", "problematic" or "-"."""

    class_id: int
    name: str
    candidates: int
    annotated: int
    blacklisted: int
    near_duplicates: int
    unreviewed: int
    eligible: int
    sampled: int
    reviewed: str
    reasons: dict[str, int]


@dataclass(frozen=True, slots=True)
class ProjectStatus:
    """Status of every class, relative to ``revision`` (None if there is none)."""

    project: str
    revision: str | None
    classes: tuple[ClassStatus, ...]
    eligibility: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for c in self.classes:
            d = asdict(c)
            rows.append({"class": d.pop("name"), **d})
        return {
            "project": self.project,
            "revision": self.revision,
            "eligibility": self.eligibility,
            "classes": rows,
        }


def _per_class(store: Store, items: Iterable[str]) -> Counter[int | None]:
    """Candidates among ``items`` per class (other ids are not counted)."""
    cols = store.candidates.columns(("class_id",), ids=items)
    return Counter(cols["class_id"])


def project_status(
    project: Project | str | os.PathLike[str],
    *,
    revision: str | None = None,
    include_unreviewed: bool = False,
) -> ProjectStatus:
    """Per-class counts of a project, as ``retest status`` shows them.

    Public as ``retest.status``. Reads only the candidates that are annotated,
    blacklisted or excluded; the rest are counted per class in SQL.

    Parameters
    ----------
    project : Project or path-like
        An open project, or a project directory (opened and closed here).
    revision : str, optional
        Revision whose members are counted as ``sampled``; default the latest.
    include_unreviewed : bool
        Count candidates whose only exclusion reason is a pending near-duplicate
        review as eligible (``retest sample --include-unreviewed``).

    Returns
    -------
    ProjectStatus
        ``classes``: one ``ClassStatus`` per class (candidates, annotated,
        blacklisted, near_duplicates, unreviewed, eligible, sampled, reviewed and
        the count per exclusion reason); ``to_dict()`` gives JSON-ready data.

    Raises
    ------
    ConfigError
        ``project`` is a path that is not inside a retest project.
    NotFoundError
        ``revision`` does not exist.

    Examples
    --------
    >>> import tempfile
    >>> from retest import init_project, status
    >>> with tempfile.TemporaryDirectory() as d:
    ...     init_project(d, classes=["cat", "dog"]).close()
    ...     s = status(d)
    >>> [(c.name, c.candidates, c.eligible) for c in s.classes], s.revision
    ([('cat', 0, 0), ('dog', 0, 0)], None)
    """
    if not isinstance(project, Project):
        with open_project(project) as opened:
            return project_status(
                opened, revision=revision, include_unreviewed=include_unreviewed
            )
    store = project.store
    annotated = _per_class(store, store.annotations.item_counts())
    blacklisted = _per_class(store, store.blacklist.current())
    elig = candidate_eligibility(project, include_unreviewed=include_unreviewed)
    tallies = class_tallies(elig)
    sampled: Counter[int] = Counter()
    reviews: dict[int, Any] = {}
    if revision is None:
        revs = store.revisions.list()
        revision = revs[-1].name if revs else None
    if revision is not None:
        sampled = Counter(m.class_id for m in store.revisions.members(revision))
        reviews = store.revisions.reviews(revision)
    rows = []
    for c in store.classes.list():
        state = reviews.get(c.id)
        if revision is None:
            reviewed = "-"
        elif state is None or not (state.reviewed or state.problematic):
            reviewed = "no"
        else:
            reviewed = "problematic" if state.problematic else "yes"
        t = tallies.get(c.id, Counter())
        rows.append(
            ClassStatus(
                c.id,
                c.name,
                t["candidates"],
                annotated[c.id],
                blacklisted[c.id],
                t["copies"],
                t["unreviewed"],
                t["eligible"],
                sampled[c.id],
                reviewed,
                {x: t[x] for x in (*REASONS, "eligible")},
            )
        )
    summary = eligibility_summary(elig)
    names = {c.id: c.name for c in store.classes.list()}
    summary["heavy_automatic_losses"] = {
        names.get(k, str(k)): round(v, 3)
        for k, v in heavy_automatic_losses(elig).items()
    }
    return ProjectStatus(project.config.name, revision, tuple(rows), summary)


#: The public name of :func:`project_status` (``retest.status``).
status = project_status


def candidate_status(project: Project, candidate_id: str) -> dict[str, Any]:
    """One candidate (its id or a unique prefix, :func:`resolve_candidate`): class,
    source, annotations, and its eligibility reasons."""
    store = project.store
    candidate_id = resolve_candidate(project, candidate_id)
    row = store.candidates.get(candidate_id)
    elig = candidate_eligibility(project)
    names = {c.id: c.name for c in store.classes.list()}
    nbrs: dict[str, list[dict[str, Any]]] = {}
    for nl in store.neardup.neighbours(candidate_id):
        nbrs[nl.metric] = [
            {"reference": r, "distance": d}
            for r, d in list(zip(nl.ref_ids, nl.distances, strict=True))[:5]
        ]
    members = [
        r.name
        for r in store.revisions.list()
        if any(m.item_id == candidate_id for m in store.revisions.members(r.name))
    ]
    reasons = list(elig.reasons.get(candidate_id, ("no_class",)))
    return {
        "id": row.id,
        "class": names.get(row.class_id) if row.class_id is not None else None,
        "source": row.source,
        "source_ref": row.source_ref,
        "keyword": row.keyword,
        "eligible": elig.is_eligible(candidate_id),
        "reasons": reasons,
        "kept_from_group": candidate_id in elig.kept,
        "near_original_threshold": elig.near_original_threshold,
        "nearest": nbrs,
        "revisions": members,
    }
