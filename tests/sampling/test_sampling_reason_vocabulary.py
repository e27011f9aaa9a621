"""One vocabulary of exclusion reasons: named constants in retest.sampling.eligibility,
ordered by name (never by position) in the sampler's and the project's decisions."""

from __future__ import annotations

import retest.sampling.eligibility as core
from retest.project import ORIGINAL_COPY_REASONS, REASONS
from retest.project._eligibility import DUPLICATE_REASONS


def _named() -> dict[str, str]:
    return {k: v for k, v in vars(core).items() if k.isupper() and isinstance(v, str)}


def test_every_reason_is_a_named_constant_of_the_core() -> None:
    values = set(_named().values())
    assert set(REASONS) <= values
    assert set(core.SAMPLER_REASONS) <= values
    # the project's and the sampler's decisions share the names they have in common
    assert (
        core.NEAR_DUPLICATE in REASONS and core.NEAR_DUPLICATE in core.SAMPLER_REASONS
    )


def test_one_reasons_tuple() -> None:
    # the core's list is the sampler's order, under its own name
    assert not hasattr(core, "REASONS")


def test_copy_reasons_by_name() -> None:
    assert ORIGINAL_COPY_REASONS == (
        core.EXACT_COPY,
        core.NEAR_ORIGINAL,
        core.NEAR_DUPLICATE,
    )
    assert DUPLICATE_REASONS == {*ORIGINAL_COPY_REASONS, core.POOL_DUPLICATE}
    assert core.BLACKLISTED not in DUPLICATE_REASONS
    assert core.UNREVIEWED not in DUPLICATE_REASONS
