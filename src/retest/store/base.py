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

The row records and id helpers are defined in :mod:`retest.store.rows`. The
implementation is :class:`retest.store.sqlite.SQLiteStore` (the project's ``retest.db``);
``tests/store/test_store_contract.py`` checks it against these conventions.
"""

from __future__ import annotations

import builtins
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from retest.store.rows import (
    AnnotationEvent,
    ArtifactRecord,
    BlacklistEvent,
    CandidateRow,
    ClassRow,
    DuplicateVerdict,
    KeywordRow,
    NeighbourList,
    NeighbourReview,
    PersonEvent,
    PersonRow,
    PredictionRecord,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    StageCheckpoint,
    TaskRow,
)

__all__ = [
    "CANDIDATE_COLUMNS",
    "AnnotationRepo",
    "ArtifactRepo",
    "BlacklistRepo",
    "CandidateRepo",
    "ClassRepo",
    "NearDupRepo",
    "PeopleRepo",
    "PredictionRepo",
    "ReferenceRepo",
    "RevisionRepo",
    "StageRepo",
    "Store",
    "TaskRepo",
]


# ----------------------------------------------------------------- repositories

CANDIDATE_COLUMNS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(CandidateRow) if f.name != "extra"
)
"""Columns :meth:`CandidateRepo.columns` reads: the row fields but ``extra``."""


def _check_columns(names: Sequence[str]) -> None:
    bad = [n for n in names if n not in CANDIDATE_COLUMNS]
    if bad or not names:
        raise ValueError(
            f"candidate columns must be some of {', '.join(CANDIDATE_COLUMNS)}; "
            f"got {builtins.list(names)}."
        )


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

    def max_array_row(self, array_name: str) -> int:
        """The highest row of ``array_name`` a reference image points at, -1 for none."""
        return max(
            (
                r.array_row
                for r in self.list()
                if r.array_name == array_name and r.array_row is not None
            ),
            default=-1,
        )

    @abstractmethod
    def set_keywords(self, keywords: Mapping[int, str | None], *, split: str) -> None:
        """Set the (recovered) original keyword of images ``index → keyword``."""


class CandidateRepo(ABC):
    """Candidate images; ingest de-duplicates exact copies by id."""

    @abstractmethod
    def add(self, rows: Iterable[CandidateRow], *, checked: int | None = None) -> int:
        """Insert-or-ignore by id (batched, one transaction); returns how many were new.

        ``checked``: the mark :meth:`existing_mark` gave with a check that found
        none of these ids; the insert may then skip re-checking the rows that
        state held (it still never stores an id twice).
        """

    def existing_mark(self, item_ids: Iterable[str]) -> tuple[set[str], int | None]:
        """:meth:`existing` and a mark of the state it read, for ``checked``."""
        return self.existing(item_ids), None

    def add_tuples(
        self, rows: Iterable[tuple[Any, ...]], *, checked: int | None = None
    ) -> int:
        """:meth:`add` for plain 15-tuples in :class:`CandidateRow` field order.

        The bulk path of ingest (no dataclass per row); ``extra`` may be ``None``.
        Implementations may override it with a faster one.
        """
        fields = [f.name for f in dataclasses.fields(CandidateRow)]
        return self.add(
            (
                CandidateRow(
                    **dict(zip(fields[:14], r, strict=False)), extra=r[14] or {}
                )
                for r in rows
            ),
            checked=checked,
        )

    def prepare_columns(
        self,
        ids: Sequence[str],
        refs: Sequence[str],
        class_ids: Sequence[int | None],
        keywords: Sequence[str | None],
        *,
        source: str,
        width: int,
        height: int,
        array_name: str,
    ) -> Callable[[Sequence[int], int | None], int]:
        """:meth:`add_columns` in two steps: ``insert(array_rows, checked)``,
        returned, stores the rows and returns how many were added. What does not
        depend on the array rows may be encoded here, on the caller's thread, so
        that a writer thread only inserts (the ingest prepares the next batch
        while its commit thread writes this one)."""

        def insert(array_rows: Sequence[int], checked: int | None = None) -> int:
            return self.add_columns(
                ids,
                refs,
                class_ids,
                keywords,
                array_rows,
                source=source,
                width=width,
                height=height,
                array_name=array_name,
                checked=checked,
            )

        return insert

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
        checked: int | None = None,
    ) -> int:
        """:meth:`add` for array rows given as columns (the TinyImages bulk path).

        Row ``i`` is ``CandidateRow(ids[i], source, refs[i], class_ids[i],
        keywords[i], width=width, height=height, array_name=array_name,
        array_row=array_rows[i])``; rows are stored in column order.
        Implementations may override it with a faster one.
        """
        return self.add_tuples(
            (
                (
                    i,
                    source,
                    r,
                    c,
                    k,
                    None,
                    None,
                    None,
                    None,
                    width,
                    height,
                    array_name,
                    a,
                    None,
                    None,
                )
                for i, r, c, k, a in zip(
                    ids, refs, class_ids, keywords, array_rows, strict=True
                )
            ),
            checked=checked,
        )

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
    def count_by_keyword(
        self, keywords: Iterable[str]
    ) -> dict[tuple[str, int | None], int]:
        """``(keyword, class_id) → number of candidates`` for those ``keywords``
        (read through the keyword index: only their rows)."""

    @abstractmethod
    def class_map(self) -> dict[str, int | None]:
        """``candidate id → class_id`` for every candidate."""

    def columns(
        self,
        names: Sequence[str],
        *,
        ids: Iterable[str] | None = None,
        has_class: bool = False,
    ) -> dict[str, builtins.list[Any]]:
        """Some columns of many candidates, one list per name, no row objects.

        ``names`` are :data:`CANDIDATE_COLUMNS`. Rows are every candidate in
        insertion order or, given ``ids``, the stored ones among them in the
        order of ``ids`` (unknown ids and repeats dropped); ``has_class`` keeps
        only candidates with a class. What eligibility and the samplers read at
        ten million candidates, where a :class:`CandidateRow` per row is too slow.
        Implementations may override it with a faster one.
        """
        _check_columns(names)
        if ids is None:
            rows: Iterable[CandidateRow] = self.iter()
        else:
            wanted = builtins.list(dict.fromkeys(ids))
            found = self.existing(wanted)
            rows = self.get_many([i for i in wanted if i in found])
        out: dict[str, builtins.list[Any]] = {n: [] for n in names}
        for r in rows:
            if not has_class or r.class_id is not None:
                for n in names:
                    out[n].append(getattr(r, n))
        return out

    def id_orders(self) -> dict[int, Any]:
        """``class_id → handles`` (int64 array) of every candidate of the class in
        id order; a handle names one candidate for :meth:`ids_at` and
        :meth:`locate`. The columnar sampling pool reads it in bulk."""
        raise NotImplementedError(f"{type(self).__name__} has no handles")

    def defer_indexes(self, adding: int) -> bool:
        """Stop maintaining secondary indexes row by row before a bulk job that
        will add about ``adding`` rows, when building them once afterwards
        (:meth:`restore_indexes`) is cheaper; whether they were deferred. Every
        query stays correct without them (only slower) until they are restored.
        A store without such indexes has nothing to do."""
        return False

    def restore_indexes(self) -> None:
        """Build the indexes :meth:`defer_indexes` dropped (any earlier job's,
        even a killed one's); nothing when they are there."""
        return None

    def missing_indexes(self) -> list[str]:
        """Names of the indexes :meth:`defer_indexes` dropped that are not back
        yet: a job is running, or one was killed before :meth:`restore_indexes`."""
        return []

    def update_id_orders(self) -> None:
        """Bring a derived cache of :meth:`id_orders` up to date after candidates
        were added, so its next reader finds it ready; ``OSError`` when it cannot
        be written. A store without such a cache has nothing to do."""
        return None

    def ids_at(self, handles: Sequence[int]) -> builtins.list[str]:
        """The ids of ``handles`` (see :meth:`id_orders`), in the same order."""
        raise NotImplementedError(f"{type(self).__name__} has no handles")

    def locate(self, item_ids: Iterable[str]) -> dict[str, tuple[int, int | None]]:
        """``id → (handle, class_id)`` of the stored ones among ``item_ids``."""
        raise NotImplementedError(f"{type(self).__name__} has no handles")

    def source_groups(self) -> builtins.list[builtins.list[str]]:
        """Candidates sharing a source id ``"<source>:<source_ref>"`` (linked as
        near-duplicates): one sorted list of ids per id held by two or more."""
        by_src: dict[str, builtins.list[str]] = {}
        for r in self.iter():
            by_src.setdefault(f"{r.source}:{r.source_ref}", []).append(r.id)
        return sorted(sorted(v) for v in by_src.values() if len(v) > 1)

    def array_refs(self, array_name: str) -> Iterator[tuple[str, int]]:
        """``(id, array_row)`` of every candidate stored in pixel array ``array_name``
        (used to verify pixels and find unreferenced rows), streamed."""
        for r in self.iter():
            if r.array_name == array_name and r.array_row is not None:
                yield r.id, r.array_row

    def max_array_row(self, array_name: str) -> int:
        """The highest row of ``array_name`` a candidate points at, -1 for none."""
        return max((r for _, r in self.array_refs(array_name)), default=-1)

    def array_names(self) -> set[str]:
        """Names of the pixel arrays candidates are stored in (``retest check``
        verifies each exists)."""
        return {r.array_name for r in self.iter() if r.array_name is not None}

    def file_refs(self) -> builtins.list[tuple[str, str, builtins.list[str]]]:
        """``(id, file_path, derived file paths)`` of every file-backed candidate."""
        return [
            (r.id, r.file_path, sorted((r.extra.get("derived") or {}).values()))
            for r in self.iter()
            if r.file_path is not None
        ]


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

    def workers(self) -> set[str]:
        """Every worker id of the grid answers (``kind="task"``) stored."""
        return {e.worker for e in self.list(kind="task") if e.worker}

    @abstractmethod
    def set_assignment_status(self, assignment_id: str, *, status: str) -> int:
        """Record a crowd assignment's status on its events (the one mutable field,
        mirroring the crowd platform's own state); returns events updated."""

    def record_import(
        self, events: Iterable[AnnotationEvent], statuses: Mapping[str, str]
    ) -> set[str]:
        """Add ``events`` and set ``statuses`` (assignment id → status) as one
        unit: a crowd import is applied whole or not at all.

        Whether an assignment is new is decided again inside the write: events of
        an assignment already stored (another import got there first) are not
        added, and their assignment ids are returned.
        """
        events = list(events)
        ids = {e.assignment_id for e in events if e.assignment_id is not None}
        stored = {aid for aid in ids if self.list(kind="task", assignment_id=aid)}
        self.add(e for e in events if e.assignment_id not in stored)
        for aid, status in statuses.items():
            self.set_assignment_status(aid, status=status)
        return stored

    @abstractmethod
    def item_counts(
        self, *, kinds: Sequence[str] | None = None, valid_only: bool = True
    ) -> dict[str, tuple[int, int]]:
        """``item_id → (n events, n with value > 0)`` over ``kinds`` (all if None).

        ``valid_only`` drops events of assignments neither Submitted nor
        Approved (Rejected, or Withdrawn by their worker). For ``task`` events,
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
    def iter_neighbours(
        self, *, metric: str, within: float | None = None
    ) -> Iterator[NeighbourList]:
        """All lists of one metric, ordered by candidate id; with ``within``, at
        least those whose closest distance is at most ``within`` (the others
        may be left out unread: a caller still compares every distance)."""

    @abstractmethod
    def list_counts(self, metrics: Sequence[str]) -> dict[str, int]:
        """Stored lists of each of ``metrics``."""

    @abstractmethod
    def without_lists(self, metrics: Sequence[str]) -> list[str]:
        """Candidates with a class that lack a list of some of ``metrics``, in
        insertion order (blacklisted ones included: the caller decides). Probes
        only the candidates after each metric's mark and its gaps
        (:meth:`mark_covered`)."""

    @abstractmethod
    def list_metrics(self) -> set[str]:
        """The metrics with at least one stored list (a read, not a scan)."""

    @abstractmethod
    def mark_covered(self, metrics: Sequence[str]) -> dict[str, bool]:
        """Record how far the lists of each of ``metrics`` cover the candidates,
        so :meth:`without_lists` need not probe them again: probes the candidates
        since the metric's last mark and the ones it left without a list. Call it
        after writing a metric's lists for every candidate (the dedup stage does);
        it is measured, never assumed, so calling it at any time is safe. Returns
        per metric whether its mark reached the last candidate."""

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

    @abstractmethod
    def forget(self, stage: str, key: str) -> bool:
        """Forget one checkpoint; returns whether it existed."""


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


class PeopleRepo(ABC):
    """The people of a labeling campaign, their sign-in sessions and the audit
    log of changes to them (tokens and session ids are stored as hashes only)."""

    @abstractmethod
    def add(
        self,
        name: str,
        key: str,
        role: str,
        token_hash: str,
        *,
        anonymous: bool = False,
    ) -> PersonRow:
        """A new person; :class:`~retest.errors.InputValidationError` when a
        person with the same ``key`` (:func:`retest.labeling.people.name_key`) exists."""

    @abstractmethod
    def get(self, key: str) -> PersonRow:
        """The person with name key ``key`` (NotFoundError if none)."""

    @abstractmethod
    def list(self, *, anonymous: bool = False) -> builtins.list[PersonRow]:
        """Named people (with ``anonymous``, the anonymous workers too), in order added."""

    @abstractmethod
    def by_token(self, token_hash: str) -> PersonRow | None:
        """The person whose current link has this hash (not revoked), or None."""

    @abstractmethod
    def set_token(self, person_id: int, token_hash: str) -> None:
        """A new link: the old one stops working and the person's sessions end;
        a revoked person is reinstated."""

    @abstractmethod
    def revoke(self, person_id: int) -> None:
        """End the person's link and every session of theirs at once."""

    @abstractmethod
    def add_session(self, session_hash: str, person_id: int, expires: str) -> None: ...

    @abstractmethod
    def session(self, session_hash: str) -> tuple[PersonRow, str] | None:
        """(person, expiry time) of a session of a person not revoked, or None."""

    @abstractmethod
    def end_session(self, session_hash: str) -> None: ...

    @abstractmethod
    def log(self, events: Iterable[PersonEvent]) -> builtins.list[int]:
        """Append audit events."""

    @abstractmethod
    def events(self) -> builtins.list[PersonEvent]:
        """Every audit event, in id order."""


class Store(ABC):
    """A project store: the repositories above plus lifecycle.

    Use as a context manager or call :meth:`close`.
    """

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
    people: PeopleRepo

    @abstractmethod
    def schema_version(self) -> int:
        """The schema version the store is at."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
