"""Which candidates may enter a revision, and why the others may not.

This is the one place that decides. ``retest sample``, ``retest status``,
``retest export``, the web labeling and review pages and the demo all call
:func:`candidate_eligibility`; none of them re-derives a rule.

A candidate is excluded for every reason that applies, reported in this order
(:data:`REASONS`):

``blacklisted``
    On the current blacklist.
``exact_copy``
    Its pixels are byte-identical to an original (reference) image (content hash).
``near_original``
    The automatic rule: its nearest original under a pixel metric (``l2`` or
    ``warp`` neighbour lists of the dedup stage) lies within the near-original
    threshold (:func:`retest.dedup.rules.near_original_threshold`: CIFAR-10.1's
    "plain L2 ≤ 1000 on 32×32×3", squared and scaled to the image's number of
    values; ``[thresholds] near_original`` in ``retest.toml`` overrides it).
``near_duplicate``
    In a near-duplicate component (confirmed verdicts, automatic pairs, shared
    source ids) that contains an original image.
``pool_duplicate``
    In a component of candidates only, and not the one member kept
    (:func:`retest.dedup.rules.resolve_near_duplicates`: highest selection
    frequency of the best-placed class; ties broken by a seeded hash of the id).
``unreviewed``
    Has a neighbour within a review target that nobody has reviewed yet
    (the dedup review queue). Excluded unless ``include_unreviewed``.

Stale inputs are refused, not used: :func:`check_fresh` raises when candidates
were ingested after the last dedup run or an ingest was interrupted.

The decision is sparse: it reads the few candidates that have a reason (from
the blacklist, the references' content hashes, the neighbour lists, the
near-duplicate graph) and counts the rest per class in SQL, so ten million
candidates cost seconds and no Python object per eligible candidate.
"""

from __future__ import annotations

