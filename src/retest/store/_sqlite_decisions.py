"""SQLite repositories of decisions and bookkeeping: blacklist, near-duplicates,
revisions, artifacts, stages, predictions."""

from __future__ import annotations

import builtins
import dataclasses
import json
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from retest.errors import NotFoundError, StoreError
from retest.store import _sqlite_cover as _cover
from retest.store._sqlite_columns import _ID
from retest.store._sqlite_common import (
    _BATCH,
    _dumps,
    _extra,
    _loads_extra,
    _where,
)
from retest.store._sqlite_common import (
    Repo as _Repo,
)
from retest.store.base import (
    ArtifactRepo,
    BlacklistRepo,
    NearDupRepo,
    PredictionRepo,
    RevisionRepo,
    StageRepo,
)
from retest.store.rows import (
    ArtifactRecord,
    BlacklistEvent,
    DuplicateVerdict,
    NeighbourList,
    NeighbourReview,
    PredictionRecord,
    ReviewState,
    Revision,
    RevisionMember,
    StageCheckpoint,
    utc_now,
)

__all__ = [
    "_Artifacts",
    "_Blacklist",
    "_NearDup",
    "_Predictions",
    "_Revisions",
    "_Stages",
]


class _Blacklist(_Repo, BlacklistRepo):
    def add(self, events: Iterable[BlacklistEvent]) -> list[int]:
        now = utc_now()
        data = (
            (None, e.item_id, e.reason, e.who, e.when or now, int(e.undo))
            for e in events
        )
        return self._db.append(
            "blacklist", "INSERT INTO blacklist VALUES (?,?,?,?,?,?)", data
        )

    def events(self, *, item_id: str | None = None) -> list[BlacklistEvent]:
        where, params = _where(item_id=item_id)
        rows = self._db.rows(f"SELECT * FROM blacklist{where} ORDER BY id", params)
        return [BlacklistEvent(r[1], r[2], r[3], r[4], bool(r[5]), r[0]) for r in rows]

    def current(self) -> dict[str, str]:
        rows = self._db.rows(
            "SELECT b.item_id, b.reason, b.undo FROM blacklist b JOIN "
            "(SELECT item_id, MAX(id) AS m FROM blacklist GROUP BY item_id) l "
            "ON b.id = l.m ORDER BY b.item_id"
        )
        return {i: r for i, r, u in rows if not u}


def _nl_row(r: Sequence[Any]) -> NeighbourList:
    dists = tuple(np.frombuffer(r[3], dtype="<f8").tolist())
    return NeighbourList(r[0], r[1], tuple(json.loads(r[2])), dists)


# The closest distance's two most significant bytes (sign, exponent, 4 bits of
# mantissa; stored little-endian), big-endian: for distances >= 0 they compare
# as bytes the way the numbers do, so SQLite skips, without reading a list into
# Python, every list whose closest distance is clearly above a threshold.
_TOP2 = "CAST(substr(distances, 8, 1) || substr(distances, 7, 1) AS BLOB)"


def _within(t: float | None) -> tuple[str, tuple[Any, ...]]:
    """SQL condition keeping at least the lists whose first (closest) distance is
    ``<= t`` (and every list starting with a negative distance)."""
    if t is None or not t >= 0.0 or t == float("inf"):
        return "", ()
    top = struct.pack(">d", t)[:2]
    return f" AND ({_TOP2} <= ? OR substr(distances, 8, 1) >= X'80')", (top,)


def _closest_first(nl: NeighbourList) -> tuple[list[str], np.ndarray]:
    """The list's ids and distances closest first (a stable sort, NaN last), as
    :class:`NeighbourList` documents and :func:`_within` relies on."""
    d = np.asarray(nl.distances, dtype="<f8")
    if (d[1:] < d[:-1]).any() or np.isnan(d).any():
        o = np.argsort(d, kind="stable")
        return [nl.ref_ids[i] for i in o.tolist()], d[o]
    return builtins.list(nl.ref_ids), d


_SCAN = 1 << 20
"""Candidate rowids per query of :meth:`_NearDup.without_lists`."""


