"""The arithmetic mode of samplers, plans and selection frequencies.

docs/algorithms.md#two-modes. ``"exact"`` (the default) computes shares and
remainders as exact integers, counts one vote per worker and task, and never
samples a class whose target histogram rests on too few originals.
``"authors"`` reproduces the published code digit for digit: floating-point
shares and remainders (ImageNetV2 ``round_histogram``, CIFAR-10.1 v6
``per_class * (c / total)``), every valid assignment counted (repeat workers and
images shown twice in a task included), and a class with too few annotated
originals marked invalid *and* still sampled from its histogram.

One setting: it is recorded in every revision's parameters, in plans and in the
export manifest, so a released set says which arithmetic made it.
"""

from __future__ import annotations

from retest.errors import ConfigError

__all__ = ["AUTHORS", "COMPAT_MODES", "EXACT", "check_compat"]

EXACT = "exact"
AUTHORS = "authors"
COMPAT_MODES: tuple[str, ...] = (EXACT, AUTHORS)


def check_compat(compat: str | None) -> str:
    """``compat`` as one of :data:`COMPAT_MODES` (None means exact).

    Examples
    --------
    >>> check_compat(None), check_compat("authors")
    ('exact', 'authors')
    """
    if compat is None:
        return EXACT
    if compat not in COMPAT_MODES:
        raise ConfigError(
            f"compat must be one of {', '.join(COMPAT_MODES)}. Got {compat!r}: "
            "'exact' (default) or 'authors' to reproduce the published arithmetic."
        )
    return compat
