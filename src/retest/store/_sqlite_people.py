"""SQLite repository of the people of a labeling campaign, their sessions and
the audit log of changes to them."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import Any

from retest.errors import InputValidationError, NotFoundError
from retest.store._sqlite_common import Repo as _Repo
from retest.store.base import PeopleRepo
from retest.store.rows import PersonEvent, PersonRow, utc_now

_COLS = "p.id, p.name, p.role, p.created, p.revoked, p.anonymous"


def _person(r: Sequence[Any]) -> PersonRow:
    return PersonRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]))


class _People(_Repo, PeopleRepo):
    def add(
        self,
        name: str,
        key: str,
        role: str,
        token_hash: str,
        *,
        anonymous: bool = False,
    ) -> PersonRow:
        now = utc_now()
        with self._db.tx() as c:
            if c.execute("SELECT 1 FROM people WHERE name_key = ?", (key,)).fetchone():
                raise InputValidationError(
                    f"a person named {name!r} exists already (names are compared "
                    "ignoring case). `retest people link NAME` gives them a new link."
                )
            cur = c.execute(
                "INSERT INTO people(name, name_key, role, token_hash, anonymous, "
                "created) VALUES (?,?,?,?,?,?)",
                (name, key, role, token_hash, int(anonymous), now),
            )
            pid = int(cur.lastrowid or 0)
        return PersonRow(pid, name, role, now, None, anonymous)

    def get(self, key: str) -> PersonRow:
        r = self._db.one(f"SELECT {_COLS} FROM people p WHERE name_key = ?", (key,))
        if r is None:
            raise NotFoundError(
                f"no person named {key!r} in this project (see `retest people list`)."
            )
        return _person(r)

    def list(self, *, anonymous: bool = False) -> builtins.list[PersonRow]:
        where = "" if anonymous else " WHERE anonymous = 0"
        rows = self._db.rows(f"SELECT {_COLS} FROM people p{where} ORDER BY id")
        return [_person(r) for r in rows]

    def by_token(self, token_hash: str) -> PersonRow | None:
        r = self._db.one(
            f"SELECT {_COLS} FROM people p WHERE token_hash = ? AND revoked IS NULL",
            (token_hash,),
        )
        return None if r is None else _person(r)

    def set_token(self, person_id: int, token_hash: str) -> None:
        with self._db.tx() as c:
            c.execute(
                "UPDATE people SET token_hash = ?, revoked = NULL WHERE id = ?",
                (token_hash, person_id),
            )
            c.execute("DELETE FROM sessions WHERE person_id = ?", (person_id,))

    def revoke(self, person_id: int) -> None:
        with self._db.tx() as c:
            c.execute(
                "UPDATE people SET token_hash = NULL, revoked = ? WHERE id = ?",
                (utc_now(), person_id),
            )
            c.execute("DELETE FROM sessions WHERE person_id = ?", (person_id,))

    def add_session(self, session_hash: str, person_id: int, expires: str) -> None:
        with self._db.tx() as c:
            c.execute(
                "INSERT INTO sessions VALUES (?,?,?,?)",
                (session_hash, person_id, utc_now(), expires),
            )

    def session(self, session_hash: str) -> tuple[PersonRow, str] | None:
        r = self._db.one(
            f"SELECT {_COLS}, s.expires FROM sessions s JOIN people p "
            "ON p.id = s.person_id WHERE s.id = ? AND p.revoked IS NULL",
            (session_hash,),
        )
        return None if r is None else (_person(r), str(r[6]))

    def end_session(self, session_hash: str) -> None:
        with self._db.tx() as c:
            c.execute("DELETE FROM sessions WHERE id = ?", (session_hash,))

    def log(self, events: Iterable[PersonEvent]) -> builtins.list[int]:
        now = utc_now()
        rows = (
            (None, e.subject, e.action, e.who, e.detail, e.when or now) for e in events
        )
        return self._db.append(
            "people_events", "INSERT INTO people_events VALUES (?,?,?,?,?,?)", rows
        )

    def events(self) -> builtins.list[PersonEvent]:
        rows = self._db.rows("SELECT * FROM people_events ORDER BY id")
        return [PersonEvent(r[1], r[2], r[3], r[4], r[5], r[0]) for r in rows]