class _NearDup(_Repo, NearDupRepo):
    def put_neighbours(self, lists: Iterable[NeighbourList]) -> int:
        def rows() -> Iterator[tuple[Any, ...]]:
            for nl in lists:
                if len(nl.ref_ids) != len(nl.distances):
                    raise StoreError(
                        f"neighbour list of {nl.candidate_id!r} ({nl.metric}) has "
                        f"{len(nl.ref_ids)} ids but {len(nl.distances)} distances."
                    )
                refs, d = _closest_first(nl)
                yield (nl.candidate_id, nl.metric, _dumps(refs), d.tobytes())

        return self._db.insert_count(
            "INSERT OR REPLACE INTO neighbours VALUES (?,?,?,?)", rows()
        )

    def neighbours(
        self, candidate_id: str, *, metric: str | None = None
    ) -> list[NeighbourList]:
        where, params = _where(candidate_id=candidate_id, metric=metric)
        rows = self._db.rows(f"SELECT * FROM neighbours{where} ORDER BY metric", params)
        return [_nl_row(r) for r in rows]

    def iter_neighbours(
        self, *, metric: str, within: float | None = None
    ) -> Iterator[NeighbourList]:
        last = ""
        cond, extra = _within(within)
        while True:
            rows = self._db.rows(
                f"SELECT * FROM neighbours WHERE metric = ? AND candidate_id > ?{cond} "
                "ORDER BY candidate_id LIMIT ?",
                (metric, last, *extra, _BATCH),
            )
            if not rows:
                return
            last = rows[-1][0]
            yield from (_nl_row(r) for r in rows)

    def list_counts(self, metrics: Sequence[str]) -> dict[str, int]:
        # one pass over the primary-key index, no list read, no sort
        ms = builtins.list(dict.fromkeys(metrics))
        if not ms:
            return {}
        sums = ", ".join("TOTAL(metric = ?)" for _ in ms)
        row = self._db.one(f"SELECT {sums} FROM neighbours", ms)
        return {m: int(n) for m, n in zip(ms, row, strict=True)}

    def list_metrics(self) -> set[str]:
        return {r[0] for r in self._db.rows("SELECT metric FROM neighbour_cover")}

    def mark_covered(self, metrics: Sequence[str]) -> dict[str, bool]:
        with self._db.tx() as c:
            return _cover.mark(c, metrics)

    def without_lists(self, metrics: Sequence[str]) -> builtins.list[str]:
        # Only the candidates a metric's mark does not vouch for are probed: its
        # gaps and every candidate after the lowest mark (retest.store._sqlite_cover).
        # Each probes the (candidate_id, metric) primary key once per metric inside
        # SQLite, in seq order ("+class_id": not through the class index): no list
        # is read, and only the candidates found reach Python.
        ms = builtins.list(dict.fromkeys(metrics))
        if not ms:
            return []
        probe = " OR ".join(
            "NOT EXISTS (SELECT 1 FROM neighbours WHERE candidate_id = c.id "
            "AND metric = ?)"
            for _ in ms
        )
        marks = ",".join("?" * len(ms))

        def gaps(c: Any) -> tuple[int, builtins.list[str]]:
            # one snapshot: the marks and the gaps they leave
            upto = dict(
                c.execute(
                    f"SELECT metric, upto FROM neighbour_cover WHERE metric IN ({marks})",
                    ms,
                ).fetchall()
            )
            lo = min(int(upto.get(m, 0)) for m in ms)
            rows = c.execute(
                f"SELECT c.id FROM (SELECT seq, {_ID} AS id FROM candidates WHERE "
                f"seq IN (SELECT seq FROM neighbour_gaps WHERE metric IN ({marks}) "
                "AND seq <= ?) AND +class_id IS NOT NULL) AS c "
                f"WHERE {probe} ORDER BY c.seq",
                (*ms, lo, *ms),
            ).fetchall()
            return lo, [r[0] for r in rows]

        last, out = self._db.read(gaps)
        while True:
            top = self._db.one("SELECT MAX(seq) FROM candidates")[0]
            if top is None or last >= top:
                return out
            # rowid ranges keep each read short (a writer is never held off long)
            hi = last + _SCAN
            rows = self._db.rows(
                f"SELECT c.id FROM (SELECT seq, {_ID} AS id FROM candidates "
                "WHERE seq > ? AND seq <= ? AND +class_id IS NOT NULL) AS c "
                f"WHERE {probe} ORDER BY c.seq",
                (last, hi, *ms),
            )
            out.extend(r[0] for r in rows)
            last = hi

    def add_verdicts(self, verdicts: Iterable[DuplicateVerdict]) -> list[int]:
        now = utc_now()
        data = (
            (
                None,
                v.candidate_id,
                v.ref_id,
                v.metric,
                int(v.is_duplicate),
                v.who,
                v.when or now,
            )
            for v in verdicts
        )
        return self._db.append(
            "verdicts", "INSERT INTO verdicts VALUES (?,?,?,?,?,?,?)", data
        )

    def verdicts(self, *, candidate_id: str | None = None) -> list[DuplicateVerdict]:
        where, params = _where(candidate_id=candidate_id)
        rows = self._db.rows(f"SELECT * FROM verdicts{where} ORDER BY id", params)
        return [
            DuplicateVerdict(r[1], r[2], r[3], bool(r[4]), r[5], r[6], r[0])
            for r in rows
        ]

    def add_reviews(self, reviews: Iterable[NeighbourReview]) -> list[int]:
        now = utc_now()
        data = (
            (
                None,
                r.candidate_id,
                r.metric,
                r.reviewer,
                _dumps(builtins.list(r.references)),
                r.when or now,
            )
            for r in reviews
        )
        return self._db.append(
            "neighbour_reviews",
            "INSERT INTO neighbour_reviews VALUES (?,?,?,?,?,?)",
            data,
        )

    def reviews(
        self, *, candidate_id: str | None = None, metric: str | None = None
    ) -> list[NeighbourReview]:
        where, params = _where(candidate_id=candidate_id, metric=metric)
        rows = self._db.rows(
            f"SELECT * FROM neighbour_reviews{where} ORDER BY id", params
        )
        return [
            NeighbourReview(r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[0])
            for r in rows
        ]


