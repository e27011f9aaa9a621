"""Samplers that draw a new test set from a cleaned candidate pool.

See docs/algorithms.md#samplers.

Every sampler is a pure function registered with :func:`register_sampler` in
:data:`SAMPLERS`, together with a :class:`SamplerSpec` saying whether it makes a
test-set revision, the tag of its revision names and the inputs it takes
(:data:`SAMPLER_INPUTS`); the pipeline reads these through
:func:`revision_strategies`, :func:`strategy_tag`, :func:`sampler_spec` and
:func:`run_sampler`, so a new sampler is one module and its registration.
A sampler takes the
candidate pool as :class:`~retest.sampling.eligibility.CandidateInfo` records and an
explicit seed or ``numpy.random.Generator``, and returns a frozen
:class:`SampleResult` (members with provenance, parameters, metadata, validity
and a per-class shortfall report). A class short of candidates makes the result
invalid; it never raises and is never silently short.

=====================  ============================================  ===
name                   function                                       tag
=====================  ============================================  ===
``keyword-count``      :func:`sample_keyword_counts` (CIFAR v4/v6)
``threshold``          :func:`sample_threshold`                       a
``matched-frequency``  :func:`sample_matched_frequency`               b
``top-images``         :func:`sample_top_images`                      c
``class-balanced``     :func:`sample_class_balanced`
``train-test``         :func:`build_train_test` (CIFAR-10.2; no revision)
=====================  ============================================  ===

Examples
--------
>>> from retest.sampling.base import SAMPLERS
>>> from retest.sampling.eligibility import CandidateInfo
>>> pool = [CandidateInfo(f"{k}{i}", k) for k in "ab" for i in range(5)]
>>> SAMPLERS.get("class-balanced")(pool, per_class=2, random_state=0).class_counts()
{'a': 2, 'b': 2}
>>> from retest.sampling.base import revision_strategies, strategy_tags
>>> "train-test" in revision_strategies(), strategy_tags("matched-frequency")
(False, ('matched-frequency', 'b'))
"""

# The concrete samplers register themselves on import; importing them here means
# SAMPLERS is complete whichever sampling module is imported first.
from retest.sampling import (  # noqa: F401
    basic,
    keyword_counts,
    matched_frequency,
    split,
)
