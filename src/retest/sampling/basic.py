"""Threshold τ (ImageNetV2 ``a``), TopImages (``c``) and class-balanced uniform samplers.

docs/algorithms.md#threshold, #top-images, #class-balanced. Every class is handled in
sorted order with its own generator (see
:func:`~retest.sampling.base.class_generators`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._validation import RandomStateLike, check_fraction
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
from retest.sampling.eligibility import CandidateInfo, EligibilityRules
from retest.sampling.histogram import DEFAULT_BINS, bin_indices

__all__ = ["sample_class_balanced", "sample_threshold", "sample_top_images"]


def _bins(rows: ClassRows, pos: NDArray[np.int64]) -> list[int | None]:
    """Each position's selection-frequency bin, None without answers."""
    b = bin_indices(rows.frequency[pos], DEFAULT_BINS).tolist()
    has = (rows.n_assignments[pos] > 0).tolist()
    return [x if h else None for x, h in zip(b, has, strict=True)]


def _carry_and_fill(
    strategy: str,
    pool: Sequence[CandidateInfo] | ColumnarPool,
    rules: EligibilityRules,
    *,
    per_class: int,
    previous: Iterable[str] | None,
    classes: Iterable[str] | None,
    random_state: RandomStateLike,
    parameters: dict[str, Any],
) -> SampleResult:
    """Keep still-eligible previous members, draw the missing ones uniformly."""
    per_class = check_per_class(per_class)
    cp = as_columnar(pool)
    eligible, report = eligible_by_class(cp, rules, previous=previous)
    names = required_classes(cp, classes)
    rngs = class_generators(random_state, names)
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    n_carried = 0
    for name in names:
        rows = eligible.get(name)
        n = 0 if rows is None else len(rows)
        carried = np.zeros(0, np.int64)
        new = np.zeros(0, np.int64)
        if rows is not None:
            carried = np.flatnonzero(rows.in_previous)
            if len(carried) > per_class:  # per_class shrank since the parent
                carried = carried[draw_positions(rngs[name], len(carried), per_class)]
            rest = np.ones(n, np.bool_)
            rest[carried] = False
            others = np.flatnonzero(rest)
            new = others[
                draw_positions(rngs[name], len(others), per_class - len(carried))
            ]
        n_carried += len(carried)
        for how, pos in (("carried", carried), ("sampled", new)):
            if rows is None or not len(pos):
                continue
            bins = _bins(rows, pos)
            members += [
                SampleMember(i, name, how, b, b)
                for i, b in zip(rows.ids(pos), bins, strict=True)
            ]
        got = len(carried) + len(new)
        if got < per_class:
            short.append(
                ClassShortfall(
                    name, per_class, got, "too_few_eligible", (("eligible", n),)
                )
            )
    return finish(
        strategy,
        members,
        short,
        parameters=parameters,
        metadata={"exclusions": report.as_dict(), "carried_over": n_carried},
        random_state=random_state,
    )


@register_sampler(
    "threshold",
    summary="per_class random images with selection frequency >= tau",
    revision=True,
    columnar=True,
    tag="a",
    inputs=(
        "per_class",
        "previous",
        "classes",
        "min_annotations",
        "threshold",
        "class_thresholds",
    ),
)
def sample_threshold(
    pool: Sequence[CandidateInfo] | ColumnarPool,
    *,
    random_state: RandomStateLike,
    per_class: int = 10,
    threshold: float = 0.7,
    class_thresholds: Mapping[str, float] | None = None,
    min_annotations: int = 10,
    require_reviewed: bool = True,
    previous: Iterable[str] | None = None,
    classes: Iterable[str] | None = None,
) -> SampleResult:
    """Threshold τ sampler (ImageNetV2 "Threshold0.7", docs/algorithms.md#threshold).

    Per class: previous members that are still eligible (selection frequency ≥ τ,
    or the class's override) are carried over; the missing slots are drawn
    uniformly from the id-sorted remaining eligible candidates. A class with too
    few candidates keeps what it has and is reported in ``shortfall``.

    Examples
    --------
    >>> pool = [CandidateInfo(f"x{i}", "cat", i / 10, 10) for i in range(11)]
    >>> r = sample_threshold(pool, per_class=3, random_state=0)
    >>> r.is_valid, all(m.id in {"x7", "x8", "x9", "x10"} for m in r.members)
    (True, True)
    """
    tau = check_fraction(threshold, "threshold")
    overrides = {
        k: check_fraction(v, f"threshold of class {k!r}")
        for k, v in sorted((class_thresholds or {}).items())
    }
    rules = EligibilityRules(min_annotations, tau, overrides, require_reviewed)
    params = {"per_class": per_class, **rules.as_dict()}
    return _carry_and_fill(
        "threshold",
        pool,
        rules,
        per_class=per_class,
        previous=previous,
        classes=classes,
        random_state=random_state,
        parameters=params,
    )


