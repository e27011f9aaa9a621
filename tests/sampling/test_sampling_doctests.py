"""The Examples sections of the sampling modules run as doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "retest.build.histogram",
    "retest.build.selection_frequency",
    "retest.build.eligibility",
    "retest.build.sampling",
    "retest.build.basic_samplers",
    "retest.build.matched_frequency",
    "retest.build.keyword_sampling",
    "retest.build.train_test",
]


@pytest.mark.parametrize("name", MODULES)
def test_sampling_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.failed == 0
