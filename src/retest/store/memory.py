"""In-memory :class:`~retest.store.base.Store` for tests and notebooks.

Behaves like :class:`~retest.store.sqlite.SQLiteStore` (same contract suite) but
keeps everything in Python containers; nothing survives :meth:`MemoryStore.close`.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from retest.errors import NotFoundError, StoreError
from retest.store.base import (
    AnnotationRepo,
    ArtifactRepo,
    BlacklistRepo,
    CandidateRepo,
    ClassRepo,
    NearDupRepo,
    PredictionRepo,
    ReferenceRepo,
    RevisionRepo,
    StageRepo,
    Store,
    TaskRepo,
)
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
    PredictionRecord,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    StageCheckpoint,
    TaskRow,
    utc_now,
)

__all__ = ["MemoryStore"]

E = TypeVar("E")


def _stamp(rec: E, attr: str) -> E:
    if getattr(rec, attr) is None:
        return dataclasses.replace(rec, **{attr: utc_now()})  # type: ignore[type-var]
    return rec


class _EventLog:
    """An append-only list that hands out increasing ids."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    def append(self, events: Iterable[Any], stamp: str) -> list[int]:
        ids = []
        for e in events:
            e = dataclasses.replace(_stamp(e, stamp), id=len(self.rows) + 1)
            self.rows.append(e)
            ids.append(e.id)
        return ids


class _Classes(ClassRepo):
    def __init__(self) -> None:
        self._c: dict[int, ClassRow] = {}
        self._k: dict[tuple[int, str], KeywordRow] = {}

    def put(self, rows: Iterable[ClassRow]) -> None:
        self._c.update({r.id: r for r in rows})

    def list(self) -> list[ClassRow]:
        return [self._c[k] for k in sorted(self._c)]

    def put_keywords(self, rows: Iterable[KeywordRow]) -> None:
        self._k.update({(r.class_id, r.keyword): r for r in rows})

    def keywords(self, *, class_id: int | None = None) -> builtins.list[KeywordRow]:
        rows = [r for r in self._k.values() if class_id in (None, r.class_id)]
        return sorted(rows, key=lambda r: (r.class_id, -r.original_count, r.keyword))


class _References(ReferenceRepo):
    def __init__(self) -> None:
        self._r: dict[tuple[str, int], ReferenceRow] = {}

    def add(self, rows: Iterable[ReferenceRow]) -> int:
        new = 0
        for r in rows:
            if (r.split, r.index) not in self._r:
                self._r[(r.split, r.index)] = r
                new += 1
        return new

    def get(self, item_id: str) -> ReferenceRow:
        split, _, idx = item_id.partition(":")
        try:
            return self._r[(split, int(idx))]
        except (KeyError, ValueError):
            raise NotFoundError(
                f"reference image {item_id!r} is not in the project."
            ) from None

    def list(
        self, *, split: str | None = None, class_id: int | None = None
    ) -> list[ReferenceRow]:
        return [
            self._r[k]
            for k in sorted(self._r)
            if split in (None, k[0]) and class_id in (None, self._r[k].class_id)
        ]

    def count(self, *, split: str | None = None) -> int:
        return sum(1 for k in self._r if split in (None, k[0]))

    def set_keywords(self, keywords: Mapping[int, str | None], *, split: str) -> None:
        for idx, kw in keywords.items():
            key = (split, int(idx))
            if key in self._r:
                self._r[key] = dataclasses.replace(self._r[key], keyword=kw)


def _match(row: Any, **want: Any) -> bool:
    return all(v is None or getattr(row, k) == v for k, v in want.items())


class _Candidates(CandidateRepo):
    def __init__(self) -> None:
        self._c: dict[str, CandidateRow] = {}

    def add(self, rows: Iterable[CandidateRow]) -> int:
        new = 0
        for r in rows:
            if r.id not in self._c:
                self._c[r.id] = dataclasses.replace(r, extra=dict(r.extra))
                new += 1
        return new

    def get(self, item_id: str) -> CandidateRow:
        try:
            return self._c[item_id]
        except KeyError:
            raise NotFoundError(
                f"candidate {item_id!r} is not in the project."
            ) from None

    def get_many(self, item_ids: Sequence[str]) -> list[CandidateRow]:
        return [self.get(i) for i in item_ids]

    def existing(self, item_ids: Iterable[str]) -> set[str]:
        return {i for i in item_ids if i in self._c}

    def iter(
        self,
        *,
        class_id: int | None = None,
        source: str | None = None,
        keyword: str | None = None,
        batch_size: int = 10_000,
    ) -> Iterator[CandidateRow]:
        for r in builtins.list(self._c.values()):
            if _match(r, class_id=class_id, source=source, keyword=keyword):
                yield r

    def count(
        self,
        *,
        class_id: int | None = None,
        source: str | None = None,
        keyword: str | None = None,
    ) -> int:
        return sum(
            1 for _ in self.iter(class_id=class_id, source=source, keyword=keyword)
        )

    def count_by_class(self) -> dict[int | None, int]:
        out: dict[int | None, int] = {}
        for r in self._c.values():
            out[r.class_id] = out.get(r.class_id, 0) + 1
        return out

    def class_map(self) -> dict[str, int | None]:
        return {k: r.class_id for k, r in self._c.items()}


