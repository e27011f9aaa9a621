"""Samplers that draw a new test set from a cleaned candidate pool (SPEC §5).

Every sampler is a pure function registered in :data:`SAMPLERS`; it takes the
candidate pool as :class:`~retest.build.eligibility.CandidateInfo` records and an
explicit seed or ``numpy.random.Generator``, and returns a frozen
:class:`SampleResult` (members with provenance, parameters, metadata, validity
and a per-class shortfall report). A class short of candidates makes the result
invalid; it never raises and is never silently short.

=====================  ============================================  ==========
name                   function                                       SPEC
=====================  ============================================  ==========
``keyword-count``      :func:`sample_keyword_counts` (CIFAR v4/v6)    §2, §5.1
``threshold``          :func:`sample_threshold`                       §5.3
``matched-frequency``  :func:`sample_matched_frequency`               §5.4
``top-images``         :func:`sample_top_images`                      §5.5
``class-balanced``     :func:`sample_class_balanced`                  §5.6
``train-test``         :func:`build_train_test` (CIFAR-10.2)          §10.6–10.7
=====================  ============================================  ==========

Examples
--------
>>> from retest.build.sampling import SAMPLERS, CandidateInfo
>>> pool = [CandidateInfo(f"{k}{i}", k) for k in "ab" for i in range(5)]
>>> SAMPLERS.get("class-balanced")(pool, per_class=2, random_state=0).class_counts()
{'a': 2, 'b': 2}
"""

from __future__ import annotations

from retest.build.basic_samplers import (
    sample_class_balanced,
    sample_threshold,
    sample_top_images,
)
from retest.build.eligibility import (
    REASONS,
    CandidateInfo,
    EligibilityRules,
    ExclusionReport,
    check_candidate,
    split_eligible,
)
from retest.build.histogram import DEFAULT_BINS, bin_index, round_histogram
from retest.build.keyword_sampling import sample_keyword_counts
from retest.build.matched_frequency import sample_matched_frequency
from retest.build.sampling_base import (
    SAMPLERS,
    ClassShortfall,
    SampleMember,
    Sampler,
    SampleResult,
)
from retest.build.train_test import build_train_test

__all__ = [
    "DEFAULT_BINS",
    "REASONS",
    "SAMPLERS",
    "CandidateInfo",
    "ClassShortfall",
    "EligibilityRules",
    "ExclusionReport",
    "SampleMember",
    "SampleResult",
    "Sampler",
    "bin_index",
    "build_train_test",
    "check_candidate",
    "round_histogram",
    "sample_class_balanced",
    "sample_keyword_counts",
    "sample_matched_frequency",
    "sample_threshold",
    "sample_top_images",
    "split_eligible",
]
