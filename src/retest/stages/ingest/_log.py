"""The ingest stage's report, its counts, and the per-batch log for people
(``reports/ingest/<job>.*``: outputs, never read back)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_LISTED_DUPLICATES",
    "REPORT_DIR",
    "IngestReport",
    "Tally",
    "append_log_line",
]

REPORT_DIR = "reports/ingest"
MAX_LISTED_DUPLICATES = 1000


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest job did (cumulative over resumed runs).

    Attributes
    ----------
    job : str
        Stable key of (source kind, path, options).
    name : str
        Source name stored on every candidate row (``CandidateRow.source``).
    total, processed : int
        Items in the source; items handled so far (all of them when complete).
    new, duplicates : int
        Candidates stored by this job; exact copies of stored candidates.
    skipped : tuple of dict
        Unreadable items: ``{"position", "ref", "reason"}``.
    resumed_from : int
        Position the last run started at (0 for a fresh job).
    command : str
        The command line that resumes (re-runs) this job.
    already_ingested : bool
        This run found the job complete and did nothing: the counts are the
        earlier runs' (not written to the report).
    removed_temporaries : tuple of str
        Temporary files of killed writers this run removed from ``arrays/``
        and ``images/`` (not written to the report).
    """

    job: str
    name: str
    kind: str
    path: str
    total: int
    processed: int
    new: int
    duplicates: int
    skipped: tuple[Mapping[str, Any], ...] = ()
    duplicate_refs: tuple[str, ...] = ()
    resumed_from: int = 0
    complete: bool = False
    source: Mapping[str, Any] = field(default_factory=dict)
    started: str = ""
    finished: str = ""
    command: str = ""
    already_ingested: bool = False
    removed_temporaries: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "total": self.total,
            "processed": self.processed,
            "new": self.new,
            "duplicates": self.duplicates,
            "skipped": [dict(s) for s in self.skipped],
            "duplicate_refs": list(self.duplicate_refs),
            "resumed_from": self.resumed_from,
            "complete": self.complete,
            "source": dict(self.source),
            "started": self.started,
            "finished": self.finished,
            "command": self.command,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IngestReport:
        return cls(
            d["job"],
            d["name"],
            d["kind"],
            d["path"],
            d["total"],
            d["processed"],
            d["new"],
            d["duplicates"],
            tuple(d.get("skipped", ())),
            tuple(d.get("duplicate_refs", ())),
            d.get("resumed_from", 0),
            d.get("complete", False),
            d.get("source", {}),
            d.get("started", ""),
            d.get("finished", ""),
            d.get("command", ""),
        )


@dataclass
class Tally:
    """Counts of an ingest job so far, summed over its batches' states."""

    processed: int = 0
    new: int = 0
    duplicates: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    dup_refs: list[str] = field(default_factory=list)

    def add(self, line: Mapping[str, Any]) -> None:
        self.processed = max(self.processed, int(line["stop"]))
        self.new += int(line["new"])
        self.duplicates += int(line["duplicates"])
        self.skipped.extend(line["skipped"])
        room = MAX_LISTED_DUPLICATES - len(self.dup_refs)
        self.dup_refs.extend(line["duplicate_refs"][: max(room, 0)])


def append_log_line(path: Path, line: Mapping[str, Any]) -> None:
    """Append a batch's line to the job's log (for people; never read back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
