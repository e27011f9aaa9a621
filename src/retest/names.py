"""The rules for the names users give things: names of files and folders, and
class names.

Revision names become export folders (``revisions/<revision>/<format>``) and file
prefixes (``<name>_data.npy``); export names become file prefixes; the project
name prefixes revision names. A name containing ``/``, ``..`` or a control
character would let a write escape the folder it is meant for, so every such name
goes through :func:`validate_name`, and nothing else decides what is allowed.

A valid name:

* is 1 to :data:`MAX_NAME_LENGTH` characters long;
* uses only ASCII letters, digits, ``_``, ``.`` and ``-``;
* starts with a letter or a digit (not ``.``: hidden files and ``..``; not ``-``:
  it would read as an option);
* does not contain ``..``.

Examples
--------
>>> validate_name("demo-b-3", "revision")
'demo-b-3'
>>> validate_name("../x", "revision")
Traceback (most recent call last):
...
retest.errors.InputValidationError: revision name '../x' is not allowed: ...
>>> suggest_name("My Data/2024")
'My-Data-2024'

Class names are labels people read, not file names: they appear in pages, CSV
files and manifests, and no exporter makes a path of them (``imagefolder``
folders are class ids, named in ``class_index.json``). So they keep what real
names use (spaces, accents, ``-``, ``'``, ``+``, parentheses, commas and a ``/``
inside a name, as Fashion-MNIST's ``T-shirt/top``), and :func:`validate_class_name`
refuses only what no label needs and what would make a name lie or escape if it
were ever joined to a path: an empty or blank name, spaces around it, ``\\``,
control and bidirectional-override characters, and a ``/`` that does not sit
between two named parts (``/x``, ``x/``, ``a//b``) or parts that are ``.`` or
``..`` (so ``..`` and ``a/../b`` are refused).

>>> validate_class_name("T-shirt/top")
'T-shirt/top'
>>> validate_class_name("../x")
Traceback (most recent call last):
...
retest.errors.InputValidationError: class name '../x' is not allowed: ...

People's names (the reviewer recorded with a verdict or a review) are shown in
tables and pages and stored with every event, so :func:`validate_person_name`
keeps any printable text up to :data:`MAX_NAME_LENGTH` characters and refuses
what would break a line or disguise a name: blank, spaces around it, control and
bidirectional-override characters.

>>> validate_person_name("Zoë O'Neill")
"Zoë O'Neill"
>>> validate_person_name("a\\nb")
Traceback (most recent call last):
...
retest.errors.InputValidationError: reviewer name 'a\\nb' is not allowed: it contains the control character U+000A. ...
"""

from __future__ import annotations

import re
import unicodedata

from retest.errors import InputValidationError

__all__ = [
    "CLASS_NAME_RULE",
    "MAX_NAME_LENGTH",
    "MAX_PERSON_NAME",
    "NAME_RULE",
    "suggest_name",
    "validate_class_name",
    "validate_name",
    "validate_person_name",
]

MAX_NAME_LENGTH = 100
NAME_RULE = (
    f"1-{MAX_NAME_LENGTH} characters from letters, digits, '_', '.' and '-', "
    "starting with a letter or digit, without '..'"
)
_VALID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _why_not(name: str) -> str | None:
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"it is {len(name)} characters long"
    if "/" in name or "\\" in name:
        return "it contains a path separator"
    if ".." in name:
        return "it contains '..'"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "it contains a control character"
    if name[0] in ".-":
        return f"it starts with {name[0]!r}"
    bad = sorted({ch for ch in name if not re.fullmatch(r"[A-Za-z0-9_.-]", ch)})
    if bad:
        return "it contains " + ", ".join(repr(ch) for ch in bad)
    return None


