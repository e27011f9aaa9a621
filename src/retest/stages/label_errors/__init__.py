"""The ``label-errors`` stage: find, rank and report suspected label errors."""

from __future__ import annotations

from retest.stages.label_errors._label_errors import (
    LabelErrorInputs,
    LabelErrorRun,
    NpyFoldCache,
    load_label_error_inputs,
    run_label_errors,
    suspect_row,
)
from retest.stages.label_errors._revision import (
    cached_predictions,
    revision_item_ids,
    revision_label_error_inputs,
)

__all__ = [
    "LabelErrorInputs",
    "LabelErrorRun",
    "NpyFoldCache",
    "cached_predictions",
    "load_label_error_inputs",
    "revision_item_ids",
    "revision_label_error_inputs",
    "run_label_errors",
    "suspect_row",
]
