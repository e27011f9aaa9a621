"""Near-duplicate review rules and graph resolution, as pure functions.

See docs/algorithms.md#near-duplicates.

Inputs are plain mappings and records; nothing here touches the store. Item ids are
strings; an id that is not a candidate is an original (reference) image.

Decisions on [AMBIGUOUS] points
-------------------------------
* Metric names: ``l2`` (squared pixel L2), ``features`` (squared feature L2; the
  published ``fc7``) and ``dssim``. ``fc7`` is accepted as an alias of ``features``.
* Review thresholds for images other than 256² scale the published ``l2`` target
  (1.2e8 at 256×256×3) by the number of pixel values, e.g. 1.875e6 at 32×32×3;
  ``dssim`` and ``features`` keep the published values.
* ``score(w)`` of a class without a non-blacklisted annotated member is 0.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.csgraph import connected_components

from retest.errors import ConfigError

__all__ = [
    "CIFAR_L2_EXCLUDE",
    "IMAGENET_TARGETS",
    "NEAR_ORIGINAL_PERCENTILE",
    "NO_PENDING",
    "DedupCandidate",
    "Resolution",
    "ReviewItem",
    "cifar_auto_excluded",
    "default_thresholds",
    "is_sufficiently_reviewed",
    "near_original_threshold",
    "resolve_near_duplicates",
    "review_queue",
    "review_threshold",
    "review_thresholds",
]

IMAGENET_TARGETS: dict[str, float] = {"l2": 1.2e8, "dssim": 0.2205, "features": 1.32e4}
"""Review targets of the ImageNetV2 notebook for 256×256×3 images.

See docs/algorithms.md#review-targets.
"""
CIFAR_L2_EXCLUDE = 1000.0
"""CIFAR-10.1: a candidate whose nearest original is at plain L2 ≤ 1000 is excluded."""
NO_PENDING = 1e100
"""Review threshold of a candidate with no unreviewed neighbour.