class _Tasks(TaskRepo):
    def __init__(self) -> None:
        self._t: dict[str, TaskRow] = {}

    def add(self, rows: Iterable[TaskRow]) -> int:
        new = 0
        for r in rows:
            if r.id not in self._t:
                self._t[r.id] = _stamp(r, "created")
                new += 1
        return new

    def get(self, task_id: str) -> TaskRow:
        try:
            return self._t[task_id]
        except KeyError:
            raise NotFoundError(f"task {task_id!r} is not in the project.") from None

    def list(self, *, class_id: int | None = None) -> list[TaskRow]:
        return [r for r in self._t.values() if class_id in (None, r.class_id)]


class _Annotations(AnnotationRepo):
    def __init__(self) -> None:
        self._log = _EventLog()

    def add(self, events: Iterable[AnnotationEvent]) -> list[int]:
        return self._log.append(events, "when")

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
        want = {
            "kind": kind,
            "class_id": class_id,
            "item_id": item_id,
            "who": who,
            "task_id": task_id,
            "assignment_id": assignment_id,
        }
        return [e for e in self._log.rows[after_id:] if _match(e, **want)]

    def count(self, *, kind: str | None = None) -> int:
        return sum(1 for e in self._log.rows if kind in (None, e.kind))

    def set_assignment_status(self, assignment_id: str, *, status: str) -> int:
        n = 0
        for i, e in enumerate(self._log.rows):
            if e.assignment_id == assignment_id:
                self._log.rows[i] = dataclasses.replace(e, assignment_status=status)
                n += 1
        return n

    def item_counts(
        self, *, kinds: Sequence[str] | None = None, valid_only: bool = True
    ) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for e in self._log.rows:
            if kinds is not None and e.kind not in kinds:
                continue
            if valid_only and e.assignment_status == "Rejected":
                continue
            n, pos = out.get(e.item_id, (0, 0))
            out[e.item_id] = (n + 1, pos + (e.value > 0))
        return out


class _Blacklist(BlacklistRepo):
    def __init__(self) -> None:
        self._log = _EventLog()

    def add(self, events: Iterable[BlacklistEvent]) -> list[int]:
        return self._log.append(events, "when")

    def events(self, *, item_id: str | None = None) -> list[BlacklistEvent]:
        return [e for e in self._log.rows if item_id in (None, e.item_id)]


class _NearDup(NearDupRepo):
    def __init__(self) -> None:
        self._n: dict[tuple[str, str], NeighbourList] = {}
        self._v = _EventLog()
        self._r = _EventLog()

    def put_neighbours(self, lists: Iterable[NeighbourList]) -> int:
        rows = builtins.list(lists)  # validate all first: one write, all or nothing
        for nl in rows:
            if len(nl.ref_ids) != len(nl.distances):
                raise StoreError(
                    f"neighbour list of {nl.candidate_id!r} ({nl.metric}) has "
                    f"{len(nl.ref_ids)} ids but {len(nl.distances)} distances."
                )
        for nl in rows:
            self._n[(nl.candidate_id, nl.metric)] = dataclasses.replace(
                nl,
                ref_ids=tuple(nl.ref_ids),
                distances=tuple(float(d) for d in nl.distances),
            )
        return len(rows)

    def neighbours(
        self, candidate_id: str, *, metric: str | None = None
    ) -> list[NeighbourList]:
        return [
            self._n[k]
            for k in sorted(self._n)
            if k[0] == candidate_id and metric in (None, k[1])
        ]

    def iter_neighbours(self, *, metric: str) -> Iterator[NeighbourList]:
        for k in sorted(k for k in self._n if k[1] == metric):
            yield self._n[k]

    def add_verdicts(self, verdicts: Iterable[DuplicateVerdict]) -> list[int]:
        return self._v.append(verdicts, "when")

    def verdicts(self, *, candidate_id: str | None = None) -> list[DuplicateVerdict]:
        return [v for v in self._v.rows if candidate_id in (None, v.candidate_id)]

    def add_reviews(self, reviews: Iterable[NeighbourReview]) -> list[int]:
        rows = (dataclasses.replace(r, references=tuple(r.references)) for r in reviews)
        return self._r.append(rows, "when")

    def reviews(
        self, *, candidate_id: str | None = None, metric: str | None = None
    ) -> list[NeighbourReview]:
        return [
            r
            for r in self._r.rows
            if _match(r, candidate_id=candidate_id, metric=metric)
        ]


