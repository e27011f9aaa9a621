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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retest.dedup.rules import (
    DedupCandidate,
    near_original_threshold,
    resolve_near_duplicates,
)
from retest.errors import StageError
from retest.pipeline.project import Project
from retest.store.rows import content_id, split_reference_id

__all__ = [
    "AUTO_METRICS",
    "REASONS",
    "Eligibility",
    "candidate_eligibility",
    "check_fresh",
    "copies",
    "heavy_automatic_losses",
    "ineligible_members",
    "pending_reviews",
    "stale_candidates",
]

REASONS: tuple[str, ...] = (
    "blacklisted",
    "exact_copy",
    "near_original",
    "near_duplicate",
    "pool_duplicate",
    "unreviewed",
)
DUPLICATE_REASONS = frozenset(REASONS[1:5])
"""Reasons that mean "a copy of something": what ``status`` counts as near-duplicates."""
AUTO_METRICS = ("l2", "warp")
"""Pixel metrics whose distances the automatic near-original rule reads."""


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Per-candidate exclusion reasons (an empty tuple means eligible).

    Attributes
    ----------
    reasons : dict of str to tuple of str
        Every candidate with a class → its reasons in :data:`REASONS` order.
    include_unreviewed : bool
        Whether ``unreviewed`` alone was allowed through.
    near_original_threshold : float or None
        Squared-distance threshold of the automatic rule (None before dedup).
    kept : frozenset of str
        The member kept from each candidate-only near-duplicate component.
    """

    reasons: dict[str, tuple[str, ...]]
    include_unreviewed: bool = False
    near_original_threshold: float | None = None
    kept: frozenset[str] = field(default_factory=frozenset)

    def blocking(self, cid: str) -> tuple[str, ...]:
        """The reasons that keep ``cid`` out (``unreviewed`` dropped if allowed)."""
        r = self.reasons.get(cid, ())
        if self.include_unreviewed:
            r = tuple(x for x in r if x != "unreviewed")
        return r

    def is_eligible(self, cid: str) -> bool:
        return cid in self.reasons and not self.blocking(cid)

    def excluded_by(self, reason: str) -> set[str]:
        return {c for c, r in self.reasons.items() if reason in r}

    @property
    def n_unreviewed_included(self) -> int:
        """Candidates let in only because ``include_unreviewed`` was set."""
        if not self.include_unreviewed:
            return 0
        return sum(1 for r in self.reasons.values() if r == ("unreviewed",))

    def counts(self) -> dict[str, int]:
        """Candidates per reason (a candidate counts once per reason) and
        ``eligible``."""
        c: Counter[str] = Counter()
        for cid, r in self.reasons.items():
            c.update(r)
            if not self.blocking(cid):
                c["eligible"] += 1
        return {k: c[k] for k in (*REASONS, "eligible")}

    def first_reason(self, cid: str) -> str | None:
        """The first blocking reason of ``cid`` (None when eligible)."""
        r = self.blocking(cid)
        return r[0] if r else None


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


def _exact_copies(project: Project, cand_ids: Sequence[str]) -> set[str]:
    ref = _reference_digests(project)
    if not ref:
        return set()
    out = set()
    rows = project.store.candidates.get_many(list(cand_ids)) if cand_ids else []
    file_backed = []
    for row in rows:
        if row.array_name is not None and row.array_row is not None:
            # array candidates are stored under the content hash of their pixels
            if row.id in ref:
                out.add(row.id)
        elif row.file_path is not None:
            file_backed.append(row.id)
    for cid, d in _digest_of_row(project, file_backed).items():
        if d in ref:
            out.add(cid)
    return out


# ------------------------------------------------------------------ dedup state


def _dedup_shape(project: Project) -> tuple[int, ...] | None:
    """Image shape the dedup distances were computed on; before any dedup run,
    the pool's own shape."""
    from retest.pipeline.dedup import dedup_image_shape

    shape = dedup_image_shape(project)
    return _pool_shape(project) if shape is None else tuple(int(x) for x in shape)


