"""The near-duplicate review queue as a CSV file, and verdicts read back from it.

``retest dedup-queue --csv FILE`` writes one row per pending pair::

    candidate,class,metric,reference,distance,duplicate

with ``duplicate`` empty. A reviewer fills it with ``yes`` or ``no`` (also
``y``/``n``, ``1``/``0``, ``true``/``false``, ``x`` = yes) and
``retest dedup-verdict --from FILE`` records one review per (candidate, metric):
the group's references as shown, the ``yes`` rows as duplicates (the same events
as ``dedup-verdict CANDIDATE METRIC --shown …`` and the web page). A pair the
same reviewer already decided the same way is not recorded again, so a file
imported twice records its verdicts once.

A group with an empty ``duplicate`` cell is not recorded (it was not decided),
unless the reviewer confirms that the rest is not duplicate: ``rest_not_duplicate``
turns the empty cells into ``no``, for every row or only those of one class
and/or up to a distance.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from retest._atomic import atomic_write_bytes
from retest._output import RULES, check_output
from retest._validation import decode_utf8
from retest.errors import InputValidationError
from retest.names import validate_person_name
from retest.project import Project, record_review, resolve_candidate, resolve_item

__all__ = [
    "QUEUE_COLUMNS",
    "RecordedReviews",
    "ReviewFileResult",
    "check_review_out",
    "read_review_file",
    "record_review_file",
    "write_review_file",
]

QUEUE_COLUMNS = ("candidate", "class", "metric", "reference", "distance", "duplicate")
_YES = {"yes", "y", "1", "true", "x"}
_NO = {"no", "n", "0", "false"}


def _review_file(path: Path) -> str | None:
    """None when ``path`` is a review CSV this command wrote, else why not."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return "it is not a readable CSV file"
    if header is None or tuple(header) != QUEUE_COLUMNS:
        return "it is not a review CSV of `retest dedup-queue --csv`"
    return None


def check_review_out(path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """The ``--csv`` file may be written (the shared output rule): an existing
    file only with ``overwrite`` and only when it is a review CSV (a filled-in one
    holds a person's verdicts, so it is never replaced silently)."""
    return check_output(
        path,
        RULES["dedup-queue"],
        option="--csv",
        overwrite=overwrite,
        owned=_review_file,
    )


def write_review_file(
    path: str | os.PathLike[str],
    items: Sequence[Any],
    class_of: dict[str, str],
    *,
    overwrite: bool = False,
) -> int:
    """Write the queue ``items`` (:class:`ReviewItem`) as CSV, atomically, after
    :func:`check_review_out`; returns the rows."""
    check_review_out(path, overwrite=overwrite)
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(QUEUE_COLUMNS)
    n = 0
    for it in items:
        for ref, d in zip(it.references, it.distances, strict=True):
            cls = class_of.get(it.candidate_id, "")
            w.writerow([it.candidate_id, cls, it.metric, ref, f"{d:.6g}", ""])
            n += 1
    atomic_write_bytes(Path(path), buf.getvalue().encode("utf-8"))
    return n


@dataclass(frozen=True, slots=True)
class ReviewFileResult:
    """What a review file held: the decided groups and what was left open."""

    #: (candidate, metric, shown references, duplicates) per decided group
    reviews: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]
    #: (candidate, metric) of groups with an undecided row
    undecided: tuple[tuple[str, str], ...]

    @property
    def pairs(self) -> int:
        return sum(len(r[2]) for r in self.reviews)

    @property
    def duplicates(self) -> int:
        return sum(len(r[3]) for r in self.reviews)


