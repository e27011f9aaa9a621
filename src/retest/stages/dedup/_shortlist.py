"""The shortlists of the costly metrics of the ``dedup`` stage.

:func:`shortlist_chunk` computes a shortlist metric (``dssim``, ``warp`` or any
registered one, :mod:`retest.stages.dedup._metrics`) for a chunk of candidates
on the union of their stored exact-metric neighbour lists: those metrics cost too
much to evaluate against a whole dataset.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from retest.dedup.knn import KnnResult, topk_from_pairs
from retest.project import Project
from retest.stages.dedup._inputs import BASE_METRICS, DedupInputs
from retest.stages.dedup._metrics import DedupMetric, DedupOptions

__all__ = ["shortlist_chunk", "shortlist_pairs"]


def shortlist_pairs(
    project: Project,
    inp: DedupInputs,
    c0: int,
    c1: int,
    base_metrics: Sequence[str] = BASE_METRICS,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(chunk-local candidate row, reference row) of every stored exact-metric neighbour."""
    row_of = {r: i for i, r in enumerate(inp.ref_ids)}
    base = set(base_metrics)
    qi: list[int] = []
    ri: list[int] = []
    for j, cid in enumerate(inp.cand_ids[c0:c1]):
        short = {
            row_of[r]
            for nl in project.store.neardup.neighbours(cid)
            if nl.metric in base
            for r in nl.ref_ids
            if r in row_of
        }
        qi.extend([j] * len(short))
        ri.extend(sorted(short))
    return np.asarray(qi, np.int64), np.asarray(ri, np.int64)


def shortlist_chunk(
    metric: DedupMetric,
    project: Project,
    inp: DedupInputs,
    c0: int,
    c1: int,
    *,
    cand_px: NDArray[np.uint8],
    ref_px: NDArray[np.uint8],
    options: DedupOptions,
    base_metrics: Sequence[str] = BASE_METRICS,
) -> KnnResult:
    """Top ``options.k`` of candidates ``c0:c1`` under a shortlist metric."""
    qa, ra = shortlist_pairs(project, inp, c0, c1, base_metrics)
    uniq, local = np.unique(ra, return_inverse=True)
    q, r = np.asarray(cand_px[c0:c1]), np.asarray(ref_px[uniq])
    dist: NDArray[np.float64] = np.zeros(0)
    if qa.size:
        dist = np.asarray(metric.pair_distances(q, r, qa, local, options), np.float64)
    return topk_from_pairs(qa, ra, dist, c1 - c0, options.k)
