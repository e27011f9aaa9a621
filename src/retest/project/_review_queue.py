"""The "possible label error" review queue of the web app (issue 7).

See docs/algorithms.md#suspect-review.

Store encoding (append-only annotation events, no new tables)
-------------------------------------------------------------
* A **queued suspect** is an :class:`~retest.store.base.AnnotationEvent` of kind
  :data:`SUSPECT_KIND` (``"label-error-suspect"``): ``item_id`` the image,
  ``class_id`` the *given* label, ``value`` the *suggested* class, ``who`` the
  queuing tool, and ``extra`` = ``{"rank", "score", "method", "source"}``.
  Queuing is idempotent: an item already queued is skipped.
* A reviewer's **verdict** is an event of kind :data:`VERDICT_KIND`
  (``"label-error-verdict"``) with ``class_id`` = the given label and ``value`` =
  the class the reviewer says is right (the given class for "label is correct",
  another class for "label is wrong (→ class)") or :data:`UNCLEAR` (-1);
  ``extra["verdict"]`` is ``"correct"``, ``"wrong"`` or ``"unclear"``. The latest
  verdict per item wins; an item is *pending* until it has one.

Rows of ``retest label-errors`` output (``label_errors.json`` or ``.csv``) carry
an ``index`` into the audited array; :func:`load_suspects` maps it to the
project's item id ``"<split>:<index>"`` (an original image) unless the row names
an ``item_id`` itself.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retest.errors import DataIntegrityError, InputValidationError, NotFoundError
from retest.project._project import Project
from retest.store.base import Store
from retest.store.rows import AnnotationEvent, reference_id, split_reference_id

__all__ = [
    "SUSPECT_KIND",
    "UNCLEAR",
    "VERDICTS",
    "VERDICT_KIND",
    "LabelErrorItem",
    "Suspect",
    "label_error_items",
    "label_error_queue",
    "load_suspects",
    "queue_label_errors",
    "record_label_verdict",
]

SUSPECT_KIND = "label-error-suspect"
VERDICT_KIND = "label-error-verdict"
UNCLEAR = -1
VERDICTS = ("correct", "wrong", "unclear")


@dataclass(frozen=True, slots=True)
class Suspect:
    """One ranked suspect to queue: item, given and suggested class, rank, score."""

    item_id: str
    given: int
    suggested: int
    rank: int = 0
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class LabelErrorItem:
    """A queued suspect with its latest verdict (None while pending)."""

    item_id: str
    given: int
    suggested: int
    rank: int
    score: float
    method: str
    verdict: str | None = None
    verdict_class: int | None = None
    who: str | None = None

    @property
    def pending(self) -> bool:
        return self.verdict is None


def _rows(path: Path) -> tuple[list[dict[str, Any]], str]:
    if not path.is_file():
        raise DataIntegrityError(f"{path}: label-error list not found. Check the path.")
    from retest._validation import decode_utf8

    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataIntegrityError(
            f"{path}: cannot read the label-error list ({err}); expected the "
            "label_errors.json or .csv that `retest label-errors` writes."
        ) from None
    text = decode_utf8(raw, f"label-error list {path}", "save it as UTF-8.")
    try:
        if path.suffix.lower() == ".csv":
            return list(csv.DictReader(io.StringIO(text, newline=""))), ""
        data = json.loads(text)
    except (csv.Error, ValueError) as err:
        raise DataIntegrityError(
            f"{path}: cannot read the label-error list ({err}); expected the "
            "label_errors.json or .csv that `retest label-errors` writes."
        ) from None
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        return list(data["errors"]), str(data.get("method", ""))
    if isinstance(data, list):
        return data, ""
    raise DataIntegrityError(
        f"{path}: expected a JSON object with an 'errors' list or a list of rows. "
        f"Got {type(data).__name__}."
    )


def load_suspects(
    path: str | os.PathLike[str],
    *,
    split: str = "test",
    top: int | None = None,
    ids: Sequence[str] | None = None,
) -> tuple[list[Suspect], str]:
    """Read ``retest label-errors`` output; returns (suspects by rank, method).

    A row's ``item_id`` names its image; otherwise ``index`` becomes
    ``ids[index]`` (a revision's members, in its order) or, without ``ids``,
    ``"<split>:<index>"``.
    """
    p = Path(path)
    rows, method = _rows(p)
    out = []
    for n, row in enumerate(rows, start=1):
        try:
            item = str(row.get("item_id") or _item(split, int(row["index"]), ids))
            s = Suspect(
                item,
                int(row["given"]),
                int(row["suggested"]),
                int(row.get("rank") or n),
                float(row.get("score") or 0.0),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise InputValidationError(
                f"{p}: row {n} needs index (or item_id), given and suggested as "
                f"integers; found {dict(row)!r} ({err})."
            ) from None
        out.append(s)
    out.sort(key=lambda s: (s.rank, s.item_id))
    return (out[:top] if top is not None else out), method


def _item(split: str, index: int, ids: Sequence[str] | None) -> str:
    if ids is None:
        return reference_id(split, index)
    if not 0 <= index < len(ids):
        raise ValueError(f"index {index} is not in 0..{len(ids) - 1}")
    return ids[index]


def _check_items(store: Store, suspects: Sequence[Suspect]) -> None:
    n_classes = len(store.classes.list())
    for s in suspects:
        for c in (s.given, s.suggested):
            if not 0 <= c < n_classes:
                raise InputValidationError(
                    f"{s.item_id}: class {c} is not a project class (0..{n_classes - 1})."
                )
        row_class: int | None
        try:
            if split_reference_id(s.item_id) is not None:
                row_class = store.references.get(s.item_id).class_id
            else:
                row_class = store.candidates.get(s.item_id).class_id
        except LookupError:
            raise NotFoundError(
                f"{s.item_id} is not an image of the project; was the label-error "
                "list computed on this project's images (see --split, --revision)?"
            ) from None
        if row_class is not None and row_class != s.given:
            raise InputValidationError(
                f"{s.item_id}: the list says given class {s.given} but the project "
                f"labels it {row_class}; wrong list or wrong --split/--revision?"
            )


def queue_label_errors(
    project: Project,
    suspects: Iterable[Suspect],
    *,
    method: str = "",
    source: str = "",
    who: str = "retest label-errors",
) -> int:
    """Queue suspects as "possible label error" items; returns how many were new.

    Validates every item first (exists, given class matches the project), so a bad
    list writes nothing; items already queued are skipped (idempotent).

    Parameters
    ----------
    project : Project
    suspects : iterable of Suspect
        From :func:`load_suspects`.
    method, source : str
        Kept with each item (the finder and the list's file).
    who : str

    Returns
    -------
    int
        Items queued now.

    Raises
    ------
    InputValidationError, NotFoundError
        An item is not an image of the project, or its class differs.
    """
    store = project.store
    items = list(suspects)
    _check_items(store, items)
    queued = {e.item_id for e in store.annotations.list(kind=SUSPECT_KIND)}
    new = [s for s in items if s.item_id not in queued]
    new = list({s.item_id: s for s in reversed(new)}.values())[::-1]  # first wins
    store.annotations.add(
        AnnotationEvent(
            who=who,
            kind=SUSPECT_KIND,
            class_id=s.given,
            item_id=s.item_id,
            value=s.suggested,
            extra={
                "rank": s.rank,
                "score": s.score,
                "method": method,
                "source": source,
            },
        )
        for s in new
    )
    return len(new)


def label_error_queue(
    project: Project, *, pending_only: bool = False
) -> list[LabelErrorItem]:
    """Queued suspects by rank, each with its latest verdict.

    Parameters
    ----------
    project : Project
    pending_only : bool
        Leave out items with a verdict other than "unclear".

    Returns
    -------
    list of LabelErrorItem
    """
    events = project.store.annotations
    return label_error_items(
        events.list(kind=SUSPECT_KIND),
        events.list(kind=VERDICT_KIND),
        pending_only=pending_only,
    )


def label_error_items(
    suspects: Iterable[AnnotationEvent],
    verdicts: Iterable[AnnotationEvent],
    *,
    pending_only: bool = False,
) -> list[LabelErrorItem]:
    """:func:`label_error_queue` from the queue's events, for a caller that keeps
    them (the web app's incremental aggregates).

    Parameters
    ----------
    suspects, verdicts : iterable of AnnotationEvent
        The ``SUSPECT_KIND`` and ``VERDICT_KIND`` events, in event order.
    pending_only : bool

    Returns
    -------
    list of LabelErrorItem
        By rank.
    """
    latest: dict[str, AnnotationEvent] = {}
    for e in verdicts:
        latest[e.item_id] = e
    out = []
    for e in suspects:
        v = latest.get(e.item_id)
        item = LabelErrorItem(
            e.item_id,
            e.class_id,
            e.value,
            int(e.extra.get("rank", 0)),
            float(e.extra.get("score", 0.0)),
            str(e.extra.get("method", "")),
            None if v is None else str(v.extra.get("verdict")),
            None if v is None or v.value == UNCLEAR else v.value,
            None if v is None else v.who,
        )
        if not (pending_only and not item.pending):
            out.append(item)
    out.sort(key=lambda i: (i.rank, i.item_id))
    return out


def record_label_verdict(
    project: Project,
    item_id: str,
    verdict: str,
    *,
    who: str,
    new_class: int | None = None,
    ui_version: str = "",
) -> int:
    """Append a reviewer's verdict on a queued item; returns the event id.

    Parameters
    ----------
    project : Project
    item_id : str
        A queued item.
    verdict : {"correct", "wrong", "unclear"}
    who : str
    new_class : int, optional
        The right class; required by (and only for) ``"wrong"``, different from
        the given class.
    ui_version : str

    Returns
    -------
    int

    Raises
    ------
    NotFoundError
        ``item_id`` is not queued.
    InputValidationError
        A bad verdict or class.
    """
    store = project.store
    queued = store.annotations.list(kind=SUSPECT_KIND, item_id=item_id)
    if not queued:
        raise NotFoundError(f"{item_id} is not in the label-error queue.")
    given = queued[0].class_id
    if verdict not in VERDICTS:
        raise InputValidationError(
            f"verdict must be one of {', '.join(VERDICTS)}. Got {verdict!r}."
        )
    n_classes = len(store.classes.list())
    if verdict == "wrong" and (
        new_class is None or new_class == given or not 0 <= new_class < n_classes
    ):
        raise InputValidationError(
            f"'label is wrong' needs the right class: a class id in 0..{n_classes - 1} "
            f"other than the given {given}. Got {new_class!r}."
        )
    value = {"correct": given, "unclear": UNCLEAR}.get(verdict, new_class)
    assert value is not None
    ids = store.annotations.add(
        [
            AnnotationEvent(
                who=who,
                kind=VERDICT_KIND,
                class_id=given,
                item_id=item_id,
                value=int(value),
                ui_version=ui_version,
                extra={"verdict": verdict},
            )
        ]
    )
    return ids[0]