def read_review_file(
    path: str | os.PathLike[str],
    *,
    rest_not_duplicate: bool = False,
    only_class: str | None = None,
    max_distance: float | None = None,
) -> ReviewFileResult:
    """The reviews a filled-in queue file records (see the module docstring).

    Raises
    ------
    InputValidationError
        Not the queue's format, or a ``duplicate`` cell that is neither yes nor
        no; the message names the file and line.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise InputValidationError(
            f"cannot read review file {p} ({err}); expected the CSV `retest "
            "dedup-queue --csv` writes."
        ) from None
    text = decode_utf8(
        raw,
        f"review file {p}",
        "save it as UTF-8 (spreadsheets: CSV UTF-8) and run again.",
    )
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or [h.strip() for h in rows[0]] != list(QUEUE_COLUMNS):
        got = ",".join(rows[0]) if rows else "an empty file"
        raise InputValidationError(
            f"{p}: expected the header {','.join(QUEUE_COLUMNS)} (the file `retest "
            f"dedup-queue --csv` writes); got {got[:80]}."
        )
    groups: dict[tuple[str, str], list[tuple[str, bool | None]]] = {}
    for line, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(QUEUE_COLUMNS):
            raise InputValidationError(
                f"{p} line {line}: {len(row)} fields, expected {len(QUEUE_COLUMNS)} "
                f"({','.join(QUEUE_COLUMNS)})."
            )
        cand, cls, metric, ref, dist, dup = (c.strip() for c in row)
        verdict: bool | None
        if dup.lower() in _YES:
            verdict = True
        elif dup.lower() in _NO:
            verdict = False
        elif dup:
            raise InputValidationError(
                f"{p} line {line}: duplicate {dup!r} is neither yes nor no; write "
                "yes, no, or leave it empty (undecided)."
            )
        else:
            verdict = None
            if rest_not_duplicate and _in_scope(cls, dist, only_class, max_distance):
                verdict = False
        groups.setdefault((cand, metric), []).append((ref, verdict))
    reviews, undecided = [], []
    for (cand, metric), pairs in groups.items():
        if any(v is None for _, v in pairs):
            undecided.append((cand, metric))
            continue
        shown = tuple(r for r, _ in pairs)
        dups = tuple(r for r, v in pairs if v)
        reviews.append((cand, metric, shown, dups))
    return ReviewFileResult(tuple(reviews), tuple(undecided))


def _in_scope(
    cls: str, dist: str, only_class: str | None, max_distance: float | None
) -> bool:
    if only_class is not None and cls != only_class:
        return False
    if max_distance is not None:
        try:
            return float(dist) <= max_distance
        except ValueError:
            return False
    return True


class RecordedReviews(NamedTuple):
    """What :func:`record_review_file` wrote."""

    #: reviews (candidate, metric) recorded with at least one pair
    reviews: int
    #: pairs left out: the reviewer's latest verdict on them already said the same
    already_recorded: int


def record_review_file(
    project: Project, result: ReviewFileResult, *, reviewer: str
) -> RecordedReviews:
    """Record every decided group of ``result`` as ``reviewer``'s reviews.

    Idempotent: a pair (candidate, reference, metric) whose latest verdict by
    this reviewer already says the same is not recorded again, so importing a
    file twice records nothing the second time (and an old file imported again
    does not override a later verdict of someone else). A changed verdict is
    recorded: the latest one counts.
    """
    who = validate_person_name(reviewer)
    recorded = already = 0
    for cand, metric, shown, dups in result.reviews:
        cid = resolve_candidate(project, cand)
        said = {
            v.ref_id: v.is_duplicate
            for v in project.store.neardup.verdicts(candidate_id=cid)
            if v.who == who and v.metric == metric
        }
        dup = {resolve_item(project, r) for r in dups}
        refs = [resolve_item(project, r) for r in shown]
        fresh = [r for r in refs if said.get(r) != (r in dup)]
        already += len(refs) - len(fresh)
        if fresh:
            record_review(
                project,
                cid,
                metric,
                reviewer=who,
                shown=fresh,
                duplicates=[r for r in fresh if r in dup],
            )
            recorded += 1
    return RecordedReviews(recorded, already)
