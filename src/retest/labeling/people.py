"""The rules for the people of a labeling campaign: names, roles, tokens.

A person is added by whoever runs the project (``retest people add``) and gets a
personal sign-in link; every answer they give is stored under their name, never
under a name typed into a page. The rules here decide what a name may be, when
two names are the same person, and how a token is kept (only its hash is
stored).

Examples
--------
>>> person_name("  Ana\\u0301 ")  # NFC: 'A', 'n', 'á'
'Aná'
>>> name_key("ANA") == name_key("ana")
True
>>> person_name("x" * 81)
Traceback (most recent call last):
...
retest.errors.InputValidationError: a person's name is 1 to 80 printable characters; got 81 characters ('xxxxxxxxxxxxxxxxxxxx…'). Choose a shorter name.
>>> len(token_hash("abc"))
64
"""

from __future__ import annotations

import hashlib
import secrets
import unicodedata

from retest.errors import InputValidationError
from retest.names import MAX_PERSON_NAME, validate_person_name

__all__ = [
    "ANONYMOUS_PREFIX",
    "LABELER",
    "MAX_NAME",
    "OWNER",
    "REVIEWER",
    "ROLES",
    "anonymous_name",
    "name_key",
    "new_token",
    "person_name",
    "token_hash",
    "worker_id",
]

LABELER, REVIEWER = "labeler", "reviewer"
ROLES = (LABELER, REVIEWER)
"""Labelers label and answer grid tasks; reviewers also see results, controls,
statistics and the review pages."""
MAX_NAME = MAX_PERSON_NAME
OWNER = "owner"
"""The name the project owner's (admin) token writes under; no person may take it."""
ANONYMOUS_PREFIX = "anon-"
"""Names of the anonymous workers of a public link start with it; no named person's does."""


def person_name(raw: str, *, anonymous: bool = False) -> str:
    """A name as stored: NFC-normalised and trimmed, 1 to :data:`MAX_NAME`
    printable characters; refused (one line saying why) rather than cut."""
    name = unicodedata.normalize("NFC", raw).strip()
    if not name or len(name) > MAX_NAME:
        shown = name[:20] + ("…" if len(name) > 20 else "")
        raise InputValidationError(
            f"a person's name is 1 to {MAX_NAME} printable characters; got "
            f"{len(name)} characters ({shown!r}). Choose a "
            f"{'shorter' if name else 'non-empty'} name."
        )
    validate_person_name(name, "person")  # the one character rule for names
    key = name_key(name)
    if key == OWNER:
        raise InputValidationError(
            f"{name!r} is the project owner's name (the admin token); choose another."
        )
    if key.startswith(ANONYMOUS_PREFIX) != anonymous:
        raise InputValidationError(
            f"names starting with {ANONYMOUS_PREFIX!r} belong to the anonymous "
            f"workers of a public link; choose another than {name[:40]!r}."
        )
    return name


def name_key(name: str) -> str:
    """What two names must share to be one person: NFC, case-folded (``Ana`` = ``ana``)."""
    return unicodedata.normalize("NFC", name.strip()).casefold()


def new_token() -> str:
    """A fresh random token (144 bits; URL-safe)."""
    return secrets.token_urlsafe(18)


def token_hash(token: str) -> str:
    """How a token or session id is stored: its SHA-256 (hex). Tokens are random
    and long, so a plain hash cannot be reversed by guessing."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def anonymous_name() -> str:
    """A fresh anonymous worker's name (a public link gives one to each browser)."""
    return ANONYMOUS_PREFIX + secrets.token_hex(6)


def worker_id(name: str) -> str:
    """The worker id of a person's grid answers (one vote per worker and task)."""
    return f"local:{name}"