def _pool_shape(project: Project) -> tuple[int, ...] | None:
    """Shape of the first candidate with pixels (the dedup stage's input shape
    when it ran without resizing)."""
    for row in project.store.candidates.iter():
        if row.array_name is not None or row.file_path is not None:
            return tuple(project.pixels([row.id])[0].shape)
    return None


def _auto_pairs(
    project: Project, threshold: float, cand_ids: Iterable[str]
) -> tuple[dict[str, float], set[tuple[str, str]]]:
    """Nearest-original distance per candidate (min over the pixel metrics) and
    every (candidate, image) pair within ``threshold``."""
    cands = set(cand_ids)
    nearest: dict[str, float] = {}
    pairs: set[tuple[str, str]] = set()
    for metric in AUTO_METRICS:
        for nl in project.store.neardup.iter_neighbours(metric=metric):
            cid = nl.candidate_id
            if cid not in cands:
                continue
            for ref, d in zip(nl.ref_ids, nl.distances, strict=True):
                if split_reference_id(ref) is not None:
                    nearest[cid] = min(nearest.get(cid, np.inf), float(d))
                if d <= threshold and ref != cid:
                    pairs.add((cid, ref))
    return nearest, pairs


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
    from retest.pipeline.dedup import dedup_review_queue

    if infos is None:
        infos = _infos(project)
    if auto is None or settled is None:
        threshold = _near_threshold(project)
        nearest, auto = (
            ({}, set()) if threshold is None else _auto_pairs(project, threshold, infos)
        )
        cands = [c for c, i in infos.items() if i.class_id is not None]
        settled = _exact_copies(project, cands) | {
            c for c, d in nearest.items() if threshold is not None and d <= threshold
        }
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
    from retest.pipeline.dedup import metric_state

    threshold = _threshold_override(project)
    shape = _dedup_shape(project)
    if threshold is None and shape is not None:
        cal = (metric_state(project, "l2") or {}).get("near_original") or {}
        threshold = near_original_threshold(
            shape, originals_nearest=cal.get("distance")
        )
    return threshold


