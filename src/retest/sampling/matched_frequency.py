"""MatchedFrequency sampler (ImageNetV2 ``b``, docs/algorithms.md#matched-frequency).

Per class, the new images reproduce the original images' histogram over five
selection-frequency bins:

1. target = :func:`~retest.sampling.histogram.round_histogram` of the class's
   original-image histogram to ``per_class`` (invalid class when the histogram
   rests on fewer than 20 annotated originals; ``compat="authors"`` still samples
   such a class, as the published code did, and keeps it marked invalid);
2. carry-over: still-eligible previous members grouped by their *current* bin;
   a bin keeps all of them if they fit its target, else a random subset;
3. fill: each bin draws its missing images from its id-sorted eligible pool;
4. upward sampling: every slot a bin could not fill takes one image from the
   first higher bin with images left, preferring a previous member (smallest
   id — the original took "the first element of a set intersection", whose order
   is arbitrary), else a random one. All bins are filled (step 3) before any
   upward sampling, so a lower bin never takes images a higher bin needs;
5. metadata records the targets, exclusions, carry-over and every upward draw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from retest._validation import RandomStateLike
from retest.errors import ConfigError
from retest.sampling.base import (
    ClassShortfall,
    SampleMember,
    SampleResult,
    check_per_class,
    class_generators,
    finish,
    register_sampler,
    required_classes,
)
from retest.sampling.columnar import (
    ClassRows,
    ColumnarPool,
    as_columnar,
    draw_positions,
    eligible_by_class,
)
from retest.sampling.compat import check_compat
from retest.sampling.eligibility import CandidateInfo, EligibilityRules
from retest.sampling.histogram import (
    DEFAULT_BINS,
    bin_indices,
    check_bins,
    round_histogram,
)
from retest.sampling.selection_frequency import TargetHistogram

__all__ = ["sample_matched_frequency"]


@register_sampler(
    "matched-frequency",
    summary="per_class images matching the originals' selection-frequency histogram",
    revision=True,
    columnar=True,
    tag="b",
    inputs=(
        "targets",
        "per_class",
        "previous",
        "classes",
        "min_annotations",
        "allow_upward",
        "compat",
    ),
)
def sample_matched_frequency(
    pool: Sequence[CandidateInfo] | ColumnarPool,
    targets: Mapping[str, TargetHistogram],
    *,
    random_state: RandomStateLike,
    per_class: int = 10,
    min_annotations: int = 10,
    require_reviewed: bool = True,
    allow_upward: bool = True,
    previous: Iterable[str] | None = None,
    classes: Iterable[str] | None = None,
    bins: Sequence[float] = DEFAULT_BINS,
    compat: str | None = None,
) -> SampleResult:
    """Sample ``per_class`` images per class matching the original histogram.

    Parameters
    ----------
    pool : sequence of CandidateInfo
        All candidates; ineligible ones are excluded and counted in the report.
    targets : mapping of class name to TargetHistogram
        From :func:`~retest.sampling.selection_frequency.class_target_histograms`.
    random_state : int or numpy.random.Generator
    per_class : int
    min_annotations : int
        Candidates need this many valid assignments.
    allow_upward : bool
        Fill short bins from higher bins (step 4); otherwise the class is short.
    previous : iterable of str, optional
        Member ids of the parent revision (carry-over).
    classes : iterable of str, optional
        Classes to sample; default: every class in ``targets`` or ``pool``.
    compat : {"exact", "authors"}, optional
        ``"authors"``: float rounding of the targets and classes with too few
        originals sampled anyway (still invalid), as published
        (docs/algorithms.md#two-modes).

    Returns
    -------
    SampleResult
        Invalid, with a per-class shortfall (missing count per bin), when a class
        has an invalid target histogram or too few candidates.

    Examples
    --------
    Originals of bins 2/3/4 in proportion 5:5:10 make a target of 1/1/2 of four
    images; the pool has nothing in bin 2 (0.4–0.6), so its slot is filled from
    bin 3 (upward sampling), or the class is short without it:

    >>> from retest.sampling.selection_frequency import TargetHistogram
    >>> targets = {"cat": TargetHistogram("cat", (0, 0, 5, 5, 10), 20, True)}
    >>> pool = [CandidateInfo(f"c{i}", "cat", f, 10)
    ...         for i, f in enumerate([0.7, 0.75, 0.9, 0.95, 1.0])]
    >>> r = sample_matched_frequency(pool, targets, per_class=4, random_state=0)
    >>> r.metadata["targets"]["cat"]["target"]
    [0, 0, 1, 1, 2]
    >>> r.is_valid, sorted((m.target_bin, m.bin, m.how) for m in r.members)
    (True, [(2, 3, 'upward'), (3, 3, 'sampled'), (4, 4, 'sampled'), (4, 4, 'sampled')])
    >>> r = sample_matched_frequency(pool, targets, per_class=4, random_state=0,
    ...                              allow_upward=False)
    >>> r.is_valid, r.shortfall[0].got, r.shortfall[0].detail
    (False, 3, (('bin 2', 1),))
    """
    per_class = check_per_class(per_class)
    edges = check_bins(bins)
    compat = check_compat(compat)
    rules = EligibilityRules(min_annotations, None, {}, require_reviewed)
    cp = as_columnar(pool)
    eligible, report = eligible_by_class(cp, rules, bins=edges, previous=previous)
    names = (
        required_classes(cp, classes)
        if classes is not None
        else sorted(set(targets) | set(cp.present_classes()))
    )
    rngs = class_generators(random_state, names)
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    meta: dict[str, Any] = {"targets": {}, "carried_over": {}, "upward_sampled": {}}
    for name in names:
        hist = targets.get(name)
        if hist is None or not hist.usable(compat):
            n = 0 if hist is None else hist.n_images
            short.append(
                ClassShortfall(
                    name, per_class, 0, "invalid_target_histogram", (("originals", n),)
                )
            )
            continue
        target = round_histogram(hist.counts, per_class, compat=compat)
        if len(target) != len(edges) + 1:
            raise _bins_mismatch(name, hist, edges)
        chosen, missing = _sample_class(
            name, eligible.get(name), target, rngs[name], edges, allow_upward
        )
        members += chosen
        meta["targets"][name] = {
            "original_counts": list(hist.counts),
            "n_originals": hist.n_images,
            "target": target,
        }
        meta["carried_over"][name] = sum(m.how == "carried" for m in chosen)
        meta["upward_sampled"][name] = [
            [m.id, m.target_bin, m.bin] for m in chosen if m.how == "upward"
        ]
        if not hist.is_valid:  # authors: sampled, and still invalid
            short.append(
                ClassShortfall(
                    name,
                    per_class,
                    len(chosen),
                    "invalid_target_histogram",
                    (
                        ("originals", hist.n_images),
                        *((f"bin {b}", k) for b, k in enumerate(missing) if k),
                    ),
                )
            )
        elif any(missing):
            short.append(
                ClassShortfall(
                    name,
                    per_class,
                    len(chosen),
                    "too_few_eligible",
                    tuple((f"bin {b}", k) for b, k in enumerate(missing) if k),
                )
            )
    meta["exclusions"] = report.as_dict()
    params = {
        "per_class": per_class,
        "histogram_bins": list(edges),
        "allow_upward_sampling": allow_upward,
        "compat": compat,
        **rules.as_dict(),
    }
    return finish(
        "matched-frequency",
        members,
        short,
        parameters=params,
        metadata=meta,
        random_state=random_state,
    )


def _bins_mismatch(
    name: str, hist: TargetHistogram, edges: tuple[float, ...]
) -> ConfigError:
    return ConfigError(
        f"target histogram of class {name!r} has {len(hist.counts)} bins but the "
        f"sampler uses {len(edges) + 1} (edges {list(edges)}); compute both with the "
        "same bins."
    )


def _sample_class(
    name: str,
    rows: ClassRows | None,
    target: Sequence[int],
    rng: np.random.Generator,
    edges: tuple[float, ...],
    allow_upward: bool,
) -> tuple[list[SampleMember], list[int]]:
    """Steps 2–4 for one class; returns the members and the missing count per bin.

    Works on positions in the class's id-sorted eligible rows; ids are read
    only for the chosen ones."""
    nb = len(target)
    if rows is None:
        return [], [int(t) for t in target]
    own = bin_indices(rows.frequency, edges)
    prev = rows.in_previous
    pools = [np.flatnonzero(own == b) for b in range(nb)]
    picks: list[tuple[int, str, int, int]] = []  # position, how, bin, target bin
    missing = [0] * nb
    for b in range(nb):
        here = pools[b]
        prev_here = here[prev[here]]
        carried = (
            prev_here
            if len(prev_here) <= target[b]
            else prev_here[draw_positions(rng, len(prev_here), target[b])]
        )
        here = here[~np.isin(here, carried)]
        picks += [(p, "carried", b, b) for p in carried.tolist()]
        need = target[b] - len(carried)
        take = draw_positions(rng, len(here), need)
        new = here[take]
        keep = np.ones(len(here), np.bool_)
        keep[take] = False
        pools[b] = here[keep]
        picks += [(p, "sampled", b, b) for p in new.tolist()]
        missing[b] = need - len(new)
    if allow_upward:
        for b in range(nb):
            while missing[b]:
                src = next((s for s in range(b + 1, nb) if len(pools[s])), None)
                if src is None:
                    break
                here = pools[src]
                preferred = np.flatnonzero(prev[here])
                at = (
                    int(preferred[0])
                    if len(preferred)
                    else int(draw_positions(rng, len(here), 1)[0])
                )
                picks.append((int(here[at]), "upward", src, b))
                pools[src] = np.delete(here, at)
                missing[b] -= 1
    ids = rows.ids([p for p, *_ in picks])
    out = [
        SampleMember(i, name, how, bb, tb)
        for i, (_, how, bb, tb) in zip(ids, picks, strict=True)
    ]
    return out, missing
