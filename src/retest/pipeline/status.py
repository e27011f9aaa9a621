"""Per-class project status: candidates, annotated, blacklisted, near-duplicates,
sampled and reviewed (``retest status``).

``sampled``/``reviewed`` refer to one revision: the one asked for, else the latest.
``near_duplicates`` counts candidates with a current "duplicate" verdict (the
reviewed decision, not the raw neighbour lists); ``blacklisted`` counts candidates on
the current blacklist; ``annotated`` counts candidates with at least one valid
(not rejected) annotation event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from retest.pipeline.project import Project

__all__ = ["ClassStatus", "ProjectStatus", "project_status"]


@dataclass(frozen=True, slots=True)
class ClassStatus:
    """Counts of one class; ``reviewed`` is "yes", "no", "problematic" or "-"."""

    class_id: int
    name: str
    candidates: int
    annotated: int
    blacklisted: int
    near_duplicates: int
    sampled: int
    reviewed: str


@dataclass(frozen=True, slots=True)
class ProjectStatus:
    """Status of every class, relative to ``revision`` (None if there is none)."""

    project: str
    revision: str | None
    classes: tuple[ClassStatus, ...]

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for c in self.classes:
            d = asdict(c)
            rows.append({"class": d.pop("name"), **d})
        return {"project": self.project, "revision": self.revision, "classes": rows}


def _per_class(
    items: Iterable[str], class_of: dict[str, int | None]
) -> Counter[int | None]:
    return Counter(class_of[i] for i in items if i in class_of)


def project_status(project: Project, *, revision: str | None = None) -> ProjectStatus:
    """Count, per class, what the project holds (see the module docstring)."""
    store = project.store
    class_of = store.candidates.class_map()
    n_cand = store.candidates.count_by_class()
    annotated = _per_class(store.annotations.item_counts(), class_of)
    blacklisted = _per_class(store.blacklist.current(), class_of)
    dups = _per_class({c for c, _ in store.neardup.duplicate_pairs()}, class_of)
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
        rows.append(
            ClassStatus(
                c.id,
                c.name,
                n_cand.get(c.id, 0),
                annotated[c.id],
                blacklisted[c.id],
                dups[c.id],
                sampled[c.id],
                reviewed,
            )
        )
    return ProjectStatus(project.config.name, revision, tuple(rows))