def _infos(project: Project) -> dict[str, DedupCandidate]:
    from retest.pipeline.dedup import candidate_infos

    return candidate_infos(project)


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
    """
    store = project.store
    infos = _infos(project)
    cand_ids = [c for c, info in infos.items() if info.class_id is not None]
    black = set(store.blacklist.current())
    exact = _exact_copies(project, cand_ids)
    threshold = _near_threshold(project)
    nearest: dict[str, float] = {}
    auto: set[tuple[str, str]] = set()
    if threshold is not None:
        nearest, auto = _auto_pairs(project, threshold, infos)
    near_orig = {c for c, d in nearest.items() if d <= (threshold or -1.0)}
    confirmed = store.neardup.duplicate_pairs()
    exact_pairs = {(c, f"exact-copy:{c}") for c in exact}  # an original node
    res = resolve_near_duplicates(
        [*confirmed, *auto, *exact_pairs], candidates=infos, seed=_seed(project)
    )
    pending = {
        i.candidate_id
        for i in pending_reviews(
            project, auto=auto, settled=exact | near_orig, infos=infos
        )
    }
    out: dict[str, tuple[str, ...]] = {}
    for cid in cand_ids:
        r = []
        if cid in black:
            r.append("blacklisted")
        if cid in exact:
            r.append("exact_copy")
        if cid in near_orig:
            r.append("near_original")
        if cid in res.near_duplicates:
            in_orig = cid in res.with_original
            if in_orig and not {"exact_copy", "near_original"} & set(r):
                r.append("near_duplicate")
            elif not in_orig:
                r.append("pool_duplicate")
        if cid in pending:
            r.append("unreviewed")
        out[cid] = tuple(r)
    return Eligibility(out, include_unreviewed, threshold, res.kept)


# ------------------------------------------------------------------ freshness


def _metrics_run(project: Project) -> tuple[str, ...]:
    from retest.pipeline import dedup

    fn = getattr(dedup, "metrics_run", None)
    if fn is not None:
        return tuple(fn(project))
    return tuple(
        m
        for m in dedup.BUILTIN_METRICS
        if next(iter(project.store.neardup.iter_neighbours(metric=m)), None)
    )


def stale_candidates(project: Project) -> list[str]:
    """Candidates (with a class) that have no neighbour list of some metric the
    dedup stage has computed: they arrived after the last dedup run."""
    from retest.pipeline.dedup import load_neighbours

    metrics = _metrics_run(project)
    if not metrics:
        return []
    nbrs = load_neighbours(project, list(metrics))
    black = set(project.store.blacklist.current())
    out = []
    for row in project.store.candidates.iter():
        if row.class_id is None or row.id in black:
            continue
        have = nbrs.get(row.id, {})
        if any(m not in have for m in metrics):
            out.append(row.id)
    return out


def check_fresh(project: Project, *, require_dedup: bool = True) -> None:
    """Refuse stale state: an interrupted ingest, candidates added since the last
    dedup run, or (``require_dedup``) no dedup run at all.

    Raises
    ------
    StageError
        One line naming the command to run.
    """
    interrupted = _interrupted_ingests(project)
    if interrupted:
        raise StageError(
            f"an ingest was interrupted ({len(interrupted)} unfinished); finish it "
            f"first: `{interrupted[0]}`."
        )
    n_cand = project.store.candidates.count()
    if not n_cand:
        return
    if not _metrics_run(project):
        if require_dedup:
            raise StageError(
                f"no near-duplicate search has run on the {n_cand} candidates; run "
                "`retest dedup` first (or pass --no-dedup for a draft that is not "
                "checked against the originals)."
            )
        return
    stale = stale_candidates(project)
    if stale:
        raise StageError(
            f"{len(stale)} candidates were added after the last dedup run (e.g. "
            f"{stale[0][:12]}); run `retest dedup` again before sampling."
        )


def _interrupted_ingests(project: Project) -> list[str]:
    from retest.pipeline import ingest

    fn = getattr(ingest, "interrupted_ingests", None)
    return [] if fn is None else list(fn(project))


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
    out = {}
    for m in members:
        if split_reference_id(m.item_id) is not None:
            continue
        r = elig.blocking(m.item_id) if m.item_id in elig.reasons else ("no_class",)
        if r:
            out[m.item_id] = r
    return out


def copies(elig: Eligibility) -> frozenset[str]:
    """Candidates excluded as a copy of an original or of another candidate."""
    return frozenset(c for c, r in elig.reasons.items() if DUPLICATE_REASONS & set(r))


def eligibility_summary(elig: Eligibility) -> dict[str, Any]:
    """JSON-ready counts and the threshold, for command output."""
    return {
        "counts": elig.counts(),
        "include_unreviewed": elig.include_unreviewed,
        "unreviewed_included": elig.n_unreviewed_included,
        "near_original_threshold": elig.near_original_threshold,
    }


def reasons_by_class(
    elig: Eligibility, class_of: Mapping[str, int | None]
) -> dict[int, dict[str, int]]:
    """Per class id: candidates per reason and ``eligible``."""
    out: dict[int, Counter[str]] = {}
    for cid, r in elig.reasons.items():
        k = class_of.get(cid)
        if k is None:
            continue
        c = out.setdefault(k, Counter())
        c.update(r)
        if not elig.blocking(cid):
            c["eligible"] += 1
    return {k: {x: v[x] for x in (*REASONS, "eligible")} for k, v in out.items()}


HEAVY_LOSS = 0.10
"""Share of a class's candidates the automatic rule may take before ``status``
warns: the new test set would lose that class's most typical images."""


def heavy_automatic_losses(
    elig: Eligibility, class_of: Mapping[str, int | None]
) -> dict[int, float]:
    """Classes whose candidates the automatic near-original rule excludes beyond
    :data:`HEAVY_LOSS`, with the share: a sign the threshold is too loose for
    these images (set ``[thresholds] near_original`` lower and review instead)."""
    total: Counter[int] = Counter()
    auto: Counter[int] = Counter()
    for cid, r in elig.reasons.items():
        k = class_of.get(cid)
        if k is None:
            continue
        total[k] += 1
        if "near_original" in r and "exact_copy" not in r:
            auto[k] += 1
    return {
        k: auto[k] / total[k] for k in sorted(total) if auto[k] / total[k] > HEAVY_LOSS
    }