def validate_name(name: str, kind: str) -> str:
    """Return ``name`` unchanged if it is a valid name, else raise.

    Parameters
    ----------
    name : str
        The user's name for a revision, an export or a project.
    kind : str
        What is being named (``"revision"``, ``"export"``, ``"project"``), for the
        message.

    Raises
    ------
    InputValidationError
        Naming the value, what is wrong with it and the rule.
    """
    if not isinstance(name, str):
        raise InputValidationError(
            f"{kind} name must be a string. Got {type(name).__name__} instead."
        )
    why = _why_not(name)
    if why is not None or not _VALID.fullmatch(name):
        raise InputValidationError(
            f"{kind} name {name!r} is not allowed: {why or 'invalid'}. "
            f"Use {NAME_RULE}, e.g. {suggest_name(name)!r}."
        )
    return name


def suggest_name(text: str, default: str = "project") -> str:
    """A valid name made from ``text``: runs of other characters become ``-``,
    leading/trailing ``.``/``-`` are dropped, ``..`` is collapsed, cut to length."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    s = re.sub(r"\.{2,}", ".", s).strip(".-")[:MAX_NAME_LENGTH].rstrip(".-")
    return s if s else default


CLASS_NAME_RULE = (
    "any text without control characters or '\\', not blank, without spaces "
    "around it; a '/' only between two named parts (e.g. 'T-shirt/top'), none of "
    "them '.' or '..'"
)
#: Bidirectional embeddings, overrides and isolates: they reorder how a name is
#: shown, so a page or terminal would show another name than the stored one.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _why_not_text(name: str) -> str | None:
    """Why ``name`` is not one line of printable text with no spaces around it."""
    if not name.strip():
        return "it is empty" if not name else "it is only spaces"
    bad = sorted(
        {
            ch
            for ch in name
            if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")
        }
    )
    if bad:
        return "it contains the control character " + ", ".join(
            f"U+{ord(ch):04X}" for ch in bad
        )
    if name != name.strip():
        return "it has spaces around it"
    return None


def _why_not_class(name: str) -> str | None:
    why = _why_not_text(name)
    if why is not None:
        return why
    if "\\" in name:
        return "it contains '\\'"
    for part in name.split("/"):
        if not part.strip():
            return "its '/' does not sit between two named parts"
        if part.strip() in (".", ".."):
            return f"it is or contains the path part {part.strip()!r}"
    return None


def validate_class_name(name: str) -> str:
    """Return the class name ``name`` unchanged if it is allowed, else raise.

    Raises
    ------
    InputValidationError
        Naming the value, what is wrong with it and the rule.
    """
    if not isinstance(name, str):
        raise InputValidationError(
            f"class name must be a string. Got {type(name).__name__} instead."
        )
    why = _why_not_class(name)
    if why is not None:
        raise InputValidationError(
            f"class name {name!r} is not allowed: {why}. Class names may be "
            f"{CLASS_NAME_RULE}."
        )
    return name


MAX_PERSON_NAME = 80
"""The longest person's name (reviewers, labelers, crowd workers): one rule for all."""
PERSON_NAME_RULE = (
    f"1-{MAX_PERSON_NAME} characters of printable text (no control characters), "
    "without spaces around it"
)


def validate_person_name(name: str, kind: str = "reviewer") -> str:
    """Return a person's name (``kind``: ``"reviewer"``) NFC-normalised if allowed,
    else raise.

    "Ána" typed with a composed á (U+00E1) or as A + combining accent (U+0301)
    is one name: NFC makes them the same string, so they are one reviewer and
    one person. "Ana" stays another name: an accent can tell two people apart,
    and nothing guesses that it does not (people are also matched case-blind,
    :func:`retest.labeling.people.name_key`).

    Raises
    ------
    InputValidationError
        Naming the value, what is wrong with it and the rule.
    """
    if not isinstance(name, str):
        raise InputValidationError(
            f"{kind} name must be a string. Got {type(name).__name__} instead."
        )
    why = _why_not_text(name)
    if why is None and len(name) > MAX_PERSON_NAME:
        why = f"it is {len(name)} characters long"
    if why is not None:
        raise InputValidationError(
            f"{kind} name {name!r} is not allowed: {why}. Use {PERSON_NAME_RULE}."
        )
    return unicodedata.normalize("NFC", name)