_REV_COLS = "name, strategy, params, seed, parent, valid, created, shortfall"


def _rev_row(r: Sequence[Any]) -> Revision:
    return Revision(
        r[0], r[1], json.loads(r[2]), r[3], r[4], bool(r[5]), r[6], json.loads(r[7])
    )


class _Revisions(_Repo, RevisionRepo):
    def create(self, revision: Revision, members: Sequence[RevisionMember]) -> Revision:
        rev = revision
        if rev.created is None:
            rev = dataclasses.replace(rev, created=utc_now())
        with self._db.tx() as c:
            if c.execute(
                "SELECT 1 FROM revisions WHERE name = ?", (rev.name,)
            ).fetchone():
                raise StoreError(
                    f"revision {rev.name!r} already exists; revisions are immutable. "
                    "Choose a new name."
                )
            if (
                rev.parent is not None
                and not c.execute(
                    "SELECT 1 FROM revisions WHERE name = ?", (rev.parent,)
                ).fetchone()
            ):
                raise NotFoundError(
                    f"parent revision {rev.parent!r} of {rev.name!r} does not exist."
                )
            c.execute(
                f"INSERT INTO revisions({_REV_COLS}) VALUES (?,?,?,?,?,?,?,?)",
                (
                    rev.name,
                    rev.strategy,
                    _dumps(dict(rev.params)),
                    rev.seed,
                    rev.parent,
                    int(rev.valid),
                    rev.created,
                    _dumps(dict(rev.shortfall)),
                ),
            )
            c.executemany(
                "INSERT INTO revision_members VALUES (?,?,?,?,?,?,?)",
                (
                    (rev.name, i, m.item_id, m.class_id, m.bin, m.origin, m.from_bin)
                    for i, m in enumerate(members)
                ),
            )
        return self.get(rev.name)

    def get(self, name: str) -> Revision:
        row = self._db.one(f"SELECT {_REV_COLS} FROM revisions WHERE name = ?", (name,))
        if row is None:
            known = ", ".join(r.name for r in self.list()) or "none"
            raise NotFoundError(
                f"revision {name!r} does not exist (revisions: {known})."
            )
        return _rev_row(row)

    def list(self) -> list[Revision]:
        return [
            _rev_row(r)
            for r in self._db.rows(f"SELECT {_REV_COLS} FROM revisions ORDER BY seq")
        ]

    def members(self, name: str) -> builtins.list[RevisionMember]:
        self.get(name)
        rows = self._db.rows(
            "SELECT item_id, class_id, bin, origin, from_bin FROM revision_members "
            "WHERE revision = ? ORDER BY pos",
            (name,),
        )
        return [RevisionMember(*r) for r in rows]

    def set_review(self, state: ReviewState) -> None:
        self.get(state.revision)
        with self._db.tx() as c:
            c.execute(
                "INSERT INTO review_states VALUES (?,?,?,?,?,?,?)",
                (
                    None,
                    state.revision,
                    state.class_id,
                    int(state.reviewed),
                    int(state.problematic),
                    state.who,
                    state.when or utc_now(),
                ),
            )

    def review_events(self, name: str) -> builtins.list[ReviewState]:
        self.get(name)
        rows = self._db.rows(
            "SELECT revision, class_id, reviewed, problematic, who, at "
            "FROM review_states WHERE revision = ? ORDER BY id",
            (name,),
        )
        return [
            ReviewState(r[0], r[1], bool(r[2]), bool(r[3]), r[4], r[5]) for r in rows
        ]


