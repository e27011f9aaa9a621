"""The people of a labeling campaign: add, list, revoke, new links (``retest people``).

Each person has a role (labeler or reviewer) and a personal sign-in link
``<base-url>/?token=<token>``; the token is shown once and stored only as its
hash (:func:`retest.labeling.people.token_hash`). A new link revokes the old
one; revoking a person ends their link and every session of theirs at once
(the web app checks the store whenever another process changed it). Every
change is an audited event.
"""

from __future__ import annotations

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
from retest.pipeline.project import Project
from retest.store.rows import PersonEvent, PersonRow

__all__ = ["Invitation", "add_person", "new_link", "revoke_person", "sign_in_link"]


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
