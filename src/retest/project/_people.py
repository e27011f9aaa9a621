"""The people of a labeling campaign: add, list, revoke, new links (``retest people``).

Each person has a role (labeler or reviewer) and a personal sign-in link
``<base-url>/?token=<token>``; the token is shown once and stored only as its
hash (:func:`retest.labeling.people.token_hash`). A new link revokes the old
one; revoking a person ends their link and every session of theirs at once
(the web app checks the store whenever another process changed it). Every
change is an audited event.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

from retest.errors import ConfigError, InputValidationError, NotFoundError
from retest.labeling.people import (
    MAX_NAME,
    ROLES,
    name_key,
    new_token,
    person_name,
    token_hash,
    worker_id,
)
from retest.labeling.tasks import hash_worker_id
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
    "find_person",
    "new_link",
    "resolve_worker",
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


def find_person(project: Project, name: str) -> PersonRow:
    """The person named ``name`` (any case, NFC); NotFoundError naming the value
    (cut to 40 characters) when nobody is, also for a name no person can have."""
    key = name_key(name)
    if not key or len(key) > MAX_NAME or not key.isprintable():
        shown = name[:40] + ("…" if len(name) > 40 else "")
        raise NotFoundError(
            f"no person named {shown!r} in this project (see `retest people list`)."
        )
    return project.store.people.get(key)


def new_link(project: Project, name: str, *, by: str) -> Invitation:
    """A new link for a person: the old one stops working, their sessions end,
    and a revoked person is reinstated."""
    person = find_person(project, name)
    token = new_token()
    project.store.people.set_token(person.id, token_hash(token))
    project.store.people.log([PersonEvent(person.name, "link", by)])
    return Invitation(person, token)


def revoke_person(project: Project, name: str, *, by: str) -> PersonRow:
    """End the person's link and sessions; their answers stay stored and counted."""
    person = find_person(project, name)
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


LOCAL = "local:"
"""The prefix of web workers' ids (:func:`retest.labeling.people.worker_id`)."""
_HEX_PREFIX = re.compile(r"[0-9a-f]{8,64}")
"""A crowd worker's hashed id or its start (`retest crowd workers` prints 8 characters)."""


def resolve_worker(project: Project, raw: str) -> str:
    """The worker id ``raw`` names, as the counts key it; refused in one line
    naming the value and where valid ones are listed when it names nobody.

    A web person (named or a public link's anonymous worker) is named by their
    name, with or without ``local:``, in any case (:func:`name_key`). An imported
    crowd worker is named by their stored hashed id, a start of it of 8 or more
    characters (as ``retest crowd workers`` and ``crowd report`` print it), or
    their raw MTurk WorkerId (hashed with the project's secret). A worker seen
    only in the answers or the exclusion log is named by their exact id.
    """
    text = unicodedata.normalize("NFC", raw).strip()
    if not text:
        raise InputValidationError(
            "no worker given: name a person (`retest people list`) or a crowd "
            "worker (`retest crowd workers`)."
        )
    store = project.store
    local = text[: len(LOCAL)].lower() == LOCAL
    name = text[len(LOCAL) :] if local else text
    try:
        return worker_id(find_person(project, name).name)
    except NotFoundError:
        pass
    known = store.annotations.workers() | excluded_workers(store)
    if text in known:
        return text
    typed = [  # answers from before people had links: a name typed on the page
        w
        for w in known
        if w.startswith(LOCAL) and name_key(w[len(LOCAL) :]) == name_key(name)
    ]
    if len(typed) == 1:
        return typed[0]
    crowd = {w for w in known if not w.startswith(LOCAL)}
    if crowd and text.isprintable():  # else not UTF-8: nobody's id, no hash input
        low = text.lower()
        hits = sorted(w for w in crowd if w.startswith(low))
        if _HEX_PREFIX.fullmatch(low) and len(hits) > 1:
            raise InputValidationError(
                f"{text!r} starts the ids of {len(hits)} crowd workers "
                f"({', '.join(h[:12] + '…' for h in hits[:3])}); give more characters."
            )
        if _HEX_PREFIX.fullmatch(low) and hits:
            return hits[0]
        from retest.project._secret import project_secret

        hashed = hash_worker_id(text, project_secret(project))
        if hashed in crowd:
            return hashed
    shown = text[:40] + ("…" if len(text) > 40 else "")
    raise NotFoundError(
        f"no worker {shown!r} in this project: name a person as `retest people "
        "list` shows them, or a crowd worker by the id `retest crowd workers` (or "
        "the /quality page) prints or their MTurk WorkerId."
    )


def set_exclusion(
    project: Project, worker: str, *, excluded: bool, by: str, reason: str = ""
) -> bool:
    """Exclude a worker's answers from the counts, or include them again (an
    audited event; reversible). ``worker`` is resolved by :func:`resolve_worker`
    (an id naming nobody is refused). Returns whether anything changed."""
    worker = resolve_worker(project, worker)
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
