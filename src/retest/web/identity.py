"""Who a request is: the project owner, a person of the campaign, or an
anonymous worker of a public link.

* The owner's (admin) token, given to ``retest serve``: a reviewer writing as
  ``owner``.
* A personal token (``retest people add``): the person it belongs to. A link
  with it opens a session (a random id in an HttpOnly cookie, stored hashed);
  scripts may send the token in a header instead.
* The public token, only when the server was started with public labeling: each
  browser gets an anonymous worker of its own (``anon-…``), which no named
  person's name can be.

Look-ups are kept in memory (one dictionary look-up per request: answers do not
wait for the store). The memory is dropped when this process revokes or signs
out, and whenever another process changed the database (SQLite's
``data_version``, read without waiting while the writer is busy): a
``retest people revoke`` takes effect on the next request.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from retest.labeling.people import (
    LABELER,
    OWNER,
    REVIEWER,
    anonymous_name,
    name_key,
    token_hash,
    worker_id,
)
from retest.store.base import Store
from retest.store.rows import PersonRow, utc_now

__all__ = ["Annotator", "Identities"]


@dataclass(frozen=True)
class Annotator:
    """Who writes: the stored name, the role and the worker id of grid answers."""

    name: str
    role: str
    worker: str = ""
    person_id: int | None = None

    @property
    def anonymous(self) -> bool:
        return self.worker.startswith("local:anon-")


def _annotator(p: PersonRow) -> Annotator:
    return Annotator(p.name, p.role, worker_id(p.name), p.id)


_KEEP = 100_000


class Identities:
    """Tokens and sessions → :class:`Annotator`, cached (see the module doc).

    Parameters
    ----------
    store : Store
        The writer store (sessions are written there).
    reader : callable
        This thread's read-only store (look-ups on a cache miss).
    version : callable
        The database's change counter for other processes' commits.
    owner_token : str
        The admin token.
    public_token : str, optional
        The public link's token; None: no public labeling.
    session_days : float
        How long a sign-in lasts.
    """

    def __init__(
        self,
        store: Store,
        reader: Callable[[], Store],
        version: Callable[[], int],
        owner_token: str,
        public_token: str | None = None,
        session_days: float = 30.0,
    ) -> None:
        self.store, self.reader, self.version = store, reader, version
        self.owner_token, self.public_token = owner_token, public_token
        self.session_days = session_days
        self.owner = Annotator(OWNER, REVIEWER, f"owner:{OWNER}")
        self._tokens: dict[str, Annotator | None] = {}
        self._sessions: dict[str, tuple[Annotator, str] | None] = {}
        self._seen = version()
        self._lock = threading.Lock()

    # -- look-ups
    def _fresh(self) -> None:
        """Forget everything once another process changed the database."""
        v = self.version()
        if v != self._seen:
            self._forget(v)

    def _forget(self, version: int | None = None) -> None:
        with self._lock:
            if version is not None:
                self._seen = version
            self._tokens, self._sessions = {}, {}

    def is_owner(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self.owner_token.encode())

    def is_public(self, token: str) -> bool:
        return self.public_token is not None and hmac.compare_digest(
            token.encode(), self.public_token.encode()
        )

    def by_token(self, token: str) -> Annotator | None:
        """The owner or the person of a personal token (None: not valid)."""
        if self.is_owner(token):
            return self.owner
        key = token_hash(token)
        self._fresh()
        tokens = self._tokens
        if key in tokens:
            return tokens[key]
        p = self.reader().people.by_token(key)
        if len(tokens) >= _KEEP:  # random tokens sent by anyone: bounded memory
            tokens.clear()
        who = tokens[key] = None if p is None else _annotator(p)
        return who

    def by_session(self, sid: str) -> Annotator | None:
        """The person of a session cookie (None: unknown, expired or revoked)."""
        if not sid or len(sid) > 100:
            return None
        key = token_hash(sid)
        self._fresh()
        sessions = self._sessions
        if key in sessions:
            hit = sessions[key]
        else:
            found = self.reader().people.session(key)
            hit = None if found is None else (_annotator(found[0]), found[1])
            if len(sessions) >= _KEEP:
                sessions.clear()
            sessions[key] = hit
        if hit is None:
            return None
        return hit[0] if hit[1] > utc_now() else None

    # -- changes
    def start_session(self, who: Annotator) -> str:
        """A new session for a person; returns its id (the cookie's value)."""
        assert who.person_id is not None
        sid = secrets.token_urlsafe(24)
        expires = datetime.now(UTC) + timedelta(days=self.session_days)
        self.store.people.add_session(
            token_hash(sid), who.person_id, expires.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        )
        return sid

    def new_anonymous(self) -> Annotator:
        """A new anonymous labeler (one per browser that opens the public link)."""
        name = anonymous_name()
        p = self.store.people.add(
            name,
            name_key(name),
            LABELER,
            "anon:" + secrets.token_hex(16),
            anonymous=True,
        )
        return _annotator(p)

    def end_session(self, sid: str) -> None:
        """Sign out: the session stops working at once."""
        self.store.people.end_session(token_hash(sid))
        self._forget()
