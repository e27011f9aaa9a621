"""The Examples sections of the sampling modules run as doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "retest.sampling.histogram",
    "retest.sampling.selection_frequency",
    "retest.sampling.eligibility",
    "retest.sampling",
    "retest.sampling.basic",
    "retest.sampling.matched_frequency",
    "retest.sampling.keyword_counts",
    "retest.sampling.split",
]


@pytest.mark.parametrize("name", MODULES)
def test_sampling_doctests(name: str) -> None:
    """Every listed module has examples (none passes by having none) and they hold."""
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.attempted >= 1, f"{name} has no >>> example"
    assert result.failed == 0