class _Artifacts(_Repo, ArtifactRepo):
    def put(self, record: ArtifactRecord) -> None:
        r = record
        with self._db.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO artifacts VALUES (?,?,?,?,?,?,?)",
                (
                    r.name,
                    r.path,
                    r.sha256,
                    r.stage,
                    _dumps(dict(r.params)),
                    r.version,
                    r.created or utc_now(),
                ),
            )

    @staticmethod
    def _row(r: Sequence[Any]) -> ArtifactRecord:
        return ArtifactRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6])

    def get(self, name: str) -> ArtifactRecord:
        row = self._db.one("SELECT * FROM artifacts WHERE name = ?", (name,))
        if row is None:
            raise NotFoundError(f"artifact {name!r} is not in the manifest.")
        return self._row(row)

    def list(self, *, stage: str | None = None) -> list[ArtifactRecord]:
        where, params = _where(stage=stage)
        rows = self._db.rows(f"SELECT * FROM artifacts{where} ORDER BY name", params)
        return [self._row(r) for r in rows]


class _Stages(_Repo, StageRepo):
    def mark(self, checkpoint: StageCheckpoint) -> None:
        k = checkpoint
        with self._db.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO stages VALUES (?,?,?,?,?)",
                (k.stage, k.key, int(k.done), k.artifact, k.when or utc_now()),
            )

    def get(self, stage: str, *, key: str) -> StageCheckpoint | None:
        r = self._db.one(
            "SELECT * FROM stages WHERE stage = ? AND key = ?", (stage, key)
        )
        return (
            None if r is None else StageCheckpoint(r[0], r[1], bool(r[2]), r[3], r[4])
        )

    def list(self, stage: str) -> list[StageCheckpoint]:
        rows = self._db.rows(
            "SELECT * FROM stages WHERE stage = ? ORDER BY key", (stage,)
        )
        return [StageCheckpoint(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def forget(self, stage: str, key: str) -> bool:
        with self._db.tx() as c:
            sql = "DELETE FROM stages WHERE stage = ? AND key = ?"
            return bool(c.execute(sql, (stage, key)).rowcount)

    def reset(self, stage: str) -> int:
        with self._db.tx() as c:
            return int(
                c.execute("DELETE FROM stages WHERE stage = ?", (stage,)).rowcount
            )


class _Predictions(_Repo, PredictionRepo):
    def put(self, record: PredictionRecord) -> None:
        r = record
        with self._db.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO predictions VALUES (?,?,?,?,?,?)",
                (
                    r.model,
                    r.dataset,
                    r.path,
                    r.sha256,
                    r.created or utc_now(),
                    _extra(r.extra),
                ),
            )

    @staticmethod
    def _row(r: Sequence[Any]) -> PredictionRecord:
        return PredictionRecord(r[0], r[1], r[2], r[3], r[4], _loads_extra(r[5]))

    def get(self, model: str, *, dataset: str) -> PredictionRecord:
        row = self._db.one(
            "SELECT * FROM predictions WHERE model = ? AND dataset = ?",
            (model, dataset),
        )
        if row is None:
            raise NotFoundError(
                f"no cached predictions of model {model!r} on {dataset!r}."
            )
        return self._row(row)

    def list(
        self, *, model: str | None = None, dataset: str | None = None
    ) -> list[PredictionRecord]:
        where, params = _where(model=model, dataset=dataset)
        rows = self._db.rows(
            f"SELECT * FROM predictions{where} ORDER BY dataset, model", params
        )
        return [self._row(r) for r in rows]
