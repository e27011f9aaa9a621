"""MTurk's batch files, read and written without a project.

The requester UI takes a question template (HTML with ``${column}`` placeholders)
and a batch input CSV (one task per row), and gives back a batch results CSV (one
assignment per row). This module knows those formats and nothing else: no store,
no project, no tokens' meaning. The format retest reads is documented in
``docs/mturk.md``.

One checkbox per image, all named ``selected`` with the image token as value;
MTurk joins the checked values of a same-named field with ``|`` in the
``Answer.selected`` column (ImageNetV2 read its answers the same way).

Examples
--------
>>> parse_time("Wed Mar 04 10:12:31 PST 2026")
'2026-03-04T18:12:31.000000Z'
>>> parse_time("Sun Jul 05 10:12:31 PDT 2026")
'2026-07-05T17:12:31.000000Z'
>>> parse_time("Wed Mar 04 10:12:31 XST 2026")
Traceback (most recent call last):
...
retest.errors.InputValidationError: SubmitTime 'Wed Mar 04 10:12:31 XST 2026': unknown time zone 'XST' (known: UTC, GMT, HST, AKST, AKDT, PST, PDT, MST, MDT, CST, CDT, EST, EDT, or a numeric offset such as -0800)
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from retest._validation import decode_utf8
from retest.errors import DataIntegrityError, InputValidationError

__all__ = [
    "ASSIGNMENT_STATUSES",
    "DOWNLOAD_HINT",
    "REQUIRED_RESULT_COLUMNS",
    "TIME_ZONES",
    "BatchRow",
    "answer_tokens",
    "batch_input_csv",
    "parse_time",
    "question_html",
    "read_results",
    "row_status",
]

ASSIGNMENT_STATUSES = ("Submitted", "Approved", "Rejected")
"""The ``AssignmentStatus`` values of a results file (the store keeps the same)."""

REQUIRED_RESULT_COLUMNS = (
    "AssignmentId",
    "WorkerId",
    "AssignmentStatus",
    "Input.task_id",
    "Answer.selected",
)
"""Columns a results file must have; ``SubmitTime``, ``AcceptTime``, ``Approve``,
``Reject`` and ``Input.class_name`` are read when present, others are ignored."""

DOWNLOAD_HINT = "Download it from the requester UI (Manage → Results → Download CSV)."

TIME_ZONES: Mapping[str, str] = {
    "UTC": "UTC",
    "GMT": "UTC",
    "HST": "Pacific/Honolulu",
    "AKST": "America/Anchorage",
    "AKDT": "America/Anchorage",
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
    "MST": "America/Denver",
    "MDT": "America/Denver",
    "CST": "America/Chicago",
    "CDT": "America/Chicago",
    "EST": "America/New_York",
    "EDT": "America/New_York",
}
"""Zone abbreviations MTurk's times may carry → the zoneinfo zone they are read in.

