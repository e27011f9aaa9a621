"""Threshold τ (ImageNetV2 ``a``), TopImages (``c``) and class-balanced uniform samplers.

docs/algorithms.md#threshold, #top-images, #class-balanced. Every class is handled in
sorted order with its own generator (see
:func:`~retest.sampling.base.class_generators`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from retest._validation import RandomStateLike, check_fraction
from retest.sampling.base import (
    ClassShortfall,
    SampleMember,
    SampleResult,
    check_per_class,
    class_generators,
    draw,
    finish,
    register_sampler,
    required_classes,
)
from retest.sampling.eligibility import CandidateInfo, EligibilityRules, split_eligible
from retest.sampling.histogram import DEFAULT_BINS, bin_index

__all__ = ["sample_class_balanced", "sample_threshold", "sample_top_images"]


def _bin(c: CandidateInfo) -> int | None:
    return bin_index(c.frequency, DEFAULT_BINS) if c.n_assignments > 0 else None


def _carry_and_fill(
    strategy: str,
    pool: Sequence[CandidateInfo],
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
    eligible, report = split_eligible(pool, rules)
    names = required_classes(pool, classes)
    rngs = class_generators(random_state, names)
    prev = frozenset(previous or ())
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    n_carried = 0
    for name in names:
        cands = {c.id: c for c in eligible.get(name, [])}
        ids = sorted(cands)
        carried = [i for i in ids if i in prev]
        if len(carried) > per_class:  # per_class shrank since the parent
            carried = draw(rngs[name], carried, per_class)
        kept = frozenset(carried)
        new = draw(rngs[name], [i for i in ids if i not in kept], per_class - len(kept))
        n_carried += len(carried)
        members += [
            SampleMember(i, name, "carried", _bin(cands[i]), _bin(cands[i]))
            for i in carried
        ]
        members += [
            SampleMember(i, name, "sampled", _bin(cands[i]), _bin(cands[i]))
            for i in new
        ]
        got = len(carried) + len(new)
        if got < per_class:
            short.append(
                ClassShortfall(
                    name, per_class, got, "too_few_eligible", (("eligible", len(ids)),)
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
    pool: Sequence[CandidateInfo],
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
    inputs=("per_class", "previous", "classes", "min_annotations"),
)
def sample_class_balanced(
    pool: Sequence[CandidateInfo],
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
    tag="c",
    inputs=("per_class", "previous", "classes", "min_annotations"),
)
def sample_top_images(
    pool: Sequence[CandidateInfo],
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
    eligible, report = split_eligible(pool, rules)
    prev = frozenset(previous or ())
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    for name in required_classes(pool, classes):
        ranked = sorted(
            eligible.get(name, []),
            key=lambda c: (c.frequency, c.n_assignments, c.id in prev, c.id),
            reverse=True,
        )
        for c in ranked[:per_class]:
            how = "carried" if c.id in prev else "sampled"
            members.append(SampleMember(c.id, name, how, _bin(c), _bin(c)))
        if len(ranked) < per_class:
            short.append(
                ClassShortfall(
                    name,
                    per_class,
                    len(ranked),
                    "too_few_eligible",
                    (("eligible", len(ranked)),),
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
