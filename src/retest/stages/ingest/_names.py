"""One source name, one meaning of its references.

Candidates sharing a source id ``<name>:<ref>`` are linked as one source image
(near-duplicates: at most one of them in a revision). That is right when a ref
names one image whatever file it comes from (a TinyImages index, a Flickr photo
id: :attr:`~retest.sources.base.CandidateSource.global_refs`), and wrong for row
numbers and relative paths: row 7 of ``pool.npz`` and row 7 of ``pool2.npz`` are
different images. So a name whose refs mean something only within one file
belongs to the file ingested under it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retest.errors import InputValidationError
from retest.names import suggest_name
from retest.project import INGEST_STAGE, Checkpoint, Project, stage_runs
from retest.sources.base import CANDIDATE_SOURCES, CandidateSource
from retest.stages.ingest._writer import content_ids

__all__ = ["check_source_name"]

# Items read per look-up when a file at another path is compared by content.
_CHECK_BATCH = 1024


def check_source_name(
    project: Project, source: CandidateSource, name: str, desc: Mapping[str, Any]
) -> None:
    """Refuse a new ingest job of ``source`` under ``name`` when another file
    already holds that name and the refs of either are local to their file.

    "The same file" is the same resolved path, what every job's description
    records: re-adding it (whatever the options), resuming it or a file that grew
    in place keep their name. A file at another path whose every image the
    project already holds (a moved or renamed copy) is accepted too: all its
    items are exact copies, so it adds no candidate and links nothing. Sources
    whose refs are global (TinyImages, Flickr) share a name freely.

    Raises
    ------
    InputValidationError
        Naming both files and the ``--name`` that keeps them apart; nothing has
        been written.
    """
    path = str(desc["path"])
    used: set[str] = set()
    clash: tuple[str, str] | None = None
    for run in stage_runs(project, INGEST_STAGE):
        rep = Checkpoint(project, INGEST_STAGE, run.key).load("report") or {}
        kind = str(rep.get("kind") or "")
        held = str(rep.get("name") or kind)
        used.add(held)
        other = str(rep.get("path") or "")
        if held != name or other == path or clash is not None:
            continue
        if not (source.global_refs and _global_refs(kind)):
            clash = (kind, other)
    if clash is None or _all_stored(project, source):
        return
    kind, other = clash
    stem = fresh = suggest_name(Path(path).name.split(".")[0], "source")
    for i in range(2, len(used) + 3):
        if fresh not in used:
            break
        fresh = f"{stem}-{i}"
    what = "folder" if Path(path).is_dir() else "file"
    raise InputValidationError(
        f"{path}: source name {name!r} already holds another {what}, {other} "
        f"({kind}); row numbers and relative paths of different files name "
        f"different images, so this {what}'s candidates would be linked as "
        "duplicates of that one's. Add it under a name of its own, e.g. "
        f"--name {fresh}; nothing was ingested."
    )


def _global_refs(kind: str) -> bool:
    """Whether the refs of source kind ``kind`` are global (False when unknown)."""
    return kind in CANDIDATE_SOURCES and CANDIDATE_SOURCES.get(kind).global_refs


def _all_stored(project: Project, source: CandidateSource) -> bool:
    """Whether the project holds every image of ``source`` (read until the first
    one it does not hold: a different file stops at its first new image)."""
    cands = project.store.candidates
    for batch in source.iter_batches(batch_size=_CHECK_BATCH):
        ids = content_ids(batch)
        if len(cands.existing(ids)) < len(set(ids)):
            return False
    return True