MTurk writes times as Java's ``Date.toString`` does, ``Wed Mar 04 10:12:31 PST
2026``, in the requester's time zone (Pacific for most). An abbreviation names a
zone *and* whether daylight time was in effect, so it is read in its zone with
the matching fold (which also settles the repeated hour when clocks go back) and
must be the abbreviation that zone used at that time; anything else is an error
naming the row, never a silently missing time."""

_NUMERIC_OFFSET = re.compile(r"[+-]\d{4}")


def _bad_time(text: str, why: str) -> InputValidationError:
    return InputValidationError(f"SubmitTime {text!r}: {why}")


def parse_time(text: str) -> str | None:
    """An MTurk time as the store's sortable UTC form; None when empty.

    Accepted: ``Wed Mar 04 10:12:31 PST 2026`` with a zone of :data:`TIME_ZONES`
    or a numeric offset (``-0800``) in place of the zone, or ISO 8601 with an
    offset (``2026-03-04T10:12:31-08:00``, as MTurk's API gives).

    Raises
    ------
    InputValidationError
        Another format, an unknown zone, or an abbreviation its zone did not use
        on that date.
    """
    text = text.strip()
    if not text:
        return None
    parts = text.split()
    if len(parts) == 1:
        try:
            when = datetime.fromisoformat(parts[0])
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise _bad_time(text, _FORMAT_HINT)
        return _utc(when)
    if len(parts) != 6:
        raise _bad_time(text, _FORMAT_HINT)
    try:
        local = datetime.strptime(" ".join(parts[1:4] + parts[5:]), "%b %d %H:%M:%S %Y")
    except ValueError:
        raise _bad_time(text, _FORMAT_HINT) from None
    zone = parts[4]
    if _NUMERIC_OFFSET.fullmatch(zone):
        return _utc(
            datetime.strptime(f"{local.isoformat()}{zone}", "%Y-%m-%dT%H:%M:%S%z")
        )
    if zone not in TIME_ZONES:
        raise _bad_time(
            text,
            f"unknown time zone {zone!r} (known: {', '.join(TIME_ZONES)}, or a "
            "numeric offset such as -0800)",
        )
    try:
        tz = ZoneInfo(TIME_ZONES[zone])
    except ZoneInfoNotFoundError:
        raise _bad_time(
            text,
            f"no time-zone data for {TIME_ZONES[zone]} on this machine; install "
            "the tzdata package (pip install tzdata)",
        ) from None
    for fold in (0, 1):
        when = local.replace(tzinfo=tz, fold=fold)
        if zone in ("UTC", "GMT") or when.tzname() == zone:
            return _utc(when)
    raise _bad_time(
        text,
        f"{TIME_ZONES[zone]} did not use {zone} on that date (it used "
        f"{local.replace(tzinfo=tz).tzname()}); was the time edited?",
    )


_FORMAT_HINT = (
    "expected MTurk's time format, e.g. 'Wed Mar 04 10:12:31 PST 2026', or "
    "ISO 8601 with an offset"
)


def _utc(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def row_status(row: Mapping[str, str | None]) -> str:
    """The assignment's status after the requester's marks.

    MTurk's downloaded results have ``Approve`` and ``Reject`` columns the requester
    fills before uploading the file back: ``x`` in Approve approves, any text in
    Reject rejects (the text is the reason shown to the worker). Without a mark the
    platform's ``AssignmentStatus`` stands.
    """
    status = (row.get("AssignmentStatus") or "").strip()
    if status not in ASSIGNMENT_STATUSES:
        raise InputValidationError(
            f"unknown AssignmentStatus {status!r} (expected one of "
            f"{', '.join(ASSIGNMENT_STATUSES)})"
        )
    approve = (row.get("Approve") or "").strip()
    reject = (row.get("Reject") or "").strip()
    if approve and approve.lower() != "x":
        raise InputValidationError(
            f"Approve holds {approve!r}; mark an approval with x or leave it empty"
        )
    if approve and reject:
        raise InputValidationError(
            "both Approve and Reject are marked; keep one of them"
        )
    if reject:
        return "Rejected"
    if approve:
        return "Approved"
    return status


def answer_tokens(row: Mapping[str, str]) -> list[str]:
    """The image tokens the worker checked (``Answer.selected``, ``|``-joined)."""
    answer = row["Answer.selected"].strip()
    return [t for t in answer.split("|") if t] if answer else []


# ---------------------------------------------------------------- reading results


def _decode(path: Path) -> str:
    """The file's text, or one :class:`InputValidationError` saying what to do."""
    if path.is_dir():
        raise InputValidationError(
            f"{path} is a directory; expected an MTurk batch results CSV file. "
            "Pass the CSV inside it."
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataIntegrityError(
            f"results file {path} does not exist; expected an MTurk batch results "
            f"CSV. {DOWNLOAD_HINT}"
        ) from None
    except OSError as err:
        raise InputValidationError(
            f"cannot read {path} ({err.strerror}); expected a readable MTurk batch "
            "results CSV. Check the path and its permissions."
        ) from None
    text = decode_utf8(
        data,
        str(path),
        "expected the UTF-8 CSV that MTurk downloads. Re-save it as UTF-8 "
        "(e.g. `iconv -f latin1 -t utf-8`), or download it again.",
    )
    if not text.strip():
        raise InputValidationError(
            f"{path} is empty; expected an MTurk batch results CSV with a header "
            f"line ({', '.join(REQUIRED_RESULT_COLUMNS)}) and one row per "
            f"assignment. {DOWNLOAD_HINT}"
        )
    return text


# Physical lines end at \r\n, \r or \n only (str.splitlines would also split at
# \x1c, \u2028 and the like, which may sit inside a field)
_PHYSICAL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_KEY_COLUMNS = (*REQUIRED_RESULT_COLUMNS, "Approve", "Reject")

Rows = list[tuple[int, dict[str, str]]]
Rejected = list[tuple[int, str]]


def _records(
    lines: Sequence[str],
) -> list[tuple[int, int, list[str] | csv.Error]]:
    """``csv.reader``'s records of ``lines`` as ``(first, end, fields or error)``,
    ``first``/``end`` indexing ``lines``; reading goes on after a bad record."""
    reader = csv.reader(iter(lines), strict=True)
    out: list[tuple[int, int, list[str] | csv.Error]] = []
    done = 0
    while True:
        try:
            fields: list[str] | csv.Error = next(reader)
        except StopIteration:
            return out
        except csv.Error as err:
            fields = err
        out.append((done, reader.line_num, fields))
        done = reader.line_num


def _why(text: str, fields: list[str] | csv.Error, header: Sequence[str]) -> str | None:
    """Why one record is not a data row of ``header`` (None: it is)."""
    if isinstance(fields, csv.Error):
        if text.count('"') % 2:
            return (
                'unbalanced quote (") in this line; quote the whole field or '
                'remove the stray "'
            )
        return f"not valid CSV ({fields})"
    if len(fields) != len(header):
        return f"has {len(fields)} fields, the header has {len(header)}"
    return None


def read_results(path: str | Path) -> tuple[Rows, Rejected]:
    """Rows of an MTurk batch results CSV as ``(line, row)``, and rejected lines.

    UTF-8 with or without a byte-order mark; any line ends. A record normally is
    one line; a quoted field may span lines. A record spanning lines that is not
    one row of the header's width (a stray ``"`` opens a quoted field that
    swallows the following lines), or that has a line break inside an id, status
    or answer column, is read again line by line, so one broken line costs one
    row, not the rest of the file. Blank lines are not data rows.

    Raises
    ------
    InputValidationError, DataIntegrityError
        Not a readable UTF-8 file, empty, or its first line lacks a column of
        :data:`REQUIRED_RESULT_COLUMNS`.
    """
    path = Path(path)
    lines = _PHYSICAL_LINE.findall(_decode(path))
    try:
        header = next(csv.reader(lines[:1], strict=True), [])
    except csv.Error:
        header = []
    missing = [c for c in REQUIRED_RESULT_COLUMNS if c not in header]
    if missing:
        raise InputValidationError(
            f"{path}: not an MTurk batch results file; missing columns {missing} "
            f"in its first line (expected {', '.join(REQUIRED_RESULT_COLUMNS)}). "
            f"{DOWNLOAD_HINT}"
        )
    key_idx = [header.index(c) for c in _KEY_COLUMNS if c in header]
    rows: Rows = []
    bad: Rejected = []

    def take(first: int, chunk: Sequence[str], *, split_bad: bool) -> None:
        for start, end, fields in _records(chunk):
            text = "".join(chunk[start:end])
            if not text.strip():
                continue
            why = _why(text, fields, header)
            if why is None and end - start > 1 and isinstance(fields, list):
                if any("\n" in fields[i] or "\r" in fields[i] for i in key_idx):
                    why = "a line break inside an id, status or answer column"
            if why is None and isinstance(fields, list):
                rows.append((first + start, dict(zip(header, fields, strict=True))))
            elif split_bad and end - start > 1:
                for k in range(start, end):
                    take(first + k, chunk[k : k + 1], split_bad=False)
            else:
                bad.append((first + start, why or "not valid CSV"))

    take(2, lines[1:], split_bad=True)
    return rows, bad


# ---------------------------------------------------------------- writing a batch


@dataclass(frozen=True, slots=True)
class BatchRow:
    """One task of a batch input file: what the template's placeholders show."""

    task_id: str
    class_name: str
    instructions: str
    """HTML that MTurk puts into the template as is (the caller escapes the text)."""
    image_urls: Sequence[str]
    tokens: Sequence[str]


_TEMPLATE = """<!-- retest MTurk question template: one task per row of batch_input.csv -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<crowd-form>
<h3>Which of these images contain at least one object of type <b>${class_name}</b>?</h3>
<div>${instructions}</div>
<input type="hidden" name="task_id" value="${task_id}">
<div style="display:flex;flex-wrap:wrap">
%s
</div>
</crowd-form>
"""
_CELL = (
    '<label style="margin:4px"><img src="${image_url_%d}" width="160"><br>'
    '<input type="checkbox" name="selected" value="${token_%d}"></label>'
)


def question_html(width: int) -> str:
    """The question template for tasks of up to ``width`` images: the question,
    the row's ``instructions`` and the grid; every task-specific text comes from
    the batch input's columns (:func:`batch_input_csv`)."""
    return _TEMPLATE % "\n".join(_CELL % (i, i) for i in range(width))


def batch_input_csv(rows: Sequence[BatchRow]) -> str:
    """The batch input CSV: one row per task, padded to the widest task."""
    width = max((len(r.tokens) for r in rows), default=0)
    header = ["task_id", "class_name", "instructions"]
    for i in range(width):
        header += [f"image_url_{i}", f"token_{i}"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for r in rows:
        row = [r.task_id, r.class_name, r.instructions]
        for url, tok in zip(r.image_urls, r.tokens, strict=True):
            row += [url, tok]
        row += [""] * (len(header) - len(row))
        writer.writerow(row)
    return buf.getvalue()