See docs/algorithms.md#review-queue.
"""
REVIEW_TOP = 30
_ALIASES = {"fc7": "features"}


def _metric(name: str) -> str:
    return _ALIASES.get(name, name)


def review_threshold(metric: str, thresholds: Mapping[str, float]) -> float | None:
    """The threshold :func:`review_queue` applies to lists of ``metric`` (None:
    it skips them).

    >>> review_threshold("fc7", {"features": 0.5})
    0.5
    """
    return thresholds.get(_metric(metric))


def default_thresholds(image_shape: Sequence[int] = (256, 256, 3)) -> dict[str, float]:
    """Review targets per metric for images of ``image_shape`` (H, W[, C]).

    >>> default_thresholds((32, 32, 3))["l2"]
    1875000.0
    """
    n = int(np.prod(image_shape))
    if n <= 0:
        raise ConfigError(f"image_shape must be positive. Got {tuple(image_shape)}.")
    out = dict(IMAGENET_TARGETS)
    out["l2"] = IMAGENET_TARGETS["l2"] * n / (256 * 256 * 3)
    return out


def cifar_auto_excluded(
    nearest_sqdist: ArrayLike, *, threshold: float = CIFAR_L2_EXCLUDE
) -> NDArray[np.bool_]:
    """CIFAR rule: True where the nearest original's plain L2 is ≤ ``threshold``.

    ``nearest_sqdist`` holds squared L2 on raw 0–255 pixels, as the kNN returns.
    """
    d = np.asarray(nearest_sqdist, dtype=np.float64)
    return np.sqrt(np.maximum(d, 0.0)) <= threshold


NEAR_ORIGINAL_PERCENTILE = 0.5
"""Percentile of the originals' distances to their closest other original that
caps the automatic near-original threshold."""


def near_original_threshold(
    image_shape: Sequence[int], *, originals_nearest: float | None = None
) -> float:
    """Squared pixel distance under which a candidate is a copy of an original.

    CIFAR-10.1 never used a candidate whose nearest CIFAR-10 image lies at plain
    L2 ≤ 1000 on 32×32×3 images. Squared, that is 1e6 over 3,072 values; the
    threshold keeps that per-value budget for other sizes and channel counts
    (255,208 at 28×28 grey, 6.4e7 at 256×256×3).

    That budget is loose for images whose originals lie close together (on
    Fashion-MNIST 29 % of training trousers have a *different* training trouser
    within it), and an automatic rule must only catch copies. So it is capped by
    ``originals_nearest``: the :data:`NEAR_ORIGINAL_PERCENTILE` percentile of the
    originals' squared distances to their closest other original (the dedup stage
    measures it): a candidate is excluded without review only when it is closer to
    an original than 99.5 % of originals are to any other. On CIFAR-10 the cap
    does not bind; closer calls go to the review queue.

    >>> near_original_threshold((32, 32, 3))
    1000000.0
    >>> round(near_original_threshold((28, 28)))
    255208
    >>> near_original_threshold((28, 28), originals_nearest=153_000.0)
    153000.0
    """
    n = int(np.prod(image_shape))
    if n <= 0:
        raise ConfigError(f"image_shape must be positive. Got {tuple(image_shape)}.")
    scaled = CIFAR_L2_EXCLUDE**2 * n / (32 * 32 * 3)
    if originals_nearest is None:
        return scaled
    return float(min(scaled, originals_nearest))


@dataclass(frozen=True, slots=True)
class DedupCandidate:
    """What the rules need to know about a candidate.

    ``selection_frequency`` is None when the candidate has no annotation;
    ``source_id`` is the source's own id (e.g. the Flickr photo id); candidates
    sharing one are linked.
    """

    class_id: int | None = None
    selection_frequency: float | None = None
    blacklisted: bool = False
    source_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """A (candidate, metric) row of the review queue with its pending references."""

    candidate_id: str
    metric: str
    references: tuple[str, ...]
    distances: tuple[float, ...]


def _same_source(a: str, b: str, info: Mapping[str, DedupCandidate]) -> bool:
    ia, ib = info.get(a), info.get(b)
    return (
        ia is not None
        and ib is not None
        and ia.source_id is not None
        and ia.source_id == ib.source_id
    )


def review_queue(
    neighbours: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]],
    *,
    thresholds: Mapping[str, float],
    candidates: Mapping[str, DedupCandidate],
    blacklist: Collection[str] = frozenset(),
    reviewed: Mapping[str, Mapping[str, Collection[str]]] | None = None,
    top: int = REVIEW_TOP,
) -> list[ReviewItem]:
    """Pairs under threshold that nobody has reviewed yet.

    See docs/algorithms.md#review-queue.

    A (candidate, metric) needs review iff the candidate is not blacklisted and
    among its first ``top`` neighbours there is a reference with distance ≤
    ``thresholds[metric]`` that is not the candidate, not blacklisted, has a
    different source id and is not in ``reviewed[candidate][metric]``.
    Rows are ordered by (candidate, metric); references keep neighbour order.
    """
    reviewed = reviewed or {}
    out = []
    for cid in sorted(neighbours):
        if cid in blacklist or (cid in candidates and candidates[cid].blacklisted):
            continue
        for metric in sorted(neighbours[cid]):
            m = _metric(metric)
            if m not in thresholds:
                continue
            seen = reviewed.get(cid, {}).get(metric, ())
            pend = [
                (ref, float(d))
                for ref, d in list(neighbours[cid][metric])[:top]
                if d <= thresholds[m]
                and ref != cid
                and ref not in blacklist
                and not (ref in candidates and candidates[ref].blacklisted)
                and not _same_source(cid, ref, candidates)
                and ref not in seen
            ]
            if pend:
                refs, dists = zip(*pend, strict=True)
                out.append(ReviewItem(cid, metric, tuple(refs), tuple(dists)))
    return out


def review_thresholds(
    neighbours: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]],
    *,
    candidate_ids: Iterable[str],
    metrics: Sequence[str],
    candidates: Mapping[str, DedupCandidate],
    reviewed: Mapping[str, Mapping[str, Collection[str]]] | None = None,
    top: int = REVIEW_TOP,
) -> dict[str, dict[str, float]]:
    """Distance of the first unreviewed neighbour per candidate and metric.

    The first neighbour among the top ``top`` that is not the candidate itself,
    not reviewed, and not a candidate with the same source id; ``1e100`` when
    there is none; ``0.0`` when the candidate has no results for the metric.
    """
    reviewed = reviewed or {}
    out: dict[str, dict[str, float]] = {}
    for cid in candidate_ids:
        row: dict[str, float] = {}
        for metric in metrics:
            lst = neighbours.get(cid, {}).get(metric)
            if not lst:
                row[metric] = 0.0
                continue
            seen = reviewed.get(cid, {}).get(metric, ())
            row[metric] = NO_PENDING
            for ref, d in list(lst)[:top]:
                if (
                    ref != cid
                    and ref not in seen
                    and not _same_source(cid, ref, candidates)
                ):
                    row[metric] = float(d)
                    break
        out[cid] = row
    return out


def is_sufficiently_reviewed(
    thresholds_of_candidate: Mapping[str, float], targets: Mapping[str, float]
) -> bool:
    """True iff ``review_threshold[m] > target[m]`` for every metric of ``targets``
    (every neighbour closer than the target has been reviewed)."""
    return all(thresholds_of_candidate.get(m, 0.0) > t for m, t in targets.items())


@dataclass(frozen=True, slots=True)
class Resolution:
    """Outcome of the near-duplicate graph.

    ``near_duplicates``: candidates excluded; ``kept``: one survivor per
    candidate-only component; ``components``: non-singleton components (sorted ids);
    ``with_original``: candidates whose component contains an original image.
    """

    near_duplicates: frozenset[str]
    kept: frozenset[str]
    components: tuple[tuple[str, ...], ...]
    with_original: frozenset[str] = frozenset()


def _member_score(info: DedupCandidate) -> float:
    if info.blacklisted or info.selection_frequency is None:
        return 0.0
    return float(info.selection_frequency)


def _tiebreak(cid: str, seed: int | None) -> str:
    if seed is None:
        return cid
    return hashlib.sha256(f"{seed}:{cid}".encode()).hexdigest()


def _keep_one(
    members: Sequence[str],
    candidates: Mapping[str, DedupCandidate],
    good_counts: Mapping[int, int],
    seed: int | None = None,
) -> str:
    by_class: dict[int, list[str]] = {}
    for cid in members:
        c = candidates[cid].class_id
        by_class.setdefault(-1 if c is None else c, []).append(cid)
    score = {
        w: max(_member_score(candidates[c]) for c in ms) for w, ms in by_class.items()
    }
    eligible = [w for w, s in score.items() if s >= 0.7] or [
        w for w, s in score.items() if s >= 0.6
    ]
    if not eligible:
        eligible = [max(score, key=lambda w: (score[w], w))]
    chosen = min(eligible, key=lambda w: (good_counts.get(w, 0), w))
    return max(
        by_class[chosen],
        key=lambda c: (_member_score(candidates[c]), _tiebreak(c, seed)),
    )


def resolve_near_duplicates(
    duplicate_pairs: Iterable[tuple[str, str]],
    *,
    candidates: Mapping[str, DedupCandidate],
    good_counts: Mapping[int, int] | None = None,
    overrides: Collection[str] = (),
    seed: int | None = None,
) -> Resolution:
    """Connected components of the near-duplicate graph and who survives.

    See docs/algorithms.md#graph-resolution.

    Edges are the (undirected) duplicate pairs plus links between candidates sharing
    a source id. Per component: any original (an id not in ``candidates``) → all its
    candidates are near-duplicates; else an ``overrides`` member is kept; else one
    member is kept by the selection-frequency rule (class score ≥ 0.7, else ≥ 0.6,
    else the best class; the eligible class with the fewest ``good_counts``, ties →
    smallest class id; inside it the max (score, id)). Candidates outside the graph
    are not near-duplicates.

    ``good_counts[class]`` = non-blacklisted annotated candidates with selection
    frequency ≥ 0.7 in the whole candidate set; computed from ``candidates`` when
    omitted. ``seed``: members with equal scores are told apart by
    ``sha256(f"{seed}:{id}")`` instead of the id itself (the published rule,
    ``seed=None``), so a seed re-draws which copy survives.
    """
    pairs = {tuple(sorted((a, b))) for a, b in duplicate_pairs if a != b}
    by_src: dict[str, list[str]] = {}
    for cid, info in candidates.items():
        if info.source_id is not None:
            by_src.setdefault(info.source_id, []).append(cid)
    for ids in by_src.values():
        ids.sort()
        pairs.update(itertools.pairwise(ids))
    if good_counts is None:
        good_counts = _good_counts(candidates)
    nodes = sorted({n for p in pairs for n in p})
    if not nodes:
        return Resolution(frozenset(), frozenset(), ())
    pos = {n: i for i, n in enumerate(nodes)}
    rows = [pos[a] for a, _ in pairs]
    cols = [pos[b] for _, b in pairs]
    graph = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nodes),) * 2)
    _, labels = connected_components(graph, directed=False)
    groups: dict[int, list[str]] = {}
    for n, lab in zip(nodes, labels, strict=True):
        groups.setdefault(int(lab), []).append(n)
    dup: set[str] = set()
    kept: set[str] = set()
    with_orig: set[str] = set()
    for members in groups.values():
        cands = [m for m in members if m in candidates]
        if not cands:
            continue
        if len(cands) < len(members):
            dup.update(cands)
            with_orig.update(cands)
            continue
        ov = sorted(c for c in cands if c in overrides)
        if len(ov) > 1:
            raise ConfigError(
                f"near-duplicate override list names {len(ov)} members of one "
                f"component ({', '.join(ov[:4])}); keep at most one per component."
            )
        keep = ov[0] if ov else _keep_one(cands, candidates, good_counts, seed)
        kept.add(keep)
        dup.update(c for c in cands if c != keep)
    comps = tuple(sorted(tuple(sorted(g)) for g in groups.values()))
    return Resolution(frozenset(dup), frozenset(kept), comps, frozenset(with_orig))


def _good_counts(candidates: Mapping[str, DedupCandidate]) -> dict[int, int]:
    out: dict[int, int] = {}
    for info in candidates.values():
        if (
            not info.blacklisted
            and info.selection_frequency is not None
            and info.selection_frequency >= 0.7
            and info.class_id is not None
        ):
            out[info.class_id] = out.get(info.class_id, 0) + 1
    return out
