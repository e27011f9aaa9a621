"""What ``retest sample`` says a short class lacks.

The basic samplers report ``("eligible", n)``: how many eligible images the class
had. The warning printed it as "missing eligible 0" (a class missing nothing,
yet short); it now says how many the class had, and keeps "missing" for the
parts that do count what is missing (bins, keywords).
"""

from __future__ import annotations

from retest.cli.sample import _shortfall_text
from retest.sampling.base import ClassShortfall


def test_eligible_is_what_the_class_had() -> None:
    s = ClassShortfall("Bag", 5, 0, "too_few_eligible", (("eligible", 0),))
    assert _shortfall_text(s) == "0 of 5 images (too few eligible: 0 eligible)"
    s = ClassShortfall("Bag", 400, 389, "too_few_eligible", (("eligible", 389),))
    assert _shortfall_text(s) == "389 of 400 images (too few eligible: 389 eligible)"


def test_bins_are_what_is_missing() -> None:
    s = ClassShortfall("Coat", 10, 7, "too_few_eligible", (("bin 2", 3),))
    assert _shortfall_text(s) == "7 of 10 images (too few eligible; missing bin 2 3)"
