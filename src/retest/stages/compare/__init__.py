"""The ``compare`` stage: prediction folders + label files -> table, fit, figure."""

from __future__ import annotations

from retest.stages.compare._compare import (
    CompareResult,
    fit_table,
    run_compare,
)

__all__ = [
    "CompareResult",
    "fit_table",
    "run_compare",
]
