"""Row records of the project store and the id / time helpers (see :mod:`retest.store.base`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ANNOTATION_KINDS",
    "ASSIGNMENT_STATUSES",
    "MEMBER_ORIGINS",
    "AnnotationEvent",
    "ArtifactRecord",
    "BlacklistEvent",
    "CandidateRow",
    "ClassRow",
    "DuplicateVerdict",
    "KeywordRow",
    "NeighbourList",
    "NeighbourReview",
    "PersonEvent",
    "PersonRow",
    "PredictionRecord",
    "ReferenceRow",
    "ReviewState",
    "Revision",
    "RevisionMember",
    "StageCheckpoint",
    "TaskRow",
    "content_id",
    "file_content_id",
    "reference_id",
    "split_reference_id",
    "utc_now",
]

ANNOTATION_KINDS = ("select", "verify", "label", "task")
"""Known annotation kinds (others are allowed; conventions in :mod:`retest.store.base`)."""
ASSIGNMENT_STATUSES = ("Submitted", "Approved", "Rejected")
MEMBER_ORIGINS = ("carried", "sampled", "upward", "reference")
"""How a revision member got in: carried over from the parent, sampled in its own
bin, sampled upward from a lower bin (``from_bin`` says which), or an original
(reference) image included by the sampler."""


# --------------------------------------------------------------------- helpers


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string with microseconds and ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def content_id(pixels: NDArray[np.uint8]) -> str:
    """Stable id of a pixel array: sha256 of ``b"uint8:" + shape + b":" + C-order bytes``.

    The shape is part of the hash, so a 28×28 and a 784-long array differ.

    Examples
    --------
    >>> a = np.zeros((2, 2), np.uint8)
    >>> content_id(a) == content_id(a.copy()) != content_id(a.reshape(4))
    True
    """
    arr = np.ascontiguousarray(pixels, dtype=np.uint8)
    h = hashlib.sha256(b"uint8:" + ",".join(map(str, arr.shape)).encode() + b":")
    h.update(arr.data)
    return h.hexdigest()


def file_content_id(data: bytes) -> str:
    """Stable id of an image file: sha256 hex of its bytes."""
    return hashlib.sha256(data).hexdigest()


def reference_id(split: str, index: int) -> str:
    """Item id of original-dataset image ``index`` of ``split`` (``"test:17"``)."""
    return f"{split}:{int(index)}"


def split_reference_id(item_id: str) -> tuple[str, int] | None:
    """Inverse of :func:`reference_id`; ``None`` for a candidate id."""
    split, sep, idx = item_id.partition(":")
    if not sep or not idx.isdigit():
        return None
    return split, int(idx)


# --------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ClassRow:
    """A class: id in ``0..K-1``, name, description and reference links (URLs)."""

    id: int
    name: str
    description: str = ""
    links: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KeywordRow:
    """A keyword (sub-class) of a class and its count in the original dataset."""

    class_id: int
    keyword: str
    original_count: int = 0


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    """One original-dataset image; pixels at ``array_name[array_row]`` under arrays/."""

    split: str
    index: int
    class_id: int
    content_id: str
    keyword: str | None = None
    array_name: str | None = None
    array_row: int | None = None

    @property
    def id(self) -> str:
        return reference_id(self.split, self.index)


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """A candidate image with provenance.

    Storage is either ``array_name``/``array_row`` (small images in arrays/) or
    ``file_path`` (relative to the project, ``images/<sha256>``). ``source_ref`` is the
    source's own reference: TinyImages index, Flickr photo id, file path, array row.
    ``class_id`` is the intended class (search class / label) or ``None``.
    """

    id: str
    source: str
    source_ref: str
    class_id: int | None = None
    keyword: str | None = None
    date_taken: str | None = None
    date_uploaded: str | None = None
    url: str | None = None
    license: str | None = None
    width: int | None = None
    height: int | None = None
    array_name: str | None = None
    array_row: int | None = None
    file_path: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskRow:
    """A crowd / grid task: the items shown, in order, and which of them are controls.

    ``controls`` maps a control role (``"pos"``, ``"neg"``) to item ids.
    """

    id: str
    class_id: int
    items: tuple[str, ...]
    controls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    seed: int | None = None
    kind: str = "grid"
    created: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AnnotationEvent:
    """One human judgment (append-only). See the module docstring for ``value``."""

    who: str
    kind: str
    class_id: int
    item_id: str
    value: int
    when: str | None = None
    ui_version: str = ""
    task_id: str | None = None
    assignment_id: str | None = None
    assignment_status: str | None = None
    worker: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True, slots=True)
class BlacklistEvent:
    """Blacklist ``item_id`` (or, with ``undo=True``, take it off again)."""

    item_id: str
    reason: str
    who: str
    when: str | None = None
    undo: bool = False
    id: int | None = None


@dataclass(frozen=True, slots=True)
class NeighbourList:
    """Nearest references of one candidate under one metric, closest first."""

    candidate_id: str
    metric: str
    ref_ids: tuple[str, ...]
    distances: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DuplicateVerdict:
    """A reviewer's decision that ``candidate_id`` is (not) a near-duplicate of ``ref_id``."""

    candidate_id: str
    ref_id: str
    metric: str
    is_duplicate: bool
    who: str
    when: str | None = None
    id: int | None = None


@dataclass(frozen=True, slots=True)
class NeighbourReview:
    """A reviewer looked at the first neighbours of a candidate under a metric."""

    candidate_id: str
    metric: str
    reviewer: str
    references: tuple[str, ...] = ()
    when: str | None = None
    id: int | None = None


@dataclass(frozen=True, slots=True)
class RevisionMember:
    """One image of a revision; ``origin`` is one of :data:`MEMBER_ORIGINS`."""

    item_id: str
    class_id: int
    bin: int | None = None
    origin: str = "sampled"
    from_bin: int | None = None


@dataclass(frozen=True, slots=True)
class Revision:
    """A sampled dataset revision (immutable once written)."""

    name: str
    strategy: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    parent: str | None = None
    valid: bool = True
    created: str | None = None
    shortfall: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReviewState:
    """Per-class review state of a revision (latest event wins)."""

    revision: str
    class_id: int
    reviewed: bool
    problematic: bool = False
    who: str = ""
    when: str | None = None


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    """Manifest entry of a file written by a stage; ``path`` relative to the project."""

    name: str
    path: str
    sha256: str
    stage: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    version: str = ""
    created: str | None = None


@dataclass(frozen=True, slots=True)
class StageCheckpoint:
    """A chunk of a resumable stage that has finished."""

    stage: str
    key: str
    done: bool = True
    artifact: str | None = None
    when: str | None = None


@dataclass(frozen=True, slots=True)
class PredictionRecord:
    """Cached predictions of ``model`` on ``dataset`` (a revision or original split)."""

    model: str
    dataset: str
    path: str
    sha256: str
    created: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------- repositories


@dataclass(frozen=True, slots=True)
class PersonRow:
    """A person of the labeling campaign (``retest people``): a named person with
    a personal sign-in link, or an anonymous worker of a public link."""

    id: int
    name: str
    role: str
    created: str
    revoked: str | None = None
    anonymous: bool = False


@dataclass(frozen=True, slots=True)
class PersonEvent:
    """One audited change to the people of a project (append-only): ``add``,
    ``link``, ``revoke``, or ``exclude`` / ``include`` of a worker's answers from
    the counts. ``subject`` is a person's name or a worker id."""

    subject: str
    action: str
    who: str
    detail: str = ""
    when: str | None = None
    id: int | None = None
