"""The reference (original) dataset: its splits, original keywords, keyword histogram."""

from __future__ import annotations

from retest.stages.reference._reference import (
    KeywordRecovery,
    ReferenceReport,
    describe_shape,
    load_reference_arrays,
    load_tinyimages_index,
    recover_keywords,
    reference_image_shape,
    reference_keyword_histogram,
    register_reference,
    register_reference_arrays,
    update_keyword_table,
)

__all__ = [
    "KeywordRecovery",
    "ReferenceReport",
    "describe_shape",
    "load_reference_arrays",
    "load_tinyimages_index",
    "recover_keywords",
    "reference_image_shape",
    "reference_keyword_histogram",
    "register_reference",
    "register_reference_arrays",
    "update_keyword_table",
]
