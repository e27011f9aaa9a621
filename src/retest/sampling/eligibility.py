"""Which candidates a sampler may use, and why the others are excluded.

See docs/algorithms.md#sampler-checks.

Reasons (named constants, the one vocabulary; :data:`SAMPLER_REASONS`) are checked
in a fixed order and the first failing one is reported:
``blacklisted`` → ``few_annotations`` → ``below_threshold`` (threshold sampler only)
→ ``near_duplicate`` → ``unreviewed``. The CIFAR rule "nearest original image at
L2 distance ≤ 1000 is never used" (docs/algorithms.md#near-original-threshold) is
reported as ``near_duplicate``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retest.errors import InputValidationError
from retest.sampling.histogram import DEFAULT_BINS, bin_index

__all__ = [
    "BELOW_THRESHOLD",
    "BLACKLISTED",
    "EXACT_COPY",
    "FEW_ANNOTATIONS",
    "NEAR_DUPLICATE",
    "NEAR_ORIGINAL",
    "POOL_DUPLICATE",
    "SAMPLER_REASONS",
    "UNREVIEWED",
    "CandidateInfo",
    "EligibilityRules",
    "ExclusionReport",
    "check_candidate",
    "split_eligible",
]

# The one vocabulary of exclusion reasons (named, never by position). The
# sampler checks a subset in SAMPLER_REASONS order; the project's decision
# (retest.project.REASONS) uses the copy reasons instead of the vote ones.
BLACKLISTED = "blacklisted"
FEW_ANNOTATIONS = "few_annotations"
BELOW_THRESHOLD = "below_threshold"
EXACT_COPY = "exact_copy"
"""Pixel-identical to an original image."""
NEAR_ORIGINAL = "near_original"
"""Within the near-original distance of an original image (CIFAR's L2 rule)."""
NEAR_DUPLICATE = "near_duplicate"
"""A reviewed near-duplicate (of an original, in the project's decision)."""
POOL_DUPLICATE = "pool_duplicate"
"""In a group of near-duplicate pool images that keeps another member."""
UNREVIEWED = "unreviewed"
SAMPLER_REASONS: tuple[str, ...] = (
    BLACKLISTED,
    FEW_ANNOTATIONS,
    BELOW_THRESHOLD,
    NEAR_DUPLICATE,
    UNREVIEWED,
)
"""What :func:`check_candidate` reports, in the order it checks."""


@dataclass(frozen=True, slots=True)
class CandidateInfo:
    """What a sampler needs to know about one candidate image.

    Parameters
    ----------
    id : str
        Stable candidate id.
    class_name : str
        The class the candidate is a candidate for.
    frequency : float
        Selection frequency for ``class_name`` (0.0 when unannotated).
    n_assignments : int
        Valid assignments behind ``frequency``.
    blacklisted, near_duplicate : bool
        Current state from the blacklist and near-duplicate resolution.
    reviewed : bool
        Near-duplicate review is sufficient (docs/algorithms.md#review-queue).
    keyword : str, optional
        Keyword / sub-class (CIFAR keyword sampler).
    nn_distance : float, optional
        L2 distance to the nearest original image (CIFAR rule), when known.

    Examples
    --------
    The pool a sampler draws from; a candidate with too few answers (when the
    sampler asks for some) or flagged a near-duplicate is left out:

    >>> import retest
    >>> from retest.sampling.eligibility import CandidateInfo
    >>> pool = [CandidateInfo(f"cat{i}", "cat", frequency=0.8, n_assignments=10)
    ...         for i in range(3)]
    >>> pool += [CandidateInfo("cat9", "cat", 0.9, n_assignments=2),
    ...          CandidateInfo("cat8", "cat", 0.9, 10, near_duplicate=True)]
    >>> r = retest.sample(pool, "class-balanced", per_class=3, min_annotations=10,
    ...                   random_state=0)
    >>> sorted(r.ids), r.is_valid
    (['cat0', 'cat1', 'cat2'], True)
    """

    id: str
    class_name: str
    frequency: float = 0.0
    n_assignments: int = 0
    blacklisted: bool = False
    near_duplicate: bool = False
    reviewed: bool = True
    keyword: str | None = None
    nn_distance: float | None = None


@dataclass(frozen=True, slots=True)
class EligibilityRules:
    """Which checks apply; the defaults are ImageNetV2's.

    See docs/algorithms.md#sampler-checks.

    ``threshold`` enables ``below_threshold`` (``class_thresholds`` override it per
    class); ``max_nn_distance`` excludes candidates whose nearest original image is
    at most that far (CIFAR: 1000).
    """

    min_annotations: int = 10
    threshold: float | None = None
    class_thresholds: Mapping[str, float] = field(default_factory=dict)
    require_reviewed: bool = True
    max_nn_distance: float | None = None

    def threshold_for(self, class_name: str) -> float | None:
        return self.class_thresholds.get(class_name, self.threshold)

    def as_dict(self) -> dict[str, Any]:
        return {
            "min_annotations": self.min_annotations,
            "threshold": self.threshold,
            "class_thresholds": dict(sorted(self.class_thresholds.items())),
            "require_reviewed": self.require_reviewed,
            "max_nn_distance": self.max_nn_distance,
        }


def check_candidate(c: CandidateInfo, rules: EligibilityRules) -> str | None:
    """The first reason ``c`` is excluded, or None when it is eligible.

    Examples
    --------
    >>> c = CandidateInfo("x", "cat", frequency=0.9, n_assignments=3)
    >>> check_candidate(c, EligibilityRules()), check_candidate(
    ...     c, EligibilityRules(min_annotations=3))
    ('few_annotations', None)
    >>> check_candidate(CandidateInfo("y", "cat", 0.9, 10, nn_distance=800.0),
    ...                 EligibilityRules(max_nn_distance=1000.0))
    'near_duplicate'
    """
    if c.blacklisted:
        return BLACKLISTED
    if c.n_assignments < rules.min_annotations:
        return FEW_ANNOTATIONS
    tau = rules.threshold_for(c.class_name)
    if tau is not None and c.frequency < tau:
        return BELOW_THRESHOLD
    if c.near_duplicate or (
        rules.max_nn_distance is not None
        and c.nn_distance is not None
        and c.nn_distance <= rules.max_nn_distance
    ):
        return NEAR_DUPLICATE
    if rules.require_reviewed and not c.reviewed:
        return UNREVIEWED
    return None


@dataclass(frozen=True, slots=True)
class ExclusionReport:
    """Counts of eligible and excluded candidates per class, bin and reason.

    ``by_class[class][reason]`` and ``by_class_bin[class][bin][reason]`` count
    exclusions; the pseudo-reason ``"eligible"`` counts usable candidates.
    """

    by_class: dict[str, dict[str, int]]
    by_class_bin: dict[str, dict[int, dict[str, int]]]

    def eligible(self, class_name: str) -> int:
        return self.by_class.get(class_name, {}).get("eligible", 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "by_class": self.by_class,
            "by_class_bin": {
                c: {str(b): v for b, v in bins.items()}
                for c, bins in self.by_class_bin.items()
            },
        }


def split_eligible(
    candidates: Iterable[CandidateInfo],
    rules: EligibilityRules,
    *,
    bins: Sequence[float] = DEFAULT_BINS,
) -> tuple[dict[str, list[CandidateInfo]], ExclusionReport]:
    """Eligible candidates per class (sorted by id) and the exclusion report.

    Raises on a duplicated candidate id, which would double its chances.

    Examples
    --------
    >>> pool = [CandidateInfo("a2", "cat", 0.9, 10), CandidateInfo("a1", "cat", 0.5, 3),
    ...         CandidateInfo("b1", "dog", 0.7, 10, blacklisted=True),
    ...         CandidateInfo("b2", "dog", 0.4, 10)]
    >>> eligible, report = split_eligible(pool, EligibilityRules())
    >>> {k: [c.id for c in v] for k, v in eligible.items()}
    {'cat': ['a2'], 'dog': ['b2']}
    >>> report.by_class
    {'cat': {'eligible': 1, 'few_annotations': 1}, 'dog': {'blacklisted': 1, 'eligible': 1}}
    """
    seen: set[str] = set()
    eligible: dict[str, list[CandidateInfo]] = defaultdict(list)
    by_class: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_bin: dict[str, dict[int, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for c in candidates:
        if c.id in seen:
            raise InputValidationError(
                f"candidate {c.id!r} appears twice in the pool; ids must be unique."
            )
        seen.add(c.id)
        reason = check_candidate(c, rules) or "eligible"
        by_class[c.class_name][reason] += 1
        by_bin[c.class_name][bin_index(c.frequency, bins)][reason] += 1
        if reason == "eligible":
            eligible[c.class_name].append(c)
    report = ExclusionReport(
        {k: dict(sorted(v.items())) for k, v in sorted(by_class.items())},
        {
            k: {b: dict(sorted(r.items())) for b, r in sorted(v.items())}
            for k, v in sorted(by_bin.items())
        },
    )
    return {
        k: sorted(v, key=lambda c: c.id) for k, v in sorted(eligible.items())
    }, report
