"""The ``label-errors`` stage: find, rank and report suspected label errors."""

from __future__ import annotations

from retest.stages.label_errors._label_errors import (
    LabelErrorInputs,
    LabelErrorRun,
    NpyFoldCache,
    load_label_error_inputs,
    run_label_errors,
)

__all__ = [
    "LabelErrorInputs",
    "LabelErrorRun",
    "NpyFoldCache",
    "load_label_error_inputs",
    "run_label_errors",
]
