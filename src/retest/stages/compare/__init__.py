"""The ``compare`` stage: prediction folders + label files -> table, fit, figure."""

from __future__ import annotations

from retest.stages.compare._compare import (
    CompareResult,
    check_compare_options,
    fit_table,
    run_compare,
)

__all__ = [
    "CompareResult",
    "check_compare_options",
    "fit_table",
    "run_compare",
]