class _Revisions(RevisionRepo):
    def __init__(self) -> None:
        self._r: dict[str, Revision] = {}
        self._m: dict[str, list[RevisionMember]] = {}
        self._reviews: list[ReviewState] = []

    def create(self, revision: Revision, members: Sequence[RevisionMember]) -> Revision:
        if revision.name in self._r:
            raise StoreError(
                f"revision {revision.name!r} already exists; revisions are immutable. "
                "Choose a new name."
            )
        if revision.parent is not None and revision.parent not in self._r:
            raise NotFoundError(
                f"parent revision {revision.parent!r} of {revision.name!r} does not exist."
            )
        rev = dataclasses.replace(
            _stamp(revision, "created"),
            params=dict(revision.params),
            shortfall=dict(revision.shortfall),
        )
        self._r[rev.name] = rev
        self._m[rev.name] = builtins.list(members)
        return rev

    def get(self, name: str) -> Revision:
        try:
            return self._r[name]
        except KeyError:
            known = ", ".join(self._r) or "none"
            raise NotFoundError(
                f"revision {name!r} does not exist (revisions: {known})."
            ) from None

    def list(self) -> list[Revision]:
        return builtins.list(self._r.values())

    def members(self, name: str) -> builtins.list[RevisionMember]:
        self.get(name)
        return builtins.list(self._m[name])

    def set_review(self, state: ReviewState) -> None:
        self.get(state.revision)
        self._reviews.append(_stamp(state, "when"))

    def review_events(self, name: str) -> builtins.list[ReviewState]:
        self.get(name)
        return [s for s in self._reviews if s.revision == name]


class _Artifacts(ArtifactRepo):
    def __init__(self) -> None:
        self._a: dict[str, ArtifactRecord] = {}

    def put(self, record: ArtifactRecord) -> None:
        self._a[record.name] = _stamp(record, "created")

    def get(self, name: str) -> ArtifactRecord:
        try:
            return self._a[name]
        except KeyError:
            raise NotFoundError(f"artifact {name!r} is not in the manifest.") from None

    def list(self, *, stage: str | None = None) -> list[ArtifactRecord]:
        return [
            self._a[k] for k in sorted(self._a) if stage in (None, self._a[k].stage)
        ]


class _Stages(StageRepo):
    def __init__(self) -> None:
        self._s: dict[tuple[str, str], StageCheckpoint] = {}

    def mark(self, checkpoint: StageCheckpoint) -> None:
        self._s[(checkpoint.stage, checkpoint.key)] = _stamp(checkpoint, "when")

    def get(self, stage: str, *, key: str) -> StageCheckpoint | None:
        return self._s.get((stage, key))

    def list(self, stage: str) -> list[StageCheckpoint]:
        return [self._s[k] for k in sorted(self._s) if k[0] == stage]

    def forget(self, stage: str, key: str) -> bool:
        return self._s.pop((stage, key), None) is not None

    def reset(self, stage: str) -> int:
        keys = [k for k in self._s if k[0] == stage]
        for k in keys:
            del self._s[k]
        return len(keys)


class _Predictions(PredictionRepo):
    def __init__(self) -> None:
        self._p: dict[tuple[str, str], PredictionRecord] = {}

    def put(self, record: PredictionRecord) -> None:
        self._p[(record.dataset, record.model)] = _stamp(record, "created")

    def get(self, model: str, *, dataset: str) -> PredictionRecord:
        try:
            return self._p[(dataset, model)]
        except KeyError:
            raise NotFoundError(
                f"no cached predictions of model {model!r} on {dataset!r}."
            ) from None

    def list(
        self, *, model: str | None = None, dataset: str | None = None
    ) -> list[PredictionRecord]:
        return [
            self._p[k]
            for k in sorted(self._p)
            if dataset in (None, k[0]) and model in (None, k[1])
        ]


class MemoryStore(Store):
    """A :class:`~retest.store.base.Store` held in memory (thread-safe writes are the
    caller's business; intended for tests and notebooks).

    Examples
    --------
    >>> from retest.store.rows import ClassRow
    >>> with MemoryStore() as s:
    ...     s.classes.put([ClassRow(0, "cat")])
    ...     s.classes.by_name("cat").id
    0
    """

    kind: Literal["sqlite", "memory"] = "memory"

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.classes = _Classes()
        self.references = _References()
        self.candidates = _Candidates()
        self.tasks = _Tasks()
        self.annotations = _Annotations()
        self.blacklist = _Blacklist()
        self.neardup = _NearDup()
        self.revisions = _Revisions()
        self.artifacts = _Artifacts()
        self.stages = _Stages()
        self.predictions = _Predictions()

    def schema_version(self) -> int:
        from retest.store._sqlite_schema import SCHEMA_VERSION

        return SCHEMA_VERSION

    def close(self) -> None:
        pass