import itertools
import shlex
import weakref
from collections import Counter
from collections.abc import (
    Callable,
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from typing import Any, TypeVar

from retest._validation import fmt_count
from retest.dedup.rules import (
    DedupCandidate,
    Resolution,
    near_original_threshold,
    resolve_near_duplicates,
)
from retest.errors import StageError
from retest.project._project import Project
from retest.project._votes import selection_frequencies
from retest.sampling.eligibility import (
    BLACKLISTED,
    EXACT_COPY,
    NEAR_DUPLICATE,
    NEAR_ORIGINAL,
    POOL_DUPLICATE,
    UNREVIEWED,
)
from retest.sampling.selection_frequency import FrequencyStat
from retest.store.base import Store
from retest.store.rows import content_id, split_reference_id

__all__ = [
    "AUTO_METRICS",
    "ORIGINAL_COPY_REASONS",
    "REASONS",
    "CandidateReasons",
    "Eligibility",
    "candidate_eligibility",
    "check_fresh",
    "class_tallies",
    "copies",
    "eligibility_summary",
    "heavy_automatic_losses",
    "ineligible_members",
    "pending_reviews",
    "selection_frequencies",
    "stale_candidates",
]

REASONS: tuple[str, ...] = (
    BLACKLISTED,
    EXACT_COPY,
    NEAR_ORIGINAL,
    NEAR_DUPLICATE,
    POOL_DUPLICATE,
    UNREVIEWED,
)
"""The reasons of the project's decision, in the order they are reported."""
ORIGINAL_COPY_REASONS: tuple[str, ...] = (EXACT_COPY, NEAR_ORIGINAL, NEAR_DUPLICATE)
"""Reasons that mean "a copy of an original image": such a candidate can never
enter a revision, whatever its votes (``pool_duplicate`` can: a group of pool
images keeps one member)."""
DUPLICATE_REASONS = frozenset((*ORIGINAL_COPY_REASONS, POOL_DUPLICATE))
"""Reasons that mean "a copy of something": what ``status`` counts as near-duplicates."""
AUTO_METRICS = ("l2", "warp")
"""Pixel metrics whose distances the automatic near-original rule reads."""
_T = TypeVar("_T")
GOOD_FREQUENCY = 0.7
"""Selection frequency of a "good" candidate (the near-duplicate rule's class counts)."""


class CandidateReasons(Mapping[str, tuple[str, ...]]):
    """Every candidate with a class → its reasons, holding only the excluded.

    A candidate with a reason is stored with its class; every other candidate
    with a class maps to ``()`` and is read from the store only when asked for
    by id or iterated, so the mapping stays small however large the pool.

    Attributes
    ----------
    excluded : dict of str to tuple of str
        Candidates with at least one reason → their reasons.
    class_of : dict of str to int
        The class of every candidate in ``excluded``.
    per_class : dict of int to int
        Candidates per class (all of them, excluded or not).
    """

    __slots__ = (
        "__weakref__",
        "_open_reader",
        "_reader",
        "_store",
        "class_of",
        "excluded",
        "per_class",
    )

    def __init__(
        self,
        excluded: dict[str, tuple[str, ...]],
        class_of: dict[str, int],
        per_class: dict[int, int],
        store: Store,
        open_reader: Callable[[], Store | None] | None = None,
    ) -> None:
        self.excluded = excluded
        self.class_of = class_of
        self.per_class = per_class
        self._store = store
        self._open_reader = open_reader
        self._reader: Store | None = None

    def _read(self, fn: Callable[[Store], _T]) -> _T:
        """``fn`` on a read-only view of the project's database, opened on first
        use: a decision outlives the ``with Project.open(...)`` it was made in."""
        if self._reader is None:
            reader = self._open_reader() if self._open_reader else None
            if reader is None:
                self._reader = self._store
            else:
                self._reader = reader
                weakref.finalize(self, reader.close)
        return fn(self._reader)

    def __getitem__(self, cid: str) -> tuple[str, ...]:
        r = self.excluded.get(cid)
        if r is not None:
            return r
        if isinstance(cid, str) and self._read(
            lambda s: _classes_of(s, [cid], has_class=True)
        ):
            return ()
        raise KeyError(cid)

    def __len__(self) -> int:
        return sum(self.per_class.values())

    def __iter__(self) -> Iterator[str]:
        cols = self._read(lambda s: s.candidates.columns(("id",), has_class=True))
        return iter(cols["id"])

    def items(self) -> ItemsView[str, tuple[str, ...]]:
        return _Items(self)

    def values(self) -> ValuesView[tuple[str, ...]]:
        return _Values(self)


class _Items(ItemsView[str, tuple[str, ...]]):
    _mapping: CandidateReasons

    def __iter__(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        ex = self._mapping.excluded
        return ((c, ex.get(c, ())) for c in self._mapping)


class _Values(ValuesView[tuple[str, ...]]):
    _mapping: CandidateReasons

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        ex = self._mapping.excluded
        return (ex.get(c, ()) for c in self._mapping)


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Per-candidate exclusion reasons (an empty tuple means eligible).

    Attributes
    ----------
    reasons : mapping of str to tuple of str
        Every candidate with a class → its reasons in :data:`REASONS` order
        (:func:`candidate_eligibility` gives a :class:`CandidateReasons`, which
        holds only the excluded; any mapping works).
    include_unreviewed : bool
        Whether ``unreviewed`` alone was allowed through.
    near_original_threshold : float or None
        Squared-distance threshold of the automatic rule (None before dedup).
    kept : frozenset of str
        The member kept from each candidate-only near-duplicate component.
    """

    reasons: Mapping[str, tuple[str, ...]]
    include_unreviewed: bool = False
    near_original_threshold: float | None = None
    kept: frozenset[str] = field(default_factory=frozenset)

    def _block(self, r: tuple[str, ...]) -> tuple[str, ...]:
        if self.include_unreviewed and UNREVIEWED in r:
            return tuple(x for x in r if x != UNREVIEWED)
        return r

    def excluded(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """``(candidate, reasons)`` of the candidates with at least one reason."""
        if isinstance(self.reasons, CandidateReasons):
            return iter(self.reasons.excluded.items())
        return ((c, r) for c, r in self.reasons.items() if r)

    def blocking(self, cid: str) -> tuple[str, ...]:
        """The reasons that keep ``cid`` out (``unreviewed`` dropped if allowed)."""
        rs = self.reasons
        r = (
            rs.excluded.get(cid, ())
            if isinstance(rs, CandidateReasons)
            else rs.get(cid, ())
        )
        return self._block(r)

    def is_eligible(self, cid: str) -> bool:
        return not self.blocking(cid) and cid in self.reasons

    def excluded_by(self, reason: str) -> set[str]:
        return {c for c, r in self.excluded() if reason in r}

    @property
    def n_unreviewed_included(self) -> int:
        """Candidates let in only because ``include_unreviewed`` was set."""
        if not self.include_unreviewed:
            return 0
        return sum(1 for _, r in self.excluded() if r == (UNREVIEWED,))

    def counts(self) -> dict[str, int]:
        """Excluded candidates per reason (each once, under its first reason:
        see :func:`_tally`) and ``eligible``."""
        c: Counter[str] = Counter()
        n_excluded = 0
        for _, r in self.excluded():
            n_excluded += 1
            _tally(c, r)
            if not self._block(r):
                c["eligible"] += 1
        c["eligible"] += len(self.reasons) - n_excluded
        return {k: c[k] for k in (*REASONS, "eligible")}

    def first_reason(self, cid: str) -> str | None:
        """The first blocking reason of ``cid`` (None when eligible)."""
        r = self.blocking(cid)
        return r[0] if r else None


def _classes_of(
    store: Store, ids: Iterable[str], *, has_class: bool = False
) -> dict[str, int | None]:
    """Class of every stored candidate among ``ids`` (other ids left out)."""
    cols = store.candidates.columns(("id", "class_id"), ids=ids, has_class=has_class)
    return dict(zip(cols["id"], cols["class_id"], strict=True))


# ------------------------------------------------------------------ exact copies


def _digest_of_row(project: Project, ids: Sequence[str]) -> dict[str, str]:
    """Pixel content hashes of stored items (items without pixels are skipped)."""
    out: dict[str, str] = {}
    with_px = []
    for i in ids:
        arr, row, path = project._location(i)
        if (arr is not None and row is not None) or path is not None:
            with_px.append(i)
    for k in range(0, len(with_px), 4096):
        part = with_px[k : k + 4096]
        for i, px in zip(part, project.pixels(part), strict=True):
            out[i] = content_id(px)
    return out


def _reference_digests(project: Project) -> set[str]:
    """Content hashes of every original image (stored with each reference row
    when it was registered: nothing to read or cache)."""
    return {r.content_id for r in project.store.references.list()}


def _exact_copies(project: Project) -> set[str]:
    """Candidates with a class whose pixels are an original's, byte for byte."""
    ref = _reference_digests(project)
    if not ref:
        return set()
    cands = project.store.candidates
    cols = ("id", "array_name", "array_row")
    out = set()
    # array candidates are stored under the content hash of their pixels
    arr = cands.columns(cols, ids=sorted(cands.existing(ref)), has_class=True)
    for cid, name, row in zip(*arr.values(), strict=True):
        if name is not None and row is not None:
            out.add(cid)
    # file candidates are stored under the hash of their file: hash the pixels
    files = cands.columns(cols, ids=[f[0] for f in cands.file_refs()], has_class=True)
    file_backed = [
        cid
        for cid, name, row in zip(*files.values(), strict=True)
        if name is None or row is None
    ]
    for cid, d in _digest_of_row(project, file_backed).items():
        if d in ref:
            out.add(cid)
    return out


# ------------------------------------------------------------------ dedup state


def _dedup_shape(project: Project) -> tuple[int, ...] | None:
    """Image shape the dedup distances were computed on; before any dedup run,
    the pool's own shape."""
    from retest.project._neardup import dedup_image_shape

    shape = dedup_image_shape(project)
    return _pool_shape(project) if shape is None else tuple(int(x) for x in shape)


def _pool_shape(project: Project) -> tuple[int, ...] | None:
    """Shape of the first candidate with pixels (the dedup stage's input shape
    when it ran without resizing)."""
    for row in project.store.candidates.iter(batch_size=256):
        if row.array_name is not None or row.file_path is not None:
            return tuple(project.pixels([row.id])[0].shape)
    return None


def _auto_pairs(
    project: Project, threshold: float
) -> tuple[set[str], set[tuple[str, str]]]:
    """Candidates whose nearest original under a pixel metric lies within
    ``threshold``, and every (candidate, image) pair within it."""
    near: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for metric in AUTO_METRICS:
        # only lists that start within the threshold are read
        for nl in project.store.neardup.iter_neighbours(
            metric=metric, within=threshold
        ):
            cid = nl.candidate_id
            for ref, d in zip(nl.ref_ids, nl.distances, strict=True):
                if d <= threshold:
                    if split_reference_id(ref) is not None:
                        near.add(cid)
                    if ref != cid:
                        pairs.add((cid, ref))
    # lists of ids that are not candidates (none are written) count for nothing
    known = project.store.candidates.existing(near | {c for c, _ in pairs})
    return near & known, {p for p in pairs if p[0] in known}


def _dedup_infos(
    project: Project,
    ids: Iterable[str],
    stats: Mapping[tuple[str, int], FrequencyStat],
    black: Collection[str],
) -> dict[str, DedupCandidate]:
    """:func:`retest.project._neardup.candidate_infos` of the candidates among ``ids``."""
    cols = project.store.candidates.columns(
        ("id", "class_id", "source", "source_ref"), ids=ids
    )
    out = {}
    for cid, k, src, ref in zip(*cols.values(), strict=True):
        st = stats.get((cid, k)) if k is not None else None
        out[cid] = DedupCandidate(
            class_id=k,
            selection_frequency=st.frequency if st and st.n_assignments else None,
            blacklisted=cid in black,
            source_id=f"{src}:{ref}",
        )
    return out


def _good_counts(
    project: Project,
    stats: Mapping[tuple[str, int], FrequencyStat],
    black: Collection[str],
) -> dict[int, int]:
    """Per class: candidates not blacklisted whose selection frequency for their
    own class is at least :data:`GOOD_FREQUENCY` (what the near-duplicate rule
    balances); only annotated candidates can count, so only they are read."""
    good = {
        (i, k)
        for (i, k), st in stats.items()
        if st.n_assignments and st.frequency >= GOOD_FREQUENCY and i not in black
    }
    cls = _classes_of(project.store, {i for i, _ in good})
    return dict(Counter(k for i, k in good if cls.get(i, -1) == k))


def _resolve(
    project: Project,
    pairs: Iterable[tuple[str, str]],
    stats: Mapping[tuple[str, int], FrequencyStat],
    black: Collection[str],
) -> tuple[Resolution, dict[str, DedupCandidate]]:
    """The near-duplicate graph of ``pairs`` plus the links between candidates
    sharing a source id, and the infos of its candidates (every candidate that
    shares a source id among them: what the review queue compares)."""
    groups = project.store.candidates.source_groups()
    links = [p for g in groups for p in itertools.pairwise(g)]
    pairs = [*pairs, *links]
    infos = _dedup_infos(project, {n for p in pairs for n in p}, stats, black)
    res = resolve_near_duplicates(
        pairs,
        candidates=infos,
        good_counts=_good_counts(project, stats, black),
        seed=_seed(project),
    )
    return res, infos


def _source_infos(project: Project) -> dict[str, DedupCandidate]:
    """Infos of the candidates that share a source id: all the review queue
    needs to tell pairs from the same source apart (it reads the blacklist
    itself)."""
    ids = {c for g in project.store.candidates.source_groups() for c in g}
    return _dedup_infos(project, ids, {}, ())


def pending_reviews(
    project: Project,
    *,
    thresholds: dict[str, float] | None = None,
    auto: set[tuple[str, str]] | None = None,
    settled: set[str] | None = None,
    infos: dict[str, DedupCandidate] | None = None,
) -> list[Any]:
    """The dedup review queue without what the automatic rule already decided: the
    pairs within the near-original threshold, and every row of a candidate that is
    already excluded as a copy of an original (``settled``: exact copies and
    near-originals) — nobody needs to look at those.

    This is the queue the review page and ``retest dedup-queue`` show;
    ``thresholds`` overrides review targets per metric.
    """
    from retest.dedup.rules import ReviewItem
    from retest.project._neardup import dedup_review_queue, review_targets

    if thresholds is None and not review_targets(project):
        return []  # no metric ever ran: nothing to review
    if infos is None:
        infos = _source_infos(project)
    if auto is None or settled is None:
        threshold = _near_threshold(project)
        near, auto = (
            (set(), set()) if threshold is None else _auto_pairs(project, threshold)
        )
        settled = _exact_copies(project) | near
    out = []
    for item in dedup_review_queue(project, thresholds=thresholds, candidates=infos):
        if item.candidate_id in settled:
            continue
        keep = [
            (r, d)
            for r, d in zip(item.references, item.distances, strict=True)
            if (item.candidate_id, r) not in auto
        ]
        if keep:
            refs, dists = zip(*keep, strict=True)
            out.append(ReviewItem(item.candidate_id, item.metric, refs, dists))
    return out


def _near_threshold(project: Project) -> float | None:
    """``[thresholds] near_original``, else the scaled CIFAR rule capped by what
    the last pixel-L2 dedup run measured on the originals."""
    from retest.project._neardup import metric_state

    threshold = _threshold_override(project)
    shape = _dedup_shape(project)
    if threshold is None and shape is not None:
        cal = (metric_state(project, "l2") or {}).get("near_original") or {}
        threshold = near_original_threshold(
            shape, originals_nearest=cal.get("distance")
        )
    return threshold


def _seed(project: Project) -> int:
    seed = project.config.seed("dedup")
    return 0 if seed is None else seed


def _threshold_override(project: Project) -> float | None:
    return project.config.threshold("near_original")


def candidate_eligibility(
    project: Project, *, include_unreviewed: bool = False
) -> Eligibility:
    """Every candidate with a class → the ordered reasons it may not be sampled.

    Parameters
    ----------
    project : Project
    include_unreviewed : bool
        Let candidates whose only reason is ``unreviewed`` through (they are still
        reported, and counted in :attr:`Eligibility.n_unreviewed_included`).

    Returns
    -------
    Eligibility
        Its ``reasons`` is a :class:`CandidateReasons`.
    """
    store = project.store
    per_class = {
        k: n for k, n in store.candidates.count_by_class().items() if k is not None
    }
    black = set(store.blacklist.current())
    stats = selection_frequencies(project)
    exact = _exact_copies(project)
    threshold = _near_threshold(project)
    near_orig: set[str] = set()
    auto: set[tuple[str, str]] = set()
    if threshold is not None:
        near_orig, auto = _auto_pairs(project, threshold)
    confirmed = store.neardup.duplicate_pairs()
    exact_pairs = {(c, f"exact-copy:{c}") for c in exact}  # an original node
    res, infos = _resolve(project, [*confirmed, *auto, *exact_pairs], stats, black)
    pending = {
        i.candidate_id
        for i in pending_reviews(
            project, auto=auto, settled=exact | near_orig, infos=infos
        )
    }
    flagged = black | exact | near_orig | res.near_duplicates | pending
    cls = _classes_of(store, sorted(flagged), has_class=True)
    excluded: dict[str, tuple[str, ...]] = {}
    class_of: dict[str, int] = {}
    for cid, k in cls.items():
        r = []
        if cid in black:
            r.append(BLACKLISTED)
        if cid in exact:
            r.append(EXACT_COPY)
        if cid in near_orig:
            r.append(NEAR_ORIGINAL)
        if cid in res.near_duplicates:
            in_orig = cid in res.with_original
            if in_orig and not {EXACT_COPY, NEAR_ORIGINAL} & set(r):
                r.append(NEAR_DUPLICATE)
            elif not in_orig:
                r.append(POOL_DUPLICATE)
        if cid in pending:
            r.append(UNREVIEWED)
        if r and k is not None:
            excluded[cid] = tuple(r)
            class_of[cid] = k
    reasons = CandidateReasons(excluded, class_of, per_class, store, project.reader)
    return Eligibility(reasons, include_unreviewed, threshold, res.kept)


# ------------------------------------------------------------------ freshness


def _metrics_run(project: Project) -> tuple[str, ...]:
    from retest.project._neardup import metrics_run

    return metrics_run(project)


def stale_candidates(project: Project) -> list[str]:
    """Candidates (with a class, not blacklisted) that have no neighbour list of
    some metric the dedup stage has computed: they arrived after the last dedup
    run. In insertion order.

    Sparse: the store probes only the candidates after each metric's mark and
    the few its lists left out (:meth:`~retest.store.base.NearDupRepo.without_lists`,
    marks set by the dedup stage's :meth:`~retest.store.base.NearDupRepo.mark_covered`),
    so the cost follows the candidates added since the last dedup run, not the
    pool; no list is read and only the stale ids reach Python.
    """
    metrics = _metrics_run(project)
    if not metrics:
        return []
    black = project.store.blacklist.current()
    return [c for c in project.store.neardup.without_lists(metrics) if c not in black]


def check_fresh(project: Project, *, require_dedup: bool = True) -> None:
    """Refuse stale state: an interrupted ingest, an interrupted dedup run,
    candidates added since the last dedup run, or (``require_dedup``) no dedup
    run at all.

    Raises
    ------
    StageError
        One line naming the command to run.
    """
    problem = _unfinished_ingest_problem(project)
    if problem:
        raise StageError(f"{problem}.")
    n_cand = project.store.candidates.count()
    if not n_cand:
        return
    if not _metrics_run(project):
        if require_dedup:
            raise StageError(
                f"no near-duplicate search has run on the {fmt_count(n_cand)} "
                "candidates; run `retest dedup` first (or pass --no-dedup for a "
                "draft that is not checked against the originals)."
            )
        return
    interrupted_dedup = _interrupted_dedup(project)
    if interrupted_dedup:
        metrics, cmd = interrupted_dedup
        raise StageError(
            f"the last dedup run of {', '.join(metrics)} was interrupted (its "
            f"neighbour lists are incomplete); finish it first: `{cmd}`."
        )
    stale = stale_candidates(project)
    if stale:
        raise StageError(
            f"{fmt_count(len(stale))} candidates were added after the last dedup "
            f"run (e.g. {stale[0]}); run `retest dedup` again before sampling."
        )


def _interrupted_dedup(project: Project) -> tuple[list[str], str] | None:
    """Metrics whose last dedup run started but did not finish (its state says
    ``complete: False``), and the command that finishes them."""
    from retest.project._neardup import metric_state

    states = {m: metric_state(project, m) or {} for m in _metrics_run(project)}
    bad = [(m, st) for m, st in states.items() if st.get("complete") is False]
    if not bad:
        return None
    st = bad[0][1]
    # every metric of that run, those it had not begun too (older runs: the
    # metrics stored with its fingerprint): the same command finishes the run
    fp = st.get("fingerprint")
    run = [m for m, s in states.items() if fp and s.get("fingerprint") == fp]
    run = list(st.get("run_metrics") or run or [m for m, _ in bad])
    return [m for m, _ in bad], dedup_command(
        run, [st, *(states.get(m, {}) for m in run)]
    )


def dedup_command(metrics: Sequence[str], states: Sequence[Mapping[str, Any]]) -> str:
    """The ``retest dedup`` command that repeats a run whose metric states are
    ``states``: every option that is part of the run's fingerprint (a command
    that left one out would start a new run instead of resuming this one).

    Options that change only how the run is done (``--chunk-size``,
    ``--memory-gib``, ``--cluster``, ``--workers``, ``--shards``) are left out.
    The SSIM settings are in every metric's state (older runs: only dssim's).
    """
    from retest.models.reference_features import REFERENCE_EMBEDDER as DEFAULT_EMBEDDER
    from retest.project._neardup import AGAINST

    def first(key: str) -> Any:
        return next((s[key] for s in states if s.get(key) is not None), None)

    cmd = ["retest", "dedup", "--metrics", ",".join(metrics)]
    against = list(first("against") or AGAINST)
    if against != list(AGAINST):
        cmd += ["--against", ",".join(against)]
    if first("k") not in (None, 30):
        cmd += ["--k", str(first("k"))]
    if first("resize"):
        cmd += ["--resize", str(first("resize"))]
    spec = first("embedder_spec") if "features" in metrics else None
    if spec and spec != DEFAULT_EMBEDDER:
        cmd += ["--embedder", str(spec)]
    ssim = first("ssim") or {}
    if ssim.get("win_size") is not None:
        cmd += ["--win-size", str(ssim["win_size"])]
    if ssim.get("gaussian_weights"):
        cmd += ["--gaussian"]
    return shlex.join(cmd)


def _unfinished_ingest_problem(project: Project) -> str | None:
    from retest.project._ingest_runs import unfinished_ingest_problem

    return unfinished_ingest_problem(project)


def ineligible_members(
    project: Project, revision: str, *, include_unreviewed: bool | None = None
) -> dict[str, tuple[str, ...]]:
    """Candidate members of ``revision`` that are no longer eligible → reasons.

    ``include_unreviewed`` defaults to what the revision was sampled with (a
    revision drawn with ``--include-unreviewed`` is not refused for pending
    reviews). Original (reference) images that a sampler included are not
    candidates and are never reported.
    """
    if include_unreviewed is None:
        params = project.store.revisions.get(revision).params or {}
        include_unreviewed = bool(params.get("include_unreviewed", False))
    members = project.store.revisions.members(revision)
    elig = candidate_eligibility(project, include_unreviewed=include_unreviewed)
    cands = [m.item_id for m in members if split_reference_id(m.item_id) is None]
    with_class = _classes_of(project.store, cands, has_class=True)
    out = {}
    for m in cands:
        r = elig.blocking(m) if m in with_class else ("no_class",)
        if r:
            out[m] = r
    return out


def copies(elig: Eligibility) -> frozenset[str]:
    """Candidates excluded as a copy of an original or of another candidate."""
    return frozenset(c for c, r in elig.excluded() if DUPLICATE_REASONS & set(r))


def eligibility_summary(elig: Eligibility) -> dict[str, Any]:
    """JSON-ready counts and the threshold, for command output."""
    return {
        "counts": elig.counts(),
        "include_unreviewed": elig.include_unreviewed,
        "unreviewed_included": elig.n_unreviewed_included,
        "near_original_threshold": elig.near_original_threshold,
    }


def _tally(c: Counter[str], r: tuple[str, ...]) -> None:
    """Count one candidate's reasons into ``c``: the one place reason counts are
    made. A candidate counts once, under its first reason in :data:`REASONS`
    order (an exact copy is also within the near-original threshold, but is one
    excluded image), so the reason counts add up to the excluded candidates."""
    if r:
        c[r[0]] += 1
    if DUPLICATE_REASONS & set(r):
        c["copies"] += 1
    if NEAR_ORIGINAL in r and EXACT_COPY not in r:
        c["automatic"] += 1


def class_tallies(
    elig: Eligibility, class_of: Mapping[str, int | None] | None = None
) -> dict[int, Counter[str]]:
    """Per class id: candidates per first reason (:func:`_tally`), ``eligible``,
    all ``candidates``, the ``copies`` (a duplicate reason) and those the
    ``automatic`` near-original rule took (not exact copies).

    ``class_of`` (candidate → class) is needed unless ``elig.reasons`` is a
    :class:`CandidateReasons`, which knows the classes; candidates it maps to
    None are left out.
    """
    out: dict[int, Counter[str]] = {}
    rs = elig.reasons
    if class_of is None:
        if not isinstance(rs, CandidateReasons):
            raise TypeError("class_of is needed for reasons without their classes")
        for k, n in rs.per_class.items():
            out[k] = Counter(candidates=n, eligible=n)
        for cid, r in rs.excluded.items():
            c = out.setdefault(rs.class_of[cid], Counter())
            _tally(c, r)
            if elig._block(r):
                c["eligible"] -= 1
        return out
    for cid, r in rs.items():
        kk = class_of.get(cid)
        if kk is None:
            continue
        c = out.setdefault(kk, Counter())
        c["candidates"] += 1
        _tally(c, r)
        if not elig._block(r):
            c["eligible"] += 1
    return out


def reasons_by_class(
    elig: Eligibility, class_of: Mapping[str, int | None] | None = None
) -> dict[int, dict[str, int]]:
    """Per class id: candidates per first reason and ``eligible`` (``class_of``: see
    :func:`class_tallies`)."""
    return {
        k: {x: v[x] for x in (*REASONS, "eligible")}
        for k, v in class_tallies(elig, class_of).items()
    }


HEAVY_LOSS = 0.10
"""Share of a class's candidates the automatic rule may take before ``status``
warns: the new test set would lose that class's most typical images."""


def heavy_automatic_losses(
    elig: Eligibility, class_of: Mapping[str, int | None] | None = None
) -> dict[int, float]:
    """Classes whose candidates the automatic near-original rule excludes beyond
    :data:`HEAVY_LOSS`, with the share: a sign the threshold is too loose for
    these images (set ``[thresholds] near_original`` lower and review instead).
    ``class_of``: see :func:`class_tallies`."""
    out = {}
    for k, c in sorted(class_tallies(elig, class_of).items()):
        if c["candidates"] and c["automatic"] / c["candidates"] > HEAVY_LOSS:
            out[k] = c["automatic"] / c["candidates"]
    return out