@register_sampler(
    "class-balanced",
    summary="per_class random images, no annotations needed",
    revision=True,
    columnar=True,
    inputs=("per_class", "previous", "classes", "min_annotations"),
)
def sample_class_balanced(
    pool: Sequence[CandidateInfo] | ColumnarPool,
    *,
    random_state: RandomStateLike,
    per_class: int = 10,
    min_annotations: int = 0,
    require_reviewed: bool = False,
    previous: Iterable[str] | None = None,
    classes: Iterable[str] | None = None,
) -> SampleResult:
    """Class-balanced uniform sampler: ``per_class`` eligible images per class.

    By default only blacklisted and near-duplicate candidates are excluded (no
    annotations needed), which suits pools whose labels are trusted, e.g. a
    held-out part of the original training set. Still-eligible previous members
    are carried over.

    Examples
    --------
    >>> pool = [CandidateInfo(f"{k}{i}", k) for k in "ab" for i in range(5)]
    >>> sample_class_balanced(pool, per_class=2, random_state=1).class_counts()
    {'a': 2, 'b': 2}
    """
    rules = EligibilityRules(min_annotations, None, {}, require_reviewed)
    params = {"per_class": per_class, **rules.as_dict()}
    return _carry_and_fill(
        "class-balanced",
        pool,
        rules,
        per_class=per_class,
        previous=previous,
        classes=classes,
        random_state=random_state,
        parameters=params,
    )


@register_sampler(
    "top-images",
    summary="the per_class most-selected images",
    revision=True,
    columnar=True,
    tag="c",
    inputs=("per_class", "previous", "classes", "min_annotations"),
)
def sample_top_images(
    pool: Sequence[CandidateInfo] | ColumnarPool,
    *,
    random_state: RandomStateLike = 0,
    per_class: int = 10,
    min_annotations: int = 10,
    require_reviewed: bool = True,
    previous: Iterable[str] | None = None,
    classes: Iterable[str] | None = None,
) -> SampleResult:
    """TopImages sampler (ImageNetV2 ``c``): the most-selected images.

    See docs/algorithms.md#top-images.

    Per class the eligible candidates are sorted descending by
    ``(selection frequency, #assignments, in previous revision, id)`` and the
    first ``per_class`` are taken. The seed is only recorded: the original used
    it for the final shuffle, which does not change the set.
    """
    per_class = check_per_class(per_class)
    rules = EligibilityRules(min_annotations, None, {}, require_reviewed)
    cp = as_columnar(pool)
    eligible, report = eligible_by_class(cp, rules, previous=previous)
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    for name in required_classes(cp, classes):
        rows = eligible.get(name)
        n = 0 if rows is None else len(rows)
        if rows is not None:
            # descending by (frequency, answers, in previous, id): positions are
            # in id order, so the position is the last key
            order = np.lexsort(
                (
                    np.arange(n),
                    rows.in_previous,
                    rows.n_assignments,
                    rows.frequency,
                )
            )
            top = order[::-1][:per_class].astype(np.int64)
            bins = _bins(rows, top)
            prev_flags = rows.in_previous[top].tolist()
            members += [
                SampleMember(i, name, "carried" if p else "sampled", b, b)
                for i, b, p in zip(rows.ids(top), bins, prev_flags, strict=True)
            ]
        if n < per_class:
            short.append(
                ClassShortfall(
                    name, per_class, n, "too_few_eligible", (("eligible", n),)
                )
            )
    return finish(
        "top-images",
        members,
        short,
        parameters={"per_class": per_class, **rules.as_dict()},
        metadata={"exclusions": report.as_dict()},
        random_state=random_state,
    )
