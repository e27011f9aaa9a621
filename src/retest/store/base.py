"""The project store: row records and repository interfaces every stage codes against.

A :class:`Store` groups small repositories, one per kind of data::

    store.classes      classes (id 0..K-1) and keywords (sub-classes) with original counts
    store.references   the original dataset's images (train/test), pixels in arrays/
    store.candidates   new images with provenance; insert-or-ignore by content id
    store.tasks        crowd / grid tasks (items in order, controls, seed)
    store.annotations  append-only human judgments (select, verify, task)
    store.blacklist    append-only blacklist events; the current blacklist is derived
    store.neardup      neighbour lists per (candidate, metric), verdicts, review marks
    store.revisions    immutable sampled revisions + their members; review-state events
    store.artifacts    manifest of every file written (path, sha256, stage, params, version)
    store.stages       checkpoints of resumable jobs (stage, chunk key)
    store.predictions  cached model predictions (model, dataset revision, path, sha256)

Conventions
-----------
* **Item ids** are strings. A candidate's id is the sha256 hex of its content
  (:func:`content_id` for pixel arrays, :func:`file_content_id` for file bytes). A
  reference (original) image's id is ``"<split>:<index>"`` (:func:`reference_id`), e.g.
  ``"test:17"``; revision members, annotations, blacklist entries and near-duplicate
  neighbours use the same id space, so a neighbour may be a reference or a candidate.
* **Times** are ISO 8601 UTC strings (``2026-01-02T03:04:05.123456Z``, sortable as
  text). A record written with ``when=None`` / ``created=None`` is stamped by the store.
* **Event ids** (``id``) are assigned by the store, increasing in write order.
* **Annotation values** are integers: ``kind="select"`` (CIFAR stage 1) and
  ``kind="verify"`` (stage 2) store 1 = yes / 0 = no; ``kind="label"`` stores a class id;
  ``kind="task"`` (ImageNet-style grid task, MTurk assignment) stores **one event per
  (assignment, item shown)** with 1 if the worker selected the item, else 0. The
  selection frequency of an item is therefore ``positive / n`` over the valid
  (not ``Rejected``) assignments, which :meth:`AnnotationRepo.item_counts` returns.
* **Bulk numbers never go into rows**: pixels live in append-only arrays under
  ``arrays/`` (see :mod:`retest.store.artifacts`); a row stores the array name and row.
* Every write is one transaction; iterables are inserted in batches.
* All methods take keyword-only arguments except the one essential positional input.

Implementations: :class:`retest.store.sqlite.SQLiteStore` (the project's ``retest.db``)
and :class:`retest.store.memory.MemoryStore`; both pass ``tests/store/test_store_contract.py``.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ANNOTATION_KINDS",
    "ASSIGNMENT_STATUSES",
    "MEMBER_ORIGINS",
    "AnnotationEvent",
    "AnnotationRepo",
    "ArtifactRecord",
    "ArtifactRepo",
    "BlacklistEvent",
    "BlacklistRepo",
    "CandidateRepo",
    "CandidateRow",
    "ClassRepo",
    "ClassRow",
    "DuplicateVerdict",
    "KeywordRow",
    "NearDupRepo",
    "NeighbourList",
    "NeighbourReview",
    "PredictionRecord",
    "PredictionRepo",
    "ReferenceRepo",
    "ReferenceRow",
    "ReviewState",
    "Revision",
    "RevisionMember",
    "RevisionRepo",
    "StageCheckpoint",
    "StageRepo",
    "Store",
    "TaskRepo",
    "TaskRow",
    "content_id",
    "file_content_id",
    "reference_id",
    "split_reference_id",
    "utc_now",
]

ANNOTATION_KINDS = ("select", "verify", "label", "task")
"""Known annotation kinds (others are allowed; these are the conventions above)."""
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


class ClassRepo(ABC):
    """Classes and keywords."""

    @abstractmethod
    def put(self, rows: Iterable[ClassRow]) -> None:
        """Insert or replace classes by id."""

    @abstractmethod
    def list(self) -> list[ClassRow]:
        """All classes ordered by id."""

    def get(self, class_id: int) -> ClassRow:
        """One class; raises :class:`~retest.errors.NotFoundError`."""
        from retest.errors import NotFoundError

        for c in self.list():
            if c.id == class_id:
                return c
        raise NotFoundError(f"class id {class_id} is not in the project.")

    def by_name(self, name: str) -> ClassRow:
        """The class called ``name``; raises :class:`~retest.errors.NotFoundError`."""
        from retest.errors import NotFoundError

        rows = self.list()
        for c in rows:
            if c.name == name:
                return c
        names = ", ".join(c.name for c in rows)
        raise NotFoundError(f"class {name!r} is not in the project (classes: {names}).")

    @abstractmethod
    def put_keywords(self, rows: Iterable[KeywordRow]) -> None:
        """Insert or replace keywords by (class_id, keyword)."""

    @abstractmethod
    def keywords(self, *, class_id: int | None = None) -> builtins.list[KeywordRow]:
        """Keywords ordered by class id, then descending count, then keyword."""


class ReferenceRepo(ABC):
    """The original dataset's images."""

    @abstractmethod
    def add(self, rows: Iterable[ReferenceRow]) -> int:
        """Insert-or-ignore by (split, index); returns how many were new."""

    @abstractmethod
    def get(self, item_id: str) -> ReferenceRow:
        """By :func:`reference_id`; raises :class:`~retest.errors.NotFoundError`."""

    @abstractmethod
    def list(
        self, *, split: str | None = None, class_id: int | None = None
    ) -> list[ReferenceRow]:
        """Ordered by split, then index."""

    @abstractmethod
    def count(self, *, split: str | None = None) -> int: ...

    @abstractmethod
    def set_keywords(self, keywords: Mapping[int, str | None], *, split: str) -> None:
        """Set the (recovered) original keyword of images ``index → keyword``."""


