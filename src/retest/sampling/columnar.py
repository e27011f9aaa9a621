"""The candidate pool as columns: what the samplers work on.

A pool of ten million candidates as :class:`CandidateInfo` records costs
gigabytes and a Python pass per sampler. :class:`ColumnarPool` keeps the
candidates that carry any information (answers, flags) as arrays, and every
other candidate only as a count per class: such a *plain* candidate has
frequency 0.0, no answers and no flags, so one rule check decides all of them
at once. Only when the rules let plain candidates in (no answers required, e.g.
``class-balanced``) does a class's id order come from :class:`PlainRows` (the
project store reads it from its indexes), and then only ids that are drawn are
ever turned into strings.

The samplers (:mod:`retest.sampling.basic`,
:mod:`retest.sampling.matched_frequency`) accept records or a columnar pool;
records are converted by :meth:`ColumnarPool.from_records`, so there is one
implementation. The result is the same as the record-by-record rules of
:func:`~retest.sampling.eligibility.check_candidate` and
:func:`~retest.sampling.eligibility.split_eligible` give.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from retest.errors import InputValidationError
from retest.sampling.eligibility import (
    BELOW_THRESHOLD,
    BLACKLISTED,
    FEW_ANNOTATIONS,
    NEAR_DUPLICATE,
    SAMPLER_REASONS,
    UNREVIEWED,
    CandidateInfo,
    EligibilityRules,
    ExclusionReport,
    check_candidate,
)
from retest.sampling.histogram import DEFAULT_BINS, bin_index, bin_indices

__all__ = [
    "ClassRows",
    "ColumnarPool",
    "PlainRows",
    "as_columnar",
    "draw_positions",
    "eligible_by_class",
]

_ELIGIBLE = len(SAMPLER_REASONS)
_LABELS = (*SAMPLER_REASONS, "eligible")


class PlainRows(Protocol):
    """Where the plain candidates of a :class:`ColumnarPool` are read from.

    A *handle* is an integer naming one candidate (the store's row number).
    """

    def order(self, class_code: int) -> NDArray[np.int64]:
        """Handles of every candidate of the class, listed or plain, sorted by id."""
        ...

    def ids(self, handles: NDArray[np.int64]) -> list[str]:
        """The ids of ``handles``, in the same order."""
        ...

    def handles(self, ids: Collection[str]) -> NDArray[np.int64]:
        """Handles of those ``ids`` that are candidates (any order)."""
        ...


@dataclass(frozen=True, eq=False)
class ColumnarPool:
    """Candidates as columns: listed rows, plus plain candidates counted per class.

    Parameters
    ----------
    class_names : tuple of str
        Class name of each class code.
    ids : list of str
        Id of each listed row (unique).
    cls : array of int
        Class code of each listed row.
    frequency, n_assignments : arrays of float
        Selection frequency and valid assignments of each listed row.
    blacklisted, near_duplicate, reviewed : arrays of bool
    nn_distance : array of float
        Distance to the nearest original, NaN when unknown.
    handles : array of int, optional
        Each listed row's handle in ``plain_rows`` (needed with ``plain``).
    plain : mapping of class code to int
        Candidates per class not listed: frequency 0.0, no answers, no flags.
    plain_rows : PlainRows, optional
        Reads the plain candidates when a rule lets them in.
    removed : array of int
        Handles that ``plain_rows.order`` lists but the pool leaves out.
    """

    class_names: tuple[str, ...]
    ids: list[str]
    cls: NDArray[np.int64]
    frequency: NDArray[np.float64]
    n_assignments: NDArray[np.float64]
    blacklisted: NDArray[np.bool_]
    near_duplicate: NDArray[np.bool_]
    reviewed: NDArray[np.bool_]
    nn_distance: NDArray[np.float64]
    handles: NDArray[np.int64] | None = None
    plain: Mapping[int, int] = field(default_factory=dict)
    plain_rows: PlainRows | None = None
    removed: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.ids) + sum(self.plain.values())

    @classmethod
    def from_records(cls, records: Iterable[CandidateInfo]) -> ColumnarPool:
        """The pool of ``records`` (every row listed); a repeated id raises."""
        recs = list(records)
        ids = [c.id for c in recs]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise InputValidationError(
                f"candidate {dup!r} appears twice in the pool; ids must be unique."
            )
        names = sorted({c.class_name for c in recs})
        code = {n: i for i, n in enumerate(names)}
        return cls(
            tuple(names),
            ids,
            np.array([code[c.class_name] for c in recs], np.int64),
            np.array([c.frequency for c in recs], np.float64),
            np.array([c.n_assignments for c in recs], np.float64),
            np.array([c.blacklisted for c in recs], np.bool_),
            np.array([c.near_duplicate for c in recs], np.bool_),
            np.array([c.reviewed for c in recs], np.bool_),
            np.array(
                [np.nan if c.nn_distance is None else c.nn_distance for c in recs],
                np.float64,
            ),
        )

    def present_classes(self) -> list[str]:
        """Sorted names of the classes with at least one candidate."""
        codes = set(np.unique(self.cls).tolist())
        codes |= {k for k, n in self.plain.items() if n > 0}
        return sorted(self.class_names[k] for k in codes)


def as_columnar(pool: Sequence[CandidateInfo] | ColumnarPool) -> ColumnarPool:
    """``pool`` as a :class:`ColumnarPool` (records are converted)."""
    return pool if isinstance(pool, ColumnarPool) else ColumnarPool.from_records(pool)


def draw_positions(rng: np.random.Generator, n: int, k: int) -> NDArray[np.int64]:
    """Positions of ``k`` distinct items of ``n``, sorted, drawn exactly as
    :func:`retest.sampling.base.draw` draws them (all when ``k >= n``)."""
    if k <= 0:
        return np.zeros(0, np.int64)
    if k >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class ClassRows:
    """One class's eligible candidates in id order (what a sampler draws from).

    ``in_previous`` marks members of the previous revision; :meth:`ids` turns
    positions into ids (reading plain candidates' ids only for those asked).
    """

    frequency: NDArray[np.float64]
    n_assignments: NDArray[np.float64]
    in_previous: NDArray[np.bool_]
    _row: NDArray[np.int64]
    _handle: NDArray[np.int64]
    _pool: ColumnarPool

    def __len__(self) -> int:
        return len(self._row)

    def ids(self, positions: Sequence[int] | NDArray[np.int64]) -> list[str]:
        pos = np.asarray(positions, np.int64)
        rows = self._row[pos]
        out: list[str | None] = [
            self._pool.ids[r] if r >= 0 else None for r in rows.tolist()
        ]
        need = [i for i, v in enumerate(out) if v is None]
        if need:
            assert self._pool.plain_rows is not None
            got = self._pool.plain_rows.ids(self._handle[pos[need]])
            for i, v in zip(need, got, strict=True):
                out[i] = v
        return [str(v) for v in out]


def _reasons(pool: ColumnarPool, rules: EligibilityRules) -> NDArray[np.int64]:
    """Each listed row's first failing reason (index into SAMPLER_REASONS), or _ELIGIBLE.

    The checks of :func:`check_candidate`, assigned from last to first so the
    first failing one wins."""
    n = len(pool.ids)
    out = np.full(n, _ELIGIBLE, np.int64)
    if rules.require_reviewed:
        out[~pool.reviewed] = SAMPLER_REASONS.index(UNREVIEWED)
    near = pool.near_duplicate.copy()
    if rules.max_nn_distance is not None:
        near |= pool.nn_distance <= rules.max_nn_distance
    out[near] = SAMPLER_REASONS.index(NEAR_DUPLICATE)
    taus = np.array(
        [
            np.nan if (t := rules.threshold_for(name)) is None else t
            for name in pool.class_names
        ],
        np.float64,
    )
    if n and len(taus):
        tau = taus[pool.cls]
        out[~np.isnan(tau) & (pool.frequency < tau)] = SAMPLER_REASONS.index(
            BELOW_THRESHOLD
        )
    out[pool.n_assignments < rules.min_annotations] = SAMPLER_REASONS.index(
        FEW_ANNOTATIONS
    )
    out[pool.blacklisted] = SAMPLER_REASONS.index(BLACKLISTED)
    return out


def _plain_reason(name: str, rules: EligibilityRules) -> int:
    r = check_candidate(CandidateInfo("", name), rules)
    return _ELIGIBLE if r is None else SAMPLER_REASONS.index(r)


def eligible_by_class(
    pool: ColumnarPool,
    rules: EligibilityRules,
    *,
    bins: Sequence[float] = DEFAULT_BINS,
    previous: Iterable[str] | None = None,
) -> tuple[dict[str, ClassRows], ExclusionReport]:
    """Eligible candidates per class (in id order) and the exclusion report,
    as :func:`~retest.sampling.eligibility.split_eligible` gives them."""
    reasons = _reasons(pool, rules)
    b = bin_indices(pool.frequency, bins)
    nb = len(bins) + 1
    by_class: dict[str, dict[str, int]] = {}
    by_bin: dict[str, dict[int, dict[str, int]]] = {}
    key = (pool.cls * nb + b) * (_ELIGIBLE + 1) + reasons
    uniq, counts = np.unique(key, return_counts=True)
    for k, cnt in zip(uniq.tolist(), counts.tolist(), strict=True):
        rest, r = divmod(k, _ELIGIBLE + 1)
        c, bb = divmod(rest, nb)
        name = pool.class_names[c]
        cls_counts = by_class.setdefault(name, {})
        cls_counts[_LABELS[r]] = cls_counts.get(_LABELS[r], 0) + cnt
        bin_counts = by_bin.setdefault(name, {}).setdefault(bb, {})
        bin_counts[_LABELS[r]] = cnt
    plain_bin = bin_index(0.0, bins)
    plain_ok: dict[int, bool] = {}
    for c, cnt in pool.plain.items():
        if cnt <= 0:
            continue
        name = pool.class_names[c]
        r = _plain_reason(name, rules)
        plain_ok[c] = r == _ELIGIBLE
        cls_counts = by_class.setdefault(name, {})
        cls_counts[_LABELS[r]] = cls_counts.get(_LABELS[r], 0) + cnt
        bin_counts = by_bin.setdefault(name, {}).setdefault(plain_bin, {})
        bin_counts[_LABELS[r]] = bin_counts.get(_LABELS[r], 0) + cnt
    report = ExclusionReport(
        {k: dict(sorted(v.items())) for k, v in sorted(by_class.items())},
        {
            k: {bb: dict(sorted(r.items())) for bb, r in sorted(v.items())}
            for k, v in sorted(by_bin.items())
        },
    )
    prev = frozenset(previous or ())
    prev_handles: NDArray[np.int64] | None = None
    out: dict[str, ClassRows] = {}
    ok = reasons == _ELIGIBLE
    for c in sorted(set(np.unique(pool.cls[ok]).tolist()) | set(plain_ok)):
        name = pool.class_names[c]
        listed = np.flatnonzero(ok & (pool.cls == c))
        if plain_ok.get(c):
            if prev_handles is None:
                prev_handles = _prev_handles(pool, prev)
            out[name] = _with_plain(pool, c, reasons, prev_handles, prev)
        elif len(listed):
            # listed rows only: ids are known, sort them here
            order = sorted(listed.tolist(), key=pool.ids.__getitem__)
            rows = np.array(order, np.int64)
            out[name] = ClassRows(
                pool.frequency[rows],
                pool.n_assignments[rows],
                np.array([pool.ids[r] in prev for r in order], np.bool_),
                rows,
                np.full(len(rows), -1, np.int64),
                pool,
            )
    return dict(sorted(out.items())), report


def _prev_handles(pool: ColumnarPool, prev: frozenset[str]) -> NDArray[np.int64]:
    if not prev or pool.plain_rows is None:
        return np.zeros(0, np.int64)
    return np.asarray(pool.plain_rows.handles(prev), np.int64)


def _with_plain(
    pool: ColumnarPool,
    c: int,
    reasons: NDArray[np.int64],
    prev_handles: NDArray[np.int64],
    prev: frozenset[str],
) -> ClassRows:
    """Class ``c``'s eligible rows when its plain candidates are eligible: the
    class's id order from ``plain_rows``, minus removed and ineligible listed rows."""
    if pool.plain_rows is None or pool.handles is None:
        raise InputValidationError(
            "a pool with plain candidates needs plain_rows and the listed rows' "
            "handles."
        )
    order = np.asarray(pool.plain_rows.order(c), np.int64)
    mine = np.flatnonzero(pool.cls == c)
    bad = mine[reasons[mine] != _ELIGIBLE]
    drop = np.concatenate([pool.removed, pool.handles[bad]])
    if len(drop):
        order = order[~np.isin(order, drop)]
    # listed rows among them: their handle → row
    good = mine[reasons[mine] == _ELIGIBLE]
    row = np.full(len(order), -1, np.int64)
    if len(good):
        hs = pool.handles[good]
        srt = np.argsort(hs)
        pos = np.searchsorted(hs[srt], order)
        pos = np.minimum(pos, len(hs) - 1)
        hit = hs[srt][pos] == order
        row[hit] = good[srt][pos[hit]]
    listed = row >= 0
    freq = np.zeros(len(order), np.float64)
    n = np.zeros(len(order), np.float64)
    freq[listed] = pool.frequency[row[listed]]
    n[listed] = pool.n_assignments[row[listed]]
    in_prev = np.isin(order, prev_handles)
    if prev:
        in_prev[listed] = [pool.ids[r] in prev for r in row[listed].tolist()]
    return ClassRows(freq, n, in_prev, row, order, pool)
