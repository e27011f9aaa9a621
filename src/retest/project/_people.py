"""The people of a labeling campaign: add, list, revoke, new links (``retest people``).

Each person has a role (labeler or reviewer) and a personal sign-in link
``<base-url>/?token=<token>``; the token is shown once and stored only as its
hash (:func:`retest.labeling.people.token_hash`). A new link revokes the old
one; revoking a person ends their link and every session of theirs at once
(the web app checks the store whenever another process changed it). Every
change is an audited event.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

from retest.errors import ConfigError
from retest.labeling.people import (
    ROLES,
    name_key,
    new_token,
    person_name,
    token_hash,
)
from retest.project._project import Project
from retest.sampling.selection_frequency import latest_assignments
from retest.store.base import Store
from retest.store.rows import AnnotationEvent, PersonEvent, PersonRow, TaskRow

__all__ = [
    "ControlScore",
    "Invitation",
    "add_person",
    "control_scores",
    "excluded_workers",
    "new_link",
    "revoke_person",
    "set_exclusion",
    "sign_in_link",
]


@dataclass(frozen=True)
class Invitation:
    """A person and their new token (shown once: only its hash is stored)."""

    person: PersonRow
    token: str

    def link(self, base_url: str) -> str:
        return sign_in_link(base_url, self.token)


def sign_in_link(base_url: str, token: str) -> str:
    """The sign-in link for ``token`` at ``base_url`` (``http://host:port``)."""
    return f"{base_url.rstrip('/')}/?token={quote(token, safe='')}"


def add_person(project: Project, name: str, role: str, *, by: str) -> Invitation:
    """Add a person with a personal link; refuses an existing name (any case)."""
    if role not in ROLES:
        raise ConfigError(f"--role must be one of {', '.join(ROLES)}; got {role!r}.")
    clean = person_name(name)
    token = new_token()
    person = project.store.people.add(clean, name_key(clean), role, token_hash(token))
    project.store.people.log([PersonEvent(clean, "add", by, role)])
    return Invitation(person, token)


def new_link(project: Project, name: str, *, by: str) -> Invitation:
    """A new link for a person: the old one stops working, their sessions end,
    and a revoked person is reinstated."""
    person = project.store.people.get(name_key(name))
    token = new_token()
    project.store.people.set_token(person.id, token_hash(token))
    project.store.people.log([PersonEvent(person.name, "link", by)])
    return Invitation(person, token)


def revoke_person(project: Project, name: str, *, by: str) -> PersonRow:
    """End the person's link and sessions; their answers stay stored and counted."""
    person = project.store.people.get(name_key(name))
    project.store.people.revoke(person.id)
    project.store.people.log([PersonEvent(person.name, "revoke", by)])
    return person


# -- quality on the controls ---------------------------------------------------
EXCLUDE, INCLUDE = "exclude", "include"


def excluded_workers(store: Store) -> frozenset[str]:
    """Workers whose answers the counts leave out: the latest ``exclude`` /
    ``include`` event of each (web labelers' ``local:<name>`` and imported crowd
    workers' ids alike)."""
    state: dict[str, bool] = {}
    for e in store.people.events():
        if e.action in (EXCLUDE, INCLUDE):
            state[e.subject] = e.action == EXCLUDE
    return frozenset(w for w, out in state.items() if out)


def set_exclusion(
    project: Project, worker: str, *, excluded: bool, by: str, reason: str = ""
) -> bool:
    """Exclude a worker's answers from the counts, or include them again (an
    audited event; reversible). Returns whether anything changed."""
    if (worker in excluded_workers(project.store)) == excluded:
        return False
    action = EXCLUDE if excluded else INCLUDE
    project.store.people.log([PersonEvent(worker, action, by, reason[:500])])
    return True


@dataclass(frozen=True)
class ControlScore:
    """A worker's answers to the controls of grid tasks (counted answers only):
    positive controls (originals of the class) should be checked, negative ones
    (originals of another class) not."""

    worker: str
    pos_right: int = 0
    pos_n: int = 0
    neg_right: int = 0
    neg_n: int = 0

    @property
    def n(self) -> int:
        return self.pos_n + self.neg_n

    @property
    def accuracy(self) -> float | None:
        return (self.pos_right + self.neg_right) / self.n if self.n else None

    def below(self, threshold: float | None, min_controls: int) -> bool:
        """Whether the project's quality bar flags this worker."""
        acc = self.accuracy
        return (
            threshold is not None
            and acc is not None
            and self.n >= min_controls
            and acc < threshold
        )


def control_scores(
    events: Iterable[AnnotationEvent], tasks: Iterable[TaskRow]
) -> dict[str, ControlScore]:
    """Per worker: right answers on the controls of the tasks they answered,
    over their counted answers (the latest valid one per task: the one vote
    rule of :func:`retest.sampling.selection_frequency.latest_assignments`;
    exclusions are ignored here, so an excluded worker's score stays visible)."""
    evs = [e for e in events if e.kind == "task"]
    counted = latest_assignments(evs)
    roles = {t.id: {i: r for r, ids in t.controls.items() for i in ids} for t in tasks}
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for e in evs:
        if (e.task_id, e.assignment_id) not in counted or e.worker is None:
            continue
        role = roles.get(e.task_id or "", {}).get(e.item_id)
        if role == "pos":
            t = tally[e.worker]
            t[0] += int(e.value > 0)
            t[1] += 1
        elif role == "neg":
            t = tally[e.worker]
            t[2] += int(e.value <= 0)
            t[3] += 1
    return {w: ControlScore(w, *v) for w, v in sorted(tally.items())}
