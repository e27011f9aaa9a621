"""Pausing Python's cyclic garbage collector around bulk object creation."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_cyclic_gc"]


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of objects that make no
    reference cycles are built (candidate records, scanned columns, vote
    aggregates): every full collection would walk all of them again. At ten
    million candidates a sample took twice as long, a column scan 68 s instead
    of 13 s. Reference counting still frees everything; the collector is
    re-enabled on exit only if it was enabled on entry.

    Examples
    --------
    >>> import gc
    >>> with no_cyclic_gc():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