class CandidateRepo(ABC):
    """Candidate images; ingest de-duplicates exact copies by id."""

    @abstractmethod
    def add(self, rows: Iterable[CandidateRow]) -> int:
        """Insert-or-ignore by id (batched, one transaction); returns how many were new."""

    def add_tuples(self, rows: Iterable[tuple[Any, ...]]) -> int:
        """:meth:`add` for plain 15-tuples in :class:`CandidateRow` field order.

        The bulk path of ingest (no dataclass per row); ``extra`` may be ``None``.
        Implementations may override it with a faster one.
        """
        fields = [f.name for f in dataclasses.fields(CandidateRow)]
        return self.add(
            CandidateRow(**dict(zip(fields[:14], r, strict=False)), extra=r[14] or {})
            for r in rows
        )

    def add_columns(
        self,
        ids: Sequence[str],
        refs: Sequence[str],
        class_ids: Sequence[int | None],
        keywords: Sequence[str | None],
        array_rows: Sequence[int],
        *,
        source: str,
        width: int,
        height: int,
        array_name: str,
    ) -> int:
        """:meth:`add` for array rows given as columns (the TinyImages bulk path).

        Row ``i`` is ``CandidateRow(ids[i], source, refs[i], class_ids[i],
        keywords[i], width=width, height=height, array_name=array_name,
        array_row=array_rows[i])``; rows are stored in column order.
        Implementations may override it with a faster one.
        """
        return self.add_tuples(
            (i, source, r, c, k, None, None, None, None, width, height, array_name,
             a, None, None)
            for i, r, c, k, a in zip(ids, refs, class_ids, keywords, array_rows,
                                     strict=True)
        )  # fmt: skip

    @abstractmethod
    def get(self, item_id: str) -> CandidateRow:
        """Raises :class:`~retest.errors.NotFoundError`."""

    @abstractmethod
    def get_many(self, item_ids: Sequence[str]) -> list[CandidateRow]:
        """Rows in the order of ``item_ids``; unknown ids raise NotFoundError."""

    @abstractmethod
    def existing(self, item_ids: Iterable[str]) -> set[str]:
        """The subset of ``item_ids`` already stored (ingest pre-filter)."""

    @abstractmethod
    def iter(
        self,
        *,
        class_id: int | None = None,
        source: str | None = None,
        keyword: str | None = None,
        batch_size: int = 10_000,
    ) -> Iterator[CandidateRow]:
        """Matching rows in insertion order, fetched in batches."""

    @abstractmethod
    def count(
        self,
        *,
        class_id: int | None = None,
        source: str | None = None,
        keyword: str | None = None,
    ) -> int: ...

    @abstractmethod
    def count_by_class(self) -> dict[int | None, int]:
        """``class_id → number of candidates``."""

    @abstractmethod
    def class_map(self) -> dict[str, int | None]:
        """``candidate id → class_id`` for every candidate."""


