"""The progress protocol shared by the core and the edges.

Core functions accept ``progress: ProgressCallback | None``; they call it as
``progress(task, done, total)`` and never print. The CLI renders bars from it.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ProgressCallback", "report"]


class ProgressCallback(Protocol):
    def __call__(self, task: str, done: int, total: int | None) -> None: ...


def report(
    progress: ProgressCallback | None, task: str, done: int, total: int | None
) -> None:
    """Call ``progress`` if given."""
    if progress is not None:
        progress(task, done, total)