class TaskRepo(ABC):
    """Crowd / grid tasks."""

    @abstractmethod
    def add(self, rows: Iterable[TaskRow]) -> int:
        """Insert-or-ignore by id; returns how many were new."""

    @abstractmethod
    def get(self, task_id: str) -> TaskRow:
        """Raises :class:`~retest.errors.NotFoundError`."""

    @abstractmethod
    def list(self, *, class_id: int | None = None) -> list[TaskRow]:
        """In creation order."""


class AnnotationRepo(ABC):
    """Append-only human judgments."""

    @abstractmethod
    def add(self, events: Iterable[AnnotationEvent]) -> list[int]:
        """Append events; returns their ids (in order)."""

    @abstractmethod
    def list(
        self,
        *,
        kind: str | None = None,
        class_id: int | None = None,
        item_id: str | None = None,
        who: str | None = None,
        task_id: str | None = None,
        assignment_id: str | None = None,
        after_id: int = 0,
    ) -> list[AnnotationEvent]:
        """Matching events with ``id > after_id``, in id order."""

    @abstractmethod
    def count(self, *, kind: str | None = None) -> int: ...

    @abstractmethod
    def set_assignment_status(self, assignment_id: str, *, status: str) -> int:
        """Record a crowd assignment's status on its events (the one mutable field,
        mirroring the crowd platform's own state); returns events updated."""

    @abstractmethod
    def item_counts(
        self, *, kinds: Sequence[str] | None = None, valid_only: bool = True
    ) -> dict[str, tuple[int, int]]:
        """``item_id → (n events, n with value > 0)`` over ``kinds`` (all if None).

        ``valid_only`` drops events of ``Rejected`` assignments. For ``task`` events,
        ``positive / n`` is the selection frequency.
        """


class BlacklistRepo(ABC):
    """Append-only blacklist events."""

    @abstractmethod
    def add(self, events: Iterable[BlacklistEvent]) -> list[int]: ...

    @abstractmethod
    def events(self, *, item_id: str | None = None) -> list[BlacklistEvent]:
        """In id order."""

    def current(self) -> dict[str, str]:
        """``item_id → reason`` of items whose latest event is not an undo."""
        state: dict[str, str | None] = {}
        for e in self.events():
            state[e.item_id] = None if e.undo else e.reason
        return {k: v for k, v in sorted(state.items()) if v is not None}


class NearDupRepo(ABC):
    """Neighbour lists, duplicate verdicts and neighbour-review marks."""

    @abstractmethod
    def put_neighbours(self, lists: Iterable[NeighbourList]) -> int:
        """Insert or replace by (candidate, metric); returns rows written."""

    @abstractmethod
    def neighbours(
        self, candidate_id: str, *, metric: str | None = None
    ) -> list[NeighbourList]:
        """Lists of one candidate, ordered by metric."""

    @abstractmethod
    def iter_neighbours(self, *, metric: str) -> Iterator[NeighbourList]:
        """All lists of one metric, ordered by candidate id."""

    @abstractmethod
    def add_verdicts(self, verdicts: Iterable[DuplicateVerdict]) -> list[int]: ...

    @abstractmethod
    def verdicts(self, *, candidate_id: str | None = None) -> list[DuplicateVerdict]:
        """In id order."""

    def duplicate_pairs(self) -> set[tuple[str, str]]:
        """(candidate, ref) pairs whose latest verdict (any metric) says duplicate."""
        state: dict[tuple[str, str], bool] = {}
        for v in self.verdicts():
            state[(v.candidate_id, v.ref_id)] = v.is_duplicate
        return {k for k, d in state.items() if d}

    @abstractmethod
    def add_reviews(self, reviews: Iterable[NeighbourReview]) -> list[int]: ...

    @abstractmethod
    def reviews(
        self, *, candidate_id: str | None = None, metric: str | None = None
    ) -> list[NeighbourReview]:
        """In id order."""


class RevisionRepo(ABC):
    """Immutable revisions, their members, and per-class review-state events."""

    @abstractmethod
    def create(self, revision: Revision, members: Sequence[RevisionMember]) -> Revision:
        """Write a new revision (stamped ``created`` if None); an existing name raises
        :class:`~retest.errors.StoreError`; an unknown parent raises NotFoundError."""

    @abstractmethod
    def get(self, name: str) -> Revision:
        """Raises :class:`~retest.errors.NotFoundError`."""

    @abstractmethod
    def list(self) -> list[Revision]:
        """In creation order."""

    @abstractmethod
    def members(self, name: str) -> builtins.list[RevisionMember]:
        """Members in the order they were written."""

    @abstractmethod
    def set_review(self, state: ReviewState) -> None:
        """Append a review-state event for one class of a revision."""

    @abstractmethod
    def review_events(self, name: str) -> builtins.list[ReviewState]:
        """All review events of a revision, oldest first."""

    def reviews(self, name: str) -> dict[int, ReviewState]:
        """``class_id → latest review state`` of a revision."""
        return {s.class_id: s for s in self.review_events(name)}


class ArtifactRepo(ABC):
    """Manifest of every file written into the project."""

    @abstractmethod
    def put(self, record: ArtifactRecord) -> None:
        """Insert or replace by name."""

    @abstractmethod
    def get(self, name: str) -> ArtifactRecord:
        """Raises :class:`~retest.errors.NotFoundError`."""

    @abstractmethod
    def list(self, *, stage: str | None = None) -> list[ArtifactRecord]:
        """Ordered by name."""


class StageRepo(ABC):
    """Checkpoints of resumable stages."""

    @abstractmethod
    def mark(self, checkpoint: StageCheckpoint) -> None:
        """Insert or replace by (stage, key)."""

    @abstractmethod
    def get(self, stage: str, *, key: str) -> StageCheckpoint | None: ...

    @abstractmethod
    def list(self, stage: str) -> list[StageCheckpoint]:
        """Ordered by key."""

    def done_keys(self, stage: str) -> set[str]:
        return {c.key for c in self.list(stage) if c.done}

    @abstractmethod
    def reset(self, stage: str) -> int:
        """Forget every checkpoint of ``stage``; returns how many."""


class PredictionRepo(ABC):
    """Registry of cached prediction files."""

    @abstractmethod
    def put(self, record: PredictionRecord) -> None:
        """Insert or replace by (model, dataset)."""

    @abstractmethod
    def get(self, model: str, *, dataset: str) -> PredictionRecord:
        """Raises :class:`~retest.errors.NotFoundError`."""

    @abstractmethod
    def list(
        self, *, model: str | None = None, dataset: str | None = None
    ) -> list[PredictionRecord]:
        """Ordered by (dataset, model)."""


class Store(ABC):
    """A project store: the repositories above plus lifecycle.

    Use as a context manager or call :meth:`close`.
    """

    kind: Literal["sqlite", "memory"]
    classes: ClassRepo
    references: ReferenceRepo
    candidates: CandidateRepo
    tasks: TaskRepo
    annotations: AnnotationRepo
    blacklist: BlacklistRepo
    neardup: NearDupRepo
    revisions: RevisionRepo
    artifacts: ArtifactRepo
    stages: StageRepo
    predictions: PredictionRepo

    @abstractmethod
    def schema_version(self) -> int:
        """The schema version the store is at."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
